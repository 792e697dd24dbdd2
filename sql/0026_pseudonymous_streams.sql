-- Subscribers' streams are named by a pseudonym, not by the id
-- (docs/decisions/0004-erasure-by-crypto-shredding.md): 'ps-' and the
-- SHA-256 of 'subscriber' || chr(31) || id in hexadecimal, the same as
-- SubscriberPseudonyms.pseudonym(for:). Statements that name a stream from a
-- subscriber id call this; it is inlined (a plain SQL function).
CREATE FUNCTION subledger_pseudonym(subscriber_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS
$$ SELECT 'ps-' || encode(sha256(convert_to('subscriber' || chr(31) || subscriber_id, 'UTF8')), 'hex') $$;

-- The installation secret of 0025 named streams by a keyed digest. Kept in
-- the same database as the log, it protected nothing a dump did not also
-- hold, and a per-database secret could not be computed where a stream is
-- named; the digest above replaces it.
DROP TABLE installation_secrets;
