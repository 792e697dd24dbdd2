import Hummingbird
import SubledgerApp
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
}
