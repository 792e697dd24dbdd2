-- Events a consumer's handler refused again and again, set aside so the
-- consumer can go on with the rest instead of stalling for every stream.
-- Support looks here; `subledger rebuild` replays them once the cause is fixed.
CREATE TABLE consumer_parked_events (
    consumer       text NOT NULL,
    position       bigint NOT NULL,
    stream_id      text NOT NULL,
    stream_version bigint NOT NULL,
    type           text NOT NULL,
    reason         text NOT NULL,
    parked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, position)
);
