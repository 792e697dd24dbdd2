-- Google Play (issue 44): pushes, acknowledgements and the voided-purchase
-- walk. The facts themselves are events (`google_play_purchase`,
-- `google_play_voided`); these tables only say what arrived and what is left
-- to do.

-- One row per Pub/Sub push, keyed by its messageId: a redelivery finds its
-- row and records nothing new. Written once the push's facts are stored (in
-- the same transaction), or as rejected/unattributed/test; a push whose
-- purchase could not be fetched is not written (503: Pub/Sub retries it).
CREATE TABLE googleplay_notifications (
    message_id        text PRIMARY KEY,
    -- subscription, one_time_product, voided_purchase, test, other
    kind              text NOT NULL,
    notification_type integer,
    event_time        timestamptz NOT NULL,
    package_name      text NOT NULL,
    environment       text,
    purchase_token    text,
    -- Whom the facts were recorded for; NULL while unattributed.
    subscriber_id     text,
    -- applied: its facts are in the ledger (or were already); acknowledged:
    -- nothing to record (a test notification); unattributed: nobody holds
    -- the purchase yet (recorded when it is linked); rejected: another
    -- package or environment, or the ledger refused it (error_code says why).
    status            text NOT NULL CHECK (status IN ('applied', 'acknowledged', 'unattributed', 'rejected')),
    error_code        text,
    error_message     text,
    summary           text NOT NULL,
    received_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX googleplay_notifications_received ON googleplay_notifications (received_at DESC, message_id);
CREATE INDEX googleplay_notifications_subscriber ON googleplay_notifications (subscriber_id, received_at DESC);

-- Every recorded purchase Google says is not acknowledged yet: Google
-- refunds a purchase not acknowledged within three days. The worker retries
-- each until Google accepts it.
-- https://developer.android.com/google/play/billing/integrate#process
CREATE TABLE googleplay_acknowledgements (
    environment      text NOT NULL,
    purchase_token   text NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('subscription', 'product')),
    product_id       text NOT NULL,
    status           text NOT NULL CHECK (status IN ('pending', 'acknowledged')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    acknowledged_at  timestamptz,
    PRIMARY KEY (environment, purchase_token)
);

CREATE INDEX googleplay_acknowledgements_due ON googleplay_acknowledgements (next_attempt_at) WHERE status = 'pending';

-- Where the voided-purchase walk goes on from: the latest voidedTimeMillis
-- it recorded.
CREATE TABLE googleplay_reconcile_checkpoints (
    id          integer PRIMARY KEY CHECK (id = 1),
    voided_since timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
