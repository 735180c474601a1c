#!/usr/bin/env bash
# ctest package.deb_has_the_daemon_unit_config_and_package_config: builds the Debian package
# with CPack (cmake/packaging.cmake) and checks it: its control fields (name, version, the
# runtime libraries in Depends, the conffile), that it holds the binaries, the systemd unit, the
# config, the package config, the man pages and laneq's bash completion, and that the laneqd and laneq extracted from it (dpkg-deb -x
# into a scratch directory) print the version, that laneqd serves with the packaged config and
# stops on SIGTERM, and that a CAF program builds with its laneq.pc and runs; the unit is
# verified with systemd-analyze when it is installed. Installs nothing on the system. Exits
# non-zero naming the first failed check.
#
#   check_deb.sh BUILD_DIR WORK_DIR VERSION CONSUMER_CPP CXX [LAUNCHER]
set -euo pipefail

build_dir="$1" work="$2" version="$3" consumer_cpp="$4" cxx="$5" launcher="${6:-}"

fail() { echo "DEB TEST FAILED: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
echo "== cpack -G DEB"
cpack --config "$build_dir/CPackConfig.cmake" -G DEB -B "$work/out" > "$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log"; fail "cpack failed"; }
arch=$(dpkg --print-architecture)
deb="$work/out/laneq_${version}_${arch}.deb"
[ -f "$deb" ] || { ls -R "$work/out"; fail "no $(basename "$deb")"; }

dpkg-deb --info "$deb" > "$work/info.txt"
cat "$work/info.txt"
field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = "laneq" ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', not $version"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture is '$(field Architecture)'"
depends=$(field Depends)
depends_names=$(tr ',' '\n' <<< "$depends" | sed 's/^ *//; s/ .*//')
# The shared libraries laneqd and laneq load on Debian 12 (dpkg-shlibdeps).
for lib in libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17 librocksdb7.8 libboost-json1.81.0 libssl3 \
           libjemalloc2 libstdc++6 libc6; do
  grep -qxF "$lib" <<< "$depends_names" || fail "Depends lacks $lib: $depends"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles > "$work/conffiles" \
  || fail "the package has no conffiles"
grep -qx "/etc/laneq/laneqd.json" "$work/conffiles" || fail "/etc/laneq/laneqd.json is not a conffile"

dpkg-deb --contents "$deb" > "$work/contents.txt"
for path in ./usr/bin/laneqd ./usr/bin/laneq ./usr/lib/systemd/system/laneqd.service \
            ./etc/laneq/laneqd.json ./usr/share/doc/laneq/laneqd.json \
            ./usr/include/laneq/actors/broker.hpp ./usr/include/laneq/version.hpp \
            ./usr/lib/cmake/laneq/laneqConfig.cmake ./usr/lib/cmake/laneq/laneqTargets.cmake \
            ./usr/lib/pkgconfig/laneq.pc ./usr/lib/liblaneq_actors.a \
            ./usr/share/man/man1/laneq.1.gz ./usr/share/man/man8/laneqd.8.gz \
            ./usr/share/bash-completion/completions/laneq; do
  grep -q " $path\$" "$work/contents.txt" || { cat "$work/contents.txt"; fail "the package lacks $path"; }
done
grep -q " ./usr/bin/laneqd\$" "$work/contents.txt" && \
  grep " ./usr/bin/laneqd\$" "$work/contents.txt" | grep -q "^-rwxr-xr-x root/root" \
  || fail "/usr/bin/laneqd is not an executable owned by root"

echo "== dpkg-deb -x into $work/root"
dpkg-deb -x "$deb" "$work/root"
for exe in laneqd laneq; do
  got=$("$work/root/usr/bin/$exe" --version) || fail "extracted $exe --version exited non-zero"
  [ "$got" = "$exe $version" ] || fail "extracted $exe --version printed '$got'"
done
# The config the package puts in /etc is the documented sample (config_test.cpp checks that
# laneqd accepts it).
cmp "$work/root/etc/laneq/laneqd.json" "$work/root/usr/share/doc/laneq/laneqd.json" \
  || fail "/etc/laneq/laneqd.json differs from the documented sample"
# The extracted laneqd serves with the packaged config (its data directory and ports moved into
# the test's reach) and stops with exit 0 on SIGTERM, as the unit stops it.
"$work/root/usr/bin/laneqd" --config "$work/root/etc/laneq/laneqd.json" --data-dir "$work/data-laneqd" \
  --http-port 0 --caf-port 0 > "$work/laneqd.out" 2> "$work/laneqd.err" &
laneqd_pid=$!
for _ in $(seq 1 300); do
  grep -qx "laneqd ready" "$work/laneqd.out" && break
  kill -0 "$laneqd_pid" 2> /dev/null || break
  sleep 0.1
done
grep -qx "laneqd ready" "$work/laneqd.out" \
  || { kill -KILL "$laneqd_pid" 2> /dev/null || true; cat "$work/laneqd.out" "$work/laneqd.err"
       fail "the extracted laneqd did not get ready with /etc/laneq/laneqd.json"; }
kill -TERM "$laneqd_pid"
laneqd_rc=0
wait "$laneqd_pid" || laneqd_rc=$?
[ "$laneqd_rc" -eq 0 ] || { cat "$work/laneqd.err"; fail "laneqd exited $laneqd_rc on SIGTERM"; }
unit="$work/root/usr/lib/systemd/system/laneqd.service"
for line in "User=laneq" "StateDirectory=laneq laneq-checkpoints" "KillSignal=SIGTERM" "Restart=on-failure" \
            "LoadCredential=laneqd.json:/etc/laneq/laneqd.json" \
            "ExecStart=/usr/bin/laneqd --config %d/laneqd.json"; do
  grep -qx "$line" "$unit" || fail "laneqd.service lacks '$line'"
done
if command -v systemd-analyze > /dev/null; then
  sed "s|/usr/bin/laneqd|$work/root/usr/bin/laneqd|" "$unit" > "$work/laneqd.service"
  systemd-analyze verify "$work/laneqd.service" > "$work/verify.log" 2>&1 \
    || { cat "$work/verify.log"; fail "systemd-analyze verify rejects laneqd.service"; }
  if [ -s "$work/verify.log" ]; then cat "$work/verify.log"; fail "systemd-analyze verify warned"; fi
else
  echo "systemd-analyze not installed: unit syntax not verified"
fi
# The package's development files work where they were extracted (laneq.pc is relative to its
# own directory): the CAF program of run_consumer_test.sh, built with pkg-config, must run.
echo "== tests/package/consumer.cpp against the extracted package (pkg-config)"
export PKG_CONFIG_PATH="$work/root/usr/lib/pkgconfig"
# shellcheck disable=SC2046
${launcher:+"$launcher"} "$cxx" -std=c++20 -O1 -o "$work/consumer" "$consumer_cpp" \
  $(pkg-config --cflags --libs laneq) > "$work/consumer-build.log" 2>&1 \
  || { cat "$work/consumer-build.log"; fail "building against the extracted package failed"; }
out=$("$work/consumer" "$work/data") || { echo "$out"; fail "the consumer built against the package failed"; }
grep -qx "package consumer: ok" <<< "$out" || fail "the consumer built against the package did not finish"
# Passed: drop the staging and extracted trees (about 130 MB; kept when a check fails).
rm -rf "$work/out/_CPack_Packages" "$work/root" "$work/data" "$work/data-laneqd"
echo "deb test: OK ($(basename "$deb"))"
