#!/usr/bin/env bash
# run.sh LANEQD: the console's browser tests (tests/README.md). Installs playwright-core from
# package-lock.json (npm ci) when node_modules is missing or older than the lock file, then runs
# console.test.mjs with node's test runner against a laneqd started from LANEQD, in Debian's
# chromium (LANEQ_CHROMIUM, default /usr/bin/chromium).
set -euo pipefail
laneqd="${1:?usage: run.sh path/to/laneqd}"
export LANEQD_BINARY="$(realpath -e "$laneqd")"
cd "$(dirname "${BASH_SOURCE[0]}")"
browser="${LANEQ_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$browser" ]; then
  echo "console tests: $browser is missing; bash scripts/install-deps.sh installs Debian's chromium" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
exec node --test --test-concurrency=1 --test-timeout=180000 units.test.mjs console.test.mjs
