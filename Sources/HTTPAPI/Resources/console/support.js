// Support actions on one subscriber (admin keys only): grant an entitlement
// for a while, revoke a grant, read who looked at the subscriber (the audit),
// and erase the subscriber. Every action asks for a reason and a
// confirmation; erasure asks for the subscriber id to be typed.

import { ApiError, get, send, session } from './api.js';
import { badge, failure, formatTime, h, replace, section, table, time } from './dom.js';

const lengths = [
  { value: 'P7D', label: '7 days' },
  { value: 'P30D', label: '30 days' },
  { value: 'P3M', label: '3 months' },
  { value: 'P1Y', label: '1 year' },
];

function field(id, label, control, help) {
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, help ? h('p', { class: 'muted', id: `${id}-help` }, help) : null);
}

/** The grants recorded in the history: each with its revocation, if any. */
export function grantsFromHistory(events) {
  const grants = new Map();
  for (const event of events) {
    if (event.type === 'granted' && event.data) grants.set(event.data.grantId, { ...event.data, revoked: null });
    if (event.type === 'grant_revoked' && event.data && grants.has(event.data.grantId)) {
      grants.get(event.data.grantId).revoked = event.data;
    }
  }
  return [...grants.values()];
}

function who(stamp) {
  if (!stamp) return '—';
  return `${stamp.actor || 'unnamed'} (${stamp.role}, key ${stamp.keyFingerprint})`;
}

/** The grants card: the list with a revoke action, and the form to grant. */
export function grantsCard(id, events, entitlementIDs, reload) {
  const admin = session.role === 'admin';
  const now = Date.now();
  const grants = grantsFromHistory(events);
  const message = h('p', { class: 'action-message', id: 'grant-message', role: 'status', 'aria-live': 'polite' });
  const list = table([
    { label: 'Entitlement', cell: (grant) => h('span', { class: 'mono' }, grant.entitlement) },
    { label: 'From', cell: (grant) => time(grant.startsAt) },
    { label: 'Until', cell: (grant) => time(grant.revoked ? grant.revoked.date : grant.endsAt) },
    { label: 'Status', cell: (grant) => statusOf(grant, now) },
    { label: 'Granted by', cell: (grant) => who(grant.grantedBy) },
    { label: 'Reason', cell: (grant) => [grant.reason, grant.revoked && grant.revoked.reason ? h('div', { class: 'muted' }, `Revoked: ${grant.revoked.reason}`) : null] },
    { label: '', cell: (grant) => (admin && !grant.revoked && Date.parse(grant.endsAt) > now ? revokeControl(id, grant, message, reload) : null) },
  ], grants, { empty: 'No grants were given to this subscriber.', caption: 'Grants', rowClass: (grant) => `grant grant-${grant.grantId}` });
  return section('Grants', { id: 'grants' },
    list,
    admin ? grantForm(id, entitlementIDs, message, reload) : h('p', { class: 'note', id: 'grants-admin-only' }, 'Granting and revoking need an admin key.'),
    message);
}

function statusOf(grant, now) {
  if (grant.revoked) return badge('revoked', 'bad');
  if (Date.parse(grant.endsAt) <= now) return badge('ended', 'off');
  if (Date.parse(grant.startsAt) > now) return badge('scheduled', 'info');
  return badge('active', 'ok');
}

function grantForm(id, entitlementIDs, message, reload) {
  const entitlement = h('select', { id: 'grant-entitlement', name: 'entitlement', required: true },
    entitlementIDs.map((value) => h('option', { value }, value)));
  const length = h('select', { id: 'grant-length', name: 'length' }, lengths.map((item) => h('option', { value: item.value, selected: item.value === 'P30D' }, item.label)));
  const reason = h('textarea', { id: 'grant-reason', name: 'reason', rows: '2', maxlength: '1000', required: true });
  const error = h('p', { class: 'field-error', id: 'grant-error', role: 'alert' });
  const confirmation = h('div', { class: 'confirm', id: 'grant-confirm', hidden: true });
  const review = h('button', { type: 'submit', id: 'grant-review' }, 'Review grant…');
  const form = h('form', {
    class: 'action-form', id: 'grant-form',
    onsubmit: (event) => {
      event.preventDefault();
      error.textContent = '';
      if (!reason.value.trim()) {
        error.textContent = 'Give a reason: it is shown in explain and kept in the ledger.';
        reason.focus();
        return;
      }
      const label = lengths.find((item) => item.value === length.value).label;
      const confirm = h('button', {
        type: 'button', id: 'grant-confirm-button',
        onclick: async () => {
          confirm.disabled = true;
          try {
            const answer = await send('POST', `/v1/subscribers/${encodeURIComponent(id)}/grants`,
              { entitlement: entitlement.value, duration: length.value, reason: reason.value.trim() });
            message.textContent = `Granted ${answer.entitlement} until ${formatTime(answer.endsAt)} (grant ${answer.id}).`;
            reload(message.textContent);
          } catch (failed) {
            error.textContent = failed.message;
            confirm.disabled = false;
          }
        },
      }, 'Confirm grant');
      replace(confirmation,
        h('p', {}, 'Grant ', h('strong', { class: 'mono' }, entitlement.value), ` for ${label} to subscriber `,
          h('strong', { class: 'mono' }, id), ', starting now. Reason: ', h('em', {}, reason.value.trim())),
        h('div', { class: 'buttons' }, confirm,
          h('button', { type: 'button', class: 'secondary', id: 'grant-cancel', onclick: () => { confirmation.hidden = true; review.focus(); } }, 'Cancel')));
      confirmation.hidden = false;
      confirm.focus();
    },
  },
  h('h3', {}, 'Grant an entitlement'),
  h('div', { class: 'field-row' },
    field('grant-entitlement', 'Entitlement', entitlement),
    field('grant-length', 'For', length)),
  field('grant-reason', 'Reason (required)', reason),
  h('div', { class: 'buttons' }, review),
  error,
  confirmation);
  return form;
}

