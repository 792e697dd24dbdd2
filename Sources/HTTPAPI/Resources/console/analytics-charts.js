// The analytics page's charts, each with the table of its numbers under it:
// built from GET /v1/analytics's series and GET /v1/analytics/cohorts. The
// tables show the API's numbers as answered (amounts as decimal strings,
// never recomputed); the charts plot them.

import { barChart, lineChart } from './charts.js';
import { formatDay, h, table } from './dom.js';

const NONE = '—';

/** The interval's start as a row label: a day, the Monday of a week, a month. */
export function intervalLabel(start, interval) {
  return interval === 'month' ? formatDay(start).slice(0, 7) : formatDay(start);
}

const intervalColumn = (interval) => ({
  label: { day: 'Day', week: 'Week of', month: 'Month' }[interval] || 'Interval',
  cell: (item) => h('time', { datetime: item.start }, intervalLabel(item.start, interval)),
});

/** The currencies of an amount metric over the series, sorted. */
function currencies(series, ...metrics) {
  const codes = new Set();
  for (const item of series) for (const metric of metrics) for (const code of Object.keys(item.values[metric] || {})) codes.add(code);
  return [...codes].sort();
}

const amount = (item, metric, code) => (item.values[metric] || {})[code];
const count = (item, metric) => (typeof item.values[metric] === 'number' ? String(item.values[metric]) : NONE);

/** "8.33%" from the API's "0.0833"; a dash for null. */
export function percent(rate) {
  if (rate === null || rate === undefined) return NONE;
  return `${(Number(rate) * 100).toFixed(2)}%`;
}

/** A table in a box that scrolls when the series is long; the box is keyboard-reachable. */
function numbers(caption, columns, rows) {
  return h('div', { class: 'numbers', tabindex: '0', role: 'region', 'aria-label': caption },
    table(columns, rows, { caption, empty: 'No interval in this range.' }));
}

export function mrrContent(series, interval) {
  const codes = currencies(series, 'mrr');
  if (codes.length === 0) {
    return h('p', { class: 'empty' }, 'No priced subscription was active in this range (MRR needs prices on the facts).');
  }
  return [
    lineChart('MRR per currency', codes.map((code) => ({
      name: code, points: series.map((item) => ({ at: item.start, value: Number(amount(item, 'mrr', code) || 0) })),
    }))),
    numbers('MRR per currency at each interval\'s end', [
      intervalColumn(interval),
      ...codes.map((code) => ({ label: `MRR ${code}`, class: 'number', cell: (item) => amount(item, 'mrr', code) ?? NONE })),
    ], series),
  ];
}

export function activeContent(series, interval) {
  const points = (metric) => series.map((item) => ({ at: item.start, value: item.values[metric] || 0 }));
  return [
    lineChart('Active subscriptions and active trials', [
      { name: 'active subscriptions', points: points('active_subscriptions') },
      { name: 'active trials', points: points('active_trials') },
    ]),
    numbers('Active subscriptions and trials at each interval\'s end, and what began in the interval', [
      intervalColumn(interval),
      { label: 'Active subscriptions', class: 'number', cell: (item) => count(item, 'active_subscriptions') },
      { label: 'Active trials', class: 'number', cell: (item) => count(item, 'active_trials') },
      { label: 'New subscriptions', class: 'number', cell: (item) => count(item, 'new_subscriptions') },
      { label: 'Renewals', class: 'number', cell: (item) => count(item, 'renewals') },
      { label: 'Trial starts', class: 'number', cell: (item) => count(item, 'trial_starts') },
      { label: 'Trial conversions', class: 'number', cell: (item) => count(item, 'trial_conversions') },
    ], series),
  ];
}

export function churnContent(series, interval) {
  const slots = series.map((item) => ({
    at: item.start,
    values: { churned: item.values.churned || 0, rate: item.values.churn_rate === null ? null : Number(item.values.churn_rate) },
  }));
  return [
    barChart('Churned subscriptions and churn rate', slots, [{ key: 'churned', label: 'churned', class: 'churned' }],
      { line: { key: 'rate', label: 'churn rate', format: (value) => `${Number((value * 100).toFixed(1))}%` } }),
    numbers('Churned subscriptions and churn rate per interval', [
      intervalColumn(interval),
      { label: 'Churned', class: 'number', cell: (item) => count(item, 'churned') },
      { label: 'Churn rate', class: 'number', cell: (item) => h('span', { title: item.values.churn_rate ?? 'no active subscription at the start' }, percent(item.values.churn_rate)) },
    ], series),
  ];
}

/** One chart and table per currency: revenue and refunds as bars, the net in the table. */
export function revenueContent(series, interval) {
  const codes = currencies(series, 'revenue', 'refunds');
  if (codes.length === 0) return h('p', { class: 'empty' }, 'Nothing priced was sold or refunded in this range.');
  return codes.map((code) => h('div', { class: 'per-currency', 'data-currency': code },
    h('h3', {}, code),
    barChart(`Revenue and refunds, ${code}`, series.map((item) => ({
      at: item.start,
      values: { revenue: Number(amount(item, 'revenue', code) || 0), refunds: Number(amount(item, 'refunds', code) || 0) },
    })), [{ key: 'revenue', label: 'revenue', class: 'revenue' }, { key: 'refunds', label: 'refunds', class: 'refunds' }]),
    numbers(`Revenue, refunds and net revenue in ${code} per interval`, [
      intervalColumn(interval),
      { label: `Revenue ${code}`, class: 'number', cell: (item) => amount(item, 'revenue', code) ?? NONE },
      { label: `Refunds ${code}`, class: 'number', cell: (item) => amount(item, 'refunds', code) ?? NONE },
      { label: `Net revenue ${code}`, class: 'number', cell: (item) => amount(item, 'net_revenue', code) ?? NONE },
    ], series)));
}

/** Retention as a grid: a row per cohort, a column per interval after it, each "n" and its share of the cohort. */
export function cohortContent(body) {
  const cohorts = body.cohorts || [];
  const interval = body.interval || 'month';
  const width = Math.max(0, ...cohorts.map((cohort) => (cohort.retained || []).length));
  const cell = (cohort, index) => {
    const retained = (cohort.retained || [])[index];
    if (retained === undefined) return h('span', { class: 'muted' }, '');
    const share = cohort.size > 0 ? retained / cohort.size : null;
    return h('span', { class: ['retention', share === null ? null : `heat-${Math.min(5, Math.ceil(share * 5))}`] },
      String(retained), h('span', { class: 'share' }, share === null ? '' : ` ${Math.round(share * 100)}%`));
  };
  return [
    h('p', { class: 'muted' },
      `A cohort is the subscriptions whose first paid period began in that ${interval}; +k is how many of them were still paying at the end of the k-th ${interval} after it.`),
    table([
      { label: interval === 'week' ? 'Cohort (week of)' : 'Cohort (month)', cell: (cohort) => h('time', { datetime: cohort.start }, intervalLabel(cohort.start, interval)) },
      { label: 'Size', class: 'number', cell: (cohort) => String(cohort.size) },
      { label: 'Trial starts', class: 'number', cell: (cohort) => String(cohort.trialStarts) },
      { label: 'Trial conversions', class: 'number', cell: (cohort) => String(cohort.trialConversions) },
      ...Array.from({ length: width }, (_, index) => ({ label: `+${index + 1}`, class: 'number', cell: (cohort) => cell(cohort, index) })),
    ], cohorts, { caption: `Retention by ${interval} cohort`, empty: 'No cohort in this range.' }),
  ];
}
