// The analytics page: MRR, actives and trials, churn, revenue and refunds
// (GET /v1/analytics) and retention by cohort (GET /v1/analytics/cohorts)
// for a range of UTC days, by day, week or month; the series as a CSV
// download. The range lives in the address (#/analytics?from=…&to=…&interval=week).

import { ApiError, get, getBlob } from './api.js';
import { activeContent, churnContent, cohortContent, mrrContent, revenueContent } from './analytics-charts.js';
import { failure, h, replace, section, unavailable } from './dom.js';
import { navigate, pageHead } from './lists.js';

const DAY = 86_400_000;
const INTERVALS = [['day', 'day'], ['week', 'week (ISO, from Monday)'], ['month', 'month']];
const ENVIRONMENTS = [['', 'Production'], ['Sandbox', 'Sandbox']];
const STORES = [['', 'both stores'], ['app_store', 'App Store'], ['google_play', 'Google Play']];

const isDay = (value) => /^\d{4}-\d{2}-\d{2}$/.test(value || '') && !Number.isNaN(Date.parse(`${value}T00:00:00Z`));
const addDays = (day, count) => new Date(Date.parse(`${day}T00:00:00Z`) + count * DAY).toISOString().slice(0, 10);
const allowed = (value, options) => (options.some(([option]) => option === value) ? value : options[0][0]);

/** The range the address asks for; by default the last 30 days, by day. `through` is the last day shown. */
export function rangeOf(values) {
  const through = isDay(values.get('to')) ? values.get('to') : new Date().toISOString().slice(0, 10);
  return {
    from: isDay(values.get('from')) ? values.get('from') : addDays(through, -29),
    through,
    interval: allowed(values.get('interval'), INTERVALS),
    environment: allowed(values.get('environment'), ENVIRONMENTS),
    store: allowed(values.get('store'), STORES),
  };
}

/** GET /v1/analytics's query for a range: from the first day's start to the end of the last day. */
export function analyticsQuery(range) {
  return {
    from: `${range.from}T00:00:00Z`, to: `${addDays(range.through, 1)}T00:00:00Z`,
    interval: range.interval, environment: range.environment, store: range.store,
  };
}

function rangeForm(range) {
  const select = (name, label, options) => h('div', { class: 'field' },
    h('label', { for: `analytics-${name}` }, label),
    h('select', { id: `analytics-${name}`, name },
      options.map(([value, text]) => h('option', { value, selected: value === range[name] }, text))));
  const form = h('form', {
    class: 'filters',
    onsubmit: (event) => {
      event.preventDefault();
      const query = new URLSearchParams();
      for (const name of ['from', 'to', 'interval', 'environment', 'store']) {
        const value = form.elements[name].value.trim();
        if (value) query.set(name, value);
      }
      navigate('analytics', query);
    },
    // A choice of interval, environment or store applies at once; dates on Show.
    onchange: (event) => { if (event.target.tagName === 'SELECT') form.requestSubmit(); },
  },
  h('div', { class: 'field' }, h('label', { for: 'analytics-from' }, 'From (UTC day)'),
    h('input', { id: 'analytics-from', name: 'from', type: 'date', value: range.from, required: true })),
  h('div', { class: 'field' }, h('label', { for: 'analytics-to' }, 'Through (UTC day)'),
    h('input', { id: 'analytics-to', name: 'to', type: 'date', value: range.through, required: true })),
  select('interval', 'Interval', INTERVALS),
  select('environment', 'Environment', ENVIRONMENTS),
  select('store', 'Store', STORES),
  h('div', { class: 'field actions' }, h('button', { type: 'submit', id: 'analytics-apply' }, 'Show')));
  return form;
}

/** Fetches the series as CSV (the key goes in a header, so no plain link can) and offers it as a file. */
async function downloadCSV(range, button, message) {
  button.disabled = true;
  message.textContent = 'Preparing the CSV…';
  try {
    const blob = await getBlob('/v1/analytics', analyticsQuery(range), 'text/csv');
    const name = `analytics-${range.from}-to-${range.through}-${range.interval}${range.environment ? '-sandbox' : ''}${range.store ? `-${range.store}` : ''}.csv`;
    const url = URL.createObjectURL(blob);
    const link = h('a', { href: url, download: name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    message.textContent = `Downloaded ${name} (${blob.size} bytes).`;
  } catch (error) {
    message.textContent = error.message || String(error);
  } finally {
    button.disabled = false;
  }
}

const loading = () => h('div', {}, h('p', { class: 'loading' }, 'Loading…'));

export async function renderAnalytics(main, values, { focusHeading }) {
  const range = rangeOf(values);
  const cards = { mrr: loading(), active: loading(), churn: loading(), revenue: loading(), cohorts: loading() };
  const message = h('p', { id: 'analytics-download-message', class: 'muted', role: 'status', 'aria-live': 'polite' });
  const download = h('button', { type: 'button', id: 'analytics-download', class: 'secondary' }, 'Download CSV');
  download.addEventListener('click', () => downloadCSV(range, download, message));
  replace(main,
    pageHead('Analytics', `${range.environment || 'Production'} auto-renewable subscriptions${range.store ? ` (${range.store === 'app_store' ? 'App Store' : 'Google Play'})` : ''}, from the ledger's events. Stocks at each interval's end, flows within it; amounts per currency, never converted.`, focusHeading),
    h('section', { class: 'card', 'aria-label': 'Range' }, rangeForm(range), h('div', { class: 'buttons' }, download), message),
    section('MRR', { id: 'analytics-mrr' }, cards.mrr),
    section('Active subscriptions and trials', { id: 'analytics-active' }, cards.active),
    section('Churn', { id: 'analytics-churn' }, cards.churn),
    section('Revenue and refunds', { id: 'analytics-revenue' }, cards.revenue),
    section('Cohorts', { id: 'analytics-cohorts' }, cards.cohorts));

  if (range.from > range.through) {
    for (const card of Object.values(cards)) replace(card, h('p', { class: 'empty' }, 'No range to show.'));
    message.textContent = `From (${range.from}) is after Through (${range.through}): choose a From on or before Through.`;
    return;
  }
  const query = analyticsQuery(range);
  const cohortQuery = { ...query, interval: range.interval === 'day' ? 'month' : range.interval };
  const [series, cohorts] = await Promise.allSettled([get('/v1/analytics', query), get('/v1/analytics/cohorts', cohortQuery)]);
  const show = (card, result, build) => {
    if (result.status === 'fulfilled') replace(card, build(result.value));
    else if (result.reason instanceof ApiError && result.reason.isUnavailable) replace(card, unavailable('Analytics'));
    else replace(card, failure(result.reason));
  };
  const items = (body) => body.series || [];
  show(cards.mrr, series, (body) => mrrContent(items(body), range.interval));
  show(cards.active, series, (body) => activeContent(items(body), range.interval));
  show(cards.churn, series, (body) => churnContent(items(body), range.interval));
  show(cards.revenue, series, (body) => revenueContent(items(body), range.interval));
  show(cards.cohorts, cohorts, cohortContent);
}
