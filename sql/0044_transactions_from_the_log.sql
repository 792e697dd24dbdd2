-- The transaction lookup answered from the log. `transaction_ids` held a row
-- for every transaction a subscriber recorded (its id, its original, the
-- subscriber and an instant), written beside the events that already hold
-- each of those: 141 bytes an event of the bench's log, the most of any
-- table after `events` (`bench --measure storage`). Two indexes of the
-- events over the keys their data holds now answer what the table did, and
-- the table goes:
--
-- * `events_transaction_key`: the ownership key (`Store.ownershipKey`: the
--   store's and the environment's prefix, then the id) of the transaction an
--   event records: a purchase, renewal or restore, a transfer's
--   transaction, a Play purchase's order id;
-- * `events_original_key`: the key of its original when that is another
--   transaction (a renewal's first purchase; a Play purchase's token), NULL
--   otherwise, so the renewals of one original share an entry.
--
-- Which subscriber recorded an event is its stream's: the subscriber whose
-- key names that stream, or after erasure the stream's pseudonym, which is
-- what the table held for an erased subscriber.
--
-- The keys are read from the stored forms the writer makes
-- (`LedgerEvent.stored()`): a transaction record (schema 2, a JSON string,
-- `TransactionFact+Record.swift`) or a JSON object. A record's first field
-- is its transaction id and, when present, its second the original's; its
-- environment is written only when it is Sandbox, so a record without the
-- bytes `e7:Sandbox` is Production's and is read no further. Lengths in a
-- record are UTF-8 bytes, so it is read as bytes.
--
-- The functions are IMMUTABLE for the indexes: `convert_to`/`convert_from`
-- are only STABLE because they depend on the database's encoding, which
-- never changes for a database.
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

-- Both hold every event (NULL keys too, deduplicated into a few entries):
-- an index with a predicate would compute the key twice for each insert.
CREATE INDEX events_transaction_key ON events (subledger_transaction_key(type, data));
CREATE INDEX events_original_key ON events (subledger_original_key(type, data));

-- Who recorded an event: the subscriber whose key names its stream, else
-- the stream's own name after `subscriber-` (an erased subscriber's
-- pseudonym, or a subscriber id in a stream not yet converted).
CREATE FUNCTION subledger_stream_subscriber(number bigint) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN (SELECT coalesce(k.subscriber_id, substr(s.stream_id, 12))
        FROM streams s LEFT JOIN subscriber_keys k ON k.pseudonym = substr(s.stream_id, 12)
        WHERE s.number = subledger_stream_subscriber.number);

-- The transactions recorded under some keys: each event recording one as
-- its transaction or as its original, with the key of the transaction and
-- of its original (itself when it is one), who recorded it and where.
CREATE FUNCTION subledger_transactions(keys text[])
RETURNS TABLE (transaction_key text, original_key text, subscriber_id text, event_position bigint)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    WITH wanted AS (SELECT DISTINCT unnest(keys) AS id),
         found AS (
             SELECT e.position, e.stream_number, w.id AS transaction_key,
                    coalesce(subledger_original_key(e.type, e.data), w.id) AS original_key
             FROM wanted w CROSS JOIN LATERAL (
                 SELECT ev.position, ev.stream_number, ev.type, ev.data FROM events ev
                 WHERE subledger_transaction_key(ev.type, ev.data) = w.id OFFSET 0) e
             UNION ALL
             SELECT e.position, e.stream_number, w.id, w.id
             FROM wanted w CROSS JOIN LATERAL (
                 SELECT ev.position, ev.stream_number FROM events ev
                 WHERE subledger_original_key(ev.type, ev.data) = w.id OFFSET 0) e)
    SELECT f.transaction_key, f.original_key, subledger_stream_subscriber(f.stream_number), f.position FROM found f;
END
$$;

-- subledger_owners (sql/0018) with the originals read from the log. Both
-- lookups read a few rows by their keys; the estimates of an expression
-- index with no statistics yet are large enough to compile the plan (JIT),
-- 70 ms a call, so neither compiles.
CREATE OR REPLACE FUNCTION subledger_owners(ids jsonb)
RETURNS TABLE (original_transaction_id text, subscriber_id text)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    WITH wanted AS (SELECT DISTINCT jsonb_array_elements_text(ids) AS id),
         originals AS (
             SELECT w.id FROM wanted w
             UNION
             SELECT t.original FROM wanted w
             CROSS JOIN LATERAL (SELECT subledger_original_key(ev.type, ev.data) AS original FROM events ev
                                 WHERE subledger_transaction_key(ev.type, ev.data) = w.id OFFSET 0) t
             WHERE t.original IS NOT NULL)
    SELECT o.original_transaction_id, o.subscriber_id FROM originals x
    CROSS JOIN LATERAL (SELECT ow.original_transaction_id, ow.subscriber_id FROM transaction_owners ow
                        WHERE ow.original_transaction_id = x.id OFFSET 0) o;
END
$$;

DROP TABLE transaction_ids;

-- Statistics of the two new index expressions, for the plans of the lookups.
ANALYZE events;
