-- Listings across subscribers (support, the console) walk an index in their
-- own order and stop at their LIMIT, whatever the table's size: without
-- these, the notification listing sorted the whole table for each page, and
-- the invalid-product listing grouped every report ever received.

-- GET /v1/appstore/notifications: newest first, all, by subscriber or by status.
CREATE INDEX appstore_notifications_received ON appstore_notifications (received_at DESC, notification_uuid);
CREATE INDEX appstore_notifications_subscriber_received
    ON appstore_notifications (subscriber_id, received_at DESC, notification_uuid);
CREATE INDEX appstore_notifications_status_received
    ON appstore_notifications (status, received_at DESC, notification_uuid);

-- GET /v1/reminders: by due time (then id), all, by status or by subscriber.
CREATE INDEX reminders_due_order ON reminders (due_at, id);
DROP INDEX reminders_by_status;
CREATE INDEX reminders_by_status ON reminders (status, due_at, id);
DROP INDEX reminders_subscriber;
CREATE INDEX reminders_subscriber ON reminders (subscriber_id, due_at, id);

-- GET /v1/products/invalid: one row per identifier, kept as reports arrive,
-- so the listing reads its page instead of grouping every report.
CREATE TABLE invalid_product_identifiers (
    identifier        text PRIMARY KEY,
    reports           bigint NOT NULL,
    devices           bigint NOT NULL,
    first_reported_at timestamptz NOT NULL,
    last_reported_at  timestamptz NOT NULL
);
CREATE INDEX invalid_product_identifiers_recent ON invalid_product_identifiers (last_reported_at DESC, identifier);

-- The devices that reported each identifier, so `devices` counts each once.
CREATE TABLE invalid_product_devices (
    identifier text NOT NULL,
    device_id  text NOT NULL,
    PRIMARY KEY (identifier, device_id)
);

INSERT INTO invalid_product_devices (identifier, device_id)
SELECT DISTINCT identifier, device_id FROM invalid_product_reports WHERE device_id IS NOT NULL;

INSERT INTO invalid_product_identifiers (identifier, reports, devices, first_reported_at, last_reported_at)
SELECT identifier, count(*), count(DISTINCT device_id), min(reported_at), max(reported_at)
FROM invalid_product_reports GROUP BY identifier;
