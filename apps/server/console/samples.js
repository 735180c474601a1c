// Each queue's samples for the charts, kept in the page (laneqd keeps no history): one per
// refresh, the last 10 minutes.

export const refresh_ms = 2000;
const keep_ms = 10 * 60 * 1000;

/** name -> [{t, backlog, in_flight, enqueued, acked, dead_letters}] */
const samples = new Map();

/** Records a queue's stats (GET /v1/queues/{name}) as a sample at `t`. */
export function record(name, stats, t = Date.now()) {
  let list = samples.get(name);
  if (!list) samples.set(name, list = []);
  list.push({t, backlog: stats.backlog, in_flight: stats.in_flight, enqueued: stats.enqueued,
             acked: stats.acked, dead_letters: stats.dead_letters});
  while (list.length && list[0].t < t - keep_ms) list.shift();
}

export function samples_of(name) {
  return samples.get(name) || [];
}
