-- The change feed: what an app's backend may act on, published once, pulled
-- through GET /v1/changes and pushed to registered webhooks.
--
-- Not a projection: `subledger rebuild` never empties these tables, so a
-- published change keeps its id and sequence whatever is rebuilt.

-- Per subscriber: how far of their stream the feed has turned into changes,
-- the last sequence used, the entitlements last published (active ids per
-- environment) and the next instant at which they may change by time alone.
CREATE TABLE change_subscribers (
    subscriber_id       text PRIMARY KEY,
    stream_version      bigint NOT NULL,
    -- The latest instant the published entitlements were evaluated at.
    clock               timestamptz NOT NULL,
    sequence            bigint NOT NULL DEFAULT 0,
    entitlements        jsonb NOT NULL DEFAULT '{}',
    next_transition_at  timestamptz
);

CREATE INDEX change_subscribers_due ON change_subscribers (next_transition_at)
    WHERE next_transition_at IS NOT NULL;

-- One row per change. The global order is (transaction_id, feed_position):
-- readers only see transactions older than every running one (as the event
-- log's consumers do), so a cursor never skips a change that commits late.
CREATE TABLE changes (
    feed_position   bigserial PRIMARY KEY,
    transaction_id  xid8 NOT NULL DEFAULT pg_current_xact_id(),
    id              text NOT NULL UNIQUE,
    subscriber_id   text NOT NULL,
    sequence        bigint NOT NULL,
    type            text NOT NULL,
    environment     text NOT NULL,
    recorded_at     timestamptz NOT NULL,
    body            jsonb NOT NULL,
    published_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (subscriber_id, sequence)
);

CREATE INDEX changes_order ON changes (transaction_id, feed_position);
CREATE INDEX changes_by_subscriber ON changes (subscriber_id, transaction_id, feed_position);

-- Webhook endpoints registered through POST /v1/webhooks (and the one from
-- SUBLEDGER_WEBHOOK_URL is not stored here: it stays the reminder webhook).
CREATE TABLE webhook_endpoints (
    id           text PRIMARY KEY,
    url          text NOT NULL,
    secret       text NOT NULL,
    -- Empty: every type.
    types        text[] NOT NULL DEFAULT '{}',
    description  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per change and endpoint subscribed to its type, created in the
-- transaction that publishes the change. Per (endpoint, subscriber) only the
-- pending row of the lowest sequence may be claimed, so changes arrive in
-- sequence order.
CREATE TABLE webhook_deliveries (
    id               bigserial PRIMARY KEY,
    endpoint_id      text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    change_id        text NOT NULL,
    subscriber_id    text NOT NULL,
    sequence         bigint NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    -- When a dispatcher may (next) take it: now, then the claim's lease or
    -- the backoff after a failure.
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    claim_token      uuid,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- Retries stop 3 days after this (reset by a manual retry).
    first_attempt_at timestamptz,
    sent_at          timestamptz,
    UNIQUE (endpoint_id, change_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (endpoint_id, subscriber_id, sequence) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, status, id);
