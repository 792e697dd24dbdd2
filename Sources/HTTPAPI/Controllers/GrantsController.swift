import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `/v1/subscribers/{subscriberId}/grants`: support grants of an
/// entitlement, and their early revocation (admin).
struct GrantsController {
    let writer: LedgerWriter
    let keys: APIKeys
    /// `SUBLEDGER_GRANT_MAX_DURATION`: a longer grant answers 400.
    let maximumDuration: ISODuration

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .post(":subscriberId/grants", use: grant)
            .delete(":subscriberId/grants/:grantId", use: revoke)
    }

    /// `201 {"id", "entitlement", "startsAt", "endsAt", "reason", "position", "subscriber"}`.
    struct GrantedBody: Encodable {
        var id: String
        var entitlement: String
        var startsAt: Date
        var endsAt: Date
        var reason: String
        var position: Int64
        var subscriber: SubscriberState
    }

    /// `200 {"id", "revokedAt", "duplicate", "position", "subscriber"}`.
    struct RevokedBody: Encodable {
        var id: String
        var revokedAt: Date
        var duplicate: Bool
        var position: Int64
        var subscriber: SubscriberState
    }

    @Sendable func grant(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        var grant = try GrantRequest.parse(json: try await RequestInput.body(request, context))
        grant.maximum = maximumDuration
        let grantID = UUID().uuidString.lowercased()
        let result = try await writer.grant(grant, grantID: grantID, by: context.actorStamp, subscriberID: subscriberID)
        guard let stored = result.ledger?.grant(id: grantID) else {
            throw APIError(.internalServerError, code: .internalError, message: "the grant was recorded but cannot be read back")
        }
        return try .json(GrantedBody(id: grantID, entitlement: stored.grant.entitlement, startsAt: stored.grant.startsAt,
                                     endsAt: stored.grant.endsAt, reason: stored.grant.reason, position: result.position,
                                     subscriber: result.state),
                         status: .created)
    }

    @Sendable func revoke(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        guard let rawGrantID = context.parameters.get("grantId") else {
            throw LedgerError(kind: .notFound, code: .grantNotFound, message: "No grant id in the path.", field: "grantId")
        }
        let grantID = try InputLimits.identifier(rawGrantID.removingPercentEncoding ?? rawGrantID, field: "grantId")
        let body = try await RequestInput.body(request, context)
        let revocation = try GrantRevocationRequest.parse(grantID: grantID, json: body)
        let result = try await writer.revokeGrant(revocation, by: context.actorStamp, subscriberID: subscriberID)
        guard let revokedAt = result.ledger?.grant(id: grantID)?.revokedAt else {
            throw APIError(.internalServerError, code: .internalError, message: "the revocation was recorded but cannot be read back")
        }
        return try .json(RevokedBody(id: grantID, revokedAt: revokedAt, duplicate: result.isDuplicate, position: result.position,
                                     subscriber: result.state))
    }
}
