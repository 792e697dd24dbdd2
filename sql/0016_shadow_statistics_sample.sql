-- The rebuild's shadow tables are analyzed from a smaller sample.
--
-- `subledger_shadow_index` ends with an ANALYZE, so the tables swapped in
-- come with statistics. At the default target (100: 30,000 sampled rows)
-- that was about 550 ms of one server process for the four read-model
-- tables of 1M events, a third as much as building their indexes, spent
-- after the load while the swap waits. At 10 (3,000 rows) it is about 90 ms.
--
-- The read models' queries need little from the statistics: lookups by key,
-- ranges on instants and whole-table counts, whose plans do not change
-- with a finer histogram. An ANALYZE at the default target later (by hand
-- or autovacuum's, once a tenth of a table has changed) refines them.
--
-- The setting is the function's own (SET clause): it ends with the call.

-- Gives the shadow of `live` every index and primary/unique key `live` has,
-- named as there with the suffix `__rebuild` (which the swap removes).
CREATE OR REPLACE FUNCTION subledger_shadow_index(live text) RETURNS void LANGUAGE plpgsql
SET default_statistics_target = 10 AS $$
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

