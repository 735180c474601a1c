#!/usr/bin/env bash
# canary_laneqd.sh: a laneqd that fails on its own, for the kill -9 test's canaries (ctest
# kill9_canary_*_must_be_caught, CMakeLists.txt): the test must notice and fail for that reason.
#   LANEQ_KILL9_CANARY=abort             laneqd gets SIGABRT 50 ms after it says it is ready (while
#                                        the test connects or loads it: both must notice)
#   LANEQ_KILL9_CANARY=sanitizer_report  a sanitizer's report line is on its stderr first
#   LANEQ_KILL9_CANARY_LANEQD            the real laneqd binary
set -euo pipefail
laneqd="${LANEQ_KILL9_CANARY_LANEQD:?the real laneqd binary}"
pid=$$  # laneqd's pid after the exec below
case "${LANEQ_KILL9_CANARY:-}" in
  abort)
    # laneqd's stdout passes through this loop, which aborts laneqd after "laneqd ready".
    exec > >(while IFS= read -r line; do
               printf '%s\n' "$line"
               if [ "$line" = "laneqd ready" ]; then sleep 0.05 && kill -ABRT "$pid"; fi
             done)
    ;;
  sanitizer_report)
    echo "==1==ERROR: AddressSanitizer: heap-use-after-free (kill9 canary)" >&2
    ;;
  *)
    echo "canary_laneqd.sh: LANEQ_KILL9_CANARY must be abort or sanitizer_report" >&2
    exit 2
    ;;
esac
exec "$laneqd" "$@"
