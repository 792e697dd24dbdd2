// The overview: active subscribers per entitlement now, a chart of active
// subscribers over time, reminders sent and failed per day, and what needs
// attention. Endpoints a server does not have yet leave a note, not a failure.

import { get, getIfAvailable, session } from './api.js';
import { lineChart, stackedBars } from './charts.js';
import { failure, formatDay, formatTime, h, replace, section, table, unavailable } from './dom.js';

const DAY = 86_400_000;
const NAME_KEYS = ['id', 'entitlement', 'productId', 'product', 'type', 'name', 'key'];
const COUNT_KEYS = ['active', 'count', 'subscribers', 'total', 'value'];

function count(value) {
  if (typeof value === 'number') return value;
  if (value && typeof value === 'object') {
    const key = COUNT_KEYS.find((name) => typeof value[name] === 'number');
    if (key) return value[key];
  }
  return 0;
}

/** [name, count] pairs from {"pro": 3} or [{"id": "pro", "active": 3}]. */
function pairs(value) {
  if (Array.isArray(value)) {
    return value.map((item) => [String(NAME_KEYS.map((key) => item && item[key]).find((name) => name != null) ?? '?'), count(item)]);
  }
  if (value && typeof value === 'object') return Object.entries(value).map(([name, item]) => [name, count(item)]);
  return [];
}

/** The stats body's breakdowns: entitlements, products, types (by key name). */
function breakdowns(stats) {
  const find = (word) => {
    const key = Object.keys(stats || {}).find((name) => name.toLowerCase().includes(word));
    return key ? pairs(stats[key]) : [];
  };
  return { entitlements: find('entitlement'), products: find('product'), types: find('type') };
}

/** Series from {"series": [{"at", "active": 3 | {"pro": 3} | [{"id", "active"}]}]}. */
function seriesOf(body) {
  const byName = new Map();
  for (const point of body.series || []) {
    const value = point.active ?? point.count ?? point.value;
    const entries = typeof value === 'number' ? [['active subscribers', value]] : pairs(value);
    for (const [name, number] of entries) {
      if (!byName.has(name)) byName.set(name, []);
      byName.get(name).push({ at: point.at, value: number });
    }
  }
  return [...byName.entries()].map(([name, points]) => ({ name, points }));
}

const isoSeconds = (time) => new Date(time).toISOString().replace(/\.\d+Z$/, 'Z');

