// The console's shell: the token form and its state, the views by URL fragment (#/queues,
// #/queue/<name>, #/topics) and their refresh every few seconds.
import {on_token_state, set_token, token} from './api.js';
import {clear_error, fill, h} from './dom.js';
import {queue_view} from './queue.js';
import {queues_view} from './queues.js';
import {refresh_ms} from './samples.js';
import {topics_view} from './topics.js';

const token_texts = {
  unknown: 'not connected yet',
  none: 'no token entered',
  ok: 'connected',
  needed: 'token needed: laneqd requires a bearer token; enter it above',
  invalid: 'token invalid: laneqd refused it (401 unauthorized); enter another',
};

function setup_token_form() {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  const state = document.getElementById('token-state');
  on_token_state(s => {
    state.dataset.state = s;
    state.textContent = token_texts[s] || s;
    document.body.dataset.token = s;
  });
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    set_token(input.value.trim());
    input.value = '';
    clear_error();
    route();
  });
  document.getElementById('token-forget').addEventListener('click', () => {
    set_token('');
    route();
  });
  document.getElementById('error-dismiss').addEventListener('click', clear_error);
  if (token()) state.textContent = 'token entered, not checked yet';
}

let current = null;
let busy = false;

/** Shows the view the fragment names. */
function route() {
  const hash = location.hash || '#/queues';
  const view = document.getElementById('view');
  let made;
  if (hash.startsWith('#/queue/')) {
    made = queue_view(decodeURIComponent(hash.slice('#/queue/'.length)));
  } else if (hash === '#/topics') {
    made = topics_view();
  } else {
    made = queues_view();
  }
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', hash.startsWith(a.getAttribute('href')));
  }
  current = made;
  fill(view, made.root);
  // At once, even while the last view's refresh is still running (the timer's next tick waits).
  made.refresh();
}

/** Refreshes the current view, unless the last refresh is still running. */
async function tick() {
  if (busy || !current) return;
  busy = true;
  const view = current;
  try {
    await view.refresh();
  } finally {
    busy = false;
  }
}

window.addEventListener('hashchange', route);
setup_token_form();
route();
setInterval(tick, refresh_ms);
document.body.append(h('span', {id: 'console-ready', hidden: true}));
