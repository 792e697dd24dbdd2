-- Erasure by crypto-shredding (docs/decisions/0004-erasure-by-crypto-shredding.md).

-- The installation secret under which a subscriber id becomes its stream's
-- pseudonym (SubscriberPseudonyms: HMAC-SHA256). One row, made here, kept
-- with the data it names, so an installation needs no new configuration.
--
-- 32 bytes from PostgreSQL's strong random source without an extension:
-- gen_random_uuid() is core since PostgreSQL 13 and draws on
-- pg_strong_random() (OpenSSL's RAND_bytes, or /dev/urandom), 122 random
-- bits per UUID; three of them (366 bits) go through sha256 (core since 11)
-- for 256 bits. pgcrypto's gen_random_bytes() draws on the same source but
-- needs CREATE EXTENSION, which managed and restricted installations may not
-- allow; random() is not a cryptographic generator and is not used.
CREATE TABLE installation_secrets (
    name   text PRIMARY KEY,
    secret bytea NOT NULL CHECK (octet_length(secret) >= 32)
);

INSERT INTO installation_secrets (name, secret)
SELECT 'subscriber_pseudonyms',
       sha256(decode(replace(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- Each subscriber's own key (SubscriberKey, AES-256-GCM), which seals the
-- personal fields of its events and digests their idempotency keys. Erasure
-- deletes the row; what it sealed is then unreadable in the append-only log.
-- The write path creates the row on a subscriber's first write with
-- ON CONFLICT DO NOTHING; `subscriber_id` is how a projection turns the
-- stream's pseudonym back into the id while the key exists.
CREATE TABLE subscriber_keys (
    pseudonym      text PRIMARY KEY,
    subscriber_id  text NOT NULL UNIQUE,
    key            bytea NOT NULL CHECK (octet_length(key) = 32)
);

-- A JSON value without the members named `names`, at any depth: erasure
-- takes the personal fields (device ids, the subscribers of a transfer,
-- reminder ids) out of the change feed's stored bodies, which copy the
-- event's data (ChangeFeed+Erasure.swift).
CREATE FUNCTION subledger_without_members(document jsonb, names text[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    IF jsonb_typeof(document) = 'object' THEN
        RETURN (SELECT coalesce(jsonb_object_agg(member.key, subledger_without_members(member.value, names)), '{}'::jsonb)
                FROM jsonb_each(document) AS member
                WHERE NOT (member.key = ANY (names)));
    ELSIF jsonb_typeof(document) = 'array' THEN
        RETURN (SELECT coalesce(jsonb_agg(subledger_without_members(element.value, names) ORDER BY element.n), '[]'::jsonb)
                FROM jsonb_array_elements(document) WITH ORDINALITY AS element(value, n));
    END IF;
    RETURN document;
END
$$;
