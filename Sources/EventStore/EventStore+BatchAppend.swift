import Postgres

/// How the event store writes a batch of appends.
public enum BatchAppend: Sendable, Hashable {
    /// `append_events` (sql/0001): a PL/pgSQL loop, one INSERT per event. A
    /// key a concurrent writer stored first is answered as a duplicate.
    case eventByEvent
    /// `append_events_set` (sql/0012): the same checks and answers in a few
    /// set-based statements, several times cheaper per event in large
    /// batches. A key a concurrent writer stored after the batch read the
    /// keys fails the append with a unique violation (SQLSTATE 23505) instead,
    /// which the ledger's writer treats as a lost race and decides again.
    /// Batches naming a stream twice go through `append_events`.
    case setBased
}

extension EventStore {
    /// The statement appending `appends`, whose document is `batch`.
    func appendStatement(for appends: [StreamAppend], batch: PostgresJSON) -> PostgresQuery {
        if batchAppend == .setBased, Set(appends.map(\.streamID)).count == appends.count {
            return "SELECT * FROM append_events_set(\(batch)::jsonb)"
        }
        return "SELECT * FROM append_events(\(batch)::jsonb)"
    }
}
