import EventStore
import Foundation
import Ledger
import Postgres

/// How the ledger lives in the event store: one stream per subscriber, event
/// keys scoped to it, and the ownership lookups written beside the events.
public enum SubscriberStreams {
    /// The stream of a subscriber's facts.
    public static func streamID(for subscriberID: String) -> String { "subscriber-" + subscriberID }

    /// The store's idempotency keys are global; the ledger's are unique per
    /// subscriber (`expiry:pass@…` can occur for everyone), so they are scoped.
    public static func storeKey(subscriberID: String, ledgerKey: String) -> String {
        subscriberID + "\u{1F}" + ledgerKey
    }

    /// The events to append for ledger events decided for `subscriberID`.
    package static func newEvents(_ events: [LedgerEvent], subscriberID: String, source: String) throws -> [NewEvent] {
        try events.map { event in
            NewEvent(type: event.type, schemaVersion: event.schemaVersion, data: try event.encodedData(),
                     metadata: EventMetadata(source: event.source ?? source),
                     idempotencyKey: event.idempotencyKey.map { storeKey(subscriberID: subscriberID, ledgerKey: $0) })
        }
    }

    /// A stored event as the ledger sees it, its payload read by hand
    /// (`LedgerEvent.decodeFast`: the same event, or the same error).
    package static func ledgerEvent(_ recorded: RecordedEvent) throws -> RecordedLedgerEvent {
        RecordedLedgerEvent(
            position: recorded.position, recordedAt: recorded.recordedAt,
            event: try LedgerEvent.decodeFast(type: recorded.type, schemaVersion: recorded.schemaVersion, data: recorded.data))
    }

    /// The same of a row as a rebuild reads it, its payload in place.
    package static func ledgerEvent(_ row: StreamEventRow) throws -> RecordedLedgerEvent {
        RecordedLedgerEvent(
            position: row.position, recordedAt: row.recordedAt,
            event: try LedgerEvent.decodeFast(type: row.type, schemaVersion: row.schemaVersion, payload: row.data))
    }
}

/// A subscriber's stream as read: the ledger events and the version to
/// expect when appending after them.
struct SubscriberHistory: Sendable {
    var subscriberID: String
    var events: [RecordedLedgerEvent]
    var stored: [RecordedEvent]
    var version: Int64

    init(subscriberID: String, stored: [RecordedEvent]) throws {
        self.subscriberID = subscriberID
        self.stored = stored
        self.events = try stored.map(SubscriberStreams.ledgerEvent)
        self.version = stored.last?.streamVersion ?? 0
    }

    var exists: Bool { version > 0 }
}
