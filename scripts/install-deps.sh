#!/usr/bin/env bash
# Installs every Debian package laneq needs to build, test, benchmark and package (Debian 12, as
# root); dpkg-dev brings dpkg-shlibdeps, which the Debian package (cmake/packaging.cmake) needs;
# openssl (the command) makes the TLS tests' throwaway certificates (tests/support/tls_certs.hpp).
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
  libgtest-dev libgmock-dev libbenchmark-dev \
  libssl-dev openssl libjemalloc-dev \
  python3 procps curl jq nodejs \
  dpkg-dev
