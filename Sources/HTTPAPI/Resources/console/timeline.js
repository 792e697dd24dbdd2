// The subscriber's timeline as SVG: one lane per group (and environment),
// non-renewing periods stacked end to end, auto-renewable terms, grace,
// refunds and revocations marked, reminders as ticks coloured by status, a
// now-line and an as-of line. What is drawn is what was known at the as-of
// instant (facts dated after it are left out), like the state beside it.

import { fitted, formatDay, formatTime, h, ms, s } from './dom.js';
import { addPlayItems } from './timeline-play.js';

const DAY = 86_400_000;
const RIGHT = 18;
const TOP = 28;
const LANE_HEIGHT = 48;
const AXIS = 30;

const ONE_TIME_LANE = 'One-time purchases';
const REMINDER_LANE = 'Reminders';

/** Lanes and items from the state, history and reminders at `at`. */
export function timelineModel({ state, events, reminders, at, now }) {
  const atTime = ms(at);
  const nowTime = ms(now);
  const lanes = new Map();
  const lane = (group, environment) => {
    const name = environment === 'Sandbox' ? `${group} · Sandbox` : group;
    if (!lanes.has(name)) lanes.set(name, { name, items: [] });
    return lanes.get(name);
  };
  const known = (time) => time !== null && time <= atTime;

  // Which group and environment each transaction belongs to.
  const transactions = new Map();
  const remember = (fact) => {
    if (fact && fact.transactionId && !transactions.has(fact.transactionId)) {
      const oneTime = ['consumable', 'non-consumable', 'free'].includes(fact.productType);
      transactions.set(fact.transactionId, {
        group: oneTime ? ONE_TIME_LANE : fact.group || fact.productId,
        environment: fact.environment || 'Production',
        productType: fact.productType,
        fact,
      });
    }
  };
  for (const event of events) {
    const data = event.data || {};
    if (['purchased', 'renewed', 'restored'].includes(event.type)) remember(data);
    if (event.type === 'transferred_in' && data.transaction) remember(data.transaction);
  }
  const laneOf = (transactionId, fallbackGroup, environment) => {
    const info = transactions.get(transactionId);
    return lane(info ? info.group : fallbackGroup || 'other', info ? info.environment : environment);
  };

  // Non-renewing periods, as the state computed them at `at` (production).
  for (const [index, period] of (state.nonRenewingPeriods || []).entries()) {
    lane(period.group).items.push({
      kind: 'period', start: ms(period.start), end: ms(period.end), stack: index % 2,
      label: period.transactionId,
      title: `Period of ${period.productId} (transaction ${period.transactionId}): ${formatTime(period.start)} → ${formatTime(period.end)}`,
    });
  }

  // Auto-renewable terms, each transaction from its purchase to its expiry
  // (extensions applied), cut where a refund revoked it.
  const terms = new Map();
  for (const [id, info] of transactions) {
    const fact = info.fact;
    if (info.productType !== 'auto-renewable' || !fact.expiresDate || !known(ms(fact.purchaseDate))) continue;
    terms.set(id, {
      kind: 'term', start: ms(fact.purchaseDate), end: ms(fact.expiresDate), revokedAt: null, lane: lane(info.group, info.environment),
      label: id, productId: fact.productId,
    });
  }
  for (const event of events) {
    const data = event.data || {};
    if (event.type === 'renewal_extended' && terms.has(data.transactionId) && known(ms(data.effectiveDate))) {
      const term = terms.get(data.transactionId);
      term.end = Math.max(term.end, ms(data.expiresDate));
    }
    if (event.type === 'refunded' && known(ms(data.revocationDate))) {
      const time = ms(data.revocationDate);
      if (terms.has(data.transactionId)) terms.get(data.transactionId).revokedAt = time;
      laneOf(data.transactionId, data.productId, data.environment).items.push({
        kind: 'refund', time,
        title: `Refunded ${data.productId} (transaction ${data.transactionId}) — access ended ${formatTime(data.revocationDate)}${data.reason ? `: ${data.reason}` : ''}`,
      });
    }
    if (event.type === 'refund_reversed' && known(ms(data.date))) {
      if (terms.has(data.transactionId)) terms.get(data.transactionId).revokedAt = null;
      laneOf(data.transactionId, data.productId, data.environment).items.push({
        kind: 'reversal', time: ms(data.date), title: `Refund of transaction ${data.transactionId} reversed ${formatTime(data.date)}`,
      });
    }
    if (event.type === 'billing_issue' && data.gracePeriodExpiresDate && known(ms(data.effectiveDate))) {
      const original = [...transactions.values()].find((info) => info.fact.originalTransactionId === data.originalTransactionId);
      lane(original ? original.group : data.productId || 'other', data.environment).items.push({
        kind: 'grace', start: ms(data.effectiveDate), end: ms(data.gracePeriodExpiresDate),
        title: `Billing issue, grace period until ${formatTime(data.gracePeriodExpiresDate)}`,
      });
    }
    if (event.type === 'expired' && known(ms(data.expiresDate))) {
      lane(data.group || data.productId || 'other', data.environment).items.push({
        kind: 'expiry', time: ms(data.expiresDate), title: event.summary || `Expired ${formatTime(data.expiresDate)}`,
      });
    }
    if (event.type === 'transferred_in' || event.type === 'transferred_out') {
      if (!known(ms(data.date))) continue;
      const original = [...transactions.values()].find((info) => info.fact.originalTransactionId === data.originalTransactionId);
      lane(original ? original.group : 'other', original ? original.environment : 'Production').items.push({
        kind: 'transfer', time: ms(data.date), title: event.summary || 'Transfer',
      });
    }
  }
  for (const term of terms.values()) {
    const title = `${term.productId} (transaction ${term.label}): ${formatTime(new Date(term.start).toISOString())} → ${formatTime(new Date(term.end).toISOString())}`;
    if (term.revokedAt !== null && term.revokedAt < term.end) {
      term.lane.items.push({ kind: 'term', start: term.start, end: Math.max(term.start, term.revokedAt), label: term.label, title });
      term.lane.items.push({
        kind: 'revoked', start: Math.max(term.start, term.revokedAt), end: term.end,
        title: `Revoked from ${formatTime(new Date(term.revokedAt).toISOString())}: ${title}`,
      });
    } else {
      term.lane.items.push({ kind: 'term', start: term.start, end: term.end, label: term.label, title });
    }
  }

  // Google Play subscriptions, from the states Google reported.
  addPlayItems({ state, events, atTime, lane });

  // Consumables, non-consumables and free products known at `at`.
  for (const purchase of state.purchases || []) {
    const item = {
      kind: purchase.revokedAt ? 'purchase-revoked' : 'purchase', time: ms(purchase.purchaseDate),
      title: `${purchase.productId} (${purchase.type}, transaction ${purchase.transactionId})${purchase.revokedAt ? `, revoked ${formatTime(purchase.revokedAt)}` : ''}`,
    };
    lane(ONE_TIME_LANE).items.push(item);
  }

  // Reminders as ticks under their group's bar (current status).
  for (const reminder of reminders || []) {
    const target = reminder.group ? lane(reminder.group, reminder.environment) : lane(REMINDER_LANE);
    target.items.push({
      kind: 'reminder', time: ms(reminder.dueAt), status: reminder.status,
      title: `Reminder ${reminder.lead || ''} due ${formatTime(reminder.dueAt)}: ${reminder.status}`
        + (reminder.attempts ? `, ${reminder.attempts} attempt(s)` : '') + (reminder.lastError ? ` — ${reminder.lastError}` : ''),
    });
  }

  const times = [atTime, nowTime];
  for (const { items } of lanes.values()) {
    for (const item of items) times.push(item.start ?? item.time, item.end ?? item.time);
  }
  const valid = times.filter((time) => time !== null && Number.isFinite(time));
  let from = Math.min(...valid);
  let to = Math.max(...valid);
  if (to - from < 2 * DAY) { from -= DAY; to += DAY; }
  const pad = (to - from) * 0.04;
  return { lanes: [...lanes.values()], from: from - pad, to: to + pad, at: atTime, now: nowTime };
}

