import Postgres

extension AuditStore {
    /// Erasure keeps who read or changed the subscriber, under the pseudonym
    /// (`path` names the route with `{id}`, never the id: sql/0023).
    static let erasureStep = ErasureStep(name: "audit") { subscriberID, pseudonym, connection in
        try await connection.query("UPDATE audit_entries SET subscriber_id = \(pseudonym) WHERE subscriber_id = \(subscriberID)")
    }
}
