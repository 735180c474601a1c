// One queue's view (#/queue/<name>): its stats and chart, a form that sends a message, its
// groups and why each waits, its dead letters with redrive, and its settings with a form that
// changes them in place (PATCH /v1/queues/{name}).
import {call, queue_path} from './api.js';
import {chart} from './chart.js';
import {clear_error, describe, fill, h, relative, say, show_error, time} from './dom.js';
import {record, samples_of} from './samples.js';

/** Why a group (GET .../groups) is not delivering, in words. */
export function why(g, now = Date.now()) {
  const until = g.until_ms ? ` until ${time(g.until_ms)} (${relative(g.until_ms, now)})` : '';
  switch (g.state) {
    case 'ready': return 'deliverable now: its head waits for a receive';
    case 'idle': return 'nothing to deliver';
    case 'in_flight':
      return `head message ${g.head} is leased to a consumer${until}: the group waits for its ` +
             'ack or nack, or for the lease to expire';
    case 'retry_wait': return `head message ${g.head} was nacked and waits for its retry${until}`;
    case 'delayed': return `head message ${g.head} is delayed${until}`;
    case 'throttled': return `a throttle of the queue has no token for it${until}`;
    case 'corrupt': return `stopped for good on a corrupt record: ${g.reason || ''}`;
    case 'reclaim_grace':
      return `head message ${g.head} waits after a restart for the consumer that held it${until}`;
    default: return g.reason || g.state;
  }
}

function header_components(spec) {
  const key = spec && spec.ordering && spec.ordering.key ? spec.ordering.key : [];
  return key.filter(c => c.header).map(c => c.header);
}

/** "name: value" lines as a headers object. */
function parse_headers(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const i = line.indexOf(':');
    if (i <= 0) throw new Error(`a header line is "name: value", not "${line.trim()}"`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

function send_form(name, spec) {
  const result = h('p', {class: 'result', id: 'send-result'});
  const keys = header_components(spec);
  const key_inputs = keys.map(k => h('label', {}, `Header ${k} (ordering key) `,
                                     h('input', {'data-header': k, class: 'key-header'})));
  const form = h('form', {id: 'send-form', class: 'panel'},
      h('h3', {}, 'Send a message'),
      h('label', {class: 'block'}, 'Body ', h('textarea', {name: 'body', id: 'send-body',
                                                            rows: 3, cols: 60})),
      h('div', {class: 'fields'}, key_inputs,
        h('label', {}, 'Fairness key ', h('input', {name: 'fairness_key'})),
        h('label', {}, 'Delay ms ', h('input', {name: 'delay_ms', type: 'number', min: 0}))),
      h('label', {class: 'block'}, 'Other headers (one "name: value" a line) ',
        h('textarea', {name: 'headers', id: 'send-headers', rows: 2, cols: 60})),
      h('button', {type: 'submit', id: 'send-submit'}, 'Send'),
      result);
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    const msg = {body: form.elements.body.value};
    try {
      const headers = parse_headers(form.elements.headers.value);
      for (const input of form.querySelectorAll('input.key-header')) {
        if (input.value !== '') headers[input.dataset.header] = input.value;
      }
      if (Object.keys(headers).length) msg.headers = headers;
      if (form.elements.fairness_key.value) msg.fairness_key = form.elements.fairness_key.value;
      if (form.elements.delay_ms.value) msg.delay_ms = Number(form.elements.delay_ms.value);
      const r = await call('POST', queue_path(name, '/messages'), msg);
      say(result, `sent: id ${r.ids.join(', ')}`);
      clear_error();
    } catch (e) {
      say(result, describe(e), 'error');
    }
  });
  return form;
}

