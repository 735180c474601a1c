#!/usr/bin/env bash
# run-figures.sh: the benchmarks/README.md figures. For each scenario, starts a fresh laneqd
# (release build, its own data directory, synced writes: laneqd's default) on free ports, runs
# laneq_loadgen against it with --server-pid, prints one JSON line per scenario on stdout and
# stops laneqd with SIGTERM.
#   bash benchmarks/loadgen/run-figures.sh [MESSAGES] [SCENARIO...]
# Scenarios: http-unordered http-groups caf-unordered caf-groups http-rate caf-rate (default: all).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${LANEQ_BIN_DIR:-$root/build/release/bin}"
messages="${1:-200000}"
shift || true
scenarios=("$@")
[ "${#scenarios[@]}" -gt 0 ] || scenarios=(http-unordered http-groups caf-unordered caf-groups http-rate caf-rate)

common=(--size=256 --consumers=4 --batch=100 --receive-max=100 --in-flight=${LOADGEN_IN_FLIGHT:-1} --durability=${LOADGEN_DURABILITY:-durable})
for s in "${scenarios[@]}"; do
  case "$s" in
    http-unordered) args=(--transport=http --groups=0 --messages="$messages") ;;
    http-groups) args=(--transport=http --groups=1000 --messages="$messages") ;;
    caf-unordered) args=(--transport=caf --groups=0 --messages="$messages") ;;
    caf-groups) args=(--transport=caf --groups=1000 --messages="$messages") ;;
    http-rate) args=(--transport=http --groups=0 --messages=30000 --rate=2000 --batch=10) ;;
    caf-rate) args=(--transport=caf --groups=0 --messages=30000 --rate=2000 --batch=10) ;;
    *) echo "run-figures.sh: unknown scenario $s" >&2; exit 2 ;;
  esac
  data="$(mktemp -d -t laneq-bench.XXXXXX)"
  caf_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$bin/laneqd" --data-dir "$data/data" --http-port 0 --caf-port "$caf_port" >"$data/out" 2>"$data/err" &
  pid=$!
  for _ in $(seq 1 300); do grep -q '^laneqd ready' "$data/out" && break; sleep 0.1; done
  port="$(sed -n 's/^laneqd http_port=\([0-9]*\)$/\1/p' "$data/out")"
  echo "== $s (laneqd pid $pid, http $port, caf $caf_port, load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  rc=0
  "$bin/laneq_loadgen" "${common[@]}" "${args[@]}" --url="http://127.0.0.1:$port" \
    --caf-port="$caf_port" --server-pid="$pid" | sed "s/^{/{\"scenario\":\"$s\",/" || rc=$?
  kill -TERM "$pid"; wait "$pid" || true
  rm -rf "$data"
  [ "$rc" -eq 0 ] || echo "== $s: loadgen exit $rc" >&2
done
