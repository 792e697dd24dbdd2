-- Webhooks hold against their own users (issue 41, item 6).

-- Each endpoint is claimed on its own (one slow endpoint holds back only its
-- own next batch): the claim walks this endpoint's due deliveries, and the
-- dispatcher's sleep probes each endpoint's earliest one.
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';

-- Sent deliveries are deleted after a retention (30 days), oldest first.
CREATE INDEX webhook_deliveries_sent ON webhook_deliveries (sent_at) WHERE status = 'sent';

-- Endpoint secrets are stored sealed (AES-GCM, `WebhookSecretSealing`):
-- `secret` holds `whseal1:<key>:<base64 of nonce, ciphertext and tag>`;
-- a plain one left by an earlier version is sealed when the database is
-- prepared. After a rotation the previous secret (sealed the same way)
-- still signs until `previous_secret_expires_at`.
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret text, ADD COLUMN previous_secret_expires_at timestamptz;

-- Without SUBLEDGER_SECRET, the key that seals endpoint secrets: one random
-- row, made on first use. It protects a copy of webhook_endpoints alone (a
-- leaked backup of that table does not reveal the secrets); a dump of the
-- whole database holds this key too.
CREATE TABLE webhook_sealing_keys (
    id         integer PRIMARY KEY CHECK (id = 1),
    key        bytea NOT NULL CHECK (length(key) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
