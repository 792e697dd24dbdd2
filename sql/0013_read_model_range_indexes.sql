-- The GiST indexes on tstzrange(starts_at, ends_at) of `entitlements` and
-- `product_activity` (sql/0007) go: they cost more than they gave.
--
-- - Building them was the largest single cost of a rebuild: about 2.5 CPU
--   seconds of about 19 per million events (perf, `subledger rebuild
--   subscriptions`), spent after the load while nothing else could run,
--   and every live projection batch paid to keep them current.
-- - No query needs them. "Active at T" counts (`GET /v1/stats`) read most
--   of each table whenever T is recent, and the planner misjudged the GiST
--   selectivity by two orders of magnitude; they now use plain predicates
--   (`starts_at <= T AND (ends_at IS NULL OR T < ends_at)`). The time series
--   (`GET /v1/stats/active`) probed the index once per point and joined
--   every active row to every point: 10 s for 60 daily points over 109,375
--   subscribers. It now scans the matching rows once and sums, per point,
--   the starts and ends before it (about 0.2 s for 336 points).
DROP INDEX IF EXISTS entitlements_active;
DROP INDEX IF EXISTS product_activity_active;
