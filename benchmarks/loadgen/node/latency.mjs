#!/usr/bin/env node
// latency.mjs: enqueue-to-delivery latency of laneqd over HTTP, from a Node.js client shaped as
// issue 23 describes: a steady producer that sends batches over keep-alive connections and
// consumers that long-poll and ack each receive in one call. Node built-ins only.
//
//   node benchmarks/loadgen/node/latency.mjs --url=http://127.0.0.1:7070 [--rate=2000]
//       [--seconds=15] [--groups=1000] [--consumers=4] ...   (--help lists every flag)
//
// One JSON object on stdout; the figures are described in benchmarks/README.md, "Node.js client".
// Every time is taken with performance.now() in this one process (one monotonic clock).
import http from "node:http";
import { readFileSync, readdirSync } from "node:fs";
import { performance, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";

const flags = {
  url: ["http://127.0.0.1:7070", "laneqd's HTTP address"],
  token: ["", "bearer token"],
  queue: ["", "queue to create and use (default nodelat-<pid>)"],
  rate: [2000, "offered msg/s, steady: message k is due k / rate seconds after the start"],
  seconds: [15, "how long the producer runs (messages = rate x seconds)"],
  "warmup-s": [1, "messages due in the first S seconds are left out of the figures"],
  size: [256, "body bytes"],
  groups: [1000, "ordering groups (header g); 0: an unordered queue"],
  keys: ["seq", "seq: message k goes to group k mod groups (as laneq_loadgen); random: a random group"],
  durability: ["durable", "the queue's delivery_durability: durable | fast"],
  batch: [100, "most messages per enqueue"],
  "linger-ms": [0, "a batch is sent when it holds --batch messages or its oldest is this old (0: at every producer tick)"],
  "tick-ms": [1, "the producer's timer: every tick it takes the messages now due"],
  connections: [10, "producer keep-alive connections (http.Agent maxSockets)"],
  "max-in-flight": [0, "enqueue calls the producer keeps in flight; while that many are, messages wait in the batch (0: no bound but the agent's sockets)"],
  consumers: [4, "consumer loops"],
  "receive-max": [100, "max of each receive"],
  "wait-ms": [1000, "long-poll wait of each receive"],
  pipeline: [1, "receives each consumer keeps in flight (1: the next is sent after the ack of the last)"],
  ack: ["sync", "sync: a consumer acks a receive's messages in one call and then receives again; async: it receives again at once, the ack on a connection of its own"],
  "shared-agent": [false, "consumers share the producer's agent (its --connections sockets) instead of one connection each"],
  nodelay: ["default", "client sockets: default (Node's), on (setNoDelay(true)), off (setNoDelay(false))"],
  "drain-s": [10, "how long to wait for the last messages after the producer stops"],
  "server-pid": [0, "laneqd's pid (same host): its CPU over the run is reported from /proc"],
  keep: [false, "keep the queue afterwards"],
};

function usage() {
  const lines = Object.entries(flags).map(([k, [d, h]]) => `  --${k}=${JSON.stringify(d)}  ${h}`);
  return "usage: node latency.mjs [--flag=value ...]\n" + lines.join("\n") + "\n";
}

function parseArgs(argv) {
  const o = {};
  for (const [k, [d]] of Object.entries(flags)) o[k] = d;
  for (const a of argv) {
    if (a === "--help" || a === "-h") { process.stdout.write(usage()); process.exit(0); }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m || !(m[1] in flags)) { process.stderr.write(`latency.mjs: unknown argument ${a}\n` + usage()); process.exit(2); }
    const def = flags[m[1]][0];
    if (typeof def === "boolean") o[m[1]] = m[2] === undefined || m[2] === "true" || m[2] === "1";
    else if (typeof def === "number") {
      const v = Number(m[2]);
      if (m[2] === undefined || !Number.isFinite(v) || v < 0) { process.stderr.write(`latency.mjs: --${m[1]} needs a number >= 0\n`); process.exit(2); }
      o[m[1]] = v;
    } else o[m[1]] = m[2] ?? "";
  }
  const bad = (c, msg) => { if (c) { process.stderr.write(`latency.mjs: ${msg}\n`); process.exit(2); } };
  bad(o.rate <= 0, "--rate must be above 0");
  bad(!["seq", "random"].includes(o.keys), "--keys is seq or random");
  bad(!["sync", "async"].includes(o.ack), "--ack is sync or async");
  bad(!["default", "on", "off"].includes(o.nodelay), "--nodelay is default, on or off");
  bad(!["durable", "fast"].includes(o.durability), "--durability is durable or fast");
  bad(o.batch < 1 || o.batch > 1000 || o["receive-max"] < 1 || o["receive-max"] > 1000, "--batch and --receive-max are 1 to 1000");
  bad(o.consumers < 1 || o.connections < 1 || o.pipeline < 1 || o["tick-ms"] < 1, "--consumers, --connections, --pipeline and --tick-ms are at least 1");
  bad(o.size < 48, "--size is at least 48");
  if (!o.queue) o.queue = `nodelat-${process.pid}`;
  return o;
}

