// DOM helpers for the console: elements built from data without innerHTML (message bodies and
// names are the users' data), times, and the error banner.

/** An element: attributes (on* are listeners, `true` an empty attribute) and children. */
export function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

/** Replaces the children of `parent`. */
export function fill(parent, ...children) {
  parent.replaceChildren();
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    parent.append(c instanceof Node ? c : String(c));
  }
  return parent;
}

/** A Unix time in ms as "2026-12-06 16:20:31Z" ('—' for 0). */
export function time(ms) {
  if (!ms) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** How far `ms` is from now: "in 12 s", "3 s ago". */
export function relative(ms, now = Date.now()) {
  if (!ms) return '';
  const s = Math.round((ms - now) / 1000);
  const abs = Math.abs(s);
  const text = abs < 120 ? `${abs} s` : abs < 7200 ? `${Math.round(abs / 60)} min`
                                                   : `${Math.round(abs / 3600)} h`;
  return s >= 0 ? `in ${text}` : `${text} ago`;
}

/** Shows an error (an api_error or any Error) in the banner at the top of the page. */
export function show_error(e, context = '') {
  const text = e && typeof e.describe === 'function' ? e.describe() : String(e && e.message || e);
  const banner = document.getElementById('error');
  document.getElementById('error-text').textContent = context ? `${context}: ${text}` : text;
  banner.hidden = false;
}

export function clear_error() {
  document.getElementById('error').hidden = true;
}

/** Sets an inline result line (`kind` 'ok' or 'error'). */
export function say(target, text, kind = 'ok') {
  target.textContent = text;
  target.dataset.kind = kind;
}

/** An error as a line: "404 queue_not_found (3): ..." */
export function describe(e) {
  return e && typeof e.describe === 'function' ? e.describe() : String(e && e.message || e);
}
