#!/usr/bin/env bash
# test.sh: what CI runs (via .ci/run). Installs the Debian packages, then builds and
# runs every ctest test twice, and the threaded ones a third time:
#   1. preset dev     (Debug, ASan + UBSan; leaks and UB abort the test)
#   2. preset release (RelWithDebInfo -O2 -g1), with the web console's tests in headless
#      chromium (tests/console: `npm ci` first)
#   3. preset tsan    (ThreadSanitizer): libqueue's unit tests, the actor tests, the
#      persistence actor's tests (RocksDB on disk) and the HTTP server's tests (laneqd in
#      process and as a process); the first report fails the run (tests/README.md says
#      what is left out)
# Each step prints how long it took.
# Prints one final line, "test.sh: PASSED ..." or "test.sh: FAILED ...", and exits
# non-zero on any failure.
#
# Environment:
#   LANEQ_SKIP_DEPS=1   skip scripts/install-deps.sh (packages already installed)
#   CCACHE_DIR          ccache directory (ccache's default when unset)
#   LANEQ_SIM_SEED, LANEQ_SIM_STEPS   passed through to the simulation tests
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

step="start"
start_s=$(date +%s)
finish() {
  local rc=$?
  local took=$(( $(date +%s) - start_s ))
  if [ "$rc" -eq 0 ]; then
    echo "test.sh: PASSED (dev: ASan+UBSan, release, tsan: unit, actors, persistence, server) in ${took}s"
  else
    echo "test.sh: FAILED at step '${step}' (exit ${rc}) after ${took}s"
  fi
  exit "$rc"
}
trap finish EXIT

run() {  # run <step name> <command...>
  step="$1"; shift
  echo "==> [${step}] $*"
  local t0
  t0=$(date +%s)
  "$@"
  echo "==> [${step}] took $(( $(date +%s) - t0 ))s"
}

if [ "${LANEQ_SKIP_DEPS:-0}" != "1" ]; then
  run "install-deps" bash scripts/install-deps.sh
fi

if command -v ccache >/dev/null 2>&1; then
  echo "==> ccache dir: $(ccache -k cache_dir 2>/dev/null || echo "${CCACHE_DIR:-default}")"
fi

# ---- dev: Debug + sanitizers ----
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run "dev: configure" cmake --preset dev
run "dev: build"     cmake --build --preset dev -j 2
run "dev: test"      ctest --preset dev -j 2
unset ASAN_OPTIONS UBSAN_OPTIONS

# ---- release: RelWithDebInfo -O2 ----
# The console's browser tests (ctest label console, release only) need playwright-core from
# tests/console/package-lock.json; tests/console/run.sh would install it too, this step times it.
run "console: npm ci" npm ci --prefix tests/console --no-audit --no-fund --loglevel=error
run "release: configure" cmake --preset release
run "release: build"     cmake --build --preset release -j 2
run "release: test"      ctest --preset release -j 2

# ---- tsan: ThreadSanitizer (labels and TSAN_OPTIONS come from the test preset) ----
run "tsan: configure" cmake --preset tsan
run "tsan: build"     cmake --build --preset tsan -j 2 --target laneq_unit_tests \
  laneq_actor_tests laneq_crash_tests laneq_server_tests laneqd
run "tsan: test"      ctest --preset tsan -j 2

step="done"