const o = parseArgs(process.argv.slice(2));
const base = new URL(o.url);
const now = () => performance.now();

// ---- HTTP ----
function makeAgent(maxSockets) {
  const agent = new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
  if (o.nodelay !== "default") {
    const orig = agent.createConnection.bind(agent);
    agent.createConnection = (...args) => {
      const s = orig(...args);
      s.setNoDelay(o.nodelay === "on");
      return s;
    };
  }
  return agent;
}
const producerAgent = makeAgent(o.connections);

/** One request; resolves {status, json, tEnd} with tEnd taken when the answer's last byte came. */
function call(agent, method, path, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    const headers = { "content-type": "application/json" };
    if (payload) headers["content-length"] = payload.length;
    if (o.token) headers.authorization = `Bearer ${o.token}`;
    let tSocket = 0;
    const req = http.request({ host: base.hostname, port: base.port || 80, method, path, agent, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const tEnd = now();
        const text = Buffer.concat(chunks).toString("utf8");
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { json = null; }
        resolve({ status: res.statusCode, json, text, tEnd, tSocket });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.on("socket", () => { tSocket = now(); });
    req.end(payload);
  });
}
const qpath = (suffix) => `/v1/queues/${encodeURIComponent(o.queue)}${suffix}`;

// ---- per-message records (index: message number k) ----
const total = Math.round(o.rate * o.seconds);
const due = new Float64Array(total);        // when the message was due (the steady schedule)
const handoff = new Float64Array(total);    // when its batch was handed to http.request
const answered = new Float64Array(total);   // when its enqueue answer came
const delivered = new Float64Array(total);  // when the receive answer that brought it came (first)
const recvSent = new Float64Array(total);   // when that receive was sent
const ackDone = new Float64Array(total);    // when its ack answer came
const batchOf = new Uint16Array(total);     // size of the enqueue batch it went in
const gotSocket = new Float64Array(total);  // when its enqueue request was given a socket by the agent
let deliveredCount = 0, ackedCount = 0, duplicates = 0, failedAcks = 0, orderViolations = 0;
const lastInGroup = new Map();

// ---- instrumentation of the client itself ----
const eld = monitorEventLoopDelay({ resolution: 1 });
let gcCount = 0, gcTotalMs = 0, gcMaxMs = 0;
const gcObs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) { gcCount++; gcTotalMs += e.duration; gcMaxMs = Math.max(gcMaxMs, e.duration); }
});
let waitingReceives = 0, noReceiveSince = now(), noReceiveMs = 0;  // time with no receive in flight
function receiveStarted() { if (waitingReceives++ === 0) noReceiveMs += now() - noReceiveSince; }
function receiveEnded() { if (--waitingReceives === 0) noReceiveSince = now(); }

