import Hummingbird
import SubledgerApp
import Ledger
import Logging

/// Per-request context: the contract's 1 MiB body limit and the caller's role.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var role: Role?
    /// Set by `buildRouter` from the configuration.
    public var maximumBodySize: Int = 1 << 20

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.role = nil
    }

    public var maxUploadSize: Int { maximumBodySize }

    /// Set by `AuthMiddleware`: the fingerprint of the caller's key (never
    /// the key) and the `Subledger-Actor` it sent, escaped and bounded.
    public var keyFingerprint: String?
    public var actor: String?
    /// Set by the router: where `AuthMiddleware` records audited requests.
    public var auditTrail: AuditTrail?
    /// Set by `AuthMiddleware` on an audited request: where a handler names
    /// the subscriber it found (the transaction lookup) for the entry.
    var auditFound: AuditRecord.Found?

    /// Who is acting, as support actions record it.
    var actorStamp: ActorStamp {
        ActorStamp(role: role?.rawValue ?? "", keyFingerprint: keyFingerprint ?? "", actor: actor)
    }
}
