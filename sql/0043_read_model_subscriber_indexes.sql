-- Two read models found by their subscriber alone. `product_activity` and
-- `entitlements` are replaced subscriber by subscriber (a delete of the
-- subscriber's rows, then an insert) and read by time (`*_ends`,
-- `entitlements_by_entitlement`): nothing looks a row up by the rest of its
-- primary key. Those keys repeated the environment, the product or
-- entitlement and the start in an entry per row, 27 and 10 bytes an event
-- of the bench's log (`bench --measure storage`). An index of the
-- subscriber alone keeps the deletes' probes and, with b-tree
-- deduplication, holds each subscriber once with the list of their rows.
--
-- What is traded: the database no longer refuses two rows of one
-- subscriber, environment, product (or entitlement) and start. The fold
-- makes them disjoint (`SubscriberReadModel`), and the rebuild tests compare
-- the rows with the fold's.
ALTER TABLE product_activity DROP CONSTRAINT IF EXISTS product_activity_pkey;
CREATE INDEX IF NOT EXISTS product_activity_subscriber ON product_activity (subscriber_id);
ALTER TABLE entitlements DROP CONSTRAINT IF EXISTS entitlements_pkey;
CREATE INDEX IF NOT EXISTS entitlements_subscriber ON entitlements (subscriber_id);
