-- Read models of the `subscriptions` projection (a consumer of that name):
-- what every subscriber has, per store environment, in tables that answer
-- questions across subscribers ("who is active on `pro` now?", "whose pass
-- ends this week?", "how many were active each day of March?") with indexed
-- predicates instead of folding streams. Owned by the projection: rebuilt
-- from the events by `subledger rebuild subscriptions`, and each subscriber's
-- rows are replaced whole whenever a batch touches them (their content is a
-- pure function of the ledger and the catalog: `SubscriberLedger.readModel`).
--
-- Why async (a checkpointed consumer) and not inline in the writer's
-- transaction, for all four tables: a write answers from the ledger it has
-- just folded in memory (`POST .../events` returns the state after the
-- write, and `GET /v1/subscribers/{id}` folds the stream), so nothing that
-- must read its own write reads these tables; what reads them (support
-- listings, stats, charts) tolerates the projection's lag of a batch, which
-- `/health` reports. Inline, every fact would pay a timeline sweep and four
-- tables' writes inside its transaction, holding the stream lock longer and
-- making concurrent writes to one subscriber wait on it.

-- The current state of each subscription (as `SubscriberState.subscriptions`
-- lists it): one row per subscriber × environment × group, and per original
-- transaction for auto-renewables (a group may hold several). The columns are
-- everything known, whatever its date, and the status at any later instant
-- follows from them without another event (`subscription_status`).
CREATE TABLE subscriptions (
    environment             text NOT NULL,
    subscriber_id           text NOT NULL,
    "group"                 text NOT NULL,
    -- The original transaction of an auto-renewable; '' for a non-renewing group.
    series                  text NOT NULL,
    product_id              text NOT NULL,
    type                    text NOT NULL CHECK (type IN ('auto-renewable', 'non-renewing')),
    original_transaction_id text NOT NULL,
    latest_transaction_id   text NOT NULL,
    -- Start of the latest stretch of continuous access (NULL: never had any).
    starts_at               timestamptz,
    -- Auto-renewable: the store's end cut short by a reported expiry;
    -- non-renewing: the end of the last stacked period (NULL: all refunded).
    expires_at              timestamptz,
    grace_ends_at           timestamptz,
    revoked_at              timestamptz,
    auto_renew              boolean NOT NULL,
    -- What the product gives, from the catalog when the row was written.
    entitlements            text[] NOT NULL DEFAULT '{}',
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment, subscriber_id, "group", series)
);

-- "Active at T" is `starts_at <= T AND T < expires_at` (not revoked by T):
-- this index serves it and "expiring between A and B".
CREATE INDEX subscriptions_expiry ON subscriptions (environment, expires_at, starts_at);
CREATE INDEX subscriptions_entitlements ON subscriptions USING gin (entitlements);

-- The status of a subscription row at `at` (an instant no fact is dated
-- after); the same as `SubscriberReadModel.Subscription.status(at:)`.
CREATE FUNCTION subscription_status(at timestamptz, starts_at timestamptz, expires_at timestamptz,
                                    grace_ends_at timestamptz, revoked_at timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN revoked_at <= at THEN 'revoked'
        WHEN starts_at <= at AND at < expires_at THEN 'active'
        WHEN at < grace_ends_at AND coalesce(expires_at, '-infinity') <= at THEN 'grace'
        ELSE 'expired'
    END
$$;

-- The stacked periods of non-renewing groups, one row per period, as known
-- now: a refund removes its period and the later ones are re-stacked (the
-- subscriber's rows are replaced whole).
CREATE TABLE non_renewing_periods (
    environment             text NOT NULL,
    subscriber_id           text NOT NULL,
    transaction_id          text NOT NULL,
    "group"                 text NOT NULL,
    product_id              text NOT NULL,
    original_transaction_id text NOT NULL,
    starts_at               timestamptz NOT NULL,
    ends_at                 timestamptz NOT NULL,
    PRIMARY KEY (environment, subscriber_id, transaction_id)
);

-- "Whose pass ends this week?"
CREATE INDEX non_renewing_periods_end ON non_renewing_periods (environment, ends_at);

-- When each entitlement was active: per subscriber × environment ×
-- entitlement, disjoint stretches, each with the product and transaction
-- that gave it longest. The exact history, not only the latest stretch: an
-- entitlement was active at T (as `GET /v1/subscribers/{id}?at=T` says)
-- exactly when one of its rows contains T, so counts at past instants and
-- time series are range predicates (GiST below).
CREATE TABLE entitlements (
    environment           text NOT NULL,
    subscriber_id         text NOT NULL,
    entitlement           text NOT NULL,
    starts_at             timestamptz NOT NULL,
    -- NULL: never ends (non-consumable, free).
    ends_at               timestamptz,
    product_id            text NOT NULL,
    source_transaction_id text NOT NULL,
    PRIMARY KEY (environment, subscriber_id, entitlement, starts_at)
);

CREATE INDEX entitlements_active ON entitlements USING gist (tstzrange(starts_at, ends_at));
CREATE INDEX entitlements_by_entitlement ON entitlements (environment, entitlement, starts_at);

-- When each product was active (an auto-renewable active or in grace, a
-- non-renewing period, a non-consumable or free purchase not refunded): what
-- `GET /v1/stats` counts per product and per type. Same shape and rule as
-- `entitlements`; products without entitlements are counted too.
CREATE TABLE product_activity (
    environment           text NOT NULL,
    subscriber_id         text NOT NULL,
    product_id            text NOT NULL,
    starts_at             timestamptz NOT NULL,
    ends_at               timestamptz,
    type                  text NOT NULL,
    "group"               text NOT NULL,
    source_transaction_id text NOT NULL,
    PRIMARY KEY (environment, subscriber_id, product_id, starts_at)
);

CREATE INDEX product_activity_active ON product_activity USING gist (tstzrange(starts_at, ends_at));
