#!/usr/bin/env bash
# run-figures.sh: the benchmarks/README.md figures. For each scenario, starts a fresh laneqd
# (release build, its own data directory, synced writes: laneqd's default) on ports the OS picks
# (read from its output), runs laneq_loadgen against it with --server-pid, prints one JSON line
# per scenario on stdout and stops laneqd with SIGTERM.
#   bash benchmarks/loadgen/run-figures.sh [MESSAGES] [SCENARIO...]
# Scenarios: http-unordered http-groups caf-unordered caf-groups http-rate caf-rate (default: all),
# and http-rate-groups, node-rate, node-rate-unordered (not in the default set; node-*: the Node.js
# client benchmarks/loadgen/node/latency.mjs instead of laneq_loadgen, `node` from PATH or NODE).
# Environment: LOADGEN_IN_FLIGHT (producer batches in flight, default 1), LOADGEN_DURABILITY
# (durable|fast, default durable), LOADGEN_ROUNDS (default 1). With more than one round the
# scenarios take turns, round after round, so a change in the machine's speed falls on all of them
# alike; every run's line carries its round, and a summary line per scenario follows: median, min
# and max of the end-to-end rate, of laneqd's CPU per message, of the p50 and p99 enqueue-to-delivery
# and of the machine probe.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${LANEQ_BIN_DIR:-$root/build/release/bin}"
messages="${1:-200000}"
shift || true
scenarios=("$@")
[ "${#scenarios[@]}" -gt 0 ] || scenarios=(http-unordered http-groups caf-unordered caf-groups http-rate caf-rate)

common=(--size=256 --consumers=4 --batch=100 --receive-max=100 --in-flight=${LOADGEN_IN_FLIGHT:-1} --durability=${LOADGEN_DURABILITY:-durable})
rounds="${LOADGEN_ROUNDS:-1}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "run-figures.sh: LOADGEN_ROUNDS must be a positive number" >&2; exit 2; }
results="$(mktemp -t laneq-figures.XXXXXX)"
trap 'rm -f "$results"' EXIT
for round in $(seq 1 "$rounds"); do
  for s in "${scenarios[@]}"; do
    case "$s" in
      http-unordered) args=(--transport=http --groups=0 --messages="$messages") ;;
      http-groups) args=(--transport=http --groups=1000 --messages="$messages") ;;
      caf-unordered) args=(--transport=caf --groups=0 --messages="$messages") ;;
      caf-groups) args=(--transport=caf --groups=1000 --messages="$messages") ;;
      http-rate) args=(--transport=http --groups=0 --messages=30000 --rate=2000 --batch=10) ;;
      caf-rate) args=(--transport=caf --groups=0 --messages=30000 --rate=2000 --batch=10) ;;
      http-rate-groups) args=(--transport=http --groups=1000 --messages=30000 --rate=2000 --batch=10) ;;
      node-rate) args=(--groups=1000) ;;
      node-rate-unordered) args=(--groups=0) ;;
      *) echo "run-figures.sh: unknown scenario $s" >&2; exit 2 ;;
    esac
    data="$(mktemp -d -t laneq-bench.XXXXXX)"
    # Both ports are picked by the OS when laneqd binds them, and read back from what it prints.
    "$bin/laneqd" --data-dir "$data/data" --http-port 0 --caf-port any >"$data/out" 2>"$data/err" &
    pid=$!
    for _ in $(seq 1 300); do grep -q '^laneqd ready' "$data/out" && break; sleep 0.1; done
    port="$(sed -n 's/^laneqd http_port=\([0-9]*\)$/\1/p' "$data/out")"
    caf_port="$(sed -n 's/^laneqd caf_port=\([0-9]*\)$/\1/p' "$data/out")"
    echo "== $s, round $round of $rounds (laneqd pid $pid, http $port, caf $caf_port, load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    rc=0
    if [[ "$s" == node-* ]]; then
      # 2,000 msg/s for 15 s (30,000 messages), 10 producer connections, 4 consumers.
      "${NODE:-node}" "$root/benchmarks/loadgen/node/latency.mjs" "${args[@]}" --rate=2000 --seconds=15 \
        --durability="${LOADGEN_DURABILITY:-durable}" --url="http://127.0.0.1:$port" --server-pid="$pid" |
        sed "s/^{/{\"scenario\":\"$s\",\"round\":$round,/" | tee -a "$results" || rc=$?
    else
      "$bin/laneq_loadgen" "${common[@]}" "${args[@]}" --url="http://127.0.0.1:$port" \
        --caf-port="$caf_port" --server-pid="$pid" |
        sed "s/^{/{\"scenario\":\"$s\",\"round\":$round,/" | tee -a "$results" || rc=$?
    fi
    kill -TERM "$pid"; wait "$pid" || true
    rm -rf "$data"
    [ "$rc" -eq 0 ] || echo "== $s: loadgen exit $rc" >&2
  done
done
[ "$rounds" -eq 1 ] || python3 - "$results" <<'PY'
import json, statistics, sys

runs = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        runs.setdefault(r["scenario"], []).append(r)

def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {k: round(v, 1) for k, v in
            (("median", statistics.median(values)), ("min", min(values)), ("max", max(values)))}

def p_us(r, q):
    e = r.get("enqueue_to_delivery", {})  # laneq_loadgen reports microseconds, latency.mjs milliseconds
    return e.get(q + "_us") if q + "_us" in e else (e[q + "_ms"] * 1000 if e.get(q + "_ms") is not None else None)

for scenario, rs in runs.items():
    print(json.dumps({
        "summary": scenario,
        "runs": len(rs),
        "ok_runs": sum(1 for r in rs if r["ok"]),
        "end_to_end_rate": spread([r.get("end_to_end_rate") for r in rs]),
        "server_cpu_us_per_message": spread([(r.get("server") or {}).get("cpu_us_per_message") for r in rs]),
        "enqueue_to_delivery_p50_us": spread([p_us(r, "p50") for r in rs]),
        "enqueue_to_delivery_p99_us": spread([p_us(r, "p99") for r in rs]),
        "thread_round_trip_us": spread([r.get("machine", {}).get("thread_round_trip_us") for r in rs]),
    }))
PY
