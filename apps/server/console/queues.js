// The queues view (#/queues): every queue with its depth, in-flight count, dead letters, groups,
// rates and a chart of the last minutes; and the form that creates a queue
// (PUT /v1/queues/{name}).
import {call, queue_path} from './api.js';
import {chart, rates} from './chart.js';
import {clear_error, describe, fill, h, say, show_error} from './dom.js';
import {record, samples_of} from './samples.js';

/** At most this many queues get their stats read on each refresh (one GET each). */
const stats_max = 100;

function last_rate(name, field) {
  const r = rates(samples_of(name).slice(-2), field);
  return r.length ? r[r.length - 1].v.toFixed(1) : '—';
}

/** The spec the form's fields describe (the JSON the textarea shows until edited by hand). */
function spec_from(form) {
  const spec = {};
  const mode = form.elements.mode.value;
  if (mode !== 'none') {
    spec.ordering = {mode};
    if (mode === 'key') {
      spec.ordering.key = form.elements.key_headers.value.split(',').map(s => s.trim())
                              .filter(Boolean).map(header => ({header}));
      spec.ordering.when_key_missing = form.elements.when_key_missing.value;
    }
  }
  for (const f of ['lease_ms', 'max_attempts']) {
    const v = form.elements[f].value.trim();
    if (v !== '') spec[f] = Number(v);
  }
  return spec;
}

function create_form(after_create) {
  const result = h('p', {class: 'result', id: 'create-result'});
  const textarea = h('textarea', {name: 'spec', id: 'create-spec', rows: 8, cols: 60,
                                  spellcheck: 'false'});
  let edited = false;
  textarea.addEventListener('input', () => { edited = true; });
  const form = h('form', {id: 'create-form', class: 'panel'},
      h('h3', {}, 'Create a queue'),
      h('div', {class: 'fields'},
        h('label', {}, 'Name ', h('input', {name: 'name', id: 'create-name', required: true,
                                             placeholder: 'orders'})),
        h('label', {}, 'Ordering ', h('select', {name: 'mode', id: 'create-mode'},
          h('option', {value: 'none'}, 'none (unordered)'),
          h('option', {value: 'queue'}, 'queue (one group)'),
          h('option', {value: 'key'}, 'key (a group per key)'))),
        h('label', {}, 'Key headers ', h('input', {name: 'key_headers', id: 'create-key',
                                                    placeholder: 'account'})),
        h('label', {}, 'When key missing ', h('select', {name: 'when_key_missing'},
          h('option', {value: 'reject'}, 'reject'),
          h('option', {value: 'unordered'}, 'unordered'),
          h('option', {value: 'keyless_lane'}, 'keyless_lane'))),
        h('label', {}, 'Lease ms ', h('input', {name: 'lease_ms', id: 'create-lease',
                                                 type: 'number', min: 1, placeholder: '30000'})),
        h('label', {}, 'Max attempts ', h('input', {name: 'max_attempts', id: 'create-attempts',
                                                     type: 'number', min: 1,
                                                     placeholder: '10'}))),
      h('label', {class: 'block'}, 'Spec (JSON, as PUT /v1/queues/{name} takes it; edit it for ' +
        'throttles, dedupe, shards...) ', textarea),
      h('button', {type: 'submit', id: 'create-submit'}, 'Create queue'),
      h('button', {type: 'button', onclick: () => { edited = false; sync(); }},
        'Spec from the fields'),
      result);
  const sync = () => {
    if (!edited) textarea.value = JSON.stringify(spec_from(form), null, 2);
  };
  form.addEventListener('input', ev => { if (ev.target !== textarea) sync(); });
  form.addEventListener('change', ev => { if (ev.target !== textarea) sync(); });
  sync();
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    const name = form.elements.name.value.trim();
    try {
      const r = await call('PUT', queue_path(name), textarea.value.trim() || '{}');
      say(result, r.created ? `created queue ${r.name}`
                            : `queue ${r.name} exists with the same spec`);
      clear_error();
      after_create();
    } catch (e) {
      say(result, describe(e), 'error');
    }
  });
  return form;
}

export function queues_view() {
  const tbody = h('tbody', {id: 'queues-body'});
  const note = h('p', {class: 'note', id: 'queues-note'});
  const table = h('table', {id: 'queues-table'},
      h('thead', {}, h('tr', {},
        ['Queue', 'Depth', 'In flight', 'Dead letters', 'Groups', 'In /s', 'Acked /s',
         'Up to the last 5 minutes (depth; in and acked /s)'].map(t => h('th', {}, t)))),
      tbody);
  let refresh;
  const root = h('section', {id: 'queues-view'},
      h('h2', {}, 'Queues'),
      table, note,
      create_form(() => refresh()));
  refresh = async () => {
    let names;
    try {
      names = (await call('GET', '/v1/queues')).queues;
    } catch (e) {
      show_error(e, 'listing the queues');
      return;
    }
    const shown = names.slice(0, stats_max);
    const now = Date.now();
    const described = await Promise.all(shown.map(n => call('GET', queue_path(n)).catch(e => e)));
    const rows = shown.map((name, i) => {
      const d = described[i];
      const link = h('a', {href: `#/queue/${encodeURIComponent(name)}`}, name);
      if (d instanceof Error) {
        return h('tr', {'data-queue': name}, h('td', {}, link),
                 h('td', {colspan: 7, class: 'error-cell'}, describe(d)));
      }
      record(name, d.stats, now);
      const s = d.stats;
      return h('tr', {'data-queue': name},
               h('td', {}, link), h('td', {class: 'num depth'}, s.backlog),
               h('td', {class: 'num in-flight'}, s.in_flight),
               h('td', {class: 'num dead-letters'}, s.dead_letters),
               h('td', {class: 'num'}, s.live_groups),
               h('td', {class: 'num'}, last_rate(name, 'enqueued')),
               h('td', {class: 'num'}, last_rate(name, 'acked')),
               h('td', {}, chart(samples_of(name), {now})));
    });
    fill(tbody, rows.length ? rows : h('tr', {}, h('td', {colspan: 8}, 'No queues yet.')));
    note.textContent = names.length > stats_max
        ? `${names.length} queues: stats and charts for the first ${stats_max} only.` : '';
  };
  return {root, refresh};
}
