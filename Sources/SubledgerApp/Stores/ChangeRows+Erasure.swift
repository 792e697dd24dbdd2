import Foundation
import Postgres

extension ChangeRows {
    /// The members of a change's `data` (a copy of the event's) that name a
    /// person: `LedgerEvent.mappingPersonalFields`'s fields as stored.
    static let personalMembers = ["deviceId", "fromSubscriberId", "toSubscriberId", "reminderId"]
    /// `personalMembers` as an SQL array (constants of the program, no input).
    static let personalMembersSQL = "ARRAY[" + personalMembers.map { "'\($0)'" }.joined(separator: ", ") + "]"

    /// Erasure keeps the subscriber's published changes, their feed state and
    /// their webhook deliveries under the pseudonym (so positions, sequences
    /// and delivery counts stay): every copy of the id is rewritten — the
    /// rows' `subscriber_id`, a reminder change's id (`rem:<id>:…`, in
    /// `changes.id` and `webhook_deliveries.change_id`), the body's
    /// `subscriberId` and `id` at any depth (a reminder's `data` repeats them)
    /// — and the body's personal members are taken out (sql/0022, sql/0025,
    /// sql/0028). A delivery still pending is `failed` and is never sent: the
    /// body it would send is the rewritten one anyway (a manual retry sends
    /// only that). `ErasureService` has already waited for the deliveries a
    /// dispatcher claimed (`settleDeliveries`); this step checks that none is
    /// in flight and rolls the erasure back if one is.
    static let erasureStep = ErasureStep(name: "change feed") { subscriberID, pseudonym, connection in
        try await connection.query("""
            UPDATE changes
            SET subscriber_id = \(pseudonym),
                id = subledger_erased_change_id(id, \(subscriberID), \(pseudonym)),
                body = subledger_erased_change_body(body, \(subscriberID), \(pseudonym), \(unsafeRaw: personalMembersSQL))
            WHERE subscriber_id = \(subscriberID)
            """)
        // No transition of an erased subscriber is published any more.
        try await connection.query("""
            UPDATE change_subscribers SET subscriber_id = \(pseudonym), next_transition_at = NULL WHERE subscriber_id = \(subscriberID)
            """)
        let inFlight = try await WebhookDeliveryStore.rewriteForErasure(of: subscriberID, pseudonym: pseudonym, on: connection)
        guard inFlight == 0 else { throw DeliveryInFlight(count: inFlight) }
        // The other party of each transfer published the erased id in its own
        // transfer changes (`fromSubscriberId` / `toSubscriberId`): those name the pseudonym now.
        let counterparts = try await transferCounterparts(of: subscriberID, on: connection)
        guard !counterparts.isEmpty else { return }
        try await connection.query("""
            UPDATE changes
            SET body = replace(body::text, to_jsonb(\(subscriberID)::text)::text, to_jsonb(\(pseudonym)::text)::text)::jsonb
            WHERE subscriber_id IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(counterparts))::jsonb))
              AND type IN ('transferred_in', 'transferred_out')
            """)
    }

    /// A delivery of the subscriber was in flight when the change-feed step ran.
    struct DeliveryInFlight: Error, CustomStringConvertible {
        var count: Int
        var description: String { "\(count) webhook deliveries of the subscriber are being posted" }
    }

    /// Makes sure that no POST of one of the subscriber's deliveries can
    /// start after the erasure commits, and waits for those under way.
    ///
    /// The dispatcher claims a delivery in a short transaction of its own,
    /// commits it, and POSTs the body it read afterwards, outside any
    /// transaction (`ChangeDispatcher`, step 2): no row lock of the erasure
    /// can stop a POST already claimed, and without this wait a claim
    /// committed just before the erasure would send the old body, naming
    /// the subscriber, after the erasure committed. So, in the erasure's
    /// transaction, each round:
    ///
    /// 1. rewrites every delivery of the subscriber not in flight to the
    ///    pseudonym and stops it (pending → `failed`), which also locks its
    ///    row until the erasure commits (a manual retry waits, and then
    ///    finds the rewritten row). A claim locks its rows `FOR UPDATE
    ///    SKIP LOCKED`: it skips a row locked here, and a row it locked
    ///    first is waited for and then found claimed (READ COMMITTED
    ///    re-reads the row), so left alone here and seen in flight next;
    /// 2. reads the deliveries in flight (a fresh snapshot: every claim
    ///    committed before step 1 touched the row is in it);
    /// 3. none: every row of the subscriber is locked here — no claim can
    ///    take one before the erasure commits, and after it none is
    ///    pending, and no POST under way can outlast the commit. Else waits
    ///    a little and goes again: the dispatcher records the outcome
    ///    (which clears `claim_token`) once its POST has ended, or, if it
    ///    died, the lease runs out; the erasure then rewrites that row too.
    ///
    /// Called before the erasure locks the subscriber's stream and runs its
    /// steps: recording a reminder's outcome appends to that stream and
    /// updates the reminder's row, and must not wait for the erasure that
    /// waits for it. Called once more after the key row is locked, from
    /// when no delivery of the subscriber can be created any more (the
    /// feed's writers hold that row `FOR KEY SHARE`: `ChangeFeedConsumer`
    /// through `SubscriberKeys.entries`, `ChangeTimeSweeper.keyed`).
    /// Gives up with `false` after `timeout` (the erasure answers 503).
    static func settleDeliveries(of subscriberID: String, pseudonym: String, timeout: Duration,
                                 on connection: Connection) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while try await WebhookDeliveryStore.rewriteForErasure(of: subscriberID, pseudonym: pseudonym, on: connection) > 0 {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(25))
        }
        return true
    }

    /// The subscribers the erased one's transfers name (by id: their
    /// pseudonyms resolved while their keys exist), read with its key
    /// before the erasure destroys it.
    static func transferCounterparts(of subscriberID: String, on connection: Connection) async throws -> [String] {
        var counterparts = Set<String>()
        for recorded in try await SubscriberHistory.read(subscriberID, on: connection).events {
            switch recorded.event {
            case .transferredOut(let transfer): counterparts.insert(transfer.toSubscriberID)
            case .transferredIn(let transfer): counterparts.insert(transfer.fromSubscriberID)
            default: break
            }
        }
        counterparts.remove(subscriberID)
        return counterparts.sorted()
    }
}
