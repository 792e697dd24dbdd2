-- The commit order is indexed by the writing transaction alone, not by
-- (transaction_id, position).
--
-- The readers of the commit order (EventStore.readCommitted, a consumer's
-- lag, the commit horizon, the change feed's lag) ask for
-- (transaction_id, position) after a checkpoint, in that order. With the
-- transaction alone in the index, PostgreSQL finds the first transaction
-- from the index and sorts each transaction's events by position as it
-- goes (an incremental sort: one transaction's events at a time). Every
-- event of one transaction has the same key, so the index stores each
-- transaction once with the list of its rows (b-tree deduplication), where
-- the two-column index stored each event's own entry. On 1M imported
-- events (1,000 transactions) the index took 7.3 MB instead of 32.9; with
-- one event a transaction, as a POST writes, 22.5 MB
-- (`subledger bench --measure storage`, docs/decisions/0007).
DROP INDEX events_commit_order;
CREATE INDEX events_commit_order ON events (transaction_id);