// ---- laneqd's own histograms (GET /metrics) ----
async function scrape() {
  const r = await call(producerAgent, "GET", "/metrics");
  if (r.status !== 200) return null;
  const out = {};
  for (const line of r.text.split("\n")) {
    const m = /^(laneq_enqueue_to_delivery_seconds|laneq_store_commit_seconds|laneq_http_request_duration_seconds)_(bucket|sum|count)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[3] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (m[1] === "laneq_enqueue_to_delivery_seconds" && labels.queue !== o.queue) continue;
    const key = m[1] + (labels.route ? `{${labels.route}}` : "");
    const h = (out[key] ??= { buckets: [], sum: 0, count: 0 });
    if (m[2] === "bucket") h.buckets.push([labels.le === "+Inf" ? Infinity : Number(labels.le), Number(m[4])]);
    else h[m[2]] = Number(m[4]);
  }
  return out;
}
/** The difference of two scrapes of one histogram: count, mean and bucket bounds of quantiles. */
function histDelta(a, b) {
  if (!b) return null;
  const prev = a ?? { buckets: b.buckets.map(([le]) => [le, 0]), sum: 0, count: 0 };
  const count = b.count - prev.count;
  if (count <= 0) return { count: 0 };
  const cum = b.buckets.map(([le, c], i) => [le, c - (prev.buckets[i]?.[1] ?? 0)]);
  const q = (p) => {  // the upper bound of the bucket that holds quantile p, in ms
    const want = p * count;
    for (const [le, c] of cum) if (c >= want) return le === Infinity ? "inf" : le * 1000;
    return "inf";
  };
  const share = (ms) => { for (const [le, c] of cum) if (le * 1000 >= ms - 1e-9) return c / count; return 1; };
  return { count, mean_ms: round((b.sum - prev.sum) * 1000 / count), p50_le_ms: q(0.5), p90_le_ms: q(0.9), p99_le_ms: q(0.99),
    p999_le_ms: q(0.999), share_le_2_5_ms: round(share(2.5)), share_le_5_ms: round(share(5)), share_le_10_ms: round(share(10)) };
}

