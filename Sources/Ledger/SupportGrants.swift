import Foundation
import JSON

// Entitlements given by hand (`POST /v1/subscribers/{id}/grants`): an
// apology, a test account, a goodwill month. A grant is a fact of the
// subscriber's stream like any other: it starts when it was recorded, ends
// at its `endsAt`, and a `grant_revoked` ends it early.

/// Who did something through the API: the key's role, a fingerprint of the
/// key (never the key) and the name the caller gave (`Subledger-Actor`).
public struct ActorStamp: Sendable, Hashable, Codable {
    public var role: String
    public var keyFingerprint: String
    public var actor: String?

    public init(role: String, keyFingerprint: String, actor: String? = nil) {
        self.role = role
        self.keyFingerprint = keyFingerprint
        self.actor = actor
    }

    /// "Ann (admin, key 3f2a…)" for explanations and summaries.
    public var description: String {
        let who = "\(role), key \(keyFingerprint)"
        return actor.map { "\($0) (\(who))" } ?? who
    }
}

/// A `granted` event: `entitlement` is active from `startsAt` until `endsAt`.
public struct SupportGrant: Sendable, Hashable, Codable {
    public var grantID: String
    public var entitlement: String
    public var startsAt: Date
    public var endsAt: Date
    public var reason: String
    public var grantedBy: ActorStamp
    public var source: String

    public init(grantID: String, entitlement: String, startsAt: Date, endsAt: Date, reason: String, grantedBy: ActorStamp,
                source: String = FactSource.api) {
        self.grantID = grantID
        self.entitlement = entitlement
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.reason = reason
        self.grantedBy = grantedBy
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case grantID = "grantId", entitlement, startsAt, endsAt, reason, grantedBy, source
    }

    /// `source` of the entitlement it gives in a state: `grant:<id>`.
    public var entitlementSource: String { "grant:" + grantID }
}

/// An `erased` event: who erased the subscriber, when and why. The reason is
/// free text from support (as a grant's), not the subscriber's.
public struct SubscriberErasure: Sendable, Hashable, Codable {
    public var date: Date
    public var reason: String
    public var erasedBy: ActorStamp
    public var source: String

    public init(date: Date, reason: String, erasedBy: ActorStamp, source: String) {
        self.date = date
        self.reason = reason
        self.erasedBy = erasedBy
        self.source = source
    }
}

/// A `grant_revoked` event: the grant ends at `date` if it had not ended.
public struct GrantRevocation: Sendable, Hashable, Codable {
    public var grantID: String
    public var date: Date
    public var reason: String?
    public var revokedBy: ActorStamp
    public var source: String

    public init(grantID: String, date: Date, reason: String?, revokedBy: ActorStamp, source: String = FactSource.api) {
        self.grantID = grantID
        self.date = date
        self.reason = reason
        self.revokedBy = revokedBy
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case grantID = "grantId", date, reason, revokedBy, source
    }
}

/// The body of `POST /v1/subscribers/{id}/grants`: an entitlement, how
/// long (`duration`, ISO 8601, or `endsAt`) and why.
public struct GrantRequest: Sendable, Hashable {
    public enum Length: Sendable, Hashable {
        case duration(ISODuration)
        case endsAt(Date)
    }

    public var entitlement: String
    public var length: Length
    public var reason: String
    /// The longest the grant may last from the decision's now
    /// (`SUBLEDGER_GRANT_MAX_DURATION`); nil: up to the latest instant stored.
    public var maximum: ISODuration?

    public init(entitlement: String, length: Length, reason: String, maximum: ISODuration? = nil) {
        self.entitlement = entitlement
        self.length = length
        self.reason = reason
        self.maximum = maximum
    }

    /// Parses a request body; a bad or missing field is a 400 naming it.
    public static func parse(json data: Data) throws(LedgerError) -> GrantRequest {
        let reader = FieldReader(fields: try FieldReader.object(from: data))
        let entitlement = try reader.requiredIdentifier("entitlement", for: "the catalog entitlement to grant")
        let durationText = try reader.string("duration", maxLength: 64)
        let endsAt = try reader.date("endsAt")
        guard let reason = try reader.text("reason"), !reason.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw .missingField("reason", "why the grant is given (shown in explain and the audit)")
        }
        let length: Length
        switch (durationText, endsAt) {
        case (let text?, nil):
            let duration: ISODuration
            do { duration = try ISODuration(parsing: text) } catch {
                throw .invalidField("duration", expected: "an ISO 8601 duration of days, weeks, months or years such as \"P30D\"",
                                    got: "\"\(text.prefix(64))\"")
            }
            guard !duration.isZero, duration.years >= 0, duration.months >= 0, duration.weeks >= 0, duration.days >= 0 else {
                throw .invalidField("duration", expected: "a positive ISO 8601 duration such as \"P30D\"", got: "\"\(text.prefix(64))\"")
            }
            length = .duration(duration)
        case (nil, let date?):
            length = .endsAt(date)
        case (nil, nil):
            throw .missingField("duration", "either \"duration\" (ISO 8601, e.g. \"P30D\") or \"endsAt\" (RFC 3339)")
        case (_?, _?):
            throw .invalidField("endsAt", expected: "absent when \"duration\" is given (send one of the two)")
        }
        return GrantRequest(entitlement: entitlement, length: length, reason: reason)
    }
}