function tickStep(span, count) {
  const steps = [DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, 61 * DAY, 91 * DAY, 182 * DAY, 365 * DAY, 730 * DAY, 1826 * DAY];
  return steps.find((step) => span / step <= count) || steps[steps.length - 1];
}

function short(text, length) {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

/** The timeline at the width of its card, and its legend; an empty one says so. */
export function renderTimeline(model) {
  if (model.lanes.length === 0) {
    return h('p', { class: 'empty' }, 'Nothing to draw: no subscriptions, periods, purchases or reminders at this instant.');
  }
  return h('div', { class: 'timeline-wrap' }, fitted('timeline-box', (width) => drawTimeline(model, width)), legend());
}

function drawTimeline(model, availableWidth) {
  const width = Math.max(300, availableWidth);
  const narrow = width < 560;
  const labelWidth = narrow ? 86 : 150;
  const height = TOP + model.lanes.length * LANE_HEIGHT + AXIS;
  const x = (time) => labelWidth + ((time - model.from) / (model.to - model.from)) * (width - labelWidth - RIGHT);
  const bottom = TOP + model.lanes.length * LANE_HEIGHT;
  const svg = s('svg', {
    class: 'timeline', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
    'aria-labelledby': 'timeline-title timeline-desc',
  },
  s('title', { id: 'timeline-title' }, 'Timeline'),
  s('desc', { id: 'timeline-desc' },
    `${model.lanes.length} lane(s) from ${formatDay(new Date(model.from).toISOString())} to ${formatDay(new Date(model.to).toISOString())}; the tables below hold the same facts.`));

  // Axis and grid: a date every 90 pixels or so; on a narrow screen shorter
  // labels ("11-23", or "2026-11" over long spans) every 55.
  const span = model.to - model.from;
  const step = tickStep(span, Math.max(2, Math.floor((width - labelWidth) / (narrow ? 55 : 90))));
  const label = (tick) => {
    const day = formatDay(new Date(tick).toISOString());
    if (!narrow) return day;
    return span > 300 * DAY ? day.slice(0, 7) : day.slice(5);
  };
  const grid = s('g', { class: 'axis' });
  for (let tick = Math.ceil(model.from / step) * step; tick <= model.to; tick += step) {
    grid.append(
      s('line', { class: 'grid', x1: x(tick), x2: x(tick), y1: TOP, y2: bottom }),
      s('text', { class: 'axis-label', x: x(tick), y: bottom + 18, 'text-anchor': 'middle' }, label(tick)));
  }
  svg.append(grid);

  model.lanes.forEach((lane, index) => {
    const top = TOP + index * LANE_HEIGHT;
    const group = s('g', { class: 'lane', 'data-lane': lane.name });
    group.append(
      s('rect', { class: index % 2 ? 'lane-bg odd' : 'lane-bg', x: 0, y: top, width, height: LANE_HEIGHT }),
      s('text', { class: 'lane-label', x: 6, y: top + 21 }, short(lane.name, narrow ? 11 : 20), s('title', {}, lane.name)));
    for (const item of lane.items) group.append(drawItem(item, top, x));
    svg.append(group);
  });

  // The as-of line, and now.
  const marker = (time, kind, label, anchor) => s('g', { class: kind },
    s('line', { class: `${kind}-line`, x1: x(time), x2: x(time), y1: TOP - 6, y2: bottom }),
    s('text', { class: `${kind}-label`, x: x(time) + (anchor === 'end' ? -4 : 4), y: TOP - 10, 'text-anchor': anchor }, label),
    s('title', {}, `${label}: ${formatTime(new Date(time).toISOString())}`));
  const apart = Math.abs(x(model.now) - x(model.at)) > 1;
  svg.append(marker(model.now, 'now', 'now', model.at > model.now ? 'end' : 'start'));
  if (apart) svg.append(marker(model.at, 'asof', 'as of', model.at > model.now ? 'start' : 'end'));
  return svg;
}

function drawItem(item, top, x) {
  const barTop = top + 8;
  const barHeight = 18;
  const middle = barTop + barHeight / 2;
  const title = s('title', {}, item.title || '');
  switch (item.kind) {
    case 'period':
    case 'term':
    case 'grace':
    case 'held':
    case 'revoked': {
      const left = x(item.start);
      const width = Math.max(2, x(item.end) - left);
      const classes = item.kind === 'period' ? `period stack-${item.stack}` : item.kind;
      const bar = s('g', {}, s('rect', { class: classes, x: left, y: item.kind === 'grace' ? barTop + 12 : barTop, width, height: item.kind === 'grace' ? 6 : barHeight, rx: 3 }), title);
      if (item.label && width > item.label.length * 6.6 + 10) {
        bar.append(s('text', { class: 'bar-label', x: left + 5, y: middle + 4 }, item.label));
      }
      return bar;
    }
    case 'refund': {
      const cx = x(item.time);
      return s('g', { class: 'refund-mark' },
        s('line', { x1: cx, x2: cx, y1: barTop - 4, y2: barTop + barHeight + 4 }),
        s('path', { d: `M${cx - 5},${barTop - 9} L${cx + 5},${barTop - 1} M${cx + 5},${barTop - 9} L${cx - 5},${barTop - 1}` }),
        title);
    }
    case 'reversal':
    case 'transfer':
    case 'expiry': {
      const cx = x(item.time);
      return s('g', { class: `${item.kind}-mark` },
        s('polygon', { points: `${cx},${middle - 6} ${cx + 6},${middle} ${cx},${middle + 6} ${cx - 6},${middle}` }), title);
    }
    case 'purchase':
    case 'purchase-revoked':
      return s('g', { class: item.kind }, s('circle', { cx: x(item.time), cy: middle, r: 5 }), title);
    case 'reminder': {
      const cx = x(item.time);
      return s('g', { class: `reminder-tick status-${item.status}` },
        s('line', { x1: cx, x2: cx, y1: top + 31, y2: top + 44 }), title);
    }
    default:
      return s('g', {});
  }
}

function legend() {
  const entry = (className, text) => h('li', {}, h('span', { class: `swatch ${className}`, 'aria-hidden': 'true' }), text);
  return h('ul', { class: 'legend', 'aria-label': 'Legend' },
    entry('period', 'non-renewing period'),
    entry('term', 'auto-renewable term'),
    entry('grace', 'grace period'),
    entry('held', 'on hold / paused (Google Play)'),
    entry('revoked', 'revoked'),
    entry('refund', 'refund'),
    entry('expiry', 'expiry'),
    entry('reminder-pending', 'reminder pending'),
    entry('reminder-sent', 'sent'),
    entry('reminder-failed', 'failed'),
    entry('reminder-cancelled', 'cancelled / skipped'),
    entry('now', 'now'),
    entry('asof', 'as of'));
}
