import Foundation
import JSON
import Hummingbird
import Ledger
import SubledgerApp

/// Requires an API key whose role allows `access`, and records in the audit
/// trail (when the request context carries one) every request about one
/// subscriber and every other admin action, allowed or not.
public struct AuthMiddleware: RouterMiddleware {
    public typealias Context = AppRequestContext
    let keys: APIKeys
    let access: Access

    public init(keys: APIKeys, access: Access) {
        self.keys = keys
        self.access = access
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The scheme is case-insensitive (RFC 6750 §2.1, RFC 9110 §11.1).
        guard let header = request.headers[.authorization], header.count > 7,
              header.prefix(7).lowercased() == "bearer "
        else { throw APIError.unauthorized }
        guard let (role, fingerprint) = keys.identify(header.dropFirst(7)) else {
            throw APIError(.unauthorized, code: .unauthorized, message: "the API key is not valid")
        }
        var context = context
        context.role = role
        context.keyFingerprint = fingerprint
        context.actor = request.headers[AuditRecord.actorHeader].map { UntrustedText.escaped($0, limit: AuditRecord.maximumActorBytes) }
        guard let trail = context.auditTrail, trail.isEnabled, let subject = AuditRecord.subject(of: request, context: context) else {
            guard access.allows(role) else { throw APIError.forbidden }
            return try await Self.answer(request, context: context, next: next)
        }
        // A place for the entry before the request runs: a request that ran is always recorded.
        guard await trail.reserve() else { throw AuditRecord.bufferFull }
        let found = AuditRecord.Found()
        context.auditFound = found
        do {
            guard access.allows(role) else { throw APIError.forbidden }
            let response = try await Self.answer(request, context: context, next: next)
            trail.record(AuditRecord.entry(request, context: context, subject: subject.naming(found), status: response.status.code))
            return response
        } catch {
            trail.record(AuditRecord.entry(request, context: context, subject: subject.naming(found), status: AuditRecord.status(of: error)))
            throw error
        }
    }

    /// The route's answer, except that only an admin learns that a
    /// subscriber was erased: to every other role an erased id answers as
    /// one that never had a fact (`subscriber_not_found`), on reads and on
    /// new facts alike.
    static func answer(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as LedgerError where error.code == .erased && context.role != .admin {
            throw SubscriberReader.notFound((try? RequestInput.subscriberID(context)) ?? "")
        }
    }
}
