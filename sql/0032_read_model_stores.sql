-- The store of each subscription row, and Google Play's held statuses
-- (issue 44): a listing says which store sells a subscription, and one on
-- hold, paused or pending is listed as such rather than as expired.
--
-- `held_status` is what a Play subscription became when it stopped granting
-- (`on_hold`, `paused`, `pending`), from `expires_at` (when access ended,
-- as the fetched state says) on; NULL for everything else. A Play
-- subscription in its grace period grants until `expires_at` and has
-- `grace_ends_at` = `expires_at`: its status is `grace` over the whole
-- stretch, as the state says (Google counts the grace period inside
-- `expiryTime`, where the App Store adds it after `expiresDate`).
--
-- Rows written before this are App Store rows: Google Play's rows only
-- came with migration 0031, in the same release as this one.
ALTER TABLE subscriptions
    ADD COLUMN store text NOT NULL DEFAULT 'app_store' CHECK (store IN ('app_store', 'google_play')),
    ADD COLUMN held_status text CHECK (held_status IN ('on_hold', 'paused', 'pending'));

-- The status of a subscription row at `at` (an instant no fact is dated
-- after); the same as `SubscriberReadModel.Subscription.status(at:)`.
CREATE FUNCTION subscription_status(at timestamptz, store text, starts_at timestamptz, expires_at timestamptz,
                                    grace_ends_at timestamptz, revoked_at timestamptz, held_status text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN revoked_at <= at THEN 'revoked'
        WHEN held_status IS NOT NULL AND coalesce(expires_at, '-infinity') <= at THEN held_status
        WHEN store = 'google_play' AND starts_at <= at AND at < grace_ends_at THEN 'grace'
        WHEN starts_at <= at AND at < expires_at THEN 'active'
        WHEN at < grace_ends_at AND coalesce(expires_at, '-infinity') <= at THEN 'grace'
        ELSE 'expired'
    END
$$;
