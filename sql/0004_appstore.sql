-- App Store Server Notifications V2, one row per verified notification, keyed
-- by Apple's notificationUUID: a retry finds its row and applies nothing. The
-- row is written in the same transaction as the facts it produced, so "stored"
-- and "applied" never disagree. A notification POSTed that fails verification
-- is never written; an item of Get Notification History that fails is written
-- rejected, keyed 'unverified:' || sha256 of its payload (reconciliation goes
-- on past it).
CREATE TABLE appstore_notifications (
    notification_uuid       text PRIMARY KEY,
    notification_type       text NOT NULL,
    subtype                 text,
    signed_date             timestamptz NOT NULL,
    -- Production or Sandbox (Xcode and LocalTesting count as Sandbox).
    environment             text NOT NULL,
    transaction_id          text,
    original_transaction_id text,
    product_id              text,
    -- Whom the facts were (or will be) recorded for; NULL while unattributed.
    subscriber_id           text,
    -- How the subscriber was found: the transaction's appAccountToken, the
    -- owner of its original transaction, not yet (unattributed), or no
    -- transaction at all (TEST, summaries).
    attribution             text NOT NULL
        CHECK (attribution IN ('app_account_token', 'transaction_owner', 'unattributed', 'none')),
    -- applied: its facts are in the ledger; acknowledged: it has no facts
    -- (TEST, PRICE_INCREASE, unknown types); pending: waiting for its
    -- original transaction to be claimed; rejected: the ledger refused its
    -- facts, or reconciliation read it and it failed verification
    -- (error_code says why), kept for support.
    status                  text NOT NULL CHECK (status IN ('applied', 'acknowledged', 'pending', 'rejected')),
    applied                 boolean GENERATED ALWAYS AS (status = 'applied') STORED,
    error_code              text,
    error_message           text,
    summary                 text NOT NULL,
    -- The JWS exactly as Apple sent it, to re-verify or re-map later.
    signed_payload          text NOT NULL,
    received_at             timestamptz NOT NULL DEFAULT now(),
    applied_at              timestamptz
);

-- What a claim of an original transaction looks for.
CREATE INDEX appstore_notifications_pending
    ON appstore_notifications (original_transaction_id, signed_date) WHERE status = 'pending';

CREATE INDEX appstore_notifications_subscriber ON appstore_notifications (subscriber_id, signed_date);
