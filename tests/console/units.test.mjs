// The console's pure functions in node, without a browser: rates from samples (none across a
// counter reset), the samples' spacing, and the words for why a group waits.
import assert from 'node:assert/strict';
import {test} from 'node:test';

import {rates} from '../../apps/server/console/chart.js';
import {settings_of, why} from '../../apps/server/console/queue.js';
import {record, samples_of} from '../../apps/server/console/samples.js';

test('console.rates_are_per_second_and_skip_a_counter_reset', () => {
  const s = [{t: 0, enqueued: 10}, {t: 2000, enqueued: 30}, {t: 4000, enqueued: 5},
             {t: 5000, enqueued: 8}];
  assert.deepEqual(rates(s, 'enqueued'), [{t: 2000, v: 10}, {t: 5000, v: 3}]);
  assert.deepEqual(rates(s.slice(0, 1), 'enqueued'), []);
});

test('console.samples_closer_than_half_a_refresh_replace_the_last_one', () => {
  const stats = n => ({backlog: n, in_flight: 0, enqueued: n, acked: 0, dead_letters: 0});
  record('q', stats(1), 10_000);
  record('q', stats(2), 12_000);
  record('q', stats(3), 12_050);  // a second view read it right after the first
  assert.deepEqual(samples_of('q').map(s => [s.t, s.backlog]), [[10_000, 1], [12_050, 3]]);
  record('q', stats(4), 12_050 + 11 * 60 * 1000);  // older than 10 minutes: dropped
  assert.equal(samples_of('q').length, 1);
});

test('console.why_a_group_waits_names_its_head_and_until_when', () => {
  const now = Date.UTC(2026, 11, 6, 12, 0, 0);
  const g = {key: 'a1', head: '7', until_ms: now + 30_000, state: 'in_flight'};
  assert.match(why(g, now),
               /^head message 7 is leased to a consumer until 2026-12-06 12:00:30Z \(in 30 s\)/);
  assert.match(why({...g, state: 'retry_wait'}, now),
               /^head message 7 was nacked .* until .*in 30 s/);
  assert.match(why({...g, state: 'delayed'}, now), /delayed until/);
  assert.match(why({...g, state: 'throttled'}, now), /throttle .* until/);
  assert.match(why({...g, state: 'corrupt', reason: 'corrupt record: seq 81'}, now),
               /corrupt record: seq 81/);
  assert.match(why({...g, state: 'reclaim_grace'}, now),
               /^head message 7 waits after a restart .* until .*in 30 s/);
  assert.match(why({...g, state: 'ready', until_ms: 0}, now), /deliverable now/);
});

test('console.the_update_form_starts_from_the_changeable_settings_only', () => {
  const spec = {ordering: {mode: 'key', key: [{header: 'a'}]}, lease_ms: 5000, max_attempts: 2,
                throttles: [], delivery_durability: 'fast', sync_writes: true,
                store_headers: 'all', shards: 1, max_depth: {messages: 9}, retention_ms: 60000,
                on_expiry: 'drop', dead_letter_retention_ms: 3600000};
  assert.deepEqual(settings_of(spec), {lease_ms: 5000, max_attempts: 2, throttles: [],
                                       delivery_durability: 'fast', store_headers: 'all',
                                       max_depth: {messages: 9}, retention_ms: 60000,
                                       on_expiry: 'drop', dead_letter_retention_ms: 3600000});
});