function groups_panel(name) {
  const tbody = h('tbody', {id: 'groups-body'});
  const blocked = h('input', {type: 'checkbox', id: 'groups-blocked'});
  const more = h('p', {class: 'note', id: 'groups-more'});
  let cursor = '';
  const next = h('button', {type: 'button', id: 'groups-next', hidden: true}, 'Next page');
  const first = h('button', {type: 'button', id: 'groups-first', hidden: true}, 'First page');
  let next_cursor = '';
  const load = async () => {
    const q = new URLSearchParams({limit: '100'});
    if (blocked.checked) q.set('state', 'blocked');
    if (cursor) q.set('cursor', cursor);
    const page = await call('GET', queue_path(name, `/groups?${q}`));
    const now = Date.now();
    fill(tbody, page.groups.length ? page.groups.map(g => h('tr', {'data-key': g.key,
                                                                   'data-state': g.state},
        h('td', {class: 'key'}, g.key || '(unordered)'), h('td', {class: 'state'}, g.state),
        h('td', {class: 'why'}, why(g, now)), h('td', {class: 'num'}, g.backlog),
        h('td', {class: 'num'}, g.head || '—'), h('td', {}, time(g.since_ms)),
        h('td', {}, g.until_ms ? `${time(g.until_ms)} (${relative(g.until_ms, now)})` : '—')))
        : h('tr', {}, h('td', {colspan: 7}, blocked.checked ? 'No blocked group on this page.'
                                                            : 'No live group on this page.')));
    next_cursor = page.next_cursor || '';
    next.hidden = !next_cursor;
    first.hidden = !cursor;
    more.textContent = next_cursor ? 'More groups follow (a page examines at most 10 × 100 ' +
                                     'groups, so a blocked-only page may be short).' : '';
  };
  const reload = () => load().catch(e => show_error(e, 'reading the groups'));
  blocked.addEventListener('change', () => { cursor = ''; reload(); });
  next.addEventListener('click', () => { cursor = next_cursor; reload(); });
  first.addEventListener('click', () => { cursor = ''; reload(); });
  const root = h('section', {id: 'groups', class: 'panel'},
      h('h3', {}, 'Groups and why each waits'),
      h('label', {}, blocked, ' blocked only (in flight, retry wait, delayed, throttled, corrupt)'),
      h('table', {id: 'groups-table'},
        h('thead', {}, h('tr', {}, ['Key', 'State', 'Why', 'Backlog', 'Head', 'Since', 'Until']
                                       .map(t => h('th', {}, t)))),
        tbody),
      first, next, more);
  return {root, refresh: load};
}

function body_text(d) {
  if (d.body !== undefined) return d.body.length > 200 ? `${d.body.slice(0, 200)}…` : d.body;
  return `(binary, base64) ${d.body_base64.slice(0, 60)}`;
}

function dead_letters_panel(name) {
  const tbody = h('tbody', {id: 'dead-letters-body'});
  const result = h('p', {class: 'result', id: 'redrive-result'});
  const selected = new Set();
  const load = async () => {
    const r = await call('GET', queue_path(name, '/dead-letters?max=100'));
    const ids = new Set(r.dead_letters.map(d => d.id));
    for (const id of [...selected]) if (!ids.has(id)) selected.delete(id);
    fill(tbody, r.dead_letters.length ? r.dead_letters.map(d => {
      const box = h('input', {type: 'checkbox', class: 'pick', 'data-id': d.id,
                              'aria-label': `choose dead letter ${d.id}`,
                              checked: selected.has(d.id)});
      box.addEventListener('change', () => {
        if (box.checked) selected.add(d.id);
        else selected.delete(d.id);
      });
      const headers = Object.entries(d.headers || {}).map(([k, v]) => `${k}: ${v}`).join(', ');
      return h('tr', {'data-id': d.id}, h('td', {}, box), h('td', {class: 'num id'}, d.id),
               h('td', {class: 'reason'}, d.reason), h('td', {class: 'num'}, d.attempts),
               h('td', {}, time(d.at_ms)), h('td', {class: 'body'}, body_text(d)),
               h('td', {}, headers));
    }) : h('tr', {}, h('td', {colspan: 7}, 'No dead letters.')));
  };
  const redrive = async ids => {
    try {
      const r = await call('POST', queue_path(name, '/dead-letters/redrive'), ids ? {ids} : {});
      say(result, `redriven: ${r.redriven}`);
      selected.clear();
      clear_error();
      await load();
    } catch (e) {
      say(result, describe(e), 'error');
    }
  };
  // One chosen: DELETE .../dead-letters/{id}; several: their ids in the body; none: every one.
  const remove = async ids => {
    try {
      const r = ids && ids.length === 1
        ? await call('DELETE', queue_path(name, `/dead-letters/${encodeURIComponent(ids[0])}`))
        : await call('DELETE', queue_path(name, '/dead-letters'), ids ? {ids} : undefined);
      say(result, `deleted: ${r.deleted}`);
      selected.clear();
      clear_error();
      await load();
    } catch (e) {
      say(result, describe(e), 'error');
    }
  };
  const root = h('section', {id: 'dead-letters', class: 'panel'},
      h('h3', {}, 'Dead letters (oldest first, up to 100)'),
      h('table', {id: 'dead-letters-table'},
        h('thead', {}, h('tr', {}, ['', 'Id', 'Reason', 'Attempts', 'Dead-lettered', 'Body',
                                    'Headers'].map(t => h('th', {}, t)))),
        tbody),
      h('button', {type: 'button', id: 'redrive-selected', onclick: () => {
        if (!selected.size) return say(result, 'choose dead letters first', 'error');
        return redrive([...selected]);
      }}, 'Redrive chosen'),
      h('button', {type: 'button', id: 'redrive-all', onclick: () => redrive(null)},
        'Redrive all'),
      h('button', {type: 'button', id: 'dead-letters-delete', onclick: () => {
        if (!selected.size) return say(result, 'choose dead letters first', 'error');
        return remove([...selected]);
      }}, 'Delete chosen'),
      h('button', {type: 'button', id: 'dead-letters-delete-all', onclick: () => {
        if (!window.confirm(`Delete every dead letter of queue ${name}? They cannot be redriven ` +
                            'afterwards.')) return undefined;
        return remove(null);
      }}, 'Delete all'),
      result,
      h('p', {class: 'note'}, 'A redriven message keeps its id and joins the back of its group. ' +
        'A deleted dead letter is gone for good.'));
  return {root, refresh: load};
}

