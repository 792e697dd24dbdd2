// Lists across subscribers: subscriptions, reminders, App Store
// notifications, parked events, invalid product identifiers. Filters live in
// the address (#/reminders?status=failed), so a list can be shared or reloaded.

import { get, getIfAvailable, session } from './api.js';
import { badge, failure, h, replace, subscriberLink, table, time, unavailable } from './dom.js';

const kinds = {
  active: 'ok', grace: 'warn', expired: 'off', revoked: 'bad',
  pending: 'info', sent: 'ok', failed: 'bad', cancelled: 'off', skipped: 'warn',
  applied: 'ok', acknowledged: 'off', rejected: 'bad',
};
export const statusBadge = (status) => badge(status, kinds[status] || 'off');

function toPicker(iso) {
  return iso && !Number.isNaN(Date.parse(iso)) ? new Date(iso).toISOString().slice(0, 19) : '';
}

function fromPicker(value) {
  if (!value) return '';
  const iso = `${value.length === 16 ? `${value}:00` : value}Z`;
  return Number.isNaN(Date.parse(iso)) ? '' : new Date(iso).toISOString().replace('.000Z', 'Z');
}

/** A filter form whose submit writes the filters into the address. */
export function filterForm(page, fields, values, presets = []) {
  const controls = fields.map((field) => {
    const id = `filter-${field.name}`;
    let control;
    if (field.type === 'select') {
      control = h('select', { id, name: field.name },
        field.options.map(([value, label]) => h('option', { value, selected: (values.get(field.name) || '') === value }, label)));
    } else if (field.type === 'datetime') {
      control = h('input', { id, name: field.name, type: 'datetime-local', step: '1', value: toPicker(values.get(field.name)) });
    } else {
      control = h('input', { id, name: field.name, type: 'text', value: values.get(field.name) || '', autocomplete: 'off', spellcheck: 'false' });
    }
    return h('div', { class: 'field' }, h('label', { for: id }, field.label), control);
  });
  const form = h('form', {
    class: 'filters',
    onsubmit: (event) => {
      event.preventDefault();
      const query = new URLSearchParams();
      for (const field of fields) {
        const raw = form.elements[field.name].value.trim();
        const value = field.type === 'datetime' ? fromPicker(raw) : raw;
        if (value) query.set(field.name, value);
      }
      navigate(page, query);
    },
  },
  controls,
  h('div', { class: 'field actions' }, h('button', { type: 'submit' }, 'Apply'),
    presets.map(([label, query]) => h('button', {
      type: 'button', class: 'secondary', onclick: () => navigate(page, new URLSearchParams(query)),
    }, label))));
  return form;
}

export function navigate(page, query) {
  const text = query.toString().replace(/\+/g, '%20');
  const target = `#/${page}${text ? `?${text}` : ''}`;
  if (location.hash === target) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = target;
}

export function pageHead(title, description, focusHeading) {
  const heading = h('h1', { tabindex: '-1' }, title);
  focusHeading(heading);
  return h('div', { class: 'page-head' }, heading, h('p', { class: 'muted' }, description));
}

export async function listInto(container, load, render) {
  replace(container, h('p', { class: 'loading', role: 'status' }, 'Loading…'));
  try {
    const body = await load();
    replace(container, render(body));
  } catch (error) {
    replace(container, failure(error));
  }
}

function pick(values, names) {
  const params = {};
  for (const name of names) if (values.get(name)) params[name] = values.get(name);
  return params;
}

