import Foundation
import Hummingbird
import JSON
import Ledger
import SubledgerApp

/// `/v1/subscribers/{subscriberId}`: record facts and restores (ingest,
/// admin); read state, history and explanations (any role).
struct SubscribersController {
    let writer: LedgerWriter
    /// Restores go through it: `signedTransactions` and `SUBLEDGER_RESTORE_VERIFY` need the App Store.
    let appStore: AppStoreIntegration
    let reader: SubscriberReader
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .write))
            .post(":subscriberId/events", use: recordEvent)
            .post(":subscriberId/restore", use: restore)
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .readSubscribers))
            .get(":subscriberId", use: state)
            .get(":subscriberId/history", use: history)
            .get(":subscriberId/explain", use: explain)
    }

    /// `{"position", "duplicate", "subscriber"}`: 201 the first time, 200 for a repeat.
    struct RecordedBody: Encodable {
        var position: Int64
        var duplicate: Bool
        var subscriber: SubscriberState

        /// What `LedgerJSON.makeEncoder()` writes for it, written by hand.
        func encodedJSON() -> [UInt8] {
            var writer = JSONBytes()
            writer.object {
                $0.bool("duplicate", duplicate)
                $0.integer("position", position)
                $0.member("subscriber") { subscriber.write(to: &$0) }
            }
            return writer.bytes
        }
    }

    /// `{"events": […]}`: a subscriber's timeline entries without their
    /// subscriber id. The service writes it with `encodedJSON`; its
    /// `Encodable` form (each entry as an `Event`) is what that must equal.
    struct HistoryBody: Encodable {
        struct Event: Encodable {
            var position: Int64
            var type: String
            var recordedAt: Date
            var data: JSONValue
            var source: String?
            var summary: String
        }
        let entries: [TimelineEntry]

        enum CodingKeys: String, CodingKey {
            case events
        }

        init(_ entries: [TimelineEntry]) {
            self.entries = entries
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(entries.map {
                Event(position: $0.position, type: $0.type, recordedAt: $0.recordedAt, data: $0.data, source: $0.source, summary: $0.summary)
            }, forKey: .events)
        }

        /// What `LedgerJSON.makeEncoder()` writes for it, written by hand:
        /// for a history of 10,000 events the generic encoder took most of
        /// the request's time.
        func encodedJSON() -> [UInt8] {
            var writer = JSONBytes()
            writer.object {
                $0.array("events", entries) { writer, entry in
                    writer.object { entry.writeMembers(to: &$0, withSubscriber: false) }
                }
            }
            return writer.bytes
        }
    }

    @Sendable func recordEvent(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        let fact = try FactRequest.parse(json: try await RequestInput.body(request, context))
        let result = try await writer.record(fact, subscriberID: subscriberID)
        return .json(bytes: RecordedBody(position: result.position, duplicate: result.isDuplicate, subscriber: result.state).encodedJSON(),
                     status: result.isDuplicate ? .ok : .created)
    }

    @Sendable func restore(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        let body = try await RequestInput.body(request, context)
        return try .json(try await appStore.restore(body: body, subscriberID: subscriberID).state)
    }

    @Sendable func state(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        return try .json(try await reader.state(of: subscriberID, at: try RequestInput.instant("at", in: request),
                                                 environment: try RequestInput.environment(in: request)))
    }

    @Sendable func history(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        let entries = try await reader.timeline(of: subscriberID)
        return .json(bytes: HistoryBody(entries).encodedJSON())
    }

    @Sendable func explain(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        return try .json(try await reader.explanation(of: subscriberID, at: try RequestInput.instant("at", in: request),
                                                       environment: try RequestInput.environment(in: request)))
    }
}
