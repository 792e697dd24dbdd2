-- The log's position without a b-tree. Its primary key's index (22 bytes an
-- event of the bench's log, `bench --measure storage`) served three reads:
-- the head as `max(position)`, which the write path now reads from the
-- position's sequence (at least the highest stored, which is all a batch's
-- decisions need of it); the conversions' updates by position, which now
-- name the stream too and go through `(stream_number, stream_version)`; and
-- a parked event's replay by position, one event now and then. Consumers and
-- rebuilds read in commit order or stream by stream, never by position.
--
-- Rows are appended in position order, so a BRIN index of the position
-- (a few pages for a million events) finds a position by the page ranges
-- that can hold it. Positions stay unique: the column is an identity
-- (GENERATED ALWAYS), drawn from its sequence only.
--
-- The event's id becomes the primary key: it is unique and never empty
-- (an idempotency key's digest, or the writer's id), and the log keeps a
-- primary key a replica or a tool can name rows by.
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events DROP CONSTRAINT events_event_id_key;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (event_id);
CREATE INDEX events_position ON events USING brin (position) WITH (pages_per_range = 16, autosummarize = on);
