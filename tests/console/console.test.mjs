// The web console (/console/, docs/operations.md "Console") driven in headless Debian chromium
// through playwright-core: load it, enter the token, create a queue, send, see the groups that
// wait and why, dead-letter and redrive from the page; and a wrong token's state.
// Run by ctest (console.browser, tests/README.md): LANEQD_BINARY names the laneqd to start,
// LANEQ_CHROMIUM the browser (default /usr/bin/chromium).
import assert from 'node:assert/strict';
import {existsSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {after, before, test} from 'node:test';

import {chromium} from 'playwright-core';

import {laneqd} from './laneqd.mjs';

const binary = process.env.LANEQD_BINARY;
const browser_path = process.env.LANEQ_CHROMIUM || '/usr/bin/chromium';
const token = 'console-test-admin-token-0001';
/** Hang guards only: each awaited change is due within a refresh (2 s) or one request. */
const wait_ms = 20_000;

// Flags for a closed network (.library machine notes): nothing in the background reaches out.
const browser_args = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                      '--disable-background-networking', '--disable-component-update',
                      '--disable-sync'];

let server;
let browser;

before(async () => {
  assert.ok(binary && existsSync(binary),
            `LANEQD_BINARY must name a built laneqd (got '${binary}')`);
  assert.ok(existsSync(browser_path),
            `${browser_path} is missing: bash scripts/install-deps.sh installs Debian's chromium`);
  server = await laneqd.start(binary, token);
  browser = await chromium.launch({executablePath: browser_path, headless: true,
                                   args: browser_args});
});

after(async () => {
  if (browser) await browser.close();
  if (server) {
    const code = await server.stop();
    assert.equal(code, 0, `laneqd exits 0 after SIGTERM; stderr: ${server.stderr()}`);
  }
});

/** A fresh page (its own sessionStorage) that records uncaught errors and CSP refusals. */
async function open_console() {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', e => page.problems.push(`uncaught: ${e.message}`));
  page.on('console', m => {
    if (/Content Security Policy|Refused to/i.test(m.text())) page.problems.push(m.text());
  });
  await page.goto(`${server.url}/console/`);
  return page;
}

/** Runs `body(page)`; on failure saves a screenshot and names it. */
async function with_page(name, body) {
  const page = await open_console();
  try {
    await body(page);
    assert.deepEqual(page.problems, [], 'the page ran without errors');
  } catch (e) {
    const shot = path.join(tmpdir(), `laneq-console-${name}.png`);
    await page.screenshot({path: shot, fullPage: true}).catch(() => {});
    e.message += `\n(screenshot: ${shot})`;
    throw e;
  } finally {
    await page.context().close();
  }
}

async function enter_token(page, t) {
  await page.fill('#token-input', t);
  await page.click('#token-use');
}

async function token_state(page, state) {
  await page.locator(`#token-state[data-state="${state}"]`).waitFor({timeout: wait_ms});
  return page.locator('#token-state').textContent();
}

/** Receives up to `max` messages through the API with a lease of `lease_ms`. */
async function receive(queue, max, lease_ms) {
  const r = await server.ok('POST', `/v1/queues/${queue}/receive`, {max, lease_ms});
  return r.messages;
}

test('console.without_a_token_or_with_a_wrong_one_shows_the_token_state', async () => {
  await with_page('token', async page => {
    // No token entered: laneqd answers 401 and the page says a token is needed.
    assert.match(await token_state(page, 'needed'), /token needed/);
    await enter_token(page, 'not-the-right-token-0000');
    assert.match(await token_state(page, 'invalid'), /token invalid/);
    // The API's error is shown with its status, code, number and message.
    await page.locator('#error-text', {hasText: '401 unauthorized (15): '})
        .waitFor({timeout: wait_ms});
    // The token stays out of the URL; the right one connects.
    assert.ok(!page.url().includes('not-the-right-token'));
    await enter_token(page, token);
    assert.match(await token_state(page, 'ok'), /connected/);
  });
});

