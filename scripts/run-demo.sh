#!/usr/bin/env bash
# run-demo.sh: installs the Debian packages, builds preset release and runs the demo.
# Arguments are passed to the demo. LANEQ_SKIP_DEPS=1 skips the package install.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ "${LANEQ_SKIP_DEPS:-0}" != "1" ]; then
  bash scripts/install-deps.sh
fi

cmake --preset release
if ! cmake --build --preset release -j 2 --target laneq_demo; then
  echo "run-demo.sh: FAILED to build laneq_demo (are there sources in apps/demo/?)" >&2
  exit 1
fi

demo="build/release/bin/laneq_demo"
echo "==> $demo $*"
exec "$demo" "$@"
