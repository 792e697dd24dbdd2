// One subscriber: entitlements with the reason for each, an as-of picker
// that re-reads everything at that instant, the timeline, subscriptions,
// purchases, devices, reminders, App Store notifications and the history.

import { ApiError, get, getIfAvailable } from './api.js';
import {
  badge, failure, formatTime, h, rawJSON, replace, section, subscriberHref, table, time, unavailable,
} from './dom.js';
import { auditCard, erasureCard, grantsCard } from './support.js';
import { renderTimeline, timelineModel } from './timeline.js';

/** "2026-12-15T00:00:00" (what a datetime-local input holds, in UTC). */
function pickerValue(iso) {
  return new Date(iso).toISOString().slice(0, 19);
}

/** The picker's value read as UTC, as RFC 3339; null when unreadable. */
function instantFromPicker(value) {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(value)) return null;
  const iso = `${value.length === 16 ? `${value}:00` : value}Z`;
  return Number.isNaN(Date.parse(iso)) ? null : new Date(iso).toISOString().replace('.000Z', 'Z');
}

const statusKinds = {
  active: 'ok', grace: 'warn', expired: 'off', revoked: 'bad',
  pending: 'info', sent: 'ok', failed: 'bad', cancelled: 'off', skipped: 'warn',
  applied: 'ok', acknowledged: 'off', rejected: 'bad',
};

function statusBadge(status) {
  return badge(status, statusKinds[status] || 'off');
}

export async function renderSubscriber(main, params, context, notice = null) {
  const { focusHeading } = context;
  const id = params.get('id') || '';
  const atParam = params.get('at');
  const at = atParam && !Number.isNaN(Date.parse(atParam)) ? atParam : null;
  const environment = params.get('environment') === 'Sandbox' ? 'Sandbox' : null;
  const heading = h('h1', { tabindex: '-1', class: 'subscriber-id' }, h('span', { class: 'muted' }, 'Subscriber '), h('span', { class: 'mono', id: 'subscriber-id' }, id));
  const body = h('div', { class: 'stack' }, h('p', { class: 'loading', role: 'status' }, 'Loading…'));
  replace(main, h('div', { class: 'page-head' }, heading, asOfForm(id, at, environment)),
    notice ? h('p', { class: 'action-message', id: 'page-message', role: 'status' }, notice) : null, body);
  focusHeading(heading);
  if (!id) {
    replace(body, failure(new Error('No subscriber id: use the search box.')));
    return;
  }

  const subscriber = `/v1/subscribers/${encodeURIComponent(id)}`;
  const instant = { at, environment };
  const [state, explanation, history, reminders, notifications] = await Promise.allSettled([
    get(subscriber, instant),
    get(`${subscriber}/explain`, instant),
    get(`${subscriber}/history`),
    getIfAvailable('/v1/reminders', { subscriberId: id, limit: 1000 }),
    getIfAvailable('/v1/appstore/notifications', { subscriberId: id, limit: 200 }),
  ]);
  // After an action, the page is read again and says what was done.
  const reload = (message) => renderSubscriber(main, params, context, message);
  if (state.status === 'rejected') {
    const error = state.reason;
    let content = failure(error);
    if (error instanceof ApiError && error.code === 'erased') {
      content = h('p', { class: 'error', role: 'alert', id: 'subscriber-erased' },
        `Subscriber "${id}" was erased: nothing about it can be shown, and new facts for this id are refused.`);
    } else if (error instanceof ApiError && error.status === 404) {
      content = h('p', { class: 'error', role: 'alert' }, `No subscriber "${id}" is recorded: no facts were ever stored for this id.`);
    }
    replace(body, content);
    return;
  }
  const current = state.value;
  const now = new Date().toISOString();
  const events = history.status === 'fulfilled' ? history.value.events : [];
  // Delivery details come from /v1/reminders; an older server has them only in the state.
  const reminderRows = reminders.status === 'fulfilled' && reminders.value ? reminders.value.reminders : current.reminders;

  // The contract's per-environment view; a server without it answers its only view.
  const environmentNote = environment && current.environment === undefined
    ? h('p', { class: 'note' }, 'This server does not answer a separate Sandbox view yet: what follows is its only view.')
    : null;
  replace(body,
    environmentNote,
    entitlementsCard(current, explanation),
    section('Timeline', { id: 'timeline' },
      renderTimeline(timelineModel({ state: current, events, reminders: reminderRows, at: current.at, now }))),
    subscriptionsCard(current),
    current.purchases && current.purchases.length ? purchasesCard(current) : null,
    current.storeTransactions && current.storeTransactions.length ? storeCard(current) : null,
    googlePlayCard(events),
    h('div', { class: 'columns' }, devicesCard(current), remindersCard(reminderRows, reminders)),
    notificationsCard(notifications),
    grantsCard(id, events, entitlementIDs(current, explanation), reload),
    historyCard(history),
    await auditCard(id),
    erasureCard(id, reload));
}

