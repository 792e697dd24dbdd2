import Foundation
import Hummingbird
import Ledger
import SubledgerApp
import Synchronization

/// Sets the audit trail every `AuthMiddleware` inside records to.
struct AuditTrailMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trail: AuditTrail

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.auditTrail = trail
        return try await next(request, context)
    }
}

/// What an audit entry says about a request.
enum AuditRecord {
    /// The name a caller gives itself (the console sends the one typed at sign-in).
    static let actorHeader = HTTPFields.Element.Name("Subledger-Actor")!
    /// `Subledger-Actor` is kept escaped and cut to this many bytes.
    static let maximumActorBytes = 128

    /// Which requests are audited: every one naming a subscriber (a path
    /// under `/v1/subscribers/{id}`, a `subscriberId` in the query of a
    /// read — the change feed, the listings of reminders and notifications,
    /// the audit's own), the transaction lookup (naming the subscriber it
    /// found), and every other request that is not a GET (an admin's
    /// actions). `subscriberID` is nil for those naming none.
    struct Subject {
        var subscriberID: String?
        var path: String

        /// With the subscriber the handler found, when the request named none.
        func naming(_ found: Found) -> Subject {
            guard subscriberID == nil, let subscriber = found.subscriberID else { return self }
            return Subject(subscriberID: subscriber, path: path)
        }
    }

    /// The subscriber a handler found (`GET /v1/transactions/{id}`), for its entry.
    final class Found: Sendable {
        private let found = Mutex<String?>(nil)

        var subscriberID: String? { found.withLock { $0 } }

        func set(_ subscriberID: String) { found.withLock { $0 = subscriberID } }
    }

    /// The routes audited although they name no subscriber in their path or query.
    static let lookups: Set<String> = ["/v1/transactions/{transactionId}"]

    /// 503 before the request ran: the audit's buffer stayed full.
    static let bufferFull = APIError(.serviceUnavailable, code: .databaseUnavailable,
                                     message: "the audit trail's buffer is full (the database is not taking its entries); "
                                         + "nothing was done; retry after 2 s", retryAfter: 2)

    static func subject(of request: Request, context: AppRequestContext) -> Subject? {
        let template = context.endpointPath ?? request.uri.path
        if let raw = context.parameters.get("subscriberId") {
            let subscriberID = raw.utf8.contains(UInt8(ascii: "%")) ? raw.removingPercentEncoding ?? raw : raw
            var path = template.replacingOccurrences(of: "{subscriberId}", with: "{id}")
            // Never the raw id in `path`, whatever form the route's name takes.
            if path.contains(raw) { path = path.replacingOccurrences(of: raw, with: "{id}") }
            return Subject(subscriberID: subscriberID, path: path)
        }
        if template.hasPrefix("/v1/audit") {
            return Subject(subscriberID: request.uri.queryParameters.get("subscriberId").map { String($0) }, path: template)
        }
        if let named = request.uri.queryParameters.get("subscriberId") {
            // A read across subscribers narrowed to one: audited under it (an
            // id the route refuses is recorded as none; the request answers 400).
            return Subject(subscriberID: try? InputLimits.validateSubscriberID(String(named)), path: template)
        }
        if lookups.contains(template) {
            return Subject(subscriberID: nil, path: template)
        }
        if request.method != .get && request.method != .head {
            return Subject(subscriberID: nil, path: template)
        }
        return nil
    }

    static func entry(_ request: Request, context: AppRequestContext, subject: Subject, status: Int) -> AuditTrail.Entry {
        AuditTrail.Entry(at: Date(), role: context.role?.rawValue ?? "", keyFingerprint: context.keyFingerprint ?? "",
                         actor: context.actor, method: request.method.rawValue, path: subject.path,
                         subscriberID: subject.subscriberID, action: action(request.method, subject.path), status: status)
    }

    /// A short name of what the request did: `state`, `history`, `grant`…
    static func action(_ method: HTTPRequest.Method, _ path: String) -> String {
        switch (method, path) {
        case (.get, "/v1/subscribers/{id}"): "state"
        case (.get, "/v1/subscribers/{id}/history"): "history"
        case (.get, "/v1/subscribers/{id}/explain"): "explain"
        case (.post, "/v1/subscribers/{id}/grants"): "grant"
        case (.delete, "/v1/subscribers/{id}/grants/{grantId}"): "revoke_grant"
        case (.delete, "/v1/subscribers/{id}"): "erase"
        case (.post, "/v1/subscribers/{id}/events"): "record_fact"
        case (.post, "/v1/subscribers/{id}/restore"): "restore"
        case (.get, "/v1/audit"): "read_audit"
        case (.get, "/v1/changes"): "read_changes"
        case (.get, "/v1/transactions/{transactionId}"): "lookup_transaction"
        case (.get, "/v1/reminders"): "list_reminders"
        case (.get, "/v1/appstore/notifications"): "list_notifications"
        default:
            (method == .get ? "read" : method.rawValue.lowercased()) + " "
                + (path.split(separator: "/").last { !$0.hasPrefix("{") }.map(String.init) ?? path)
        }
    }

    /// The status the client gets for an error (`APIError.answering`, as `ErrorMiddleware` answers it).
    static func status(of error: any Error) -> Int {
        Int((APIError.answering(error) ?? .internalError).status.code)
    }
}
