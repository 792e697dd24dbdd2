import Logging

/// A `StreamLogHandler` whose own metadata is kept aside and handed over
/// only when a message is logged.
///
/// `StreamLogHandler` formats its metadata as text each time it changes, so
/// the lines it writes need not; Hummingbird sets a request id on every
/// request's logger, which made that formatting a cost of every request
/// (1.4% of a read's samples) although almost nothing is logged per request.
/// The line written is the same: the metadata goes in as the message's
/// own, under which a message's explicit metadata wins as before.
struct DeferredMetadataLogHandler: LogHandler {
    private var stream: StreamLogHandler
    var metadata = Logger.Metadata()
    var metadataProvider: Logger.MetadataProvider?

    /// Takes over `stream`'s metadata provider, merged here in the order
    /// `StreamLogHandler` merges: the handler's metadata, then the
    /// provider's, then the message's.
    init(_ stream: StreamLogHandler) {
        self.stream = stream
        metadataProvider = stream.metadataProvider
        self.stream.metadataProvider = nil
    }

    var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, provided in provided }
        }
        guard !merged.isEmpty else { return stream.log(event: event) }
        var event = event
        event.metadata = merged.merging(event.metadata ?? [:]) { _, explicit in explicit }
        stream.log(event: event)
    }
}
