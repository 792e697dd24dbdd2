-- Ownership is per environment: a Sandbox fact must never claim, move or
-- touch a Production purchase. The ownership tables key a Sandbox id as
-- 'Sandbox' || chr(31) || id (no identifier holds a control character, so
-- no Production id can equal one); Production ids stay bare.
--
-- Rows written before this were keyed by the bare id whatever the
-- environment. A transaction recorded only from the Sandbox moves to its
-- Sandbox key; one recorded in both keeps its Production row and gains a
-- Sandbox one for each subscriber that recorded it there.

CREATE TEMPORARY TABLE sandbox_transactions ON COMMIT DROP AS
SELECT DISTINCT substr(e.stream_id, length('subscriber-') + 1) AS subscriber_id,
       coalesce(e.data->>'transactionId', e.data->'transaction'->>'transactionId') AS transaction_id,
       coalesce(e.data->>'originalTransactionId', e.data->'transaction'->>'originalTransactionId') AS original_transaction_id
FROM events e
WHERE e.stream_id LIKE 'subscriber-%'
  AND e.type IN ('purchased', 'renewed', 'restored', 'transferred_in')
  AND coalesce(e.data->>'environment', e.data->'transaction'->>'environment') = 'Sandbox';

CREATE TEMPORARY TABLE production_transactions ON COMMIT DROP AS
SELECT DISTINCT coalesce(e.data->>'transactionId', e.data->'transaction'->>'transactionId') AS transaction_id,
       coalesce(e.data->>'originalTransactionId', e.data->'transaction'->>'originalTransactionId') AS original_transaction_id
FROM events e
WHERE e.stream_id LIKE 'subscriber-%'
  AND e.type IN ('purchased', 'renewed', 'restored', 'transferred_in')
  AND coalesce(e.data->>'environment', e.data->'transaction'->>'environment', 'Production') = 'Production';

-- Sandbox rows of transaction_ids, under their Sandbox keys.
INSERT INTO transaction_ids (transaction_id, original_transaction_id, subscriber_id)
SELECT 'Sandbox' || chr(31) || s.transaction_id, 'Sandbox' || chr(31) || s.original_transaction_id, s.subscriber_id
FROM sandbox_transactions s
WHERE s.transaction_id IS NOT NULL AND s.original_transaction_id IS NOT NULL
ON CONFLICT (transaction_id, subscriber_id) DO NOTHING;

-- Bare rows that only the Sandbox ever recorded go.
DELETE FROM transaction_ids t
USING sandbox_transactions s
WHERE t.transaction_id = s.transaction_id AND t.subscriber_id = s.subscriber_id
  AND NOT EXISTS (SELECT 1 FROM production_transactions p WHERE p.transaction_id = t.transaction_id);

-- Owners: a Sandbox original's owner is its bare row's owner when only the
-- Sandbox knows it (the row moves), else the subscribers holding it there.
INSERT INTO transaction_owners (original_transaction_id, subscriber_id)
SELECT 'Sandbox' || chr(31) || o.original_transaction_id, o.subscriber_id
FROM transaction_owners o
WHERE EXISTS (SELECT 1 FROM sandbox_transactions s WHERE s.original_transaction_id = o.original_transaction_id)
ON CONFLICT (original_transaction_id) DO NOTHING;

DELETE FROM transaction_owners o
WHERE EXISTS (SELECT 1 FROM sandbox_transactions s WHERE s.original_transaction_id = o.original_transaction_id)
  AND NOT EXISTS (SELECT 1 FROM production_transactions p WHERE p.original_transaction_id = o.original_transaction_id);