function revokeControl(id, grant, message, reload) {
  const box = h('div', { class: 'revoke' });
  const open = h('button', {
    type: 'button', class: 'secondary revoke-open', 'data-grant': grant.grantId,
    onclick: () => {
      const reason = h('input', { type: 'text', class: 'revoke-reason', id: `revoke-reason-${grant.grantId}`, maxlength: '1000', required: true });
      const error = h('p', { class: 'field-error', role: 'alert' });
      const confirm = h('button', {
        type: 'button', class: 'danger revoke-confirm',
        onclick: async () => {
          if (!reason.value.trim()) {
            error.textContent = 'Give a reason for revoking it.';
            reason.focus();
            return;
          }
          confirm.disabled = true;
          try {
            const answer = await send('DELETE', `/v1/subscribers/${encodeURIComponent(id)}/grants/${encodeURIComponent(grant.grantId)}`,
              { reason: reason.value.trim() });
            message.textContent = `Revoked grant ${answer.id} at ${formatTime(answer.revokedAt)}.`;
            reload(message.textContent);
          } catch (failed) {
            error.textContent = failed.message;
            confirm.disabled = false;
          }
        },
      }, `Confirm revoking ${grant.entitlement}`);
      replace(box,
        h('label', { for: `revoke-reason-${grant.grantId}` }, 'Reason for revoking (required)'),
        reason,
        h('div', { class: 'buttons' }, confirm,
          h('button', { type: 'button', class: 'secondary', onclick: () => replace(box, open) }, 'Cancel')),
        error);
      reason.focus();
    },
  }, 'Revoke…');
  return replace(box, open);
}

/** Who read or changed this subscriber, newest first (admin keys only). */
export async function auditCard(id) {
  if (session.role !== 'admin') {
    return section('Audit', { id: 'audit' }, h('p', { class: 'note' }, 'The audit of who looked at this subscriber needs an admin key.'));
  }
  let entries = [];
  let after = null;
  try {
    // At most five pages of a thousand: the latest are what support asks about.
    for (let page = 0; page < 5; page += 1) {
      const answer = await get('/v1/audit', { subscriberId: id, limit: 1000, after });
      entries = entries.concat(answer.entries);
      after = answer.nextCursor;
      if (!after) break;
    }
  } catch (error) {
    return section('Audit', { id: 'audit' }, failure(error));
  }
  const latest = entries.slice(-100).reverse();
  return section('Audit', { id: 'audit', actions: h('span', { class: 'muted' }, `${entries.length}${after ? '+' : ''} entries, newest first`) },
    table([
      { label: 'When', cell: (row) => time(row.at) },
      { label: 'Who', cell: (row) => row.actor || h('span', { class: 'muted' }, 'unnamed') },
      { label: 'Role', cell: (row) => row.role },
      { label: 'Key', cell: (row) => h('span', { class: 'mono' }, row.keyFingerprint) },
      { label: 'Action', cell: (row) => h('span', { class: 'mono' }, row.action) },
      { label: 'Status', cell: (row) => badge(String(row.status), row.status < 400 ? 'ok' : 'bad') },
    ], latest, { empty: 'Nobody has looked at this subscriber yet.', caption: 'Audit', rowClass: () => 'audit-entry' }));
}

/**
 * Erasure behind a typed confirmation (admin keys only): a reason, then the
 * subscriber id typed exactly; only then is the button enabled.
 */
export function erasureCard(id, reload) {
  if (session.role !== 'admin') return null;
  const reason = h('textarea', { id: 'erase-reason', name: 'reason', rows: '2', maxlength: '1000', required: true });
  const typed = h('input', {
    id: 'erase-typed', name: 'typed', type: 'text', autocomplete: 'off', spellcheck: 'false', required: true,
    'aria-describedby': 'erase-typed-help',
  });
  const error = h('p', { class: 'field-error', id: 'erase-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'danger', id: 'erase-submit', disabled: true }, 'Erase this subscriber for good');
  const ready = () => typed.value === id && reason.value.trim() !== '';
  const check = () => { button.disabled = !ready(); };
  typed.addEventListener('input', check);
  reason.addEventListener('input', check);
  const form = h('form', {
    class: 'action-form', id: 'erase-form',
    onsubmit: async (event) => {
      event.preventDefault();
      if (!ready()) return;
      button.disabled = true;
      error.textContent = '';
      try {
        await send('DELETE', `/v1/subscribers/${encodeURIComponent(id)}`, { reason: reason.value.trim() });
        reload(`Subscriber ${id} was erased.`);
      } catch (failed) {
        error.textContent = failed instanceof ApiError && failed.isUnavailable
          ? 'This server cannot erase subscribers yet.'
          : failed.message;
        check();
      }
    },
  },
  h('p', { id: 'erase-explanation' },
    h('strong', {}, 'Erasure is permanent and cannot be undone. '),
    'The subscriber\u2019s personal data (its id, device ids and account token) becomes unreadable everywhere in the ledger; ',
    'afterwards this page, its history and its state answer only that it was erased, and new facts for this id are refused. ',
    'Counts across subscribers keep their numbers; the audit keeps its entries under a pseudonym.'),
  field('erase-reason', 'Reason (required)', reason),
  field('erase-typed', 'Type the subscriber id to confirm', typed, ['Type ', h('span', { class: 'mono' }, id), ' exactly.']),
  h('div', { class: 'buttons' }, button),
  error);
  return section('Erase subscriber', { id: 'erasure' }, form);
}
