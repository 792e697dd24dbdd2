-- Subscription analytics (docs/decisions/0006-analytics-projection.md):
-- sums per UTC day of what every subscriber contributes, kept by the
-- `analytics` projection. Stocks (active_subscriptions, active_trials, mrr)
-- are stored as day deltas, so a stock at the end of a day is the sum of
-- every delta up to it; `analytics_years` holds the same deltas per year so
-- that sum reads at most a year of days. Flows are the day's own counts
-- and amounts. Amounts are integer micros of `currency` ('' for counts):
-- exact sums, rounded to the currency's minor unit only when answered.
-- Nothing here is personal: contributions are keyed by the stream's
-- pseudonym, and hold only days, products, prices and counts.
CREATE TABLE analytics_days (
    environment text NOT NULL,
    metric text NOT NULL,
    day date NOT NULL,
    store text NOT NULL,
    product_id text NOT NULL,
    currency text NOT NULL,
    value bigint NOT NULL,
    PRIMARY KEY (environment, metric, day, store, product_id, currency)
);

CREATE TABLE analytics_years (
    environment text NOT NULL,
    metric text NOT NULL,
    year int NOT NULL,
    store text NOT NULL,
    product_id text NOT NULL,
    currency text NOT NULL,
    value bigint NOT NULL,
    PRIMARY KEY (environment, metric, year, store, product_id, currency)
);

-- Retention of each cohort (`metric` retained_week or retained_month;
-- `cohort` its first day) as deltas over `k`: the subscriptions paying at
-- the end of the `k + 1`-th week or month after the cohort's are the sum of
-- the values of offsets 0 to `k` (two rows per stretch of paid access,
-- rather than one per interval it lasts).
CREATE TABLE analytics_retention (
    environment text NOT NULL,
    metric text NOT NULL,
    cohort date NOT NULL,
    k int NOT NULL,
    store text NOT NULL,
    product_id text NOT NULL,
    value bigint NOT NULL,
    PRIMARY KEY (environment, metric, cohort, k, store, product_id)
);

-- Each subscriber's last contribution (`AnalyticsContributionCoding`), to
-- subtract when its stream changes.
CREATE TABLE analytics_contributions (
    pseudonym text PRIMARY KEY,
    items bytea NOT NULL
);
