// The API as the console uses it: the key from sessionStorage as a bearer
// token, the contract's error shape turned into ApiError.

const KEY = 'subledger.console.key';
const ROLE = 'subledger.console.role';
const ACTOR = 'subledger.console.actor';

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  get role() { return sessionStorage.getItem(ROLE); },
  /** The name typed at sign-in, sent as Subledger-Actor (the audit records it). */
  get actor() { return sessionStorage.getItem(ACTOR); },
  save(key, role, actor) {
    sessionStorage.setItem(KEY, key);
    sessionStorage.setItem(ROLE, role);
    if (actor) sessionStorage.setItem(ACTOR, actor);
  },
  clear() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(ROLE);
    sessionStorage.removeItem(ACTOR);
  },
};

/** The headers of every call: the key, and who is acting. */
function headers(key, extra) {
  const fields = { Authorization: `Bearer ${key}`, Accept: 'application/json', ...extra };
  // A header value must be Latin-1: other characters are percent-encoded.
  const actor = session.actor;
  if (actor) fields['Subledger-Actor'] = /^[\x20-\x7e]*$/.test(actor) ? actor : encodeURIComponent(actor);
  return fields;
}

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }

  /** The server has no such route (an endpoint that has not shipped yet). */
  get isUnavailable() {
    return (this.status === 404 && this.code === 'not_found') || this.status === 405 || this.status === 501;
  }
}

let onUnauthorized = () => {};

/** Called when a key that signed in is refused later (keys rotated). */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

function query(params) {
  const pairs = Object.entries(params || {})
    .filter(([, value]) => value !== undefined && value !== null && value !== '')
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
  return pairs.length ? `?${pairs.join('&')}` : '';
}

/** GET a JSON document; throws ApiError. */
export async function get(url, params, { key = session.key, quiet = false } = {}) {
  return request('GET', url + query(params), undefined, { key, quiet });
}

/** GET a file in another format (`accept`, e.g. text/csv) as a Blob, for a download; throws ApiError. */
export async function getBlob(url, params, accept) {
  return request('GET', url + query(params), undefined, { key: session.key, quiet: false, accept });
}

/** POST or DELETE a JSON body (an action); answers the JSON answer, throws ApiError. */
export async function send(method, url, body) {
  return request(method, url, body, { key: session.key, quiet: false });
}

async function request(method, url, payload, { key, quiet, accept }) {
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: headers(key, { ...(payload === undefined ? {} : { 'Content-Type': 'application/json' }), ...(accept ? { Accept: accept } : {}) }),
      body: payload === undefined ? undefined : JSON.stringify(payload),
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch {
    throw new ApiError(0, 'network', 'The server could not be reached. Check that it is running, then try again.');
  }
  if (accept && response.ok) return response.blob();
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (!response.ok) {
    const error = (body && body.error) || {};
    const failure = new ApiError(response.status, error.code || `http_${response.status}`,
      error.message || `The server answered ${response.status} ${response.statusText}.`, error.field);
    if (response.status === 401 && !quiet) onUnauthorized(failure);
    throw failure;
  }
  return body;
}

/** GET, answering null when the server does not have the endpoint yet. */
export async function getIfAvailable(url, params) {
  try {
    return await get(url, params);
  } catch (error) {
    if (error instanceof ApiError && error.isUnavailable) return null;
    throw error;
  }
}

/**
 * Checks a key: support or admin may use the console. Answers the role, or
 * throws ApiError with a message for the person signing in.
 */
export async function checkKey(key) {
  try {
    await get('/v1/reminders', { limit: 1 }, { key, quiet: true });
  } catch (error) {
    if (error.status === 401) {
      throw new ApiError(401, error.code, 'That key was not accepted by this server. Check that you pasted the whole key, then try again.');
    }
    if (error.status === 403) {
      throw new ApiError(403, error.code, 'That key is valid, but its role cannot read across subscribers. Use a support or admin key.');
    }
    throw error;
  }
  try {
    await get('/v1/parked', { limit: 1 }, { key, quiet: true });
    return 'admin';
  } catch (error) {
    if (error.status === 403) return 'support';
    if (error instanceof ApiError && error.isUnavailable) return 'support';
    throw error;
  }
}