export async function renderSubscriptions(main, values, { focusHeading }) {
  const results = h('div', {});
  replace(main, pageHead('Subscriptions', 'Subscriptions across subscribers, filtered by entitlement, product or status.', focusHeading),
    h('section', { class: 'card' }, filterForm('subscriptions', [
      { name: 'entitlement', label: 'Entitlement' },
      { name: 'productId', label: 'Product' },
      { name: 'group', label: 'Group' },
      { name: 'status', label: 'Status', type: 'select', options: [['', 'any'], ['active', 'active'], ['grace', 'grace'], ['expired', 'expired'], ['revoked', 'revoked']] },
      { name: 'environment', label: 'Environment', type: 'select', options: [['', 'Production'], ['Sandbox', 'Sandbox']] },
      { name: 'expiresAfter', label: 'Expires after (UTC)', type: 'datetime' },
      { name: 'expiresBefore', label: 'Expires before (UTC)', type: 'datetime' },
    ], values, [['Active now', 'status=active']]), results));
  const params = { limit: 50, ...pick(values, ['entitlement', 'productId', 'group', 'status', 'environment', 'expiresAfter', 'expiresBefore', 'cursor']) };
  await listInto(results, () => getIfAvailable('/v1/subscriptions', params), (body) => {
    if (!body) return unavailable('The subscriptions list');
    const next = body.nextCursor;
    const pager = h('div', { class: 'pager' },
      values.get('cursor') ? h('button', {
        type: 'button', class: 'secondary',
        onclick: () => { const query = new URLSearchParams(values); query.delete('cursor'); navigate('subscriptions', query); },
      }, 'First page') : null,
      next ? h('button', {
        type: 'button', id: 'next-page',
        onclick: () => { const query = new URLSearchParams(values); query.set('cursor', next); navigate('subscriptions', query); },
      }, 'Next page') : null);
    return [table([
      { label: 'Subscriber', cell: (row) => subscriberLink(row.subscriberId) },
      { label: 'Group', cell: (row) => row.group },
      { label: 'Product', cell: (row) => row.productId },
      { label: 'Type', cell: (row) => row.type },
      { label: 'Status', cell: (row) => statusBadge(row.status) },
      { label: 'Expires', cell: (row) => time(row.expiresAt) },
      { label: 'Auto-renew', cell: (row) => (row.type === 'auto-renewable' ? (row.autoRenew ? 'on' : 'off') : '—') },
    ], body.subscriptions || [], { empty: 'No subscription matches.', caption: 'Subscriptions' }), pager];
  });
}

