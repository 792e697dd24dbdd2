-- The read models' small vocabularies as enums. An environment ('Production',
-- 'Sandbox'), a product type ('auto-renewable', ...) and a store
-- ('app_store', 'google_play') were text in every row, 9 to 15 bytes each;
-- an enum is 4. `bench --measure storage`: product_activity 53 → 46 bytes
-- an event, subscriptions 50 → 44, entitlements and non_renewing_periods one
-- each (decision 0007, item 15).
--
-- What a query sees is the same words: an enum reads and prints as its
-- label, and a literal or an untyped parameter compares with it
-- (`environment = 'Sandbox'`). What changes: a value typed `text` must be
-- cast (`environment::text = $1::text`, or `$1::subledger_environment`), an
-- enum sorts in the order declared here rather than by its letters, and
-- text functions (`lower`, `LIKE`) need `::text`. docs/api.md lists the
-- columns. (A shadow copy a dead rebuild left keeps the old types until
-- the next rebuild drops it and copies the live tables again.)
CREATE TYPE subledger_environment AS ENUM ('Production', 'Sandbox');
CREATE TYPE subledger_product_type AS ENUM ('consumable', 'non-consumable', 'auto-renewable', 'non-renewing', 'free');
CREATE TYPE subledger_store AS ENUM ('app_store', 'google_play');

-- The checks compare with text arrays: dropped, and put back as enums.
ALTER TABLE subscriptions
    DROP CONSTRAINT subscriptions_type_check,
    DROP CONSTRAINT subscriptions_store_check,
    ALTER COLUMN store DROP DEFAULT;
ALTER TABLE subscriptions
    ALTER COLUMN environment TYPE subledger_environment USING environment::subledger_environment,
    ALTER COLUMN type TYPE subledger_product_type USING type::subledger_product_type,
    ALTER COLUMN store TYPE subledger_store USING store::subledger_store,
    ALTER COLUMN store SET DEFAULT 'app_store',
    ADD CONSTRAINT subscriptions_type_check CHECK (type IN ('auto-renewable', 'non-renewing'));
ALTER TABLE non_renewing_periods
    ALTER COLUMN environment TYPE subledger_environment USING environment::subledger_environment;
ALTER TABLE entitlements
    ALTER COLUMN environment TYPE subledger_environment USING environment::subledger_environment;
ALTER TABLE product_activity
    ALTER COLUMN environment TYPE subledger_environment USING environment::subledger_environment,
    ALTER COLUMN type TYPE subledger_product_type USING type::subledger_product_type;

-- A subscription row's status from its own columns, as before.
CREATE FUNCTION subscription_status(at timestamptz, store subledger_store, starts_at timestamptz, expires_at timestamptz,
                                    grace_ends_at timestamptz, revoked_at timestamptz, held_status text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT subscription_status(at, store::text, starts_at, expires_at, grace_ends_at, revoked_at, held_status)
$$;