export async function renderOverview(main, values, { focusHeading }) {
  const heading = h('h1', { tabindex: '-1' }, 'Overview');
  focusHeading(heading);
  const now = Date.now();
  const activeCard = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  const chartCard = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  const remindersCard = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  const attentionCard = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  const range = values.get('range') || '30d';
  const entitlement = values.get('entitlement') || '';
  const choose = (name, value) => {
    const query = new URLSearchParams(values);
    if (value) query.set(name, value);
    else query.delete(name);
    location.hash = `#/?${query.toString()}`;
  };
  const entitlementSelect = h('select', { id: 'chart-entitlement', onchange: (event) => choose('entitlement', event.target.value) },
    h('option', { value: '' }, 'all entitlements'),
    entitlement ? h('option', { value: entitlement, selected: true }, entitlement) : null);
  const rangeForm = h('form', { class: 'inline-form', onsubmit: (event) => event.preventDefault() },
    h('label', { for: 'chart-entitlement' }, 'Entitlement'),
    entitlementSelect,
    h('label', { for: 'chart-range' }, 'Range'),
    h('select', { id: 'chart-range', onchange: (event) => choose('range', event.target.value) },
      [['30d', 'last 30 days, daily'], ['12w', 'last 12 weeks, weekly'], ['52w', 'last 52 weeks, weekly']]
        .map(([value, label]) => h('option', { value, selected: value === range }, label))));

  replace(main, h('div', { class: 'page-head' }, heading, h('p', { class: 'muted' }, `As of ${formatTime(new Date(now).toISOString())}`)),
    h('div', { class: 'columns' },
      section('Active subscribers now', { id: 'active-now' }, activeCard),
      section('Needs attention', { id: 'attention' }, attentionCard)),
    section('Active subscribers over time', { id: 'active-chart', actions: rangeForm }, chartCard),
    section('Reminders, last 14 days', { id: 'reminder-chart' }, remindersCard));

  const [interval, days] = { '30d': ['day', 30], '12w': ['week', 84], '52w': ['week', 364] }[range] || ['day', 30];
  await Promise.all([
    fill(activeCard, async () => {
      const stats = await getIfAvailable('/v1/stats');
      if (!stats) return unavailable('Active subscriber counts');
      const { entitlements, products, types } = breakdowns(stats);
      for (const [name] of entitlements) {
        if (name !== entitlement) entitlementSelect.append(h('option', { value: name }, name));
      }
      return [
        entitlements.length === 0 ? h('p', { class: 'empty' }, 'No entitlement is active.')
          : h('ul', { class: 'big-numbers' }, entitlements.map(([name, number]) => h('li', {},
            h('span', { class: 'big-number' }, String(number)), h('span', { class: 'mono' }, name)))),
        products.length ? h('details', {}, h('summary', {}, 'By product'), table([
          { label: 'Product', cell: (row) => row[0] }, { label: 'Active', cell: (row) => String(row[1]) }], products)) : null,
        types.length ? h('details', {}, h('summary', {}, 'By type'), table([
          { label: 'Type', cell: (row) => row[0] }, { label: 'Active', cell: (row) => String(row[1]) }], types)) : null,
      ];
    }),
    fill(chartCard, async () => {
      const body = await getIfAvailable('/v1/stats/active', { from: isoSeconds(now - days * DAY), to: isoSeconds(now), interval, entitlement });
      if (!body) return unavailable('Active subscribers over time');
      const series = seriesOf(body);
      if (series.length === 0) return h('p', { class: 'empty' }, 'No data points in this range.');
      return lineChart('Active subscribers over time', series);
    }),
    fill(remindersCard, async () => {
      const lastDays = { dueAfter: isoSeconds(now - 14 * DAY), dueBefore: isoSeconds(now), limit: 10000 };
      const [sent, failed] = await Promise.all([
        get('/v1/reminders', { ...lastDays, status: 'sent' }),
        get('/v1/reminders', { ...lastDays, status: 'failed' }),
      ]);
      const perDay = [];
      for (let day = 13; day >= 0; day -= 1) perDay.push({ day: formatDay(new Date(now - day * DAY).toISOString()), values: { sent: 0, failed: 0 } });
      const bucket = (rows, key) => {
        for (const row of rows) {
          const entry = perDay.find((item) => item.day === formatDay(row.dueAt));
          if (entry) entry.values[key] += 1;
        }
      };
      bucket(sent.reminders, 'sent');
      bucket(failed.reminders, 'failed');
      return [
        h('p', {}, `${sent.reminders.length} sent, ${failed.reminders.length} failed (by due day).`, ' ',
          failed.reminders.length ? h('a', { href: '#/reminders?status=failed' }, 'See the failed ones') : null),
        stackedBars('Reminders sent and failed per day', perDay, [
          { key: 'sent', label: 'sent', class: 'reminder-sent' },
          { key: 'failed', label: 'failed', class: 'reminder-failed' },
        ]),
      ];
    }),
    fill(attentionCard, async () => {
      const tomorrow = isoSeconds(now + DAY);
      const [failed, dueSoon, pending, parked, invalid] = await Promise.allSettled([
        get('/v1/reminders', { status: 'failed', limit: 1000 }),
        get('/v1/reminders', { status: 'pending', dueBefore: tomorrow, limit: 1000 }),
        getIfAvailable('/v1/appstore/notifications', { status: 'pending', limit: 1000 }),
        session.role === 'admin' ? getIfAvailable('/v1/parked', { limit: 1000 }) : Promise.resolve(undefined),
        get('/v1/products/invalid'),
      ]);
      const number = (result, field) => {
        if (result.status === 'rejected') return '?';
        if (result.value === null) return 'n/a';
        if (result.value === undefined) return 'admin only';
        const length = result.value[field].length;
        return length >= 1000 ? '1000+' : String(length);
      };
      return h('ul', { class: 'attention' },
        h('li', {}, h('a', { href: '#/reminders?status=failed' }, 'Failed reminders'), h('span', { class: 'count' }, number(failed, 'reminders'))),
        h('li', {}, h('a', { href: `#/reminders?status=pending&dueBefore=${encodeURIComponent(tomorrow)}` }, 'Reminders due in 24 hours'), h('span', { class: 'count' }, number(dueSoon, 'reminders'))),
        h('li', {}, h('a', { href: '#/notifications?status=pending' }, 'Unattributed App Store notifications'), h('span', { class: 'count' }, number(pending, 'notifications'))),
        h('li', {}, h('a', { href: '#/parked' }, 'Parked events'), h('span', { class: 'count' }, number(parked, 'parked'))),
        h('li', {}, h('a', { href: '#/products' }, 'Invalid product identifiers'), h('span', { class: 'count' }, number(invalid, 'identifiers'))));
    }),
  ]);
}

async function fill(container, render) {
  try {
    replace(container, await render());
  } catch (error) {
    replace(container, failure(error));
  }
}