/** Every entitlement of the catalog: those explained and those never granted. */
function entitlementIDs(state, explanation) {
  const ids = new Set(state.entitlements.map((entitlement) => entitlement.id));
  if (explanation.status === 'fulfilled') {
    for (const entitlement of explanation.value.entitlements || []) ids.add(entitlement.id);
    for (const id of explanation.value.neverGranted || []) ids.add(id);
  }
  return [...ids].sort();
}

function asOfForm(id, at, environment) {
  const input = h('input', { id: 'asof', name: 'asof', type: 'datetime-local', step: '1', value: pickerValue(at || new Date().toISOString()) });
  const view = h('select', { id: 'environment', name: 'environment' },
    h('option', { value: '' }, 'Production'),
    h('option', { value: 'Sandbox', selected: environment === 'Sandbox' }, 'Sandbox'));
  const message = h('span', { class: 'field-error', id: 'asof-error', role: 'alert' });
  const form = h('form', {
    class: 'asof', id: 'asof-form', 'aria-describedby': 'asof-help',
    onsubmit: (event) => {
      event.preventDefault();
      const instant = instantFromPicker(input.value);
      if (!instant) {
        message.textContent = 'Enter a date and time.';
        return;
      }
      location.hash = subscriberHref(id, instant, view.value);
    },
  },
  h('label', { for: 'asof' }, 'As of (UTC)'),
  input,
  h('label', { for: 'environment', class: 'visually-hidden' }, 'Environment'),
  view,
  h('button', { type: 'submit', id: 'asof-apply' }, 'Show'),
  h('button', {
    type: 'button', id: 'asof-now', class: 'secondary',
    onclick: () => { location.hash = subscriberHref(id, null, view.value); },
  }, 'Now'),
  h('span', { id: 'asof-help', class: 'muted asof-state' },
    `${environment ? 'Sandbox view' : 'Production view'}, ${at ? `at ${formatTime(at)}` : 'now'}`),
  message);
  return form;
}

function entitlementsCard(state, explanation) {
  const explained = new Map();
  let neverGranted = [];
  let explainError = null;
  if (explanation.status === 'fulfilled') {
    for (const entitlement of explanation.value.entitlements || []) explained.set(entitlement.id, entitlement);
    neverGranted = explanation.value.neverGranted || [];
  } else {
    explainError = explanation.reason;
  }
  const ids = [...new Set([...state.entitlements.map((entitlement) => entitlement.id), ...explained.keys()])];
  const rows = ids.map((id) => ({ id, state: state.entitlements.find((entitlement) => entitlement.id === id), why: explained.get(id) }));
  const list = rows.length === 0
    ? h('p', { class: 'empty' }, 'No entitlement was ever granted to this subscriber.')
    : h('ul', { class: 'entitlements' }, rows.map(({ id, state: granted, why }) => {
      const active = granted ? granted.active : Boolean(why && why.active);
      return h('li', { class: ['entitlement', active ? 'is-active' : 'is-inactive'], 'data-entitlement': id, 'data-active': String(active) },
        h('div', { class: 'entitlement-head' },
          h('span', { class: 'entitlement-name mono' }, id),
          badge(active ? 'Active' : 'Inactive', active ? 'ok' : 'off'),
          granted ? h('span', { class: 'muted' }, granted.productId, ' · ',
            granted.expiresAt ? ['expires ', time(granted.expiresAt)] : 'no expiry',
            granted.source.startsWith('grant:') ? ' · support grant ' : ' · transaction ',
            h('span', { class: 'mono' }, granted.source.startsWith('grant:') ? granted.source.slice(6) : granted.source)) : null),
        why
          ? h('ul', { class: 'reasons' }, why.reasons.map((reason, index) => h('li', { class: index === 0 ? 'reason main' : 'reason' }, reason)))
          : h('p', { class: 'muted' }, explainError ? 'The explanation could not be loaded.' : 'No explanation.'));
    }));
  return section('Entitlements', { id: 'entitlements' },
    list,
    neverGranted.length ? h('p', { class: 'muted' }, 'Never granted: ', neverGranted.join(', ')) : null,
    explainError ? failure(explainError) : null);
}

