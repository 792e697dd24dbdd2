-- Snapshots of subscribers' ledgers: `SubscriberLedger.snapshotData()` (a
-- compact binary form, layout `format`) folded through `stream_version` of
-- the subscriber's stream. Writes and `GET /v1/subscribers/{id}` read this
-- row and the events after it instead of the whole history; a subscriber
-- with thousands of events costs about what one with a few does.
--
-- A cache, never the truth: it holds only what the events say, a row is only
-- ever replaced by one of a later version (or of this build's format), and
-- deleting any or all rows changes no answer, only its cost. Written inline,
-- by whoever has just folded a long tail (the writer in its transaction, a
-- reader, the subscriptions projection), once the tail since the last
-- snapshot reaches a few dozen events, so its cost is spread over them.
CREATE TABLE subscriber_snapshots (
    subscriber_id  text PRIMARY KEY,
    stream_version bigint NOT NULL CHECK (stream_version > 0),
    format         integer NOT NULL,
    ledger         bytea NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
