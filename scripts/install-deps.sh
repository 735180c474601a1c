#!/usr/bin/env bash
# Installs every Debian package laneq needs to build, test, benchmark and package (Debian 12, as
# root); dpkg-dev brings dpkg-shlibdeps, which the Debian package (cmake/packaging.cmake) needs;
# openssl (the command) makes the TLS tests' throwaway certificates (tests/support/tls_certs.hpp).
# libcli11-dev is the laneq CLI's argument parser (header-only); groff-base renders laneq(1) in
# the test that checks the man page (tests/cli/check_man.sh).
# chromium (/usr/bin/chromium) and fonts-dejavu-core are for the web console's browser tests
# (tests/console, ctest label console); npm installs their one npm package, playwright-core, from
# tests/console/package-lock.json (no browser download). Debian's npm package is installed when
# no npm is on the machine: a nodejs build that brings its own npm (such as nodejs 20 from
# NodeSource) conflicts with Debian's npm, which would replace it.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential g++ cmake ninja-build pkg-config ccache git ca-certificates \
  clang clang-format libclang-rt-14-dev \
  libcaf-dev libcaf-doc \
  librocksdb-dev rocksdb-tools \
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev \
  libssl-dev openssl libjemalloc-dev \
  python3 procps curl jq nodejs groff-base \
  chromium fonts-dejavu-core \
  dpkg-dev
if ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get install -y -q --no-install-recommends npm
fi
