// Webhook deliveries (admin keys only): the change feed's webhook endpoints,
// how far behind each one is (pending deliveries and the age of the oldest),
// and one endpoint's deliveries by status, with a retry behind a
// confirmation. The endpoint and status live in the address
// (#/deliveries?webhook=whk_…&status=failed).

import { get, getIfAvailable, send, session } from './api.js';
import { failure, formatTime, h, replace, section, subscriberLink, table, time, unavailable } from './dom.js';
import { filterForm, pageHead, statusBadge } from './lists.js';

/** The most pending deliveries read per endpoint to find the oldest. */
const PENDING_LIMIT = 1000;

/** "45 s", "12 min", "3 h 5 min", "2 d 4 h": how long ago an instant was. */
export function age(iso, now = Date.now()) {
  const seconds = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** Pending deliveries of one endpoint: how many (at most PENDING_LIMIT) and the oldest. */
async function backlog(endpoint) {
  const answer = await get(`/v1/webhooks/${encodeURIComponent(endpoint.id)}/deliveries`, { status: 'pending', limit: PENDING_LIMIT });
  const rows = answer.deliveries;
  // Newest first: the oldest is the last one read.
  return { count: rows.length, more: rows.length >= PENDING_LIMIT, oldest: rows.length ? rows[rows.length - 1] : null };
}

function oldestCell(pending) {
  if (pending instanceof Error) return h('span', { class: 'error-text' }, pending.message);
  if (!pending.oldest) return h('span', { class: 'muted' }, 'none pending');
  return h('span', { class: 'oldest-pending', title: `created ${formatTime(pending.oldest.createdAt)}` },
    `${pending.more ? 'at least ' : ''}${age(pending.oldest.createdAt)}`);
}

export async function renderDeliveries(main, values, context, notice = null) {
  const { focusHeading } = context;
  const endpointsBox = h('div', {}, h('p', { class: 'loading', role: 'status' }, 'Loading…'));
  const deliveriesBox = h('div', {});
  replace(main,
    pageHead('Webhook deliveries',
      'The change feed\u2019s webhook endpoints and their deliveries. A receiver that keeps failing holds its pending deliveries back: retry one once the receiver is fixed.',
      focusHeading),
    notice ? h('p', { class: 'action-message', id: 'page-message', role: 'status' }, notice) : null,
    section('Endpoints', { id: 'webhook-endpoints' }, endpointsBox),
    deliveriesBox);
  if (session.role !== 'admin') {
    replace(endpointsBox, h('p', { class: 'note', id: 'deliveries-admin-only' },
      'Webhook endpoints and their deliveries are shown to admin keys only. Sign in with an admin key to see them.'));
    return;
  }

  let endpoints;
  try {
    const answer = await getIfAvailable('/v1/webhooks');
    if (!answer) {
      replace(endpointsBox, unavailable('Webhook endpoints'));
      return;
    }
    endpoints = answer.webhooks;
  } catch (error) {
    replace(endpointsBox, failure(error));
    return;
  }
  const backlogs = await Promise.all(endpoints.map((endpoint) => backlog(endpoint).catch((error) => error)));
  const pendingOf = new Map(endpoints.map((endpoint, index) => [endpoint.id, backlogs[index]]));
  replace(endpointsBox, table([
    { label: 'Endpoint', cell: (row) => h('a', { class: 'mono', href: `#/deliveries?webhook=${encodeURIComponent(row.id)}` }, row.id) },
    { label: 'URL', cell: (row) => h('span', { class: 'mono' }, row.url) },
    { label: 'Types', cell: (row) => (row.types.length ? row.types.join(', ') : h('span', { class: 'muted' }, 'every type')) },
    { label: 'Description', cell: (row) => row.description || '—' },
    { label: 'Created', cell: (row) => time(row.createdAt) },
    {
      label: 'Pending',
      cell: (row) => {
        const pending = pendingOf.get(row.id);
        return pending instanceof Error ? '—' : `${pending.count}${pending.more ? '+' : ''}`;
      },
    },
    { label: 'Oldest pending', cell: (row) => oldestCell(pendingOf.get(row.id)) },
  ], endpoints, {
    empty: 'No webhook endpoint is registered: POST /v1/webhooks adds one (see the webhooks documentation).',
    caption: 'Webhook endpoints',
    rowClass: (row) => `webhook webhook-${row.id}`,
  }));
  if (endpoints.length === 0) return;

  const chosen = endpoints.find((endpoint) => endpoint.id === values.get('webhook')) || endpoints[0];
  const status = ['pending', 'sent', 'failed'].includes(values.get('status')) ? values.get('status') : '';
  const form = filterForm('deliveries', [
    { name: 'webhook', label: 'Endpoint', type: 'select', options: endpoints.map((endpoint) => [endpoint.id, endpoint.description ? `${endpoint.id} · ${endpoint.description.slice(0, 40)}` : endpoint.id]) },
    { name: 'status', label: 'Status', type: 'select', options: [['', 'any'], ['pending', 'pending'], ['sent', 'sent'], ['failed', 'failed']] },
  ], new URLSearchParams({ webhook: chosen.id, status }), [['Failed', `webhook=${encodeURIComponent(chosen.id)}&status=failed`],
    ['Pending', `webhook=${encodeURIComponent(chosen.id)}&status=pending`]]);
  const results = h('div', {}, h('p', { class: 'loading', role: 'status' }, 'Loading…'));
  const message = h('p', { class: 'action-message', id: 'delivery-message', role: 'status', 'aria-live': 'polite' });
  replace(deliveriesBox, section('Deliveries', {
    id: 'deliveries',
    actions: h('span', { class: 'muted' }, 'to ', h('span', { class: 'mono', id: 'deliveries-url' }, chosen.url), ', newest first'),
  }, form, message, results));

  const reload = (text) => renderDeliveries(main, values, context, text);
  try {
    const answer = await get(`/v1/webhooks/${encodeURIComponent(chosen.id)}/deliveries`, { status, limit: 200 });
    replace(results, table([
      {
        label: 'Delivery',
        cell: (row) => [h('span', { class: 'mono delivery-id' }, row.id),
          h('div', { class: 'muted' }, 'change ', h('span', { class: 'mono' }, row.changeId)),
          h('div', { class: 'muted' }, 'created ', time(row.createdAt))],
      },
      { label: 'Subscriber', cell: (row) => subscriberLink(row.subscriberId) },
      { label: 'Sequence', cell: (row) => String(row.sequence) },
      { label: 'Status', cell: (row) => statusBadge(row.status) },
      { label: 'Attempts', cell: (row) => String(row.attempts) },
      { label: 'Next attempt', cell: (row) => time(row.nextAttemptAt) },
      { label: 'Last error', cell: (row) => (row.lastError ? h('span', { class: 'error-text' }, row.lastError) : '—') },
      { label: 'Sent', cell: (row) => time(row.sentAt) },
      { label: '', cell: (row) => (retryable(row) ? retryControl(chosen, row, message, reload) : null) },
    ], answer.deliveries, {
      empty: status ? `No ${status} delivery to this endpoint.` : 'Nothing was delivered to this endpoint yet.',
      caption: 'Deliveries',
      rowClass: (row) => `delivery delivery-${row.status}`,
    }));
  } catch (error) {
    replace(results, failure(error));
  }
}

/** A failed delivery, or a pending one whose attempts failed (it waits for its next attempt). */
function retryable(row) {
  return row.status === 'failed' || (row.status === 'pending' && row.attempts > 0 && Boolean(row.lastError));
}

function retryControl(endpoint, delivery, message, reload) {
  const box = h('div', { class: 'retry' });
  const open = h('button', {
    type: 'button', class: 'secondary retry-open', 'data-delivery': delivery.id,
    onclick: () => {
      const error = h('p', { class: 'field-error', role: 'alert' });
      const confirm = h('button', {
        type: 'button', class: 'retry-confirm',
        onclick: async () => {
          confirm.disabled = true;
          try {
            const answer = await send('POST',
              `/v1/webhooks/${encodeURIComponent(endpoint.id)}/deliveries/${encodeURIComponent(delivery.id)}/retry`);
            message.textContent = `Delivery ${answer.id} is ${answer.status} again: it is sent at once, from a first attempt.`;
            reload(message.textContent);
          } catch (failed) {
            error.textContent = failed.message;
            confirm.disabled = false;
          }
        },
      }, 'Confirm retry');
      replace(box,
        h('p', { class: 'retry-question' }, `Send delivery ${delivery.id} (change `, h('span', { class: 'mono' }, delivery.changeId),
          ') again from a first attempt? Later changes of this subscriber wait until it succeeds or fails again.'),
        h('div', { class: 'buttons' }, confirm,
          h('button', { type: 'button', class: 'secondary retry-cancel', onclick: () => replace(box, open) }, 'Cancel')),
        error);
      confirm.focus();
    },
  }, delivery.status === 'failed' ? 'Retry…' : 'Retry now…');
  return replace(box, open);
}
