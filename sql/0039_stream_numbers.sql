-- Each stream gets a number, and an event names its stream by that number
-- instead of the stream's id.
--
-- A subscriber stream's id is 46 characters ("subscriber-ps-" and 32
-- hexadecimal digits), written into every event and into every entry of
-- the unique index on (stream, version): with 1M events of the bench's mix
-- that index alone took 108 bytes an event, its keys arriving in no order
-- (a new subscriber's pseudonym falls anywhere), and the ids 47 bytes of
-- each 276-byte row (`subledger bench --measure storage`). A bigint is 8
-- bytes in both places. The id stays in `streams`, one row a stream, and
-- readers join it (EventStore.columns); a stream renamed (the naming
-- conversions) changes its one row, not every event of it.
--
-- The numbers are given by an identity, in no meaningful order: nothing
-- compares them but for equality, and a page of a rebuild still walks
-- streams by id (StreamwiseRebuild).

-- Every append writes its stream's row first; events written some other
-- way (by hand, or by a test of an old migration) get theirs here, at
-- their highest version, so no event is left without a number.
INSERT INTO streams (stream_id, version)
SELECT e.stream_id, max(e.stream_version) FROM events e
WHERE NOT EXISTS (SELECT 1 FROM streams s WHERE s.stream_id = e.stream_id)
GROUP BY e.stream_id;

ALTER TABLE streams ADD COLUMN number bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE streams ADD CONSTRAINT streams_number_key UNIQUE (number);

-- Each event's number is its stream row's (the column stays NOT NULL).
CREATE FUNCTION subledger_stream_number(stream text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found bigint;
BEGIN
    SELECT s.number INTO found FROM streams s WHERE s.stream_id = stream;
    RETURN found;
END
$$;

-- One rewrite of the table: the column changes type in place (each row
-- written once, without the id's bytes), and its indexes are built again.
ALTER TABLE events ALTER COLUMN stream_id TYPE bigint USING subledger_stream_number(stream_id);
ALTER TABLE events RENAME COLUMN stream_id TO stream_number;
ALTER TABLE events RENAME CONSTRAINT events_stream_id_stream_version_key TO events_stream_number_stream_version_key;
DROP FUNCTION subledger_stream_number(text);

-- append_events (sql/0017) with the stream's number: the same input, result
-- rows (a duplicate's stream still answered by id), locks and errors.
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
    target_number bigint;
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
            RETURNING version, number INTO current_version, target_number;
        END IF;
        IF current_version IS NULL THEN
            SELECT s.version, s.number INTO current_version, target_number FROM streams s WHERE s.stream_id = target FOR UPDATE;
            IF NOT FOUND THEN
                INSERT INTO streams (stream_id, version) VALUES (target, 0) ON CONFLICT DO NOTHING
                RETURNING version, number INTO current_version, target_number;
                IF current_version IS NULL THEN
                    SELECT s.version, s.number INTO current_version, target_number
                    FROM streams s WHERE s.stream_id = target FOR UPDATE;
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
                SELECT ev.position, ev.stream_version, s.stream_id
                INTO found_position, found_version, found_stream
                FROM events ev JOIN streams s ON s.number = ev.stream_number WHERE ev.idempotency_key = key;
            END IF;

            IF found_position IS NULL THEN
                INSERT INTO events (stream_number, stream_version, event_id, type, schema_version,
                                    data, metadata, idempotency_key)
                VALUES (target_number, current_version + 1, (event_entry->>'id')::uuid, event_entry->>'type',
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
                SELECT ev.position, ev.stream_version, s.stream_id
                INTO found_position, found_version, found_stream
                FROM events ev JOIN streams s ON s.number = ev.stream_number WHERE ev.idempotency_key = key;
            END IF;

            r_stream_index := stream_index; r_event_index := event_index;
            r_position := found_position; r_stream_version := found_version;
            r_duplicate := true; r_stored_stream := found_stream;
            RETURN NEXT;
        END LOOP;

        UPDATE streams SET version = current_version, updated_at = now() WHERE number = target_number;
    END LOOP;
    -- No NOTIFY here (see sql/0001): the caller notifies after commit.
END
$$;

-- append_events_set (sql/0012) with the streams' numbers: the same input,
-- result rows, locks and errors.
CREATE OR REPLACE FUNCTION append_events_set(batch jsonb)
RETURNS TABLE (r_stream_index integer, r_event_index integer, r_position bigint,
               r_stream_version bigint, r_duplicate boolean, r_stored_stream text)
LANGUAGE plpgsql AS $$
DECLARE
    ids      text[];
    numbers  bigint[];
    versions bigint[];
BEGIN
    SELECT array_agg(x.stream ORDER BY x.stream) INTO ids FROM jsonb_to_recordset(batch) AS x(stream text);
    IF ids IS NULL THEN
        RETURN;
    END IF;
    IF array_position(ids, NULL) IS NOT NULL OR array_position(ids, '') IS NOT NULL THEN
        RAISE EXCEPTION 'append_events_set: a stream has no id' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(ids) AS i) <> cardinality(ids) THEN
        RAISE EXCEPTION 'append_events_set: a stream is named twice' USING ERRCODE = '22023';
    END IF;

    INSERT INTO streams (stream_id, version) SELECT i, 0 FROM unnest(ids) AS i ORDER BY i ON CONFLICT DO NOTHING;
    -- Writers to one stream queue here; a locked row is read as its last writer left it.
    -- Index probes by array, never a scan: the streams table grows with the ledger.
    SELECT array_agg(l.stream_id ORDER BY l.stream_id), array_agg(l.number ORDER BY l.stream_id),
           array_agg(l.version ORDER BY l.stream_id)
    INTO ids, numbers, versions
    FROM (SELECT s.stream_id, s.number, s.version FROM streams s WHERE s.stream_id = ANY (ids) ORDER BY s.stream_id FOR UPDATE) l;

    RETURN QUERY
    WITH given AS (
        SELECT (x.ord - 1)::integer AS si, x.stream, st.number, x.expected, x.events, st.version
        FROM ROWS FROM (jsonb_to_recordset(batch) AS (stream text, expected bigint, events jsonb))
             WITH ORDINALITY AS x(stream, expected, events, ord)
        JOIN unnest(ids, numbers, versions) AS st(stream_id, number, version) ON st.stream_id = x.stream
    ), flat AS (
        SELECT g.si, (y.ord - 1)::integer AS ei, g.stream, g.number, g.version, y.id, y.type, y.schema_version,
               y.data, y.metadata, y.key,
               stored.position AS stored_position, stored.stream_version AS stored_version,
               stored_stream.stream_id AS stored_stream,
               y.key IS NULL OR row_number() OVER (PARTITION BY y.key ORDER BY g.si, y.ord) = 1 AS first_of_key
        FROM given g
        CROSS JOIN ROWS FROM (jsonb_to_recordset(g.events)
                              AS (id uuid, type text, "schemaVersion" integer, data jsonb, metadata jsonb, key text))
             WITH ORDINALITY AS y(id, type, schema_version, data, metadata, key, ord)
        LEFT JOIN events stored ON stored.idempotency_key = y.key
        LEFT JOIN streams stored_stream ON stored_stream.number = stored.stream_number
    ), fresh AS (
        SELECT f.*, f.version + row_number() OVER (PARTITION BY f.si ORDER BY f.ei) AS new_version
        FROM flat f WHERE f.stored_position IS NULL AND f.first_of_key
    ), checked AS (
        SELECT coalesce(bool_and(append_events_expected_holds(g.stream, g.version, g.expected)), true) AS holds
        FROM given g WHERE g.expected IS NOT NULL AND EXISTS (SELECT 1 FROM fresh f WHERE f.si = g.si)
    ), inserted AS (
        INSERT INTO events (stream_number, stream_version, event_id, type, schema_version, data, metadata, idempotency_key)
        SELECT f.number, f.new_version, f.id, f.type, coalesce(f.schema_version, 1), f.data,
               coalesce(f.metadata, '{}'::jsonb), f.key
        FROM fresh f
        WHERE (SELECT holds FROM checked)
        ORDER BY f.si, f.ei
        RETURNING position, stream_number, stream_version, event_id, idempotency_key
    ), versions AS (
        UPDATE streams st SET version = v.version, updated_at = now()
        FROM (SELECT i.stream_number, max(i.stream_version) AS version FROM inserted i GROUP BY i.stream_number) v
        WHERE st.number = ANY (numbers) AND st.number = v.stream_number
    )
    SELECT f.si, f.ei,
           coalesce(f.stored_position, mine.position, first_copy.position),
           coalesce(f.stored_version, mine.stream_version, first_copy.stream_version),
           mine.position IS NULL,
           coalesce(f.stored_stream, CASE WHEN mine.position IS NOT NULL THEN f.stream END, first_stream.stream_id)
    FROM flat f
    LEFT JOIN inserted mine ON f.stored_position IS NULL AND f.first_of_key AND mine.event_id = f.id
    LEFT JOIN inserted first_copy ON f.stored_position IS NULL AND NOT f.first_of_key AND first_copy.idempotency_key = f.key
    -- The first copy may be in another stream of this batch.
    LEFT JOIN unnest(ids, numbers) AS first_stream(stream_id, number) ON first_stream.number = first_copy.stream_number
    ORDER BY f.si, f.ei;
END
$$;
