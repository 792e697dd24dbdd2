-- The ledger's lookups beside the event store, written in the same transaction
-- as the events they describe, so they never disagree with the streams.

-- Who holds each original transaction (restorable products only). The primary
-- key is what makes two subscribers claiming one original at once safe: the
-- second INSERT fails with a unique violation and that writer decides again.
CREATE TABLE transaction_owners (
    original_transaction_id text PRIMARY KEY,
    subscriber_id           text NOT NULL,
    claimed_at              timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX transaction_owners_subscriber ON transaction_owners (subscriber_id);

-- Every recorded transaction (consumables too) and each subscriber stream
-- holding its facts: after a transfer, the previous owner's stream still
-- tells what happened before it.
CREATE TABLE transaction_ids (
    transaction_id          text NOT NULL,
    original_transaction_id text NOT NULL,
    subscriber_id           text NOT NULL,
    recorded_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (transaction_id, subscriber_id)
);

CREATE INDEX transaction_ids_original ON transaction_ids (original_transaction_id);

-- Product identifiers the App Store reported invalid on a device
-- (`POST /v1/products/invalid`), kept for support.
CREATE TABLE invalid_product_reports (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    identifier  text NOT NULL,
    device_id   text,
    reported_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX invalid_product_reports_identifier ON invalid_product_reports (identifier, reported_at);
