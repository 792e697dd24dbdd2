-- The event store: streams, events, consumer checkpoints and the append function.
-- It knows nothing about subscriptions.

CREATE TABLE streams (
    stream_id  text PRIMARY KEY,
    version    bigint NOT NULL CHECK (version >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE events (
    position        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream_id       text NOT NULL,
    stream_version  bigint NOT NULL CHECK (stream_version > 0),
    event_id        uuid NOT NULL UNIQUE,
    type            text NOT NULL,
    schema_version  integer NOT NULL DEFAULT 1,
    data            jsonb NOT NULL,
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- Unique: a fact sent twice is stored once, whichever stream it was sent to.
    idempotency_key text UNIQUE,
    -- The writing transaction; consumers read in (transaction_id, position) order.
    transaction_id  xid8 NOT NULL DEFAULT pg_current_xact_id(),
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stream_id, stream_version)
);

CREATE INDEX events_commit_order ON events (transaction_id, position);

CREATE TABLE consumer_checkpoints (
    name           text PRIMARY KEY,
    transaction_id xid8 NOT NULL DEFAULT '0'::xid8,
    position       bigint NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Appends events to one or more streams, all or nothing.
--
-- batch: [{"stream": text, "expected": bigint|null,
--          "events": [{"id": uuid, "type": text, "schemaVersion": int,
--                      "data": json, "metadata": json, "key": text|null}]}]
--
-- Per stream: the stream row is locked first (writers to one stream queue
-- here); events whose idempotency key is already stored are answered with the
-- stored position as duplicates; only if something new remains is the expected
-- version checked, so a retried request is a duplicate, never a conflict, and
-- a losing writer raises SQLSTATE SL409 before allocating any position.
CREATE FUNCTION append_events(batch jsonb)
RETURNS TABLE (r_stream_index integer, r_event_index integer, r_position bigint,
               r_stream_version bigint, r_duplicate boolean, r_stored_stream text)
LANGUAGE plpgsql AS $$
DECLARE
    stream_entry jsonb;
    event_entry  jsonb;
    stream_index integer;
    event_index  integer;
    target       text;
    current_version bigint;
    key          text;
    fresh        integer;
    total        integer;
    known        integer;
    keys         text[];
    found_position bigint;
    found_version  bigint;
    found_stream   text;
BEGIN
    FOR stream_entry, stream_index IN
        SELECT value, (ordinality - 1)::integer FROM jsonb_array_elements(batch) WITH ORDINALITY
    LOOP
        target := stream_entry->>'stream';
        IF target IS NULL OR target = '' THEN
            RAISE EXCEPTION 'append_events: stream % has no id', stream_index USING ERRCODE = '22023';
        END IF;

        SELECT s.version INTO current_version FROM streams s WHERE s.stream_id = target FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO streams (stream_id, version) VALUES (target, 0) ON CONFLICT DO NOTHING;
            SELECT s.version INTO current_version FROM streams s WHERE s.stream_id = target FOR UPDATE;
        END IF;

        -- One index probe for all keys (an anti-join here would scan events).
        SELECT count(*), array_agg(e->>'key') FILTER (WHERE e->>'key' IS NOT NULL)
        INTO total, keys
        FROM jsonb_array_elements(stream_entry->'events') e;
        SELECT count(*) INTO known FROM events ev WHERE ev.idempotency_key = ANY (keys);
        fresh := total - known;

        IF fresh > 0 AND jsonb_typeof(stream_entry->'expected') = 'number'
           AND (stream_entry->>'expected')::bigint <> current_version THEN
            RAISE EXCEPTION 'stream % is at version %, not the expected %',
                target, current_version, stream_entry->>'expected'
                USING ERRCODE = 'SL409', DETAIL = current_version::text, HINT = target;
        END IF;

        FOR event_entry, event_index IN
            SELECT value, (ordinality - 1)::integer
            FROM jsonb_array_elements(stream_entry->'events') WITH ORDINALITY
        LOOP
            key := event_entry->>'key';
            found_position := NULL;
            IF key IS NOT NULL AND known > 0 THEN
                SELECT ev.position, ev.stream_version, ev.stream_id
                INTO found_position, found_version, found_stream
                FROM events ev WHERE ev.idempotency_key = key;
            END IF;

            IF found_position IS NULL THEN
                INSERT INTO events (stream_id, stream_version, event_id, type, schema_version,
                                    data, metadata, idempotency_key)
                VALUES (target, current_version + 1, (event_entry->>'id')::uuid, event_entry->>'type',
                        coalesce((event_entry->>'schemaVersion')::integer, 1),
                        event_entry->'data', coalesce(event_entry->'metadata', '{}'::jsonb), key)
                ON CONFLICT (idempotency_key) DO NOTHING
                RETURNING position INTO found_position;

                IF found_position IS NOT NULL THEN
                    current_version := current_version + 1;
                    r_stream_index := stream_index; r_event_index := event_index;
                    r_position := found_position; r_stream_version := current_version;
                    r_duplicate := false; r_stored_stream := target;
                    RETURN NEXT;
                    CONTINUE;
                END IF;
                -- A concurrent writer committed the same key first: its copy stands.
                SELECT ev.position, ev.stream_version, ev.stream_id
                INTO found_position, found_version, found_stream
                FROM events ev WHERE ev.idempotency_key = key;
            END IF;

            r_stream_index := stream_index; r_event_index := event_index;
            r_position := found_position; r_stream_version := found_version;
            r_duplicate := true; r_stored_stream := found_stream;
            RETURN NEXT;
        END LOOP;

        UPDATE streams SET version = current_version, updated_at = now() WHERE stream_id = target;
    END LOOP;
    -- No NOTIFY here: a notifying transaction holds a cluster-wide lock from
    -- its pre-commit to the end of its commit, WAL flush included, which
    -- serialises every appending writer. The caller notifies after commit.
END
$$;
