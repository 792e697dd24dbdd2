// Google Play on the timeline. A Play fact is a state Google reported when
// the service fetched the purchase, so a token's lane is drawn from its
// fetched states in the order they were observed: each speaks from when it
// was observed (the first from the purchase's start) until the next one, or
// until its own expiryTime if that comes first. A state that grants
// (active, canceled) is a term, one in its grace period a grace bar, one on
// hold, paused or pending a held stretch; a voided purchase is a refund mark
// and revoked from then on; a purchase that replaced another (upgrade,
// downgrade, resubscribe) says so with a transfer mark.

import { formatTime, ms } from './dom.js';

const GRANTING = ['SUBSCRIPTION_STATE_ACTIVE', 'SUBSCRIPTION_STATE_CANCELED'];
const HELD = {
  SUBSCRIPTION_STATE_ON_HOLD: 'on hold',
  SUBSCRIPTION_STATE_PAUSED: 'paused',
  SUBSCRIPTION_STATE_PENDING: 'pending',
  SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED: 'pending, canceled',
};

function shortToken(token) {
  return token.length > 14 ? `${token.slice(0, 12)}…` : token;
}

/**
 * Adds the Play subscriptions known at `atTime` to their lanes.
 * `lane(group, environment)` finds or makes a lane; the group of a token
 * comes from the state's subscriptions, else its product.
 */
export function addPlayItems({ state, events, atTime, lane }) {
  const known = (time) => time !== null && time <= atTime;
  const groups = new Map();
  for (const subscription of state.subscriptions || []) {
    if (subscription.store === 'google_play') groups.set(subscription.originalTransactionId, subscription.group);
  }
  const tokens = new Map();
  const voids = new Map();
  for (const event of events) {
    const data = event.data || {};
    if (event.type === 'google_play_purchase' && data.kind === 'subscription' && known(ms(data.observedAt))) {
      if (!tokens.has(data.purchaseToken)) tokens.set(data.purchaseToken, []);
      tokens.get(data.purchaseToken).push(data);
    }
    if (event.type === 'google_play_voided' && known(ms(data.voidedAt))) voids.set(data.purchaseToken, data);
  }
  for (const [token, states] of tokens) {
    states.sort((a, b) => ms(a.observedAt) - ms(b.observedAt));
    const first = states[0];
    const product = first.basePlanId ? `${first.productId}:${first.basePlanId}` : first.productId;
    const target = lane(groups.get(token) || product, first.environment);
    const voided = voids.get(token);
    const voidedAt = voided ? ms(voided.voidedAt) : null;
    const name = `${product} (token ${shortToken(token)})`;
    states.forEach((fetched, index) => {
      const from = index === 0 ? Math.min(ms(fetched.startTime), ms(fetched.observedAt)) : ms(fetched.observedAt);
      const next = index + 1 < states.length ? ms(states[index + 1].observedAt) : null;
      const expiry = fetched.expiryTime ? ms(fetched.expiryTime) : null;
      const said = `as Google Play said at ${formatTime(fetched.observedAt)}`;
      if (GRANTING.includes(fetched.state) || fetched.state === 'SUBSCRIPTION_STATE_IN_GRACE_PERIOD') {
        if (expiry === null || expiry <= from) return;
        let end = next === null ? expiry : Math.min(expiry, next);
        if (voidedAt !== null) end = Math.min(end, Math.max(from, voidedAt));
        if (end <= from) return;
        const grace = fetched.state === 'SUBSCRIPTION_STATE_IN_GRACE_PERIOD';
        target.items.push({
          kind: grace ? 'grace' : 'term', start: from, end, label: grace ? undefined : shortToken(token),
          title: `${name}: ${grace ? 'in its grace period' : 'paid'} until ${formatTime(fetched.expiryTime)}, ${said}`
            + (fetched.orderId ? ` (order ${fetched.orderId})` : '') + (fetched.autoRenew ? '; renews' : '; auto-renew off'),
        });
      } else if (HELD[fetched.state]) {
        // It grants nothing from when it was observed, or its expiryTime if
        // earlier (as the ledger judges it), until the next state.
        const start = expiry === null ? ms(fetched.observedAt) : Math.min(ms(fetched.observedAt), expiry);
        const end = next ?? Math.max(start, atTime);
        target.items.push({
          kind: 'held', start, end: Math.max(end, start + 1),
          title: `${name}: ${HELD[fetched.state]} ${said}; it grants nothing`,
        });
      } else if (fetched.state === 'SUBSCRIPTION_STATE_EXPIRED') {
        target.items.push({ kind: 'expiry', time: Math.min(expiry ?? from, from), title: `${name}: expired ${said}` });
      }
      if (index === 0 && fetched.linkedPurchaseToken) {
        target.items.push({
          kind: 'transfer', time: ms(fetched.startTime),
          title: `${name} replaces token ${shortToken(fetched.linkedPurchaseToken)} (upgrade, downgrade or resubscribe)`,
        });
      }
    });
    if (voidedAt !== null) {
      const last = states[states.length - 1];
      target.items.push({
        kind: 'refund', time: voidedAt,
        title: `${name} voided by Google Play ${formatTime(voided.voidedAt)}; access ended then`,
      });
      const paidUntil = last.expiryTime ? ms(last.expiryTime) : null;
      if (paidUntil !== null && paidUntil > voidedAt) {
        target.items.push({ kind: 'revoked', start: voidedAt, end: paidUntil, title: `Revoked from ${formatTime(voided.voidedAt)}: ${name}` });
      }
    }
  }
}
