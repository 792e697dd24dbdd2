-- append_events_set (sql/0039) without a join of the whole streams table.
-- It named the stream of an event already stored under a batch event's
-- idempotency key by joining `streams` on the stored event's number, and
-- the plan cached for the function (made for the 100 x 100 rows PostgreSQL
-- assumes a set-returning function gives) hashed every stream for each
-- batch, a cost that grows with the number of subscribers (building hash
-- tables was 17% of an import's CPU samples, perf). The stream is now read only for an event
-- that has a stored copy, by the streams' number index. Same input, result
-- rows, locks and errors.
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
               -- Only a stored copy's stream is looked up (by its number's index).
               CASE WHEN stored.position IS NOT NULL
                    THEN (SELECT ss.stream_id FROM streams ss WHERE ss.number = stored.stream_number) END AS stored_stream,
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
