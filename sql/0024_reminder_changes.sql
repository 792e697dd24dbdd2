-- Reminders are changes of the feed (types `renewal_reminder` and
-- `expiry_prompt`), published by the change feed's time sweeper when due and
-- delivered by the change dispatcher, like every other change.
--
-- SUBLEDGER_WEBHOOK_URL becomes a stored endpoint (id `whk_reminders`,
-- written at startup from the configuration) subscribed to those two types:
-- its secret is SUBLEDGER_WEBHOOK_SECRET, which may be absent (then nothing
-- is signed, as before), and it gives up after a number of attempts rather
-- than after the retry period (`max_attempts`; NULL: the retry period only).
ALTER TABLE webhook_endpoints ALTER COLUMN secret DROP NOT NULL;
ALTER TABLE webhook_endpoints ADD COLUMN max_attempts integer CHECK (max_attempts > 0);

-- webhook_deliveries is a queue: thousands of rows arrive and leave between
-- two analyzes at the default thresholds, and the claim's plan depends on
-- its statistics. Analyze (and vacuum) it after 2% of it changed, not 10-20%.
ALTER TABLE webhook_deliveries SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.02);
