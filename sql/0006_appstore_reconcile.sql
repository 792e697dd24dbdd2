-- Reconciliation of App Store notifications with Get Notification History:
-- per environment, the instant up to which every notification Apple sent is
-- known to be stored. The next run asks from a little before it (the
-- windows overlap; notificationUUID dedupes), so a notification is never
-- missed between two runs. Only a run that covered the window from the
-- checkpoint on moves it forward.
CREATE TABLE appstore_reconcile_checkpoints (
    environment        text PRIMARY KEY CHECK (environment IN ('Production', 'Sandbox')),
    reconciled_until   timestamptz NOT NULL,
    -- The last successful run's window, for support and /metrics.
    last_window_start  timestamptz NOT NULL,
    last_window_end    timestamptz NOT NULL,
    last_success_at    timestamptz NOT NULL DEFAULT now(),
    -- Notifications the runs stored that had never arrived by POST.
    recovered_total    bigint NOT NULL DEFAULT 0
);
