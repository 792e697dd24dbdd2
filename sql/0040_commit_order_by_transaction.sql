-- The commit order is indexed by the writing transaction alone, not by
-- (transaction_id, position).
--
-- The readers of the commit order (EventStore.readCommitted, a consumer's
-- lag, the commit horizon, the change feed's lag) ask for
-- (transaction_id, position) after a checkpoint, in that order. With the
-- transaction alone in the index, PostgreSQL finds the first transaction
-- from the index and sorts each transaction's events by position as it
-- goes (an incremental sort: one transaction's events at a time). An
-- entry is 16 bytes instead of 24: on 1M imported events the index took
-- 24.3 MB instead of 31.2 (`subledger bench --measure storage`).
--
-- Without deduplication: every event of one transaction has the same key,
-- and with b-tree deduplication the index kept each transaction once with
-- the list of its rows (7.9 MB), but the import was slower in six
-- alternated pairs of six (about 5%: merging the lists as pages fill).
-- Without it the import was as fast as before in three pairs of three
-- (docs/decisions/0007).
DROP INDEX events_commit_order;
CREATE INDEX events_commit_order ON events (transaction_id) WITH (deduplicate_items = off);
