import ServiceLifecycle

/// At graceful shutdown, waits for the snapshots `serve`'s writers left to
/// be stored in the background (`LedgerCache`). Placed between the cluster
/// and the application in the service group, it stops after the application
/// (no new writes) and before the embedded cluster, so a save under way is
/// finished rather than cut off by the database going away.
public struct SnapshotFlushService: Service {
    let ledgers: LedgerCache

    public init(ledgers: LedgerCache) { self.ledgers = ledgers }

    public func run() async throws {
        try? await gracefulShutdown()
        await ledgers.snapshotsSaved()
    }
}