function subscriptionsCard(state) {
  const subscriptions = table([
    { label: 'Group', cell: (row) => h('span', { class: 'mono' }, row.group) },
    { label: 'Product', cell: (row) => row.productId },
    { label: 'Store', cell: (row) => storeName(row.store) },
    { label: 'Type', cell: (row) => row.type },
    { label: 'Status', cell: (row) => statusBadge(row.status) },
    { label: 'Expires', cell: (row) => time(row.expiresAt) },
    { label: 'Auto-renew', cell: (row) => (row.type === 'auto-renewable' ? (row.autoRenew ? 'on' : 'off') : '—') },
    { label: 'Original transaction', cell: (row) => h('span', { class: 'mono' }, row.originalTransactionId) },
  ], state.subscriptions, { empty: 'No subscriptions at this instant.', caption: 'Subscriptions' });
  const periods = state.nonRenewingPeriods.length === 0 ? null : table([
    { label: 'Group', cell: (row) => h('span', { class: 'mono' }, row.group) },
    { label: 'Product', cell: (row) => row.productId },
    { label: 'Transaction', cell: (row) => h('span', { class: 'mono' }, row.transactionId) },
    { label: 'Start', cell: (row) => time(row.start) },
    { label: 'End', cell: (row) => time(row.end) },
  ], state.nonRenewingPeriods, { caption: 'Non-renewing periods' });
  return section('Subscriptions', { id: 'subscriptions' }, subscriptions,
    periods ? [h('h3', {}, 'Non-renewing periods'), periods] : null);
}

function purchasesCard(state) {
  return section('One-time purchases', { id: 'purchases' }, table([
    { label: 'Product', cell: (row) => row.productId },
    { label: 'Store', cell: (row) => storeName(row.store) },
    { label: 'Type', cell: (row) => row.type },
    { label: 'Transaction', cell: (row) => h('span', { class: 'mono' }, row.transactionId) },
    { label: 'Purchased', cell: (row) => time(row.purchaseDate) },
    { label: 'Quantity', cell: (row) => String(row.quantity) },
    { label: 'Revoked', cell: (row) => time(row.revokedAt) },
  ], state.purchases, { caption: 'One-time purchases' }));
}

const offerNames = { 1: 'introductory', 2: 'promotional', 3: 'offer code', 4: 'win-back' };
const refundReasons = { 0: 'another reason', 1: 'an issue with the app' };

// What the App Store said about the transactions shown: family sharing,
// offers, upgrades and refunds (their type, share and reason).
function storeCard(state) {
  const refund = (row) => {
    if (!row.revocationType && row.revocationReason === undefined) return '—';
    const parts = [row.revocationType || 'refunded'];
    if (row.revocationPercentage !== undefined) parts.push(`${row.revocationPercentage / 1000}%`);  // milliunits: 50000 is 50%
    if (row.revocationReason !== undefined) parts.push(refundReasons[row.revocationReason] || `reason ${row.revocationReason}`);
    return parts.join(' · ');
  };
  return section('What the App Store says', { id: 'store-transactions' }, table([
    { label: 'Transaction', cell: (row) => h('span', { class: 'mono' }, row.transactionId) },
    { label: 'Product', cell: (row) => row.productId },
    { label: 'Ownership', cell: (row) => (row.ownershipType === 'FAMILY_SHARED' ? 'Family Sharing' : (row.ownershipType ? 'purchased' : '—')) },
    { label: 'Offer', cell: (row) => {
      if (row.offerType === undefined && !row.offerDiscount) return '—';
      const kind = row.offerType === undefined ? 'offer' : offerNames[row.offerType] || `type ${row.offerType}`;
      return row.offerDiscount ? `${kind} · ${row.offerDiscount.replaceAll('_', ' ')}` : kind;
    } },
    { label: 'Price', cell: (row) => (row.price === undefined ? '—' : `${row.price} ${row.currency}`
      + (row.storefront ? ` · ${row.storefront}` : '')) },
    { label: 'Upgraded', cell: (row) => (row.isUpgraded ? 'yes' : '—') },
    { label: 'Refund', cell: refund },
  ], state.storeTransactions, { caption: 'What the App Store says about these transactions' }));
}

/** The store a subscription or purchase came from (an older server says none: the App Store). */
function storeName(store) {
  return store === 'google_play' ? 'Google Play' : 'App Store';
}