test('console.creates_sends_shows_blocked_groups_and_redrives_a_dead_letter', async () => {
  await with_page('flow', async page => {
    await enter_token(page, token);
    await token_state(page, 'ok');

    // Create a queue ordered by the header "account" from the form.
    await page.fill('#create-name', 'orders');
    await page.selectOption('#create-mode', 'key');
    await page.fill('#create-key', 'account');
    await page.fill('#create-lease', '60000');
    await page.fill('#create-attempts', '2');
    assert.deepEqual(JSON.parse(await page.inputValue('#create-spec')),
                     {ordering: {mode: 'key', key: [{header: 'account'}],
                                 when_key_missing: 'reject'},
                      lease_ms: 60000, max_attempts: 2});
    await page.click('#create-submit');
    await page.locator('#create-result', {hasText: 'created queue orders'})
        .waitFor({timeout: wait_ms});
    const spec = (await server.ok('GET', '/v1/queues/orders')).spec;
    assert.equal(spec.max_attempts, 2);
    assert.equal(spec.lease_ms, 60000);

    // The same name with another spec: the API's error, with its code, is shown.
    await page.fill('#create-attempts', '3');
    await page.click('#create-submit');
    await page.locator('#create-result', {hasText: 'spec_conflict (2)'})
        .waitFor({timeout: wait_ms});

    // The queue is listed with its depth, and its chart fills with samples.
    const row = page.locator('#queues-body tr[data-queue="orders"]');
    await row.waitFor({timeout: wait_ms});
    await page.click('#queues-body tr[data-queue="orders"] a');
    await page.locator('#queue-view[data-queue="orders"]').waitFor({timeout: wait_ms});

    // Send three messages from the page: two of account a1, one of b2.
    await page.locator('#send-form').waitFor({timeout: wait_ms});
    const sent = [];
    for (const [account, body] of [['a1', 'a1-first'], ['a1', 'a1-second'], ['b2', 'b2-first']]) {
      await page.fill('#send-body', body);
      await page.fill('#send-form input[data-header="account"]', account);
      await page.click('#send-submit');
      const result = page.locator('#send-result', {hasText: 'sent: id'});
      await page.waitForFunction(prev => {
        const t = document.getElementById('send-result').textContent;
        return t.startsWith('sent: id') && t !== prev;
      }, sent.length ? `sent: id ${sent[sent.length - 1]}` : '', {timeout: wait_ms});
      sent.push((await result.textContent()).replace('sent: id ', ''));
    }
    assert.equal(new Set(sent).size, 3);

    // A consumer (the test, through the API) takes both heads; it nacks b2's with a retry in a
    // minute and holds a1's: both groups wait, each for its own reason.
    const got = await receive('orders', 10, 60000);
    assert.deepEqual(got.map(m => m.body).sort(), ['a1-first', 'b2-first']);
    const a1 = got.find(m => m.body === 'a1-first');
    const b2 = got.find(m => m.body === 'b2-first');
    await server.ok('POST', '/v1/queues/orders/nack', {lease: b2.lease, retry_after_ms: 60000});

    await page.check('#groups-blocked');
    const a1_row = page.locator('#groups-body tr[data-key="a1"][data-state="in_flight"]');
    const b2_row = page.locator('#groups-body tr[data-key="b2"][data-state="retry_wait"]');
    await a1_row.waitFor({timeout: wait_ms});
    await b2_row.waitFor({timeout: wait_ms});
    assert.match(await a1_row.locator('td.why').textContent(),
                 new RegExp(`head message ${a1.id} is leased to a consumer until .*: the group ` +
                            'waits for its ack or nack'));
    assert.match(await b2_row.locator('td.why').textContent(),
                 new RegExp(`head message ${b2.id} was nacked and waits for its retry until`));

    // Dead-letter a1's head through the API: the page lists it, and a1 is no longer blocked.
    const dl = await server.ok('POST', '/v1/queues/orders/nack', {lease: a1.lease,
                                                                 dead_letter: true});
    assert.equal(dl.dead_lettered, true);
    const dl_row = page.locator(`#dead-letters-body tr[data-id="${a1.id}"]`);
    await dl_row.waitFor({timeout: wait_ms});
    assert.equal(await dl_row.locator('td.reason').textContent(), 'requested');
    assert.equal(await dl_row.locator('td.body').textContent(), 'a1-first');
    await a1_row.waitFor({state: 'detached', timeout: wait_ms});

    // Redrive it from the page.
    await dl_row.locator('input.pick').check();
    await page.click('#redrive-selected');
    await page.locator('#redrive-result', {hasText: 'redriven: 1'}).waitFor({timeout: wait_ms});
    await dl_row.waitFor({state: 'detached', timeout: wait_ms});

    // Through the API: no dead letter left, and the message is back at the end of its group.
    assert.deepEqual((await server.ok('GET', '/v1/queues/orders/dead-letters')).dead_letters, []);
    const next = await receive('orders', 10, 60000);
    assert.deepEqual(next.map(m => m.body), ['a1-second']);
    await server.ok('POST', '/v1/queues/orders/ack', {lease: next[0].lease});
    const back = await receive('orders', 10, 60000);
    assert.deepEqual(back.map(m => [m.id, m.body]), [[a1.id, 'a1-first']]);
    await server.ok('POST', '/v1/queues/orders/ack', {lease: back[0].lease});

    // Settings: shown, and changed in place with the form (PATCH); a fixed field is refused
    // with the API's error.
    assert.equal(JSON.parse(await page.locator('#settings-spec').textContent()).max_attempts, 2);
    assert.match(await page.locator('#settings-note').textContent(), /PATCH/);
    const form_start = JSON.parse(await page.inputValue('#settings-patch'));
    assert.equal(form_start.max_attempts, 2);
    assert.equal(form_start.ordering, undefined);
    await page.fill('#settings-patch', JSON.stringify({max_attempts: 4, max_depth: {messages: 50},
                                                       retention_ms: 86400000,
                                                       on_expiry: 'drop'}));
    await page.click('#settings-submit');
    await page.locator('#settings-result', {hasText: 'updated: lease_ms 60000, max_attempts 4'})
        .waitFor({timeout: wait_ms});
    const patched = (await server.ok('GET', '/v1/queues/orders')).spec;
    assert.equal(patched.max_attempts, 4);
    assert.deepEqual(patched.max_depth, {messages: 50});
    assert.equal(patched.retention_ms, 86400000);
    assert.equal(patched.on_expiry, 'drop');
    await page.waitForFunction(
        () => JSON.parse(document.getElementById('settings-spec').textContent).max_attempts === 4,
        null, {timeout: wait_ms});
    await page.fill('#settings-patch', JSON.stringify({ordering: {mode: 'queue'}}));
    await page.click('#settings-submit');
    await page.locator('#settings-result', {hasText: 'invalid_spec (1)'}).waitFor({timeout: wait_ms});
    assert.match(await page.locator('#settings-result').textContent(), /ordering\.mode: is fixed/);

    // Back on the list: the chart has several samples.
    await page.click('#nav-queues');
    await page.waitForFunction(() => {
      const svg = document.querySelector('#queues-body tr[data-queue="orders"] svg.chart');
      return svg && Number(svg.dataset.samples) >= 2;
    }, null, {timeout: wait_ms});
  });
});

