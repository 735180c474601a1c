#!/usr/bin/env bash
# ctest package.caf_program_builds_against_the_installed_package: installs the build into a
# scratch prefix (cmake --install --prefix), checks what landed there, then builds
# tests/package/consumer.cpp out of tree against it twice, with find_package(laneq) and with
# pkg-config, and runs both: each must create a queue on an embedded broker, enqueue, receive and
# ack (consumer.cpp). Writes only under WORK_DIR. Exits non-zero naming the first failed check.
#
#   run_consumer_test.sh BUILD_DIR SOURCE_DIR WORK_DIR VERSION CXX [GENERATOR [LAUNCHER]]
set -euo pipefail

build_dir="$1" source_dir="$2" work="$3" version="$4" cxx="$5"
generator="${6:-}" launcher="${7:-}"

fail() { echo "PACKAGE TEST FAILED: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"

echo "== cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" > "$work/install.log" \
  || { cat "$work/install.log"; fail "cmake --install failed"; }

# What a CAF application and an operator need, and nothing outside the prefix.
libdir=$(cd "$prefix" && dirname "$(find . -path '*/cmake/laneq/laneqConfig.cmake' | head -1)" \
  | sed 's|^\./||; s|/cmake/laneq$||')
[ -n "$libdir" ] && [ "$libdir" != "." ] || fail "no <libdir>/cmake/laneq/laneqConfig.cmake under $prefix"
for f in bin/laneqd bin/laneq \
         include/laneq/version.hpp include/laneq/queue_spec.hpp include/laneq/actors/broker.hpp \
         "$libdir/liblaneq_actors.a" "$libdir/liblaneq_persistence.a" \
         "$libdir/liblaneq_protocol.a" "$libdir/liblaneq_core.a" \
         "$libdir/cmake/laneq/laneqConfigVersion.cmake" "$libdir/cmake/laneq/laneqTargets.cmake" \
         "$libdir/cmake/laneq/laneq-caf.cmake" "$libdir/pkgconfig/laneq.pc" \
         lib/systemd/system/laneqd.service share/doc/laneq/laneqd.json; do
  [ -f "$prefix/$f" ] || fail "$f is not installed"
done
if grep -v "^-- Install configuration" "$work/install.log" | grep -v -- "$prefix" | grep -q .; then
  grep -v -- "$prefix" "$work/install.log"
  fail "cmake --install wrote outside its prefix"
fi
got=$("$prefix/bin/laneqd" --version) || fail "installed laneqd --version exited non-zero"
[ "$got" = "laneqd $version" ] || fail "installed laneqd --version printed '$got'"

echo "== find_package(laneq) from $prefix"
gen_args=()
[ -n "$generator" ] && gen_args+=(-G "$generator")
[ -n "$launcher" ] && gen_args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
cmake -S "$source_dir/tests/package" -B "$work/consumer" "${gen_args[@]}" \
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=$cxx" "-DCMAKE_PREFIX_PATH=$prefix" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring the consumer failed"; }
grep -q "laneq $version from $prefix/$libdir/cmake/laneq" "$work/configure.log" \
  || { cat "$work/configure.log"; fail "find_package(laneq) did not find version $version in $prefix"; }
cmake --build "$work/consumer" -j 1 > "$work/build.log" 2>&1 \
  || { cat "$work/build.log"; fail "building the consumer with find_package(laneq) failed"; }
out=$("$work/consumer/laneq_package_consumer" "$work/data-cmake") \
  || { echo "$out"; fail "the consumer built with CMake failed"; }
echo "$out"
grep -qx "laneq $version ($version)" <<< "$out" || fail "the consumer did not print laneq $version"
grep -qx "package consumer: ok" <<< "$out" || fail "the consumer (CMake) did not finish"

echo "== pkg-config laneq from $prefix"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
pc_version=$(pkg-config --modversion laneq) || fail "pkg-config does not find laneq.pc"
[ "$pc_version" = "$version" ] || fail "laneq.pc says version $pc_version"
# shellcheck disable=SC2046
${launcher:+"$launcher"} "$cxx" -std=c++20 -O1 -o "$work/consumer-pc" \
  "$source_dir/tests/package/consumer.cpp" $(pkg-config --cflags --libs laneq) \
  > "$work/pc-build.log" 2>&1 || { cat "$work/pc-build.log"; fail "building with pkg-config failed"; }
out=$("$work/consumer-pc" "$work/data-pc") || { echo "$out"; fail "the consumer built with pkg-config failed"; }
grep -qx "package consumer: ok" <<< "$out" || fail "the consumer (pkg-config) did not finish"

# Passed: drop the installed tree and the stores (kept when a check fails).
rm -rf "$prefix" "$work/data-cmake" "$work/data-pc"
echo "package test: OK (installed, found by CMake and pkg-config, the embedded broker works)"
