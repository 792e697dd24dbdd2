// The console's shell: sign-in, the search box, navigation between pages
// (hash routes, so /console is the only page the server serves).

import { renderAnalytics } from './analytics.js';
import { ApiError, checkKey, get, session, whenUnauthorized } from './api.js';
import { renderDeliveries } from './deliveries.js';
import { h, replace, subscriberHref } from './dom.js';
import { renderInvalidProducts, renderNotifications, renderParked, renderReminders, renderSubscriptions } from './lists.js';
import { renderOverview } from './overview.js';
import { renderSubscriber } from './subscriber.js';

const pages = {
  '': renderOverview,
  analytics: renderAnalytics,
  subscriber: renderSubscriber,
  subscriptions: renderSubscriptions,
  reminders: renderReminders,
  notifications: renderNotifications,
  parked: renderParked,
  products: renderInvalidProducts,
  deliveries: renderDeliveries,
};

const $ = (id) => document.getElementById(id);
let userNavigated = false;
let fromSearch = false;
let renderCount = 0;

function showSignIn(message) {
  $('app').hidden = true;
  $('signin').hidden = false;
  $('signin-message').textContent = message || '';
  $('signin-key').value = '';
  ($('signin-name').value ? $('signin-key') : $('signin-name')).focus();
}

function showApp() {
  $('signin').hidden = true;
  $('app').hidden = false;
  $('role').textContent = `${session.role} key`;
  $('role').title = session.actor ? `Signed in as ${session.actor}` : '';
  render();
}

async function signIn(event) {
  event.preventDefault();
  const key = $('signin-key').value.trim();
  const name = $('signin-name').value.trim();
  const message = $('signin-message');
  if (!name) {
    message.textContent = 'Enter your name first: the audit records who looked.';
    $('signin-name').focus();
    return;
  }
  if (!key) {
    message.textContent = 'Paste an API key first.';
    return;
  }
  const button = $('signin-submit');
  button.disabled = true;
  message.textContent = 'Checking the key…';
  try {
    const role = await checkKey(key);
    session.save(key, role, name);
    message.textContent = '';
    showApp();
  } catch (error) {
    message.textContent = error.message;
    $('signin-key').focus();
  } finally {
    button.disabled = false;
  }
}

function signOut() {
  session.clear();
  location.hash = '#/';
  showSignIn('Signed out. The key was removed from this tab.');
}

/** The search box: a transaction or original transaction id leads to its owner, anything else is tried as a subscriber id. */
async function search(event) {
  event.preventDefault();
  const text = $('search-input').value.trim();
  const message = $('search-message');
  if (!text) return;
  message.textContent = 'Searching…';
  try {
    const owner = await findSubscriber(text);
    if (owner) {
      message.textContent = owner.via ? `${owner.via} belongs to subscriber ${owner.id}.` : '';
      userNavigated = true;
      fromSearch = true;
      const target = subscriberHref(owner.id);
      if (location.hash === target) {
        fromSearch = false;
        render();
      } else {
        location.hash = target;
      }
    } else {
      message.textContent = `Nothing found for "${text}": it is not a subscriber id, a transaction, original transaction or order id in this ledger.`;
    }
  } catch (error) {
    message.textContent = error.message;
  }
}

/**
 * Whom the text leads to: the owner of a transaction or original transaction
 * id, a subscriber id, else the owner of an App Store order id (where the
 * server has the orders endpoint). Null when none.
 */
async function findSubscriber(text) {
  const id = encodeURIComponent(text);
  const notFound = (error) => error instanceof ApiError && (error.status === 404 || error.status === 400);
  try {
    const transaction = await get(`/v1/transactions/${id}`);
    return { id: transaction.subscriberId, via: `Transaction ${text}` };
  } catch (error) {
    if (!notFound(error)) throw error;
  }
  try {
    const state = await get(`/v1/subscribers/${id}`);
    return { id: state.subscriberId };
  } catch (error) {
    if (!notFound(error)) throw error;
  }
  try {
    const order = await get(`/v1/orders/${id}`);
    const owner = order.subscriberId || (order.transactions || []).map((item) => item.subscriberId).find(Boolean);
    return owner ? { id: owner, via: `Order ${text}` } : null;
  } catch (error) {
    // No such order, no orders endpoint, or the App Store API not configured.
    if (error instanceof ApiError && error.status !== 401) return null;
    throw error;
  }
}

function route() {
  const hash = location.hash.startsWith('#/') ? location.hash.slice(2) : '';
  const split = hash.indexOf('?');
  const name = split < 0 ? hash : hash.slice(0, split);
  const query = split < 0 ? '' : hash.slice(split + 1);
  return { name: name.replace(/\/$/, ''), params: new URLSearchParams(query) };
}

async function render() {
  if (!session.key) return;
  const { name, params } = route();
  const page = pages[name];
  const main = $('main');
  for (const link of document.querySelectorAll('#nav a')) {
    const target = link.getAttribute('href').slice(2);
    if (target === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  renderCount += 1;
  const focus = renderCount > 1 || userNavigated;
  let heading = null;
  const context = { focusHeading: (element) => { heading = element; } };
  if (!page) {
    replace(main, h('h1', {}, 'Not found'), h('p', {}, 'No such page in the console. ', h('a', { href: '#/' }, 'Go to the overview')));
    return;
  }
  const rendering = page(main, params, context);
  // Keyboard and screen reader users land on the new page's heading.
  if (focus && heading) heading.focus();
  document.title = `${main.querySelector('h1') ? main.querySelector('h1').textContent : 'Console'} · Subledger console`;
  try {
    await rendering;
  } catch (error) {
    replace(main, h('h1', {}, 'Something went wrong'), h('p', { class: 'error', role: 'alert' }, error.message || String(error)));
  }
}

function start() {
  $('signin-form').addEventListener('submit', signIn);
  $('search').addEventListener('submit', search);
  $('sign-out').addEventListener('click', signOut);
  $('skip-link').addEventListener('click', (event) => {
    event.preventDefault();
    $('main').focus();
  });
  window.addEventListener('hashchange', () => {
    if (!location.hash.startsWith('#/') && location.hash !== '') return;
    userNavigated = true;
    if (!fromSearch) $('search-message').textContent = '';
    fromSearch = false;
    render();
  });
  whenUnauthorized(() => {
    session.clear();
    showSignIn('The server no longer accepts this key. Sign in again.');
  });
  if (session.key) showApp();
  else showSignIn();
}

start();