test('console.deletes_chosen_dead_letters_and_then_all_of_them', async () => {
  await server.ok('PUT', '/v1/queues/doomed', {lease_ms: 200, max_attempts: 1});
  await server.ok('POST', '/v1/queues/doomed/messages',
                  {messages: [{body: 'd1'}, {body: 'd2'}, {body: 'd3'}, {body: 'd4'}]});
  // One attempt each, never acked: the four leases expire and the messages are dead letters.
  assert.equal((await receive('doomed', 10, 200)).length, 4);
  await with_page('delete-dead-letters', async page => {
    await enter_token(page, token);
    await page.goto(`${server.url}/console/#/queue/doomed`);
    const rows = page.locator('#dead-letters-body tr[data-id]');
    const count_is = n => page.waitForFunction(k =>
        document.querySelectorAll('#dead-letters-body tr[data-id]').length === k, n,
        {timeout: wait_ms});
    await count_is(4);
    const ids = await rows.evaluateAll(trs => trs.map(tr => tr.dataset.id));

    // One chosen (DELETE .../dead-letters/{id}).
    await page.locator(`#dead-letters-body tr[data-id="${ids[0]}"] input.pick`).check();
    await page.click('#dead-letters-delete');
    await page.locator('#redrive-result', {hasText: 'deleted: 1'}).waitFor({timeout: wait_ms});
    await count_is(3);

    // Two chosen (their ids in one request).
    for (const id of ids.slice(1, 3)) {
      await page.locator(`#dead-letters-body tr[data-id="${id}"] input.pick`).check();
    }
    await page.click('#dead-letters-delete');
    await page.locator('#redrive-result', {hasText: 'deleted: 2'}).waitFor({timeout: wait_ms});
    await count_is(1);
    assert.deepEqual(await rows.evaluateAll(trs => trs.map(tr => tr.dataset.id)), [ids[3]]);

    // All, after a confirmation: declined first (nothing happens), then accepted.
    page.once('dialog', d => d.dismiss());
    await page.click('#dead-letters-delete-all');
    await count_is(1);
    page.once('dialog', d => d.accept());
    await page.click('#dead-letters-delete-all');
    await page.locator('#redrive-result', {hasText: 'deleted: 1'}).waitFor({timeout: wait_ms});
    await count_is(0);

    const stats = (await server.ok('GET', '/v1/queues/doomed')).stats;
    assert.equal(stats.dead_letters, 0);
    assert.equal(stats.dead_letters_deleted, 4);
    assert.equal(stats.redriven, 0);
  });
});

