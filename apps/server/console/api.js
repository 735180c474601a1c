// The console's only way to laneqd: its public HTTP API (docs/api.md), with the operator's
// bearer token from this tab's sessionStorage. Errors become ApiError with the API's code,
// number and message; every answer tells the token state listeners whether the token worked.

const token_key = 'laneq.console.token';

/** The token the operator entered ('' when none). */
export function token() {
  return sessionStorage.getItem(token_key) || '';
}

/** Keeps `t` for this tab only (sessionStorage; never in the URL); '' forgets it. */
export function set_token(t) {
  if (t) sessionStorage.setItem(token_key, t);
  else sessionStorage.removeItem(token_key);
  notify(t ? 'unknown' : 'none');
}

/** An answer that is not 2xx, or no answer at all (status 0). */
export class api_error extends Error {
  constructor(status, code, number, message) {
    super(message);
    this.status = status;
    this.code = code;
    this.number = number;
  }
  /** "404 queue_not_found (3): no queue 'x'" */
  describe() {
    const num = this.number ? ` (${this.number})` : '';
    return `${this.status ? this.status + ' ' : ''}${this.code}${num}: ${this.message}`;
  }
}

const listeners = new Set();
let last_state = 'unknown';

/**
 * Calls `fn(state)` whenever the token's state changes: 'ok' (an answer came with it),
 * 'needed' (401 without a token), 'invalid' (401 with one), 'none' or 'unknown'.
 */
export function on_token_state(fn) {
  listeners.add(fn);
  fn(last_state);
}

function notify(state) {
  if (state === last_state) return;
  last_state = state;
  for (const fn of listeners) fn(state);
}

/**
 * One API call: `body` is an object (sent as JSON), a string (sent as is: a spec typed by hand)
 * or undefined. Resolves to the parsed answer; rejects with an api_error.
 */
export async function call(method, path, body) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, {method, headers, body: payload, cache: 'no-store'});
  } catch (e) {
    throw new api_error(0, 'unreachable', 0, `laneqd did not answer (${e.message})`);
  }
  const text = await res.text();
  let doc = null;
  try {
    doc = text ? JSON.parse(text) : {};
  } catch {
    doc = null;
  }
  if (res.status === 401) notify(t ? 'invalid' : 'needed');
  else if (res.status !== 403) notify('ok');
  if (!res.ok) {
    const e = doc && doc.error ? doc.error : {};
    throw new api_error(res.status, e.code || `http_${res.status}`, e.number || 0,
                        e.message || text.slice(0, 200) || res.statusText);
  }
  return doc;
}

/** The path of a queue (a tenant's name "acme/orders" is one segment, percent-encoded). */
export function queue_path(name, rest = '') {
  return `/v1/queues/${encodeURIComponent(name)}${rest}`;
}