export async function renderReminders(main, values, { focusHeading }) {
  const results = h('div', {});
  const soon = new Date(Date.now() + 7 * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
  if (![...values.keys()].length) {
    values.set('status', 'pending');
    values.set('dueBefore', soon);
  }
  replace(main, pageHead('Reminders', 'Renewal reminders and expiry prompts across subscribers, by due time.', focusHeading),
    h('section', { class: 'card' }, filterForm('reminders', [
      { name: 'status', label: 'Status', type: 'select', options: [['', 'any'], ['pending', 'pending'], ['sent', 'sent'], ['failed', 'failed'], ['cancelled', 'cancelled'], ['skipped', 'skipped']] },
      { name: 'subscriberId', label: 'Subscriber' },
      { name: 'dueAfter', label: 'Due after (UTC)', type: 'datetime' },
      { name: 'dueBefore', label: 'Due before (UTC)', type: 'datetime' },
    ], values, [['Due in 7 days', `status=pending&dueBefore=${soon}`], ['Failed', 'status=failed']]), results));
  await listInto(results, () => get('/v1/reminders', { limit: 500, ...pick(values, ['status', 'subscriberId', 'dueAfter', 'dueBefore']) }),
    (body) => table([
      { label: 'Due', cell: (row) => time(row.dueAt) },
      { label: 'Subscriber', cell: (row) => subscriberLink(row.subscriberId) },
      { label: 'Type', cell: (row) => (row.type === 'expiry_prompt' ? 'expiry prompt' : 'renewal reminder') },
      { label: 'Group', cell: (row) => row.group || '—' },
      { label: 'Product', cell: (row) => row.productId || '—' },
      { label: 'Lead', cell: (row) => row.lead },
      { label: 'Status', cell: (row) => statusBadge(row.status) },
      { label: 'Attempts', cell: (row) => (row.attempts === undefined ? '—' : String(row.attempts)) },
      { label: 'Last error', cell: (row) => (row.lastError ? h('span', { class: 'error-text' }, row.lastError) : '—') },
    ], body.reminders, { empty: 'No reminder matches.', caption: 'Reminders' }));
}

export async function renderNotifications(main, values, { focusHeading }) {
  const results = h('div', {});
  if (![...values.keys()].length) values.set('status', 'pending');
  replace(main, pageHead('App Store notifications',
    'Verified notifications from Apple. Pending ones are unattributed: they wait for their original transaction to be claimed.', focusHeading),
  h('section', { class: 'card' }, filterForm('notifications', [
    { name: 'status', label: 'Status', type: 'select', options: [['', 'any'], ['pending', 'pending (unattributed)'], ['applied', 'applied'], ['rejected', 'rejected'], ['acknowledged', 'acknowledged']] },
    { name: 'subscriberId', label: 'Subscriber' },
  ], values, [['Unattributed', 'status=pending'], ['Rejected', 'status=rejected']]), results));
  await listInto(results, () => getIfAvailable('/v1/appstore/notifications', { limit: 200, ...pick(values, ['status', 'subscriberId']) }),
    (body) => (!body ? unavailable('The notifications list') : table([
      { label: 'Received', cell: (row) => time(row.receivedAt) },
      { label: 'Type', cell: (row) => [row.type, row.subtype ? h('span', { class: 'muted' }, ` / ${row.subtype}`) : null] },
      { label: 'Status', cell: (row) => statusBadge(row.status) },
      { label: 'Subscriber', cell: (row) => (row.subscriberId ? subscriberLink(row.subscriberId) : h('span', { class: 'muted' }, row.attribution)) },
      { label: 'Original transaction', cell: (row) => h('span', { class: 'mono' }, row.originalTransactionId || '—') },
      { label: 'Environment', cell: (row) => row.environment },
      { label: 'Summary', cell: (row) => row.summary },
      { label: 'Error', cell: (row) => (row.errorCode ? h('span', { class: 'error-text' }, `${row.errorCode}: ${row.errorMessage || ''}`) : '—') },
    ], body.notifications, { empty: 'No notification matches.', caption: 'App Store notifications' })));
}

export async function renderParked(main, values, { focusHeading }) {
  const results = h('div', {});
  replace(main, pageHead('Parked events',
    'Events a projection set aside after its handler refused them again and again. Fix the cause, then run subledger rebuild.', focusHeading),
  h('section', { class: 'card' }, results));
  if (session.role !== 'admin') {
    replace(results, h('p', { class: 'note' }, 'Parked events are shown to admin keys only. Sign in with an admin key to see them.'));
    return;
  }
  await listInto(results, () => getIfAvailable('/v1/parked', { limit: 500 }), (body) => (!body ? unavailable('The parked events list') : table([
    { label: 'Parked', cell: (row) => time(row.parkedAt) },
    { label: 'Consumer', cell: (row) => h('span', { class: 'mono' }, row.consumer) },
    { label: 'Position', cell: (row) => String(row.position) },
    { label: 'Stream', cell: (row) => (row.subscriberId ? subscriberLink(row.subscriberId) : h('span', { class: 'mono' }, row.streamId)) },
    { label: 'Type', cell: (row) => row.type },
    { label: 'Reason', cell: (row) => h('span', { class: 'error-text' }, row.reason) },
  ], body.parked, { empty: 'No parked events: every projection handled every event.', caption: 'Parked events' })));
}

export async function renderInvalidProducts(main, values, { focusHeading }) {
  const results = h('div', {});
  replace(main, pageHead('Invalid product identifiers',
    'Identifiers the App Store reported invalid on devices. One in the catalog usually means it is missing or not cleared for sale in App Store Connect.', focusHeading),
  h('section', { class: 'card' }, results));
  await listInto(results, () => get('/v1/products/invalid'), (body) => table([
    { label: 'Identifier', cell: (row) => h('span', { class: 'mono' }, row.identifier) },
    { label: 'In catalog', cell: (row) => (row.inCatalog ? badge('yes', 'warn') : badge('no', 'off')) },
    { label: 'Reports', cell: (row) => String(row.reports) },
    { label: 'Devices', cell: (row) => String(row.devices) },
    { label: 'First reported', cell: (row) => time(row.firstReportedAt) },
    { label: 'Last reported', cell: (row) => time(row.lastReportedAt) },
  ], body.identifiers, { empty: 'No device reported an invalid identifier.', caption: 'Invalid product identifiers' }));
}
