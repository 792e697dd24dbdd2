import EventStore
import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `POST /v1/parked/{consumer}/{position}/replay` (admin): retries one event
/// a projection set aside, once its cause is fixed, and says what happened.
struct ParkedReplayController {
    let store: EventStore
    let consumers: [any EventConsumer]
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/parked")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .post(":consumer/:position/replay", use: replay)
    }

    struct ReplayBody: Encodable {
        var consumer: String
        var position: Int64
        var streamId: String
        var streamVersion: Int64
        var type: String
        /// `replayed`: the projection took it and it is no longer parked.
        var outcome: String
    }

    @Sendable func replay(request: Request, context: AppRequestContext) async throws -> Response {
        let name = context.parameters.get("consumer")?.removingPercentEncoding ?? ""
        guard let consumer = consumers.first(where: { $0.name == name }) else {
            throw LedgerError(kind: .notFound, code: .consumerNotFound,
                              message: "No projection is named '\(name.prefix(64))'; known: \(consumers.map(\.name).joined(separator: ", ")).",
                              field: "consumer")
        }
        guard let text = context.parameters.get("position"), let position = Int64(text), position > 0 else {
            throw LedgerError.invalidField("position", expected: "the position of a parked event, a whole number from 1")
        }
        switch try await store.replayParked(consumer, position: position) {
        case .replayed(let event):
            return try .json(ReplayBody(consumer: consumer.name, position: position, streamId: event.streamID,
                                        streamVersion: event.streamVersion, type: event.type, outcome: "replayed"))
        case .failed(_, let reason):
            throw LedgerError(kind: .conflict, code: .replayFailed,
                              message: "The \(consumer.name) projection refused event \(position) again; it stays parked. \(reason.prefix(2000))")
        case .notParked:
            throw LedgerError(kind: .notFound, code: .parkedEventNotFound,
                              message: "No event at position \(position) is parked for \(consumer.name).", field: "position")
        }
    }
}
