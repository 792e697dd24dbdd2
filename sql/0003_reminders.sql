-- The reminder projection (a consumer named `reminders`) and the delivery
-- bookkeeping of the reminder dispatcher.

-- One row per reminder the rules ever called for. The projection owns
-- everything but the delivery columns (attempts, next_attempt_at, claim_token,
-- last_error), which the dispatcher owns; a rebuild replays `reminder_sent` and
-- `reminder_failed` events, so sent and failed stay what they were.
CREATE TABLE reminders (
    id              text PRIMARY KEY,
    subscriber_id   text NOT NULL,
    "group"         text NOT NULL,
    product_id      text NOT NULL,
    type            text NOT NULL CHECK (type IN ('renewal_reminder', 'expiry_prompt')),
    lead            text NOT NULL,
    expires_at      timestamptz NOT NULL,
    due_at          timestamptz NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'sent', 'cancelled', 'skipped', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    -- When the dispatcher may (next) take it: due_at, then the claim's lease or
    -- the backoff after a failure.
    next_attempt_at timestamptz NOT NULL,
    -- Which claim holds the current lease; only that claim may schedule a retry.
    claim_token     uuid,
    last_error      text,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reminders_subscriber ON reminders (subscriber_id, due_at);
CREATE INDEX reminders_due ON reminders (next_attempt_at) WHERE status = 'pending';
CREATE INDEX reminders_by_status ON reminders (status, due_at);

-- Per subscriber: how far of their stream the projection has applied, and the
-- earliest non-renewing coverage end not yet recorded as expired (what the
-- expiry sweeper looks for).
CREATE TABLE reminder_subscribers (
    subscriber_id   text PRIMARY KEY,
    stream_version  bigint NOT NULL,
    -- The latest recorded_at seen in the stream: the projection's clock.
    clock           timestamptz NOT NULL,
    next_expiry_at  timestamptz
);

CREATE INDEX reminder_subscribers_next_expiry ON reminder_subscribers (next_expiry_at)
    WHERE next_expiry_at IS NOT NULL;