test('console.lists_max_attempts_dead_letters_and_redrives_all_and_shows_topics', async () => {
  await server.ok('PUT', '/v1/queues/short', {lease_ms: 200, max_attempts: 1});
  await server.ok('POST', '/v1/queues/short/messages', {messages: [{body: 'x'}, {body: 'y'}]});
  // One attempt each, never acked: both leases expire and both messages are dead-lettered.
  assert.equal((await receive('short', 10, 200)).length, 2);
  await server.ok('PUT', '/v1/topics/events', {queues: ['short']});
  await with_page('redrive-all', async page => {
    await enter_token(page, token);
    await page.goto(`${server.url}/console/#/queue/short`);
    const rows = page.locator('#dead-letters-body tr[data-id]');
    await page.waitForFunction(() =>
        document.querySelectorAll('#dead-letters-body tr[data-id]').length === 2, null,
        {timeout: wait_ms});
    for (const reason of await rows.locator('td.reason').allTextContents()) {
      assert.equal(reason, 'max_attempts');
    }
    await page.click('#redrive-all');
    await page.locator('#redrive-result', {hasText: 'redriven: 2'}).waitFor({timeout: wait_ms});
    const stats = (await server.ok('GET', '/v1/queues/short')).stats;
    assert.equal(stats.dead_letters, 0);
    assert.equal(stats.redriven, 2);

    await page.click('#nav-topics');
    const topic = page.locator('#topics-body tr[data-topic="events"]');
    await topic.waitFor({timeout: wait_ms});
    assert.equal(await topic.locator('td').nth(1).textContent(), 'short');
  });
});
