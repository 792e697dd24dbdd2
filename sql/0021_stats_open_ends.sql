-- `GET /v1/stats` and `GET /v1/stats/active` find the rows active at an
-- instant through the end, not by reading each table whole.
--
-- An entitlement or a product was active at T when `starts_at <= T AND
-- (ends_at IS NULL OR T < ends_at)`. Rows that ended before T — every
-- lapsed subscriber's stretches, most of a table in an app with churn —
-- cannot count, and an index on the end skips them: the planner reads
-- `ends_at IS NULL` and `ends_at > T` from it (a bitmap OR) when they are
-- a small part of the table, and still scans the table when they are
-- most of it (a young app, where that is the cheaper plan).
--
-- Led by the end, `environment` after it, as sql/0015 explains. A btree on
-- one instant costs a rebuild about 0.1 s per 200,000 rows, far less than
-- the GiST range indexes sql/0013 dropped.
CREATE INDEX entitlements_ends ON entitlements (ends_at, environment);
CREATE INDEX product_activity_ends ON product_activity (ends_at, environment);
