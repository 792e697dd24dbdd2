import EventStore
import Foundation
import JSON
import Ledger

/// One event of a subscriber's history as served.
public struct TimelineEntry: Sendable, Encodable {
    public var subscriberID: String
    public var position: Int64
    public var type: String
    public var recordedAt: Date
    public var data: JSONValue
    public var source: String?
    public var summary: String

    enum CodingKeys: String, CodingKey {
        case subscriberID = "subscriberId", position, type, recordedAt, data, source, summary
    }

    init(subscriberID: String, stored: RecordedEvent, event: RecordedLedgerEvent) {
        self.subscriberID = subscriberID
        position = stored.position
        type = stored.type
        recordedAt = stored.recordedAt
        // The hand-written parser: through `JSONDecoder`, which tries each
        // kind of value in turn, a 10,000-event history spent half its
        // time here.
        // As the subscriber's backend knows it (`shownData`): personal
        // fields opened, a transaction stored as a record as its object.
        data = JSONValue(json: (try? stored.shownData(of: event.event)) ?? stored.data) ?? .null
        source = stored.metadata.source ?? event.event.source
        summary = event.event.summary
    }

    /// Its members as `LedgerJSON.makeEncoder()` writes them (keys sorted;
    /// no `source` when there is none), `subscriberId` only when asked:
    /// a subscriber's own history leaves it out.
    public func writeMembers(to writer: inout JSONBytes, withSubscriber: Bool) {
        writer.json("data", data)
        writer.integer("position", position)
        writer.date("recordedAt", recordedAt)
        if let source { writer.string("source", source) }
        if withSubscriber { writer.string("subscriberId", subscriberID) }
        writer.string("summary", summary)
        writer.string("type", type)
    }
}

/// The owner of a transaction and its facts (`GET /v1/transactions/{id}`).
public struct TransactionReport: Sendable, Encodable {
    public var transactionID: String
    public var originalTransactionID: String
    /// The subscriber holding the original transaction now.
    public var subscriberID: String
    public var facts: [TimelineEntry]

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", subscriberID = "subscriberId", facts
    }

    /// What `LedgerJSON.makeEncoder()` writes for it, written by hand: an
    /// original transaction renewed 10,000 times has that many facts.
    public func encodedJSON() -> [UInt8] {
        var writer = JSONBytes()
        writer.object {
            $0.array("facts", facts) { writer, fact in
                writer.object { fact.writeMembers(to: &$0, withSubscriber: true) }
            }
            $0.string("originalTransactionId", originalTransactionID)
            $0.string("subscriberId", subscriberID)
            $0.string("transactionId", transactionID)
        }
        return writer.bytes
    }
}
