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

-- The state `GET /v1/subscribers/{id}` last computed for "now", valid while
-- the stream is still at `stream_version`, the catalog is the one it was
-- computed with (`catalog`, `Catalog.fingerprint`), and the clock is within
-- [valid_from, valid_until) — until the next instant at which the rules say
-- it may change (`SubscriberLedger.nextChange`; NULL: never). Served as it
-- is, with `at` set to the request's instant, so a read of a long history
-- costs what a short one does. A cache like the snapshots: written lazily by
-- the reader that computed it, never consulted for `?at=`.
CREATE TABLE subscriber_state_cache (
    subscriber_id  text PRIMARY KEY,
    stream_version bigint NOT NULL,
    catalog        text NOT NULL,
    valid_from     timestamptz NOT NULL,
    valid_until    timestamptz,
    state          text NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