// What Google Play said about each purchase token, as last fetched: its
// state, paid-until, auto-renew, acknowledgement and the purchase it
// replaces; and what Google voided. Read from the history's Play facts.
function googlePlayCard(events) {
  const latest = new Map();
  const voided = new Map();
  for (const event of events) {
    if (event.type === 'google_play_purchase' && event.data) {
      const seen = latest.get(event.data.purchaseToken);
      if (!seen || seen.observedAt <= event.data.observedAt) latest.set(event.data.purchaseToken, event.data);
    } else if (event.type === 'google_play_voided' && event.data) {
      voided.set(event.data.purchaseToken, event.data);
    }
  }
  if (latest.size === 0) return null;
  const rows = [...latest.values()].sort((a, b) => (a.observedAt < b.observedAt ? 1 : -1));
  const short = (token) => (token.length > 16 ? `${token.slice(0, 8)}…${token.slice(-6)}` : token);
  return section('What Google Play says', { id: 'google-play' }, table([
    { label: 'Purchase token', cell: (row) => h('span', { class: 'mono', title: row.purchaseToken }, short(row.purchaseToken)) },
    { label: 'Product', cell: (row) => (row.basePlanId ? `${row.productId}:${row.basePlanId}` : row.productId) },
    { label: 'Order', cell: (row) => h('span', { class: 'mono' }, row.orderId || '—') },
    { label: 'State', cell: (row) => row.state.replace('SUBSCRIPTION_STATE_', '').toLowerCase().replaceAll('_', ' ') },
    { label: 'Paid until', cell: (row) => time(row.expiryTime) },
    { label: 'Auto-renew', cell: (row) => (row.autoRenew === undefined ? '—' : (row.autoRenew ? 'on' : 'off')) },
    { label: 'Acknowledged', cell: (row) => (row.acknowledged ? 'yes' : 'not yet') },
    { label: 'Replaces', cell: (row) => (row.linkedPurchaseToken ? h('span', { class: 'mono' }, short(row.linkedPurchaseToken)) : '—') },
    { label: 'Voided', cell: (row) => (voided.has(row.purchaseToken) ? time(voided.get(row.purchaseToken).voidedAt) : '—') },
    { label: 'As of', cell: (row) => time(row.observedAt) },
  ], rows, { caption: 'What Google Play said when each purchase was last fetched' + (rows.some((row) => row.environment === 'Sandbox') ? ' (test purchases are Sandbox)' : '') }));
}

function devicesCard(state) {
  return section('Devices', { id: 'devices' }, state.devices.length === 0
    ? h('p', { class: 'empty' }, 'No device recorded.')
    : h('ul', { class: 'devices' }, state.devices.map((device) =>
      h('li', { class: 'device' }, h('span', { class: 'mono device-id' }, device.id), h('span', { class: 'muted' }, ' first seen ', time(device.firstSeenAt))))));
}

function remindersCard(rows, result) {
  const detailed = result.status === 'fulfilled' && result.value;
  return section('Reminders', { id: 'reminders' }, table([
    { label: 'Due', cell: (row) => time(row.dueAt) },
    { label: 'Lead', cell: (row) => row.lead },
    { label: 'Status', cell: (row) => statusBadge(row.status) },
    { label: 'Attempts', cell: (row) => (row.attempts === undefined ? '—' : String(row.attempts)) },
    { label: 'Last error', cell: (row) => (row.lastError ? h('span', { class: 'error-text' }, row.lastError) : '—') },
  ], rows, { empty: 'No reminders scheduled.', caption: 'Reminders' }),
  detailed ? null : h('p', { class: 'note' }, 'Delivery attempts and errors: not available on this server yet.'));
}

function notificationsCard(result) {
  let content;
  if (result.status === 'rejected') content = failure(result.reason);
  else if (!result.value) content = unavailable('App Store notifications');
  else {
    content = table([
      { label: 'Received', cell: (row) => time(row.receivedAt) },
      { label: 'Type', cell: (row) => [row.type, row.subtype ? h('span', { class: 'muted' }, ` / ${row.subtype}`) : null] },
      { label: 'Status', cell: (row) => statusBadge(row.status) },
      { label: 'Attribution', cell: (row) => row.attribution },
      { label: 'Environment', cell: (row) => row.environment },
      { label: 'Summary', cell: (row) => row.summary },
      { label: 'Error', cell: (row) => (row.errorCode ? h('span', { class: 'error-text' }, `${row.errorCode}: ${row.errorMessage || ''}`) : '—') },
      { label: 'Applied', cell: (row) => time(row.appliedAt) },
    ], result.value.notifications, { empty: 'No App Store notifications for this subscriber.', caption: 'App Store notifications' });
  }
  return section('App Store notifications', { id: 'notifications' }, content);
}

function historyCard(result) {
  if (result.status === 'rejected') return section('History', { id: 'history' }, failure(result.reason));
  const events = result.value.events;
  return section('History', { id: 'history', actions: h('span', { class: 'muted' }, `${events.length} event(s), oldest first`) },
    h('ol', { class: 'history' }, events.map((event) => {
      const environment = event.data && event.data.environment;
      return h('li', { class: 'event', 'data-type': event.type, 'data-position': String(event.position) },
        h('div', { class: 'event-head' },
          h('span', { class: 'position mono' }, `#${event.position}`),
          time(event.recordedAt),
          badge(event.type, 'type'),
          badge(event.source || 'unknown source', 'source'),
          environment ? badge(environment, environment === 'Sandbox' ? 'warn' : 'env') : null),
        h('p', { class: 'summary' }, event.summary),
        h('details', { class: 'raw-data' }, h('summary', {}, 'Raw data'), rawJSON(event.data)));
    })));
}
