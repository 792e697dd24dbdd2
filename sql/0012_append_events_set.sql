-- A set-based twin of append_events (sql/0001) for large multi-stream
-- batches (`subledger import`): the same input, the same result rows, the
-- same guarantees, in a few statements instead of a loop of one INSERT and
-- one RETURN NEXT per event, which costs most of a batch's time in PL/pgSQL.
--
-- Guarantees, as append_events:
-- - every stream row is locked before its version is read (in stream id
--   order, so two batches never deadlock on each other's streams);
-- - an event whose idempotency key is stored already is answered with the
--   stored copy as a duplicate; a key given twice in one batch is stored once,
--   the later copy answered as a duplicate of the first;
-- - a stream with something new whose expected version is not its version
--   raises SQLSTATE SL409 (DETAIL: the version, HINT: the stream) and nothing
--   is stored;
-- - positions follow (stream index, event index) and stream versions follow
--   positions within a stream.
-- Unlike append_events, a key stored by a concurrent transaction after this
-- one read the keys is not answered as a duplicate: the INSERT fails with a
-- unique violation (SQLSTATE 23505) and the caller decides again. A stream
-- named twice in one batch is refused (22023): use append_events for that.

CREATE OR REPLACE FUNCTION append_events_expected_holds(stream text, current_version bigint, expected bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF expected IS NOT NULL AND expected <> current_version THEN
        RAISE EXCEPTION 'stream % is at version %, not the expected %', stream, current_version, expected
            USING ERRCODE = 'SL409', DETAIL = current_version::text, HINT = stream;
    END IF;
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION append_events_set(batch jsonb)
RETURNS TABLE (r_stream_index integer, r_event_index integer, r_position bigint,
               r_stream_version bigint, r_duplicate boolean, r_stored_stream text)
LANGUAGE plpgsql AS $$
DECLARE
    ids      text[];
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
    SELECT array_agg(l.stream_id ORDER BY l.stream_id), array_agg(l.version ORDER BY l.stream_id)
    INTO ids, versions
    FROM (SELECT s.stream_id, s.version FROM streams s WHERE s.stream_id = ANY (ids) ORDER BY s.stream_id FOR UPDATE) l;

    RETURN QUERY
    WITH given AS (
        SELECT (x.ord - 1)::integer AS si, x.stream, x.expected, x.events, st.version
        FROM ROWS FROM (jsonb_to_recordset(batch) AS (stream text, expected bigint, events jsonb))
             WITH ORDINALITY AS x(stream, expected, events, ord)
        JOIN unnest(ids, versions) AS st(stream_id, version) ON st.stream_id = x.stream
    ), flat AS (
        SELECT g.si, (y.ord - 1)::integer AS ei, g.stream, g.version, y.id, y.type, y.schema_version,
               y.data, y.metadata, y.key,
               stored.position AS stored_position, stored.stream_version AS stored_version,
               stored.stream_id AS stored_stream,
               y.key IS NULL OR row_number() OVER (PARTITION BY y.key ORDER BY g.si, y.ord) = 1 AS first_of_key
        FROM given g
        CROSS JOIN ROWS FROM (jsonb_to_recordset(g.events)
                              AS (id uuid, type text, "schemaVersion" integer, data jsonb, metadata jsonb, key text))
             WITH ORDINALITY AS y(id, type, schema_version, data, metadata, key, ord)
        LEFT JOIN events stored ON stored.idempotency_key = y.key
    ), fresh AS (
        SELECT f.*, f.version + row_number() OVER (PARTITION BY f.si ORDER BY f.ei) AS new_version
        FROM flat f WHERE f.stored_position IS NULL AND f.first_of_key
    ), checked AS (
        SELECT coalesce(bool_and(append_events_expected_holds(g.stream, g.version, g.expected)), true) AS holds
        FROM given g WHERE g.expected IS NOT NULL AND EXISTS (SELECT 1 FROM fresh f WHERE f.si = g.si)
    ), inserted AS (
        INSERT INTO events (stream_id, stream_version, event_id, type, schema_version, data, metadata, idempotency_key)
        SELECT f.stream, f.new_version, f.id, f.type, coalesce(f.schema_version, 1), f.data,
               coalesce(f.metadata, '{}'::jsonb), f.key
        FROM fresh f
        WHERE (SELECT holds FROM checked)
        ORDER BY f.si, f.ei
        RETURNING position, stream_id, stream_version, event_id, idempotency_key
    ), versions AS (
        UPDATE streams st SET version = v.version, updated_at = now()
        FROM (SELECT i.stream_id, max(i.stream_version) AS version FROM inserted i GROUP BY i.stream_id) v
        WHERE st.stream_id = ANY (ids) AND st.stream_id = v.stream_id
    )
    SELECT f.si, f.ei,
           coalesce(f.stored_position, mine.position, first_copy.position),
           coalesce(f.stored_version, mine.stream_version, first_copy.stream_version),
           mine.position IS NULL,
           coalesce(f.stored_stream, mine.stream_id, first_copy.stream_id)
    FROM flat f
    LEFT JOIN inserted mine ON f.stored_position IS NULL AND f.first_of_key AND mine.event_id = f.id
    LEFT JOIN inserted first_copy ON f.stored_position IS NULL AND NOT f.first_of_key AND first_copy.idempotency_key = f.key
    ORDER BY f.si, f.ei;
END
$$;