/** laneqd's CPU seconds so far (utime + stime of /proc/<pid>/stat, 100 ticks a second), or null. */
function serverCpu() {
  if (!o["server-pid"]) return null;
  try {
    const f = readFileSync(`/proc/${o["server-pid"]}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch { return null; }
}

/** The machine's CPU and I/O pressure (PSI "some" totals, µs) and laneqd's threads' time waiting
 * for a CPU (sum of /proc/<pid>/task/<tid>/schedstat's run-queue delay, ns). */
function pressure() {
  const psi = (f) => { try { return Number(/some .*total=(\d+)/.exec(readFileSync(f, "utf8"))[1]); } catch { return null; } };
  let rq = null;
  if (o["server-pid"]) {
    try {
      rq = 0;
      for (const t of readdirSync(`/proc/${o["server-pid"]}/task`))
        rq += Number(readFileSync(`/proc/${o["server-pid"]}/task/${t}/schedstat`, "utf8").split(" ")[1]);
    } catch { rq = null; }
  }
  let self = null;
  try { self = Number(readFileSync("/proc/self/schedstat", "utf8").split(" ")[1]); } catch { self = null; }
  return { cpu: psi("/proc/pressure/cpu"), io: psi("/proc/pressure/io"), rq, self, t: now() };
}
function pressureDelta(a, b) {
  const ms = b.t - a.t;
  const share = (x, y) => (x === null || y === null ? null : round((y - x) / 1000 / ms));
  return { cpu_some_share: share(a.cpu, b.cpu), io_some_share: share(a.io, b.io),
    laneqd_runqueue_wait_ms_per_s: a.rq === null || b.rq === null ? null : round((b.rq - a.rq) / 1e6 / (ms / 1000), 1),
    client_runqueue_wait_ms_per_s: a.self === null || b.self === null ? null : round((b.self - a.self) / 1e6 / (ms / 1000), 1) };
}

// ---- producer ----
const t0 = now() + 200;  // the schedule starts a little after setup
let nextK = 0;           // next message to create
const pending = [];        // messages waiting in the producer's batch
let enqueueFailures = 0, enqueueCalls = 0, inflightEnqueues = 0, maxInflightEnqueues = 0;
const pad = "x".repeat(o.size);

function keyOf(k) {
  if (o.groups === 0) return null;
  const g = o.keys === "seq" ? k % o.groups : Math.floor(Math.random() * o.groups);
  return "g" + g;
}

function flush() {
  const ks = pending.splice(0, o.batch);
  const th = now();  // the stamp: this batch is handed to http.request now
  const msgs = ks.map((k) => {
    handoff[k] = th;
    batchOf[k] = ks.length;
    const stamp = `{"k":${k},"t":${th.toFixed(3)},"p":"`;
    const body = stamp + pad.slice(0, Math.max(0, o.size - stamp.length - 2)) + `"}`;
    const g = keyOf(k);
    return g === null ? { body } : { body, headers: { g } };
  });
  enqueueCalls++;
  maxInflightEnqueues = Math.max(maxInflightEnqueues, ++inflightEnqueues);
  call(producerAgent, "POST", qpath("/messages"), { messages: msgs }).then((r) => {
    inflightEnqueues--;
    while (o["max-in-flight"] > 0 && pending.length > 0 && mayFlush()) flush();  // what waited for this answer goes now
    if (r.status !== 200) { enqueueFailures++; process.stderr.write(`enqueue: ${r.status} ${r.text}\n`); return; }
    for (const k of ks) { answered[k] = r.tEnd; gotSocket[k] = r.tSocket; }
  }, (e) => { inflightEnqueues--; enqueueFailures++; process.stderr.write(`enqueue: ${e.message}\n`); });
}

const mayFlush = () => o["max-in-flight"] === 0 || inflightEnqueues < o["max-in-flight"];

let producerDone;
const producerFinished = new Promise((r) => (producerDone = r));
function tick() {
  const t = now();
  while (nextK < total && t0 + (nextK * 1000) / o.rate <= t) {
    due[nextK] = t0 + (nextK * 1000) / o.rate;
    pending.push(nextK++);
    if (pending.length >= o.batch && mayFlush()) flush();
  }
  while (pending.length > 0 && mayFlush() && (o["linger-ms"] === 0 || t - due[pending[0]] >= o["linger-ms"] || nextK >= total)) flush();
  if (nextK < total || pending.length > 0) setTimeout(tick, o["tick-ms"]);
  else producerDone();
}

// ---- consumers ----
let stopping = false;
const consumerAgents = [];
let receives = 0, emptyReceives = 0, receivedMsgs = 0, ackCalls = 0;

function settle(msgs, tEnd, tSent) {
  const leases = [];
  for (const m of msgs) {
    let k = -1;
    try { k = JSON.parse(m.body).k; } catch { /* not ours */ }
    leases.push(m.lease);
    if (!(k >= 0 && k < total)) continue;
    if (delivered[k] !== 0) { duplicates++; continue; }
    delivered[k] = tEnd;
    recvSent[k] = tSent;
    deliveredCount++;
    if (m.ordering_key) {
      const last = lastInGroup.get(m.ordering_key);
      if (last !== undefined && last > k) orderViolations++;
      lastInGroup.set(m.ordering_key, k);
    }
  }
  return leases;
}

async function ackAll(agent, msgs, leases) {
  ackCalls++;
  const r = await call(agent, "POST", qpath("/ack"), { leases });
  if (r.status !== 200) { failedAcks += leases.length; return; }
  failedAcks += r.json?.failed?.length ?? 0;
  for (const m of msgs) {
    try { const k = JSON.parse(m.body).k; if (ackDone[k] === 0) { ackDone[k] = r.tEnd; ackedCount++; } } catch { /* skip */ }
  }
}

async function receiveLoop(agent, ackAgent) {
  while (!stopping) {
    const tSent = now();
    receiveStarted();
    let r;
    try { r = await call(agent, "POST", qpath("/receive"), { max: o["receive-max"], wait_ms: o["wait-ms"] }); }
    catch (e) { receiveEnded(); if (!stopping) process.stderr.write(`receive: ${e.message}\n`); return; }
    receiveEnded();
    receives++;
    if (r.status !== 200) { process.stderr.write(`receive: ${r.status} ${r.text}\n`); return; }
    const msgs = r.json.messages ?? [];
    if (msgs.length === 0) { emptyReceives++; continue; }
    receivedMsgs += msgs.length;
    const leases = settle(msgs, r.tEnd, tSent);
    if (o.ack === "sync") await ackAll(agent, msgs, leases);
    else ackAll(ackAgent, msgs, leases).catch((e) => process.stderr.write(`ack: ${e.message}\n`));
  }
}

// ---- figures ----
function round(x, d = 3) { return Math.round(x * 10 ** d) / 10 ** d; }
function summary(values) {
  const a = Float64Array.from(values).sort();
  const q = (p) => a.length ? round(a[Math.min(a.length - 1, Math.floor(p * a.length))]) : null;
  return { count: a.length, p50_ms: q(0.5), p90_ms: q(0.9), p99_ms: q(0.99), p999_ms: q(0.999), max_ms: a.length ? round(a[a.length - 1]) : null,
    mean_ms: a.length ? round(a.reduce((s, x) => s + x, 0) / a.length) : null };
}

/// Creates the queue (exits when laneqd cannot be reached or refuses it).
async function createQueue() {
  const spec = { delivery_durability: o.durability };
  if (o.groups > 0) spec.ordering = { mode: "key", key: [{ header: "g" }] };
  let r;
  try { r = await call(producerAgent, "PUT", qpath(""), spec); }
  catch (e) { process.stderr.write(`latency.mjs: cannot reach ${o.url}: ${e.message}\n`); process.exit(3); }
  if (r.status !== 200 && r.status !== 201) { process.stderr.write(`latency.mjs: create queue: ${r.status} ${r.text}\n`); process.exit(1); }
}

/// Per message, over the messages due after the warm-up and delivered: the latency and its
/// parts, and the slowest 1% of them.
function analyze() {
  // Per message, the messages due after the warm-up and delivered.
  const from = Math.min(total, Math.round(o.rate * o["warmup-s"]));
  const e2d = [], due2d = [], gen = [], enq = [], sockWait = [], ans2d = [], e2a = [];
  const waitingRecv = [], laterRecv = [];  // delivered by a receive sent before / after the enqueue answer
  let counted = 0;
  for (let k = from; k < total; k++) {
    if (delivered[k] === 0 || answered[k] === 0) continue;
    counted++;
    const d = delivered[k] - handoff[k];
    e2d.push(d);
    due2d.push(delivered[k] - due[k]);
    gen.push(handoff[k] - due[k]);
    enq.push(answered[k] - handoff[k]);
    sockWait.push(gotSocket[k] - handoff[k]);
    ans2d.push(delivered[k] - answered[k]);
    if (ackDone[k] !== 0) e2a.push(ackDone[k] - handoff[k]);
    (recvSent[k] < answered[k] ? waitingRecv : laterRecv).push(d);
  }
  // The slowest 1%: what their time was made of.
  const idx = [];
  for (let k = from; k < total; k++) if (delivered[k] !== 0 && answered[k] !== 0) idx.push(k);
  idx.sort((a, b) => (delivered[b] - handoff[b]) - (delivered[a] - handoff[a]));
  const tail = idx.slice(0, Math.max(1, Math.floor(idx.length / 100)));
  const mean = (f) => tail.length ? round(tail.reduce((s, k) => s + f(k), 0) / tail.length) : null;
  return { counted, e2d, due2d, gen, enq, sockWait, ans2d, e2a, waitingRecv, laterRecv, tail, mean };
}

// Over 80 lines: the run in its order (queue, consumers, load, drain, scrape), then the report as
// one object literal, its fields in the order they are printed.
async function main() {
  await createQueue();
  const before = await scrape();

  for (let i = 0; i < o.consumers; i++) {
    const a = o["shared-agent"] ? producerAgent : makeAgent(o.pipeline);
    const ackAgent = o.ack === "async" ? makeAgent(o.pipeline) : a;
    consumerAgents.push(a, ackAgent);
  }
  const loops = [];
  for (let i = 0; i < o.consumers; i++)
    for (let j = 0; j < o.pipeline; j++) loops.push(receiveLoop(consumerAgents[2 * i], consumerAgents[2 * i + 1]));

  eld.enable();
  gcObs.observe({ entryTypes: ["gc"] });
  const cpu0 = process.cpuUsage();
  const serverCpu0 = serverCpu();
  const p0 = pressure();
  const tStart = now();
  setTimeout(tick, Math.max(0, t0 - now()));
  await producerFinished;
  const deadline = now() + o["drain-s"] * 1000;
  while (ackedCount < total && now() < deadline) await new Promise((res) => setTimeout(res, 20));
  const tEnd = now();
  const cpu = process.cpuUsage(cpu0);
  const serverCpu1 = serverCpu();
  const p1 = pressure();
  stopping = true;
  eld.disable();
  gcObs.disconnect();
  const after = await scrape();
  for (const a of new Set(consumerAgents)) a.destroy();
  await Promise.race([Promise.allSettled(loops), new Promise((res) => setTimeout(res, 100))]);
  if (!o.keep) await call(producerAgent, "DELETE", qpath("?force=true")).catch(() => {});
  producerAgent.destroy();

  const { counted, e2d, due2d, gen, enq, sockWait, ans2d, e2a, waitingRecv, laterRecv, tail, mean } = analyze();
  const wall = (tEnd - tStart) / 1000;

  const report = {
    ok: deliveredCount === total && ackedCount === total && enqueueFailures === 0 && orderViolations === 0,
    client: "node " + process.version,
    queue: o.queue, durability: o.durability, groups: o.groups, keys: o.keys, body_bytes: o.size,
    offered_rate: o.rate, messages: total, measured_messages: counted, warmup_s: o["warmup-s"],
    producer: {
      how: `a timer every ${o["tick-ms"]} ms takes the messages due (message k is due k/${o.rate} s after the start); ` +
        (o["linger-ms"] > 0 ? `a batch is sent when it holds ${o.batch} messages or its oldest has waited ${o["linger-ms"]} ms`
          : `a batch is sent at every tick with what is due (at most ${o.batch})`) +
        (o["max-in-flight"] > 0 ? `, but only while fewer than ${o["max-in-flight"]} enqueue calls are in flight (else the messages wait, and go when an answer comes)` : "") +
        `; over at most ${o.connections} keep-alive connections (http.Agent maxSockets); each message is stamped when its batch is handed to http.request`,
      batch_max: o.batch, linger_ms: o["linger-ms"], tick_ms: o["tick-ms"], connections: o.connections, max_in_flight: o["max-in-flight"],
      enqueue_calls: enqueueCalls, mean_batch: round(total / Math.max(1, enqueueCalls), 1), max_enqueues_in_flight: maxInflightEnqueues, enqueue_failures: enqueueFailures,
    },
    consumer: {
      how: `${o.consumers} consumers, each ${o.pipeline} receive(s) in flight of max ${o["receive-max"]}, wait_ms ${o["wait-ms"]}; ` +
        (o.ack === "sync" ? "each receive's messages acked in one call, then the next receive" : "the next receive sent at once, the ack in one call on a connection of its own") +
        (o["shared-agent"] ? "; on the producer's agent" : "; a keep-alive connection each"),
      consumers: o.consumers, pipeline: o.pipeline, ack: o.ack, receive_max: o["receive-max"], wait_ms: o["wait-ms"], shared_agent: o["shared-agent"],
      receives, empty_receives: emptyReceives, messages_per_receive: round(receivedMsgs / Math.max(1, receives - emptyReceives), 1), ack_calls: ackCalls,
      time_with_no_receive_waiting_share: round(noReceiveMs / (tEnd - tStart)),
    },
    nodelay: o.nodelay,
    delivered: deliveredCount, acked: ackedCount, duplicates, failed_acks: failedAcks, order_violations: orderViolations,
    // The headline: from the stamp (the batch handed to http.request) to the receive answer.
    enqueue_to_delivery: summary(e2d),
    breakdown: {
      due_to_delivery: summary(due2d),           // from the schedule: the producer's batching included
      producer_wait: summary(gen),               // due to stamp: timer lateness and batching
      enqueue_call: summary(enq),                // stamp to the enqueue answer (laneqd's synced write inside)
      enqueue_socket_wait: summary(sockWait),    // stamp to the agent giving the request a socket (all 10 busy: it waits)
      answer_to_delivery: summary(ans2d),        // enqueue answer to the receive answer (negative: the delivery came first)
      enqueue_to_ack: summary(e2a),
      by_receive: {                              // was a receive already waiting when the enqueue was answered?
        receive_sent_before_answer: { share: round(waitingRecv.length / Math.max(1, counted)), ...summary(waitingRecv) },
        receive_sent_after_answer: { share: round(laterRecv.length / Math.max(1, counted)), ...summary(laterRecv) },
      },
      slowest_1pct: {
        count: tail.length, mean_enqueue_to_delivery_ms: mean((k) => delivered[k] - handoff[k]),
        mean_enqueue_call_ms: mean((k) => answered[k] - handoff[k]),
        mean_enqueue_socket_wait_ms: mean((k) => gotSocket[k] - handoff[k]),
        mean_answer_to_delivery_ms: mean((k) => delivered[k] - answered[k]),
        receive_sent_after_answer_share: round(tail.filter((k) => recvSent[k] >= answered[k]).length / tail.length),
        mean_receive_sent_after_answer_ms: mean((k) => Math.max(0, recvSent[k] - answered[k])),
      },
    },
    server: serverCpu0 === null || serverCpu1 === null ? null : {
      pid: o["server-pid"], cpu_s: round(serverCpu1 - serverCpu0, 2), cpu_cores: round((serverCpu1 - serverCpu0) * 1000 / (tEnd - tStart)),
      cpu_us_per_message: round((serverCpu1 - serverCpu0) * 1e6 / Math.max(1, ackedCount), 1) },
    laneqd: {  // laneqd's own histograms over the run (GET /metrics; the bucket holding each quantile)
      enqueue_to_delivery: histDelta(before?.laneq_enqueue_to_delivery_seconds, after?.laneq_enqueue_to_delivery_seconds),
      store_commit: histDelta(before?.laneq_store_commit_seconds, after?.laneq_store_commit_seconds),
      http_enqueue: histDelta(before?.["laneq_http_request_duration_seconds{enqueue}"], after?.["laneq_http_request_duration_seconds{enqueue}"]),
      http_receive: histDelta(before?.["laneq_http_request_duration_seconds{receive}"], after?.["laneq_http_request_duration_seconds{receive}"]),
      http_ack: histDelta(before?.["laneq_http_request_duration_seconds{ack}"], after?.["laneq_http_request_duration_seconds{ack}"]),
    },
    node: {
      event_loop_delay_ms: { p50: round(eld.percentile(50) / 1e6), p99: round(eld.percentile(99) / 1e6), max: round(eld.max / 1e6), mean: round(eld.mean / 1e6) },
      gc: { count: gcCount, total_ms: round(gcTotalMs), max_ms: round(gcMaxMs) },
      cpu_s: round((cpu.user + cpu.system) / 1e6), cpu_cores: round((cpu.user + cpu.system) / 1e6 / wall),
    },
    machine: pressureDelta(p0, p1),  // share of the run some task waited for a CPU / for I/O (PSI); run-queue waits
    duration_s: round(wall), loadavg: (await import("node:os")).loadavg().map((x) => round(x, 2)),
  };
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exit(report.ok ? 0 : 1);
}

main().catch((e) => { process.stderr.write(`latency.mjs: ${e.stack}\n`); process.exit(1); });
