-- Three reductions of the log, with one conversion of the events stored
-- before (the table written once more, below): the transaction lookup
-- answered from the log, idempotency keys as event ids, and streams whose
-- rows no append updates.
--
-- The transaction lookup answered from the log. `transaction_ids` held a row
-- for every transaction a subscriber recorded (its id, its original, the
-- subscriber and an instant) in a table of its own with two indexes: 138
-- bytes an event of the bench's log, the most of any table after `events`
-- (`bench --measure storage`). Each event now carries the keys the writer
-- gives it (`NewEvent.lookupKey`, `lookupGroup`; '' for none), indexed
-- where they are not empty, and the table goes:
--
-- * `lookup_key`: the ownership key (`Store.ownershipKey`: the store's and
--   the environment's prefix, then the id) of the transaction an event
--   records: a purchase, renewal or restore, a transfer's transaction, a
--   Play purchase's order id;
-- * `lookup_group`: its original's key when that is another transaction (a
--   renewal's first purchase; a Play purchase's token).
--
-- Empty rather than NULL: a NULL in a row of this many columns adds a null
-- bitmap, which lengthens the row's header by 8 bytes. A lookup is an index
-- probe and a comparison of text, as it was in the table; which subscriber
-- recorded an event is its stream's: the subscriber whose key names that
-- stream, or after erasure the stream's pseudonym, which is what the table
-- held for an erased subscriber.
--
-- The events stored before get their keys once, here, read from the stored
-- forms the writer makes (`LedgerEvent.stored()`): a transaction record
-- (schema 2, a JSON string, `TransactionFact+Record.swift`) or a JSON
-- object. A record's first field is its transaction id and, when present,
-- its second the original's; its environment is written only when it is
-- Sandbox, so a record without the bytes `e7:Sandbox` is Production's and
-- is read no further. Lengths in a record are UTF-8 bytes, so it is read as
-- bytes. (`convert_to` and `convert_from` are STABLE only because they
-- depend on the database's encoding, which never changes for a database.)
CREATE FUNCTION subledger_event_keys(type text, data jsonb, want_original boolean)
RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    record bytea; at integer := 0; size integer; colon integer; length integer; code integer; value text;
    transaction text; original text; sandbox boolean := false; maybe_sandbox boolean; fact jsonb; prefix text := '';
BEGIN
    IF type NOT IN ('purchased', 'renewed', 'restored', 'transferred_in', 'google_play_purchase') THEN RETURN NULL; END IF;
    IF jsonb_typeof(data) = 'string' THEN
        IF type NOT IN ('purchased', 'renewed', 'restored') THEN RETURN NULL; END IF;
        record := convert_to(data #>> '{}', 'UTF8');
        size := octet_length(record);
        -- 'e7:Sandbox'
        maybe_sandbox := position('\x65373a53616e64626f78'::bytea IN record) > 0;
        WHILE at < size LOOP
            code := get_byte(record, at);
            -- Production's transaction and original are the first two fields.
            EXIT WHEN NOT maybe_sandbox AND code NOT IN (105, 111);
            colon := position('\x3a'::bytea IN substr(record, at + 2, 12));
            IF colon < 2 THEN RETURN NULL; END IF;
            length := convert_from(substr(record, at + 2, colon - 1), 'UTF8')::integer;
            value := convert_from(substr(record, at + colon + 2, length), 'UTF8');
            IF code = 105 THEN transaction := value;     -- i
            ELSIF code = 111 THEN original := value;     -- o
            ELSIF code = 101 THEN sandbox := value = 'Sandbox'; -- e
            END IF;
            at := at + colon + 1 + length;
        END LOOP;
    ELSE
        IF jsonb_typeof(data) <> 'object' THEN RETURN NULL; END IF;
        fact := CASE type WHEN 'transferred_in' THEN data->'transaction' ELSE data END;
        IF fact IS NULL OR jsonb_typeof(fact) <> 'object' THEN RETURN NULL; END IF;
        IF type = 'google_play_purchase' THEN
            transaction := fact->>'orderId'; original := fact->>'purchaseToken'; prefix := 'google_play' || chr(31);
        ELSE
            transaction := fact->>'transactionId'; original := fact->>'originalTransactionId';
        END IF;
        sandbox := fact->>'environment' = 'Sandbox';
    END IF;
    IF sandbox THEN prefix := prefix || 'Sandbox' || chr(31); END IF;
    IF want_original THEN
        RETURN CASE WHEN original IS DISTINCT FROM transaction THEN prefix || original END;
    END IF;
    RETURN prefix || transaction;
END
$$;

-- The ownership key of the transaction an event records (NULL: none).
CREATE FUNCTION subledger_transaction_key(type text, data jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN subledger_event_keys(type, data, false);

-- The ownership key of that transaction's original when it is another one.
CREATE FUNCTION subledger_original_key(type text, data jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN subledger_event_keys(type, data, true);

-- Idempotency keys as event ids. A key was stored as its text (the
-- ledger's are 22 characters, sql/0035) in the row and again in the unique
-- index, whose random keys leave its pages about two thirds full: 23 bytes
-- in the row and 53 in the index an event. An event appended with a key
-- now takes the MD5 of the key's text, as a `uuid`, for its id, and the
-- ids are unique: the key costs no column and an index entry of 24 bytes
-- instead of 32. The event store computes the digest from the text a
-- writer gives (`EventStore.storedKey`; in SQL `md5(key)::uuid`, which
-- this migration uses for the keys stored before); an event without a key
-- keeps the id its writer drew (time-ordered, `EventIDs`), as the events
-- stored before without one keep theirs. No reader outside the event
-- store used an event's id (sql/0037), and the anchors' logs use the
-- message's id as its idempotency key the same way. Any text is still a
-- key, and two texts are one key only if they are equal (or collide in
-- MD5's 128 bits: for 10^12 keys, odds below 10^-14). A stored key can no
-- longer be read back as its text; the one reader that needed it, the
-- conversion of streams written before erasure (`PlainStreamConversion`),
-- digests each ledger key again under the subscriber's key, and so takes
-- the keys of the streams not yet converted from
-- `unconverted_idempotency_keys`, kept here until then.
CREATE TABLE unconverted_idempotency_keys (
    position   bigint PRIMARY KEY,
    stored_key text NOT NULL
);
INSERT INTO unconverted_idempotency_keys (position, stored_key)
SELECT e.position, e.idempotency_key
FROM streams s JOIN events e ON e.stream_number = s.number
WHERE starts_with(s.stream_id, 'subscriber-') AND s.stream_id !~ '^subscriber-ps-[0-9a-f]{32}$'
  AND e.idempotency_key IS NOT NULL;

-- One conversion of the events stored before: the table is written once
-- more, each row with its keys read from its data and its id from its
-- idempotency key. A new table rather than changes to this one: a dropped
-- column stays in every row written after as a NULL, and a NULL here adds
-- the null bitmap (8 bytes a row, below). Its columns are in the order
-- that leaves no padding: the 8-byte ones first, then the id, the schema
-- version (2 bytes: the writers' versions are small numbers), and the
-- variable ones; a row is about 22 bytes shorter with the key gone
-- (`bench --measure storage`).
CREATE TABLE events_converted (
    position        bigint GENERATED ALWAYS AS IDENTITY,
    stream_number   bigint NOT NULL,
    stream_version  bigint NOT NULL,
    -- The writing transaction; consumers read in (transaction_id, position) order.
    transaction_id  xid8 NOT NULL DEFAULT pg_current_xact_id(),
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    -- Unique: an idempotency key's digest, or the id of an event without one.
    event_id        uuid NOT NULL,
    schema_version  smallint NOT NULL DEFAULT 1,
    type            text NOT NULL,
    data            jsonb NOT NULL,
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    lookup_key      text NOT NULL DEFAULT '',
    lookup_group    text NOT NULL DEFAULT ''
);
INSERT INTO events_converted OVERRIDING SYSTEM VALUE
SELECT position, stream_number, stream_version, transaction_id, recorded_at,
       coalesce(md5(idempotency_key)::uuid, event_id), schema_version, type, data, metadata,
       coalesce(subledger_transaction_key(type, data), ''), coalesce(subledger_original_key(type, data), '')
FROM events ORDER BY position;
-- Positions go on from where the old table's sequence stands (past any
-- position a rolled-back append took).
DO $$
DECLARE
    last bigint; called boolean;
BEGIN
    EXECUTE format('SELECT last_value, is_called FROM %s', pg_get_serial_sequence('events', 'position')) INTO last, called;
    PERFORM setval(pg_get_serial_sequence('events_converted', 'position'), last, called);
END
$$;
DROP TABLE events;
ALTER TABLE events_converted RENAME TO events;
ALTER SEQUENCE events_converted_position_seq RENAME TO events_position_seq;
ALTER TABLE events
    ADD CONSTRAINT events_pkey PRIMARY KEY (position),
    ADD CONSTRAINT events_stream_version_check CHECK (stream_version > 0),
    ADD CONSTRAINT events_stream_number_stream_version_key UNIQUE (stream_number, stream_version),
    ADD CONSTRAINT events_event_id_key UNIQUE (event_id);
CREATE INDEX events_commit_order ON events (transaction_id) WITH (deduplicate_items = off);
CREATE INDEX events_lookup_key ON events (lookup_key) WHERE lookup_key <> '';
CREATE INDEX events_lookup_group ON events (lookup_group) WHERE lookup_group <> '';

-- A stream's version is its last event's. Every append updated its
-- stream's row with the version (and an instant no reader used), which
-- kept the table's pages half empty for those updates (sql/0036: 32 bytes
-- an event of the bench's log for 10 events a stream). The append
-- functions below read the version from the events' (stream_number,
-- stream_version) index, one probe, once the stream is locked; the rows
-- are written once and no longer updated, and the pages fill.
ALTER TABLE streams DROP COLUMN version, DROP COLUMN updated_at;
ALTER TABLE streams RESET (fillfactor);
CLUSTER streams USING streams_pkey;

-- The append functions (sql/0039, sql/0042) store the keys a batch gives
-- (`lk`, `lg`; absent: '') and take each idempotency key as its digest's
-- text, which is the event's id when given (the writer sends it as `id` too),
-- and read each stream's version from its events. Otherwise unchanged.
-- A stream's version is read after its lock in a statement of its own,
-- which under READ COMMITTED sees what a writer waited for committed; under
-- REPEATABLE READ or SERIALIZABLE it would not, and the append would fail
-- on the version's unique index. Refused with an error that says why.
CREATE FUNCTION append_events_isolation_holds() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'appends need the READ COMMITTED isolation level, not %', current_setting('transaction_isolation')
            USING ERRCODE = '0A000';
    END IF;
END
$$;

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
    key          uuid;
    fresh        integer;
    total        integer;
    known        integer;
    found_position bigint;
    found_version  bigint;
    found_stream   text;
BEGIN
    PERFORM append_events_isolation_holds();
    FOR stream_entry, stream_index IN
        SELECT value, (ordinality - 1)::integer FROM jsonb_array_elements(batch) WITH ORDINALITY
    LOOP
        target := stream_entry->>'stream';
        IF target IS NULL OR target = '' THEN
            RAISE EXCEPTION 'append_events: stream % has no id', stream_index USING ERRCODE = '22023';
        END IF;

        target_number := NULL;
        IF stream_entry->'expected' = '0'::jsonb THEN
            INSERT INTO streams (stream_id) VALUES (target) ON CONFLICT DO NOTHING RETURNING number INTO target_number;
        END IF;
        IF target_number IS NULL THEN
            SELECT s.number INTO target_number FROM streams s WHERE s.stream_id = target FOR UPDATE;
            IF NOT FOUND THEN
                INSERT INTO streams (stream_id) VALUES (target) ON CONFLICT DO NOTHING RETURNING number INTO target_number;
                IF target_number IS NULL THEN
                    SELECT s.number INTO target_number FROM streams s WHERE s.stream_id = target FOR UPDATE;
                END IF;
            END IF;
        END IF;
        -- The stream's version is its last event's, read once the stream is
        -- locked: a statement of its own, whose snapshot holds what the
        -- writer it waited for committed (one probe of the version index).
        SELECT coalesce(max(ev.stream_version), 0) INTO current_version FROM events ev WHERE ev.stream_number = target_number;

        -- One index probe per key (an anti-join here could scan events).
        SELECT count(*), count(stored.position) INTO total, known
        FROM jsonb_array_elements(stream_entry->'events') e
        LEFT JOIN LATERAL (SELECT ev.position FROM events ev WHERE ev.event_id = (e->>'key')::uuid OFFSET 0) stored ON true;
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
            key := (event_entry->>'key')::uuid;
            found_position := NULL;
            IF key IS NOT NULL AND known > 0 THEN
                SELECT ev.position, ev.stream_version, s.stream_id
                INTO found_position, found_version, found_stream
                FROM events ev JOIN streams s ON s.number = ev.stream_number WHERE ev.event_id = key;
            END IF;

            IF found_position IS NULL THEN
                INSERT INTO events (stream_number, stream_version, event_id, type, schema_version,
                                    data, metadata, lookup_key, lookup_group)
                VALUES (target_number, current_version + 1, coalesce(key, (event_entry->>'id')::uuid), event_entry->>'type',
                        coalesce((event_entry->>'schemaVersion')::integer, 1),
                        event_entry->'data', coalesce(event_entry->'metadata', '{}'::jsonb),
                        coalesce(event_entry->>'lk', ''), coalesce(event_entry->>'lg', ''))
                ON CONFLICT (event_id) DO NOTHING
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
                FROM events ev JOIN streams s ON s.number = ev.stream_number WHERE ev.event_id = key;
            END IF;

            r_stream_index := stream_index; r_event_index := event_index;
            r_position := found_position; r_stream_version := found_version;
            r_duplicate := true; r_stored_stream := found_stream;
            RETURN NEXT;
        END LOOP;

    END LOOP;
    -- No NOTIFY here (see sql/0001): the caller notifies after commit.
END
$$;

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

    PERFORM append_events_isolation_holds();
    INSERT INTO streams (stream_id) SELECT i FROM unnest(ids) AS i ORDER BY i ON CONFLICT DO NOTHING;
    -- Writers to one stream queue here.
    -- Index probes by array, never a scan: the streams table grows with the ledger.
    SELECT array_agg(l.stream_id ORDER BY l.stream_id), array_agg(l.number ORDER BY l.stream_id)
    INTO ids, numbers
    FROM (SELECT s.stream_id, s.number FROM streams s WHERE s.stream_id = ANY (ids) ORDER BY s.stream_id FOR UPDATE) l;
    -- Each stream's version is its last event's, read in a statement of its
    -- own once every stream is locked (its snapshot holds what the writers
    -- waited for committed).
    SELECT array_agg(coalesce((SELECT max(ev.stream_version) FROM events ev WHERE ev.stream_number = n), 0) ORDER BY o)
    INTO versions
    FROM unnest(numbers) WITH ORDINALITY AS x(n, o);

    RETURN QUERY
    WITH given AS (
        SELECT (x.ord - 1)::integer AS si, x.stream, st.number, x.expected, x.events, st.version
        FROM ROWS FROM (jsonb_to_recordset(batch) AS (stream text, expected bigint, events jsonb))
             WITH ORDINALITY AS x(stream, expected, events, ord)
        JOIN unnest(ids, numbers, versions) AS st(stream_id, number, version) ON st.stream_id = x.stream
    ), flat AS (
        SELECT g.si, (y.ord - 1)::integer AS ei, g.stream, g.number, g.version, y.id, y.type, y.schema_version,
               y.data, y.metadata, y.key, y.lk, y.lg,
               stored.position AS stored_position, stored.stream_version AS stored_version,
               -- Only a stored copy's stream is looked up (by its number's index).
               CASE WHEN stored.position IS NOT NULL
                    THEN (SELECT ss.stream_id FROM streams ss WHERE ss.number = stored.stream_number) END AS stored_stream,
               y.key IS NULL OR row_number() OVER (PARTITION BY y.key ORDER BY g.si, y.ord) = 1 AS first_of_key
        FROM given g
        CROSS JOIN ROWS FROM (jsonb_to_recordset(g.events)
                              AS (id uuid, type text, "schemaVersion" integer, data jsonb, metadata jsonb, key uuid,
                                  lk text, lg text))
             WITH ORDINALITY AS y(id, type, schema_version, data, metadata, key, lk, lg, ord)
        LEFT JOIN events stored ON stored.event_id = y.key
    ), fresh AS (
        SELECT f.*, f.version + row_number() OVER (PARTITION BY f.si ORDER BY f.ei) AS new_version
        FROM flat f WHERE f.stored_position IS NULL AND f.first_of_key
    ), checked AS (
        SELECT coalesce(bool_and(append_events_expected_holds(g.stream, g.version, g.expected)), true) AS holds
        FROM given g WHERE g.expected IS NOT NULL AND EXISTS (SELECT 1 FROM fresh f WHERE f.si = g.si)
    ), inserted AS (
        INSERT INTO events (stream_number, stream_version, event_id, type, schema_version, data, metadata,
                            lookup_key, lookup_group)
        SELECT f.number, f.new_version, coalesce(f.key, f.id), f.type, coalesce(f.schema_version, 1), f.data,
               coalesce(f.metadata, '{}'::jsonb), coalesce(f.lk, ''), coalesce(f.lg, '')
        FROM fresh f
        WHERE (SELECT holds FROM checked)
        ORDER BY f.si, f.ei
        RETURNING position, stream_number, stream_version, event_id
    )
    SELECT f.si, f.ei,
           coalesce(f.stored_position, mine.position, first_copy.position),
           coalesce(f.stored_version, mine.stream_version, first_copy.stream_version),
           mine.position IS NULL,
           coalesce(f.stored_stream, CASE WHEN mine.position IS NOT NULL THEN f.stream END, first_stream.stream_id)
    FROM flat f
    LEFT JOIN inserted mine ON f.stored_position IS NULL AND f.first_of_key AND mine.event_id = coalesce(f.key, f.id)
    LEFT JOIN inserted first_copy ON f.stored_position IS NULL AND NOT f.first_of_key AND first_copy.event_id = f.key
    -- The first copy may be in another stream of this batch.
    LEFT JOIN unnest(ids, numbers) AS first_stream(stream_id, number) ON first_stream.number = first_copy.stream_number
    ORDER BY f.si, f.ei;
END
$$;

-- Who recorded an event: the subscriber whose key names its stream, else
-- the stream's own name after `subscriber-` (an erased subscriber's
-- pseudonym, or a subscriber id in a stream not yet converted).
CREATE FUNCTION subledger_stream_subscriber(number bigint) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN (SELECT coalesce(k.subscriber_id, substr(s.stream_id, 12))
        FROM streams s LEFT JOIN subscriber_keys k ON k.pseudonym = substr(s.stream_id, 12)
        WHERE s.number = subledger_stream_subscriber.number);

-- The transactions recorded under some keys (a JSON array of ownership
-- keys): each event recording one as its transaction or as its original,
-- with the key of the transaction and of its original (itself when it is
-- one), who recorded it and where.
CREATE FUNCTION subledger_transactions(keys jsonb)
RETURNS TABLE (transaction_key text, original_key text, subscriber_id text, event_position bigint)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    WITH wanted AS (SELECT DISTINCT k AS id FROM jsonb_array_elements_text(keys) k),
         found AS (
             SELECT e.position, e.stream_number, w.id AS transaction_key,
                    CASE WHEN e.lookup_group <> '' THEN e.lookup_group ELSE w.id END AS original_key
             FROM wanted w CROSS JOIN LATERAL (
                 SELECT ev.position, ev.stream_number, ev.lookup_group FROM events ev
                 WHERE ev.lookup_key = w.id AND ev.lookup_key <> '' OFFSET 0) e
             UNION ALL
             SELECT e.position, e.stream_number, w.id, w.id
             FROM wanted w CROSS JOIN LATERAL (
                 SELECT ev.position, ev.stream_number FROM events ev
                 WHERE ev.lookup_group = w.id AND ev.lookup_group <> '' OFFSET 0) e)
    SELECT f.transaction_key, f.original_key, subledger_stream_subscriber(f.stream_number), f.position FROM found f;
END
$$;

-- subledger_owners (sql/0018) with the originals read from the log. It
-- reads a few rows by their keys: it never compiles its plan (JIT took 70
-- ms a call where estimates were off).
CREATE OR REPLACE FUNCTION subledger_owners(ids jsonb)
RETURNS TABLE (original_transaction_id text, subscriber_id text)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    WITH wanted AS (SELECT DISTINCT k AS id FROM jsonb_array_elements_text(ids) k),
         originals AS (
             SELECT w.id FROM wanted w
             UNION
             -- An event's original, when it has one of its own. (Tested in
             -- the select list, not the WHERE clause: there it would let the
             -- plan scan the group's index for each id.)
             SELECT t.original FROM wanted w
             CROSS JOIN LATERAL (SELECT CASE WHEN ev.lookup_group <> '' THEN ev.lookup_group END AS original
                                 FROM events ev
                                 WHERE ev.lookup_key = w.id AND ev.lookup_key <> '' OFFSET 0) t
             WHERE t.original IS NOT NULL)
    SELECT o.original_transaction_id, o.subscriber_id FROM originals x
    CROSS JOIN LATERAL (SELECT ow.original_transaction_id, ow.subscriber_id FROM transaction_owners ow
                        WHERE ow.original_transaction_id = x.id OFFSET 0) o;
END
$$;

DROP TABLE transaction_ids;

-- Statistics of the new columns, for the plans of the lookups, when there
-- are events to sample. An empty table analyzed is known to be empty: a
-- plan the append function cached then (its probe of the idempotency keys)
-- scanned the whole table for each key, and an import on a new database
-- slowed to a few hundred events a second.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM events) THEN ANALYZE events; END IF;
END
$$;
