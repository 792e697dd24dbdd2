-- Erasure reaches every copy of a subscriber id in the change feed
-- (docs/decisions/0004-erasure-by-crypto-shredding.md, ChangeFeed+Erasure.swift).

-- The erasure's delivery statements find the subscriber's rows by this
-- index instead of reading the whole queue (sent rows included).
CREATE INDEX webhook_deliveries_by_subscriber ON webhook_deliveries (subscriber_id);

-- A change id under the pseudonym: a reminder's change is named
-- 'rem:' || subscriber || ':' || the rest (Reminders.reminderID), and the
-- rest (group, end, lead, environment) names nobody. Any other id is kept.
-- The prefix is compared whole, so a subscriber id holding ':' is no
-- ambiguity: the id is known, not parsed.
CREATE FUNCTION subledger_erased_change_id(id text, subscriber text, pseudonym text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN starts_with(id, 'rem:' || subscriber || ':')
                THEN 'rem:' || pseudonym || ':' || substr(id, length('rem:' || subscriber || ':') + 1)
                ELSE id END
$$;

-- A stored change body under the pseudonym, at any depth: members named in
-- `names` (personal fields of the event's data) are taken out, a string
-- equal to the subscriber id (`subscriberId` at the top and in a
-- reminder's `data`) becomes the pseudonym, and a reminder id of the
-- subscriber (`id` at the top and in `data`) becomes the one
-- subledger_erased_change_id makes.
CREATE FUNCTION subledger_erased_change_body(document jsonb, subscriber text, pseudonym text, names text[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    IF jsonb_typeof(document) = 'object' THEN
        RETURN (SELECT coalesce(jsonb_object_agg(member.key, subledger_erased_change_body(member.value, subscriber, pseudonym, names)),
                                '{}'::jsonb)
                FROM jsonb_each(document) AS member
                WHERE NOT (member.key = ANY (names)));
    ELSIF jsonb_typeof(document) = 'array' THEN
        RETURN (SELECT coalesce(jsonb_agg(subledger_erased_change_body(element.value, subscriber, pseudonym, names) ORDER BY element.n),
                                '[]'::jsonb)
                FROM jsonb_array_elements(document) WITH ORDINALITY AS element(value, n));
    ELSIF jsonb_typeof(document) = 'string' THEN
        IF document #>> '{}' = subscriber THEN
            RETURN to_jsonb(pseudonym);
        END IF;
        RETURN to_jsonb(subledger_erased_change_id(document #>> '{}', subscriber, pseudonym));
    END IF;
    RETURN document;
END
$$;