/** The fields of a spec that PATCH may change (docs/api.md "PATCH /v1/queues/{name}"). */
const changeable = ['lease_ms', 'max_attempts', 'throttles', 'delivery_durability',
                    'store_headers', 'dedupe', 'max_depth', 'retention_ms', 'on_expiry',
                    'dead_letter_retention_ms'];

/** The changeable settings of `spec`, as the update form starts from them. */
export function settings_of(spec) {
  const out = {};
  for (const k of changeable) if (spec && spec[k] !== undefined) out[k] = spec[k];
  return out;
}

function settings_panel(name, on_updated) {
  const pre = h('pre', {id: 'settings-spec'});
  const summary = h('p', {id: 'settings-summary'});
  const patch = h('textarea', {id: 'settings-patch', rows: 8, cols: 60, spellcheck: 'false'});
  const result = h('p', {class: 'result', id: 'settings-result'});
  const form = h('form', {id: 'settings-form'},
      h('label', {class: 'block'}, 'Change settings (a JSON merge patch: the fields given ' +
        'replace the queue\'s, null puts a default back) ', patch),
      h('button', {type: 'submit', id: 'settings-submit'}, 'Update'),
      result);
  const root = h('section', {id: 'settings', class: 'panel'},
      h('h3', {}, 'Settings'), summary, pre, form,
      h('p', {class: 'note', id: 'settings-note'}, 'PATCH /v1/queues/{name}: lease, attempts, ' +
        'throttle rates, delivery durability (from the next start), stored headers, the dedupe ' +
        'window, max_depth and retention (retention_ms, on_expiry: dead_letter | drop, ' +
        'dead_letter_retention_ms) may change; the ordering, shards and keys are fixed.'));
  let shown = null;
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    try {
      // Sent as typed: the API names what is wrong with it.
      const r = await call('PATCH', queue_path(name), patch.value);
      say(result, `updated: lease_ms ${r.spec.lease_ms}, max_attempts ${r.spec.max_attempts}`);
      shown = null;
      on_updated(r.spec);
      clear_error();
    } catch (e) {
      say(result, describe(e), 'error');
    }
  });
  const show = d => {
    summary.textContent = d.summary;
    const text = JSON.stringify(d.spec, null, 2);
    if (pre.textContent !== text) pre.textContent = text;
    // The form starts from the settings as they are, until the operator edits it.
    const start = JSON.stringify(settings_of(d.spec), null, 2);
    if (shown === null || patch.value === shown) {
      patch.value = start;
      shown = start;
    }
  };
  return {root, show};
}

export function queue_view(name) {
  const stats = h('dl', {id: 'queue-stats', class: 'stats'});
  const chart_box = h('div', {id: 'queue-chart'});
  const send_box = h('div', {});
  const groups = groups_panel(name);
  const dead = dead_letters_panel(name);
  let spec = null;
  // After an update the view reads the queue again (summary, spec, stats).
  const settings = settings_panel(name, () => refresh());
  const root = h('section', {id: 'queue-view', 'data-queue': name},
      h('p', {}, h('a', {href: '#/queues'}, '← all queues')),
      h('h2', {}, 'Queue ', h('span', {id: 'queue-name'}, name)),
      stats, chart_box, send_box, groups.root, dead.root, settings.root);
  const refresh = async () => {
    let d;
    try {
      d = await call('GET', queue_path(name));
    } catch (e) {
      show_error(e, `reading queue ${name}`);
      return;
    }
    const now = Date.now();
    record(name, d.stats, now);
    const s = d.stats;
    fill(stats, ...[['depth', s.backlog], ['in flight', s.in_flight],
                    ['dead letters', s.dead_letters], ['groups', s.live_groups],
                    ['enqueued', s.enqueued], ['acked', s.acked], ['nacked', s.nacked],
                    ['redriven', s.redriven], ['waiting receives', s.waiting_receives]]
                 .map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))));
    fill(chart_box, chart(samples_of(name), {now, width: 480, height: 80}),
         h('span', {class: 'legend'},
           'depth (area), in /s and acked /s (lines), up to the last 5 minutes'));
    settings.show(d);
    if (spec === null) {
      spec = d.spec;
      fill(send_box, send_form(name, spec));
    }
    await Promise.all([groups.refresh().catch(e => show_error(e, 'reading the groups')),
                       dead.refresh().catch(e => show_error(e, 'reading the dead letters'))]);
  };
  return {root, refresh};
}
