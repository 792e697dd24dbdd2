import Postgres

/// PostgreSQL's statistics of the tables, which its planner chooses plans by.
///
/// A table filled from empty faster than autovacuum looks (once a minute)
/// keeps the statistics of its empty days, and every session keeps the
/// generic plans it made from them (a sequential scan of a table it
/// believes to be one page) until the table is analyzed: after a bulk load,
/// the loader analyzes (docs/decisions/0007-log-size.md).
enum PlannerStatistics {
    /// `ANALYZE` of every table of the database: a sample of each, so a few
    /// seconds on millions of events.
    static func refresh(on pool: ConnectionPool) async throws {
        try await pool.query("ANALYZE")
    }
}
