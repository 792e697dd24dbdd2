/// Every advisory lock Subledger takes, declared in one place so two parts
/// cannot pick the same key by accident, nor one part spell its key two
/// ways. Each is a text name hashed to PostgreSQL's 64-bit lock key
/// (`hashtextextended(name, 0)`); the migrations keep their fixed number
/// (`Migrations.lockKey`), which older releases also take.
public enum AdvisoryLock: Sendable, Hashable {
    /// The one instance running a consumer (session lock, held while it leads).
    case consumer(String)
    /// A rebuild of a consumer's projection; erasure takes it too, to wait
    /// for none (transaction lock).
    case rebuild(String)
    /// The one-off conversion of plain subscriber streams to pseudonyms.
    case plainStreamConversion
    /// The renaming of streams to another pseudonym scheme.
    case streamNamingConversion
    /// Webhook registrations, counted under it against their limit.
    case webhookRegistration
    /// The audit's pruning, one instance at a time.
    case auditPrune
    /// The one App Store reconciler of the fleet.
    case appStoreReconcile
    /// The one walk of Google Play's voided purchases at a time.
    case googlePlayVoidedWalk

    /// The name hashed to the key.
    public var name: String {
        switch self {
        case .consumer(let consumer): "consumer:" + consumer
        case .rebuild(let consumer): "rebuild:" + consumer
        case .plainStreamConversion: "subledger:plain-stream-conversion"
        case .streamNamingConversion: "subledger:stream-naming-conversion"
        case .webhookRegistration: "subledger:webhook-registration"
        case .auditPrune: "subledger:audit-prune"
        case .appStoreReconcile: "appstore:reconcile"
        case .googlePlayVoidedWalk: "googleplay:voided-walk"
        }
    }
}

extension Connection {
    /// Takes `lock` for this session, waiting for it.
    public func lock(_ lock: AdvisoryLock) async throws {
        try await query("SELECT pg_advisory_lock(hashtextextended(\(lock.name), 0))")
    }

    /// Takes `lock` for this session if no one holds it.
    public func tryLock(_ lock: AdvisoryLock) async throws -> Bool {
        try await query("SELECT pg_try_advisory_lock(hashtextextended(\(lock.name), 0))").first?.decode(Bool.self, at: 0) == true
    }

    /// Lets go of a session lock.
    public func unlock(_ lock: AdvisoryLock) async throws {
        try await query("SELECT pg_advisory_unlock(hashtextextended(\(lock.name), 0))")
    }

    /// Takes `lock` until this transaction ends, waiting for it.
    public func lockForTransaction(_ lock: AdvisoryLock) async throws {
        try await query("SELECT pg_advisory_xact_lock(hashtextextended(\(lock.name), 0))")
    }

    /// Takes `lock` until this transaction ends if no one holds it.
    public func tryLockForTransaction(_ lock: AdvisoryLock) async throws -> Bool {
        try await query("SELECT pg_try_advisory_xact_lock(hashtextextended(\(lock.name), 0))").first?.decode(Bool.self, at: 0) == true
    }
}
