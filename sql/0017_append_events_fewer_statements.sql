-- append_events (sql/0001) with fewer statements per stream: the same input,
-- result rows, locks and errors.
--
-- Every statement of a PL/pgSQL function pays for its executor's start and
-- end, which for the request path's appends (a few streams of one event) is
-- most of their cost. For a new stream with one event the function ran seven
-- statements (a locking read that found nothing, the insert, the locking read
-- again, two to count the stored keys, the event, the version); it now runs
-- four:
-- - a stream the writer expects to be new (expected version 0) is inserted
--   first, and a row this transaction inserted is locked by it; when another
--   transaction holds or created the row, the insert waits for it and does
--   nothing, and the row is read with FOR UPDATE as before. Any other stream
--   is read with FOR UPDATE first, as before.
-- - the events and how many of their keys are stored are counted in one
--   statement, with one index probe per key (LATERAL, kept apart by OFFSET 0).
--   A key named twice in one stream's events and already stored now counts
--   as stored for each copy, so a stream with nothing new is not checked
--   against its expected version (before, it could fail SL409 for it).

CREATE OR REPLACE FUNCTION append_events(batch jsonb)
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

        current_version := NULL;
        IF stream_entry->'expected' = '0'::jsonb THEN
            INSERT INTO streams (stream_id, version) VALUES (target, 0) ON CONFLICT DO NOTHING
            RETURNING version INTO current_version;
        END IF;
        IF current_version IS NULL THEN
            SELECT s.version INTO current_version FROM streams s WHERE s.stream_id = target FOR UPDATE;
            IF NOT FOUND THEN
                INSERT INTO streams (stream_id, version) VALUES (target, 0) ON CONFLICT DO NOTHING
                RETURNING version INTO current_version;
                IF current_version IS NULL THEN
                    SELECT s.version INTO current_version FROM streams s WHERE s.stream_id = target FOR UPDATE;
                END IF;
            END IF;
        END IF;

        -- One index probe per key (an anti-join here could scan events).
        SELECT count(*), count(stored.position) INTO total, known
        FROM jsonb_array_elements(stream_entry->'events') e
        LEFT JOIN LATERAL (SELECT ev.position FROM events ev WHERE ev.idempotency_key = e->>'key' OFFSET 0) stored ON true;
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
    -- No NOTIFY here (see sql/0001): the caller notifies after commit.
END
$$;
