// Each queue's samples for the charts, kept in the page (laneqd keeps no history): one per
// refresh, the last 10 minutes.

export const refresh_ms = 2000;
const keep_ms = 10 * 60 * 1000;
const spacing_ms = refresh_ms / 2;

/** name -> [{t, backlog, in_flight, enqueued, acked, dead_letters}] */
const samples = new Map();

/** Records a queue's stats (GET /v1/queues/{name}) as a sample at `t`. */
export function record(name, stats, t = Date.now()) {
  let list = samples.get(name);
  if (!list) samples.set(name, list = []);
  const sample = {t, backlog: stats.backlog, in_flight: stats.in_flight,
                  enqueued: stats.enqueued, acked: stats.acked, dead_letters: stats.dead_letters};
  // Samples closer than `spacing_ms` (two views read the queue one after the other) would make
  // a rate of a few messages over a few milliseconds: the newer one takes the last one's place.
  if (list.length && t - list[list.length - 1].t < spacing_ms) list[list.length - 1] = sample;
  else list.push(sample);
  while (list.length && list[0].t < t - keep_ms) list.shift();
}

export function samples_of(name) {
  return samples.get(name) || [];
}
