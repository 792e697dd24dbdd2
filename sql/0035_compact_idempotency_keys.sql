-- A subscriber's ledger idempotency key is stored as the first 22
-- base64url digits (132 bits) of its digest under the subscriber's own key
-- (SubscriberStreams.storeKey), without the stream's pseudonym before it:
-- two subscribers' keys are independent, so their digests of the same
-- ledger key are unrelated, and the pseudonym added nothing but 36 bytes to
-- every row and every entry of the unique index.
--
-- The keys stored before become the same prefix of the same digest, so a
-- fact retried after this is still found. No subscriber key is needed (an
-- erased subscriber's keys are cut the same way).
UPDATE events
SET idempotency_key = substr(idempotency_key, 37, 22)
WHERE idempotency_key ~ '^ps-[0-9a-f]{32}\x1f[A-Za-z0-9_-]{43}$';
