-- Streams' pseudonyms are keyed with SUBLEDGER_SECRET when it is set
-- (PseudonymScheme; docs/decisions/0004-erasure-by-crypto-shredding.md,
-- "The installation secret"). The secret is never stored here: a dump must
-- not hold it.

-- The schemes the log's subscriber streams are named under: the one in
-- force, which names every live subscriber's stream, and earlier ones under
-- which erased subscribers' streams still lie (an erased stream cannot be
-- renamed: nobody knows its id any more). `holds_erased`: streams of erased
-- subscribers keep names of this scheme, so a new fact for such an id is
-- checked against it too, when the process can compute it.
CREATE TABLE stream_naming (
    scheme       text PRIMARY KEY,
    in_force     boolean NOT NULL,
    holds_erased boolean NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX stream_naming_in_force ON stream_naming (in_force) WHERE in_force;

-- Until now every stream was named by SHA-256 alone.
INSERT INTO stream_naming (scheme, in_force) VALUES ('sha256', true);

-- A conversion's work list (StreamNamingConversion): each live stream's
-- pseudonym under the scheme in force and under the new one (`scheme`).
-- Filled and emptied by one conversion; what is left after an interrupted
-- one is taken up by the next start, under the same scheme only.
CREATE TABLE stream_renames (
    old_pseudonym text PRIMARY KEY,
    new_pseudonym text NOT NULL UNIQUE,
    scheme        text NOT NULL,
    done          boolean NOT NULL DEFAULT false
);

-- A pseudonym can no longer be computed in SQL: the key is not here.
DROP FUNCTION subledger_pseudonym(text);
