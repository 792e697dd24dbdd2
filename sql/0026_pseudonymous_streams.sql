-- Subscribers' streams are named by a pseudonym, not by the id
-- (docs/decisions/0004-erasure-by-crypto-shredding.md): 'ps-' and the first
-- 32 hexadecimal digits (128 bits) of the SHA-256 of
-- 'subscriber' || chr(31) || id, the same as
-- SubscriberPseudonyms.pseudonym(for:). The service computes pseudonyms
-- itself on its hot paths; this is for statements and operators that need
-- one from an id (convert_to is not immutable, so it is not inlined).
CREATE FUNCTION subledger_pseudonym(subscriber_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS
$$ SELECT 'ps-' || left(encode(sha256(convert_to('subscriber' || chr(31) || subscriber_id, 'UTF8')), 'hex'), 32) $$;

-- The installation secret of 0025 named streams by a keyed digest. Kept in
-- the same database as the log, it protected nothing a dump did not also
-- hold, and a per-database secret could not be computed where a stream is
-- named; the digest above replaces it.
DROP TABLE installation_secrets;
