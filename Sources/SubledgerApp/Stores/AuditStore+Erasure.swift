import Postgres

extension AuditStore {
    /// Erasure keeps who read or changed the subscriber, under the pseudonym
    /// (`path` names the route with `{id}`, never the id: sql/0023).
    ///
    /// The last step of an erasure, so that its table lock (`SHARE ROW
    /// EXCLUSIVE`, against the `ROW EXCLUSIVE` every audit batch takes first,
    /// `AuditStore.insert`) is held only from here to the commit — a key
    /// deletion later — and audit writes never wait for the rest of the
    /// erasure (its wait for webhook deliveries under way included). No
    /// entry naming the id survives:
    ///
    /// - a batch that took its lock first commits before the `UPDATE` below
    ///   starts (the lock waits for it), and the `UPDATE`, a statement with
    ///   a snapshot taken after, moves its entries;
    /// - a batch that asks for its lock after this one waits for the
    ///   erasure's commit, and then looks for erased subscribers in a
    ///   statement that sees the key deleted: it writes the pseudonym.
    ///
    /// A batch looks for erased subscribers only under its lock and takes
    /// no other lock before it commits, so it never waits for the erasure
    /// while holding what the erasure waits for.
    static let erasureStep = ErasureStep(name: "audit") { subscriberID, pseudonym, connection in
        try await connection.query("LOCK TABLE audit_entries IN SHARE ROW EXCLUSIVE MODE")
        try await connection.query("UPDATE audit_entries SET subscriber_id = \(pseudonym) WHERE subscriber_id = \(subscriberID)")
    }
}
