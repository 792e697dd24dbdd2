import Foundation
import Postgres

/// An event to append. `data` and `metadata` are JSON objects.
public struct NewEvent: Sendable {
    /// The id of an event without an idempotency key. An event with one
    /// takes the key's digest for its id (`EventStore.storedKey`, sql/0044).
    public var id: UUID
    public var type: String
    public var schemaVersion: Int
    public var data: Data
    public var metadata: EventMetadata
    /// Events with the same key are stored once, across all streams. Any
    /// text; the log keeps its MD5 as the event's id (sql/0044).
    public var idempotencyKey: String?
    /// Two keys the log indexes (`events.lookup_key`, `lookup_group`,
    /// sql/0044) for finding events by something their data holds; nil for
    /// none. The ledger keeps there the transaction an event records and
    /// its original.
    public var lookupKey: String?
    public var lookupGroup: String?

    public init(id: UUID = EventIDs.next(), type: String, schemaVersion: Int = 1, data: Data,
                metadata: EventMetadata = EventMetadata(), idempotencyKey: String? = nil,
                lookupKey: String? = nil, lookupGroup: String? = nil) {
        self.id = id
        self.type = type
        self.schemaVersion = schemaVersion
        self.data = data
        self.metadata = metadata
        self.idempotencyKey = idempotencyKey
        self.lookupKey = lookupKey
        self.lookupGroup = lookupGroup
    }
}

/// Where an event came from and what caused it.
public struct EventMetadata: Sendable, Codable, Equatable {
    /// The channel that delivered the fact: `api`, `import`, `appstore`, `system`…
    public var source: String?
    /// The event or request that caused this one.
    public var causationID: String?
    /// Shared by every event of one request or workflow.
    public var correlationID: String?

    public init(source: String? = nil, causationID: String? = nil, correlationID: String? = nil) {
        self.source = source
        self.causationID = causationID
        self.correlationID = correlationID
    }

    /// The metadata in a stored `metadata` column as PostgreSQL writes
    /// `jsonb` out; none when it is not an object of them.
    ///
    /// Nearly every event's is `{}` or `{"source": "api"}` (PostgreSQL puts
    /// a space after the colon), read here without `JSONDecoder`: through
    /// it, every event of a 10,000-event history read cost a tenth of the
    /// request. Anything else (an escape, another member) goes to it.
    init(storedText text: String) {
        if text == "{}" {
            self.init()
            return
        }
        let prefix = #"{"source": ""#.utf8, suffix = #""}"#.utf8
        let bytes = text.utf8
        if bytes.count >= prefix.count + suffix.count, bytes.starts(with: prefix), bytes.suffix(suffix.count).elementsEqual(suffix) {
            let value = bytes.dropFirst(prefix.count).dropLast(suffix.count)
            if !value.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                self.init(source: String(decoding: value, as: UTF8.self))
                return
            }
        }
        self = (try? JSONDecoder().decode(EventMetadata.self, from: Data(bytes))) ?? EventMetadata()
    }
}

/// An event as stored.
public struct RecordedEvent: Sendable, Equatable {
    public var position: Int64
    public var streamID: String
    public var streamVersion: Int64
    /// Its idempotency key's digest (`EventStore.storedKey`) when it was
    /// appended with one.
    public var eventID: UUID
    public var type: String
    public var schemaVersion: Int
    public var data: Data
    public var metadata: EventMetadata
    public var transactionID: UInt64
    public var recordedAt: Date

    /// The consumer checkpoint just past this event.
    public var checkpoint: Checkpoint { Checkpoint(transactionID: transactionID, position: position) }
}

/// A consumer's place in the commit-ordered log: `(transaction id, position)`.
public struct Checkpoint: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var transactionID: UInt64
    public var position: Int64

    public init(transactionID: UInt64, position: Int64) {
        self.transactionID = transactionID
        self.position = position
    }

    public static let start = Checkpoint(transactionID: 0, position: 0)

    public static func < (lhs: Checkpoint, rhs: Checkpoint) -> Bool {
        (lhs.transactionID, lhs.position) < (rhs.transactionID, rhs.position)
    }

    public var description: String { "\(transactionID)/\(position)" }
}

/// The version a writer expects a stream to be at.
public enum ExpectedVersion: Sendable, Hashable {
    /// No check.
    case any
    /// The stream must not exist yet (version 0).
    case noStream
    /// The stream must be exactly at this version (its number of events).
    case exact(Int64)

    var number: Int64? {
        switch self {
        case .any: nil
        case .noStream: 0
        case .exact(let version): version
        }
    }
}

/// Events for one stream within an append.
public struct StreamAppend: Sendable {
    public var streamID: String
    public var expected: ExpectedVersion
    public var events: [NewEvent]

    public init(streamID: String, expected: ExpectedVersion = .any, events: [NewEvent]) {
        self.streamID = streamID
        self.expected = expected
        self.events = events
    }
}

/// What became of one appended event.
public struct AppendOutcome: Sendable, Equatable {
    public var position: Int64
    public var streamVersion: Int64
    /// True when an event with the same idempotency key was already stored;
    /// `position` is then the stored one's.
    public var isDuplicate: Bool
    /// The stream holding the stored event (another one for a cross-stream duplicate).
    public var storedStreamID: String

    public init(position: Int64, streamVersion: Int64, isDuplicate: Bool, storedStreamID: String) {
        self.position = position
        self.streamVersion = streamVersion
        self.isDuplicate = isDuplicate
        self.storedStreamID = storedStreamID
    }
}

/// The outcomes of one stream's events, in the order they were given.
public struct StreamAppendResult: Sendable, Equatable {
    public var streamID: String
    public var outcomes: [AppendOutcome]

    /// True when every event was already stored.
    public var isAllDuplicates: Bool { !outcomes.isEmpty && outcomes.allSatisfy(\.isDuplicate) }
}

/// The stream was not at the version the writer expected; nothing was stored.
public struct WrongExpectedVersion: Error, Sendable, Equatable, CustomStringConvertible {
    public var streamID: String
    public var expected: ExpectedVersion
    public var actual: Int64

    public var description: String {
        "stream \(streamID) is at version \(actual), which the writer did not expect (\(expected))"
    }
}
