# packaging.cmake: the Debian package `laneq` (CPack, DEB generator) for Debian 12: laneqd and
# laneq in /usr/bin, the systemd unit, /etc/laneq/laneqd.json (a conffile), laneq(1), laneqd(8),
# laneq's bash completion, the headers, static libraries, CMake package config and laneq.pc of
# cmake/install.cmake. Build it with
# `cpack --config build/release/CPackConfig.cmake` (README.md "Install"); the ctest test
# package.deb_has_the_daemon_unit_config_and_package_config checks it (tests/package/check_deb.sh).

if(NOT TARGET laneq_persistence OR NOT TARGET laneq_actors OR NOT TARGET laneqd)
  return()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME laneq)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "laneq")
set(CPACK_PACKAGE_CONTACT "laneq maintainers <laneq@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "durable message queue on CAF: laneqd, laneq CLI, embedded broker")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # laneq_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# The long description (CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY first and indents these).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "laneqd serves queues (unordered, ordered per queue or per key, leases, retries,\ndead letters, delays, fairness, throttles) over HTTP/JSON and CAF remote actors,\nstored in RocksDB; laneq is its command line. The package also holds the headers,\nstatic libraries, CMake package config (find_package(laneq)) and laneq.pc for\nCAF programs that embed the broker.")
# Binaries without their line tables (static libraries are never stripped by CMake's install).
set(CPACK_STRIP_FILES ON)
# One package from three install components: runtime (binaries, unit, docs), dev (headers,
# libraries, package config) and config (/etc/laneq/laneqd.json, left out of `cmake --install`).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL runtime dev config)
# Depends: the shared libraries laneqd and laneq load, as dpkg-shlibdeps finds them (libcaf
# core, io and openssl, librocksdb, libboost-json, libssl, libjemalloc, libstdc++, libc).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Building a CAF program against the package needs the development packages of what the
# static libraries link (cmake/laneqConfig.cmake.in finds them).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
  "libcaf-dev (>= 0.17.6), librocksdb-dev (>= 7.8), libboost-json1.81-dev, libssl-dev, pkg-config")
# /etc/laneq/laneqd.json is a conffile: an upgrade keeps the administrator's edits.
# (dpkg's conffiles list takes no comments, so it is written here.)
file(WRITE "${PROJECT_BINARY_DIR}/package/conffiles" "/etc/laneq/laneqd.json\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PROJECT_BINARY_DIR}/package/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