/// The body of `DELETE /v1/subscribers/{id}/grants/{grantId}`: an optional reason.
public struct GrantRevocationRequest: Sendable, Hashable {
    public var grantID: String
    public var reason: String?

    public init(grantID: String, reason: String?) {
        self.grantID = grantID
        self.reason = reason
    }

    /// An empty body is no reason; otherwise a JSON object with `reason`.
    public static func parse(grantID: String, json data: Data) throws(LedgerError) -> GrantRevocationRequest {
        guard !data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) else {
            return GrantRevocationRequest(grantID: grantID, reason: nil)
        }
        let reader = FieldReader(fields: try FieldReader.object(from: data))
        return GrantRevocationRequest(grantID: grantID, reason: try reader.text("reason"))
    }
}

extension Decider {
    /// Decides a grant: `grantID` is the new grant's id (made by the caller,
    /// so the decision stays a function of its inputs), starting at `now`.
    public func decide(_ request: GrantRequest, grantID: String, by actor: ActorStamp, ledger: SubscriberLedger, now: Date,
                       source: String = FactSource.api) throws(LedgerError) -> Decision {
        // Stored dates keep milliseconds: the grant in memory is the one read back.
        let now = RFC3339.date(milliseconds: RFC3339.milliseconds(of: now))
        guard catalog.entitlementIDs.contains(request.entitlement) else {
            throw LedgerError(kind: .rule, code: .unknownEntitlement,
                              message: "Entitlement '\(request.entitlement)' is not in the catalog; grant one of: "
                                  + catalog.entitlementIDs.joined(separator: ", ") + ".",
                              field: "entitlement")
        }
        let endsAt: Date
        switch request.length {
        case .duration(let duration):
            endsAt = duration.added(to: now)
            guard endsAt <= InputLimits.latestInstant else {
                throw .invalidField("duration", expected: "a duration ending \(InputLimits.rangeDescription)")
            }
        case .endsAt(let date):
            guard date > now else {
                throw .invalidField("endsAt", expected: "a date-time after now (\(RFC3339.format(now)))", got: RFC3339.format(date))
            }
            endsAt = date
        }
        if let maximum = request.maximum, endsAt > maximum.added(to: now) {
            switch request.length {
            case .duration(let duration):
                throw .invalidField("duration", expected: "a duration of at most \(maximum) (SUBLEDGER_GRANT_MAX_DURATION)",
                                    got: "\"\(duration)\"")
            case .endsAt(let date):
                throw .invalidField("endsAt", expected: "a date-time at most \(maximum) after now, by \(RFC3339.format(maximum.added(to: now))) "
                                        + "(SUBLEDGER_GRANT_MAX_DURATION)", got: RFC3339.format(date))
            }
        }
        let grant = SupportGrant(grantID: grantID, entitlement: request.entitlement, startsAt: now, endsAt: endsAt,
                                 reason: request.reason, grantedBy: actor, source: source)
        return Decision(events: [.granted(grant)]).settled(lastPosition: ledger.lastPosition)
    }

    /// Decides a revocation: 404 `grant_not_found` for a grant the
    /// subscriber never had; a grant already revoked is a duplicate.
    public func decide(_ request: GrantRevocationRequest, by actor: ActorStamp, ledger: SubscriberLedger, now: Date,
                       source: String = FactSource.api) throws(LedgerError) -> Decision {
        guard ledger.supportGrants[request.grantID] != nil else {
            throw LedgerError(kind: .notFound, code: .grantNotFound,
                              message: "Subscriber '\(ledger.subscriberID)' has no grant '\(request.grantID)'.", field: "grantId")
        }
        if let revoked = ledger.grantRevocations[request.grantID] { return .duplicate(of: revoked.position) }
        let now = RFC3339.date(milliseconds: RFC3339.milliseconds(of: now))
        let revocation = GrantRevocation(grantID: request.grantID, date: now, reason: request.reason, revokedBy: actor, source: source)
        return Decision(events: [.grantRevoked(revocation)]).settled(lastPosition: ledger.lastPosition)
    }
}

extension SubscriberLedger {
    /// The grant with this id and its revocation, if any.
    public func grant(id: String) -> (grant: SupportGrant, revokedAt: Date?)? {
        guard let grant = supportGrants[id] else { return nil }
        return (grant.value, grantRevocations[id]?.date)
    }
}

/// The body of `DELETE /v1/subscribers/{id}`: why the subscriber is erased.
public struct ErasureRequest: Sendable, Hashable {
    public var reason: String

    public init(reason: String) { self.reason = reason }

    /// A JSON object with a non-empty `reason`.
    public static func parse(json data: Data) throws(LedgerError) -> ErasureRequest {
        let reader = FieldReader(fields: try FieldReader.object(from: data))
        guard let reason = try reader.text("reason"), !reason.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw .missingField("reason", "why the subscriber is erased (kept in the erased event and shown in its history)")
        }
        return ErasureRequest(reason: reason)
    }
}
