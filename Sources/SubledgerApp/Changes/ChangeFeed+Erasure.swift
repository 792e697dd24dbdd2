import Postgres

extension ChangeRows {
    /// The members of a change's `data` (a copy of the event's) that name a
    /// person: `LedgerEvent.mappingPersonalFields`'s fields as stored.
    static let personalMembers = ["deviceId", "fromSubscriberId", "toSubscriberId", "reminderId"]
    /// `personalMembers` as an SQL array (constants of the program, no input).
    static let personalMembersSQL = "ARRAY[" + personalMembers.map { "'\($0)'" }.joined(separator: ", ") + "]"

    /// Erasure keeps the subscriber's published changes, their feed state and
    /// their webhook deliveries under the pseudonym (so positions, sequences
    /// and delivery counts stay), with the body's `subscriberId` rewritten
    /// and its personal members taken out (sql/0022, sql/0025).
    static let erasureStep = ErasureStep(name: "change feed") { subscriberID, pseudonym, connection in
        try await connection.query("""
            UPDATE changes
            SET subscriber_id = \(pseudonym),
                body = jsonb_set(subledger_without_members(body, \(unsafeRaw: personalMembersSQL)), '{subscriberId}', to_jsonb(\(pseudonym)::text))
            WHERE subscriber_id = \(subscriberID)
            """)
        // No transition of an erased subscriber is published any more.
        try await connection.query("""
            UPDATE change_subscribers SET subscriber_id = \(pseudonym), next_transition_at = NULL WHERE subscriber_id = \(subscriberID)
            """)
        try await connection.query("UPDATE webhook_deliveries SET subscriber_id = \(pseudonym) WHERE subscriber_id = \(subscriberID)")
    }
}
