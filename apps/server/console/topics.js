// The topics view (#/topics): every topic (GET /v1/topics) with the queues it publishes to.
import {call} from './api.js';
import {fill, h, show_error} from './dom.js';

export function topics_view() {
  const tbody = h('tbody', {id: 'topics-body'});
  const root = h('section', {id: 'topics-view'},
      h('h2', {}, 'Topics'),
      h('table', {id: 'topics-table'},
        h('thead', {}, h('tr', {}, h('th', {}, 'Topic'), h('th', {}, 'Queues (subscriptions)'))),
        tbody),
      h('p', {class: 'note'}, 'A message published to a topic is committed into every one of ' +
        'its queues in one write (docs/api.md, "Topics").'));
  const refresh = async () => {
    let r;
    try {
      r = await call('GET', '/v1/topics');
    } catch (e) {
      show_error(e, 'listing the topics');
      return;
    }
    fill(tbody, r.topics.length ? r.topics.map(t => h('tr', {'data-topic': t.name},
        h('td', {}, t.name),
        h('td', {}, t.spec.queues.map((q, i) => [
          i ? ', ' : '', h('a', {href: `#/queue/${encodeURIComponent(q)}`}, q)]))))
        : h('tr', {}, h('td', {colspan: 2}, 'No topics.')));
  };
  return {root, refresh};
}
