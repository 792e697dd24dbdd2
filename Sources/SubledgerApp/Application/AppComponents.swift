/// The parts that answer requests, wired once: the one write path (its
/// concurrent writes combined into shared commits, its claims of original
/// transactions applying the App Store notifications waiting for them), the
/// reader (concurrent reads of current states sharing a round trip) and the
/// App Store integration. The HTTP routes are built from these.
public struct AppComponents: Sendable {
    public let dependencies: AppDependencies
    public let writer: LedgerWriter
    public let reader: SubscriberReader
    public let appStore: AppStoreIntegration
    /// Off (its routes answer 503) unless configured; a configuration that
    /// does not work has stopped `serve` before this is built.
    public let googlePlay: GooglePlayIntegration
    /// Where the GET routes read: the standbys when `DATABASE_READ_URL` is set.
    public let reads: ReadPath

    public init(_ dependencies: AppDependencies) {
        let appStore = AppStoreIntegration(dependencies)
        var writer = LedgerWriter(dependencies)
        writer.claimObserver = appStore.claimObserver
        writer.combiner = dependencies.writeCombiner
        var reader = SubscriberReader(dependencies)
        reader.combiner = ReadCombiner()
        self.dependencies = dependencies
        self.writer = writer
        self.reader = reader
        self.appStore = appStore
        do {
            self.googlePlay = try GooglePlayIntegration.make(dependencies, writer: writer, reader: reader)
        } catch {
            self.googlePlay = GooglePlayIntegration(unavailable: "\(error)")
        }
        self.reads = ReadPath(dependencies, primaryReader: reader)
    }
}
