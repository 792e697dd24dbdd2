import Foundation
import Hummingbird
import Ledger

/// `/v1/subscribers/{subscriberId}`: record facts and restores (ingest,
/// admin); read state, history and explanations (any role).
struct SubscriberController {
    let ledger: LedgerService
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
    }

    struct HistoryBody: Encodable {
        struct Event: Encodable {
            var position: Int64
            var type: String
            var recordedAt: Date
            var data: JSONDocument
            var source: String?
            var summary: String
        }
        var events: [Event]
    }

    @Sendable func recordEvent(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try Self.subscriberID(context)
        let fact = try FactRequest.parse(json: try await Self.body(request, context))
        let result = try await ledger.record(fact, subscriberID: subscriberID)
        return try .json(RecordedBody(position: result.position, duplicate: result.isDuplicate, subscriber: result.state),
                         status: result.isDuplicate ? .ok : .created)
    }

    @Sendable func restore(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try Self.subscriberID(context)
        let restore = try RestoreRequest.parse(json: try await Self.body(request, context))
        return try .json(try await ledger.restore(restore, subscriberID: subscriberID).state)
    }

    @Sendable func state(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try Self.subscriberID(context)
        return try .json(try await ledger.state(of: subscriberID, at: try Self.at(request)))
    }

    @Sendable func history(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try Self.subscriberID(context)
        let entries = try await ledger.timeline(of: subscriberID)
        return try .json(HistoryBody(events: entries.map {
            .init(position: $0.position, type: $0.type, recordedAt: $0.recordedAt, data: $0.data, source: $0.source, summary: $0.summary)
        }))
    }

    @Sendable func explain(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try Self.subscriberID(context)
        return try .json(try await ledger.explanation(of: subscriberID, at: try Self.at(request)))
    }

    // MARK: Input

    /// The path's subscriber id, percent-decoded and validated.
    static func subscriberID(_ context: AppRequestContext) throws(LedgerError) -> String {
        guard let raw = context.parameters.get("subscriberId"), let decoded = raw.removingPercentEncoding else {
            throw LedgerError(kind: .badRequest, code: "invalid_field",
                              message: "Field 'subscriberId' must be a percent-encoded path segment.", field: "subscriberId")
        }
        try LedgerStreams.validate(subscriberID: decoded)
        return decoded
    }

    /// The request body, at most the configured limit (413 beyond it).
    static func body(_ request: Request, _ context: AppRequestContext) async throws -> Data {
        var data = Data()
        for try await chunk in request.body {
            guard data.count + chunk.readableBytes <= context.maxUploadSize else {
                throw APIError(.contentTooLarge, code: "body_too_large",
                               message: "the request body is larger than the \(context.maxUploadSize / 1024) KiB limit")
            }
            data.append(contentsOf: chunk.readableBytesView)
        }
        return data
    }

    /// `?at=` as an RFC 3339 instant; absent: now.
    static func at(_ request: Request) throws(LedgerError) -> Date? {
        guard let text = request.uri.queryParameters.get("at") else { return nil }
        guard let date = RFC3339.parse(text) else {
            throw LedgerError(kind: .badRequest, code: "invalid_field",
                              message: "Field 'at' must be an RFC 3339 date-time such as \"2024-01-31T12:00:00Z\", got \"\(text.prefix(64))\".",
                              field: "at")
        }
        return date
    }
}
