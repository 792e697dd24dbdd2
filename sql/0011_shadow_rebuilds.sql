-- Blue-green rebuilds of read models (`EventStore.rebuildStreamwise`): the
-- rebuild fills a shadow copy of each of a projection's tables
-- (`<table>__rebuild`) while `serve` goes on reading and writing the live
-- ones, indexes it once it is loaded (building an index once is much cheaper
-- than maintaining it row by row), catches up, and swaps it in by renaming in
-- one short transaction. Only the rebuild calls these; a shadow left by a
-- rebuild that died is dropped by the next one. Idempotent (CREATE OR
-- REPLACE), like every migration.
--
-- Privileges granted on a live table are not carried to its replacement:
-- the schema has none (one role owns and uses everything).

-- An empty shadow of `live`: its columns, defaults, NOT NULL and CHECK
-- constraints; no index (see `subledger_shadow_index`).
CREATE OR REPLACE FUNCTION subledger_shadow_create(live text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I', live || '__rebuild');
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', live || '__rebuild', live);
END
$$;

-- Gives the shadow of `live` every index and primary/unique key `live` has,
-- named as there with the suffix `__rebuild` (which the swap removes).
CREATE OR REPLACE FUNCTION subledger_shadow_index(live text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    shadow text := live || '__rebuild';
    item record;
BEGIN
    FOR item IN
        SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition, i.indisunique AS is_unique,
               k.oid AS constraint_oid
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid AND k.contype IN ('p', 'u')
        WHERE i.indrelid = live::regclass
    LOOP
        IF item.constraint_oid IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', shadow, item.name || '__rebuild',
                           pg_get_constraintdef(item.constraint_oid));
        ELSE
            -- pg_get_indexdef: "CREATE [UNIQUE] INDEX name ON schema.table USING method (...) [WHERE ...]".
            EXECUTE format('CREATE %sINDEX %I ON %I %s', CASE WHEN item.is_unique THEN 'UNIQUE ' ELSE '' END,
                           item.name || '__rebuild', shadow,
                           substr(item.definition, position(' USING ' IN item.definition) + 1));
        END IF;
    END LOOP;
    EXECUTE format('ANALYZE %I', shadow);
END
$$;

-- Replaces `live` with its shadow: drops it, renames the shadow and its
-- indexes to the live names. Takes ACCESS EXCLUSIVE locks on both tables
-- until the caller's transaction ends: keep that transaction short.
CREATE OR REPLACE FUNCTION subledger_shadow_swap(live text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    shadow text := live || '__rebuild';
    item record;
BEGIN
    EXECUTE format('DROP TABLE %I', live);
    EXECUTE format('ALTER TABLE %I RENAME TO %I', shadow, live);
    FOR item IN
        SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = live::regclass AND right(c.relname, 9) = '__rebuild'
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', item.name, left(item.name, -9));
    END LOOP;
END
$$;
