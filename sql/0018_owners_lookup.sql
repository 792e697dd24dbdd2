-- The owners of the original transactions some ids name (given as original
-- or as other transaction ids), read by every write before it decides.
--
-- As a statement it was planned on every run: the ownership tables of a new
-- deployment start empty and grow with every purchase, and a plan a
-- connection kept from when they held a few rows scanned them whole (1.1 ms
-- a write after five seconds of purchases). Planning cost more than running
-- it: in `pg_stat_statements` over five seconds of combined purchases, 355 ms
-- of planning for 124 ms of execution. Here the plan is made once per
-- connection, with sequential scans priced out, so it is the index probes
-- whatever the tables held when it was made; they are the right plan at any
-- size, since a lookup reads a few rows by their keys.
CREATE FUNCTION subledger_owners(ids jsonb)
RETURNS TABLE (original_transaction_id text, subscriber_id text)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    WITH wanted AS (SELECT DISTINCT jsonb_array_elements_text(ids) AS id),
         originals AS (
             SELECT w.id FROM wanted w
             UNION
             SELECT t.original_transaction_id FROM wanted w
             CROSS JOIN LATERAL (SELECT ti.original_transaction_id FROM transaction_ids ti
                                 WHERE ti.transaction_id = w.id OFFSET 0) t)
    SELECT o.original_transaction_id, o.subscriber_id FROM originals x
    CROSS JOIN LATERAL (SELECT ow.original_transaction_id, ow.subscriber_id FROM transaction_owners ow
                        WHERE ow.original_transaction_id = x.id OFFSET 0) o;
END
$$;
