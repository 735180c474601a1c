# install.cmake: install rules for laneqd, laneq and laneq as a component of CAF programs: the
# public headers, the static libraries an embedded broker needs (laneq::actors and what it links),
# the CMake package config (find_package(laneq CONFIG)), laneq.pc for pkg-config, and the
# packaging/ files (systemd unit, sample config). README.md "Install" and docs/operations.md
# "Running under systemd" describe the result; tests/package/ tests it.
#
# Layout under the prefix (GNUInstallDirs):
#   bin/laneqd, bin/laneq
#   include/laneq/*.hpp (libqueue and the generated version.hpp), include/laneq/actors/*.hpp
#   <libdir>/liblaneq_{core,protocol,persistence,actors}.a
#   <libdir>/cmake/laneq/ (laneqConfig.cmake, laneqConfigVersion.cmake, laneqTargets.cmake,
#                          laneq-caf.cmake), <libdir>/pkgconfig/laneq.pc
#   lib/systemd/system/laneqd.service, share/doc/laneq/ (laneqd.json, the guides)
# The Debian package (cmake/packaging.cmake) adds /etc/laneq/laneqd.json (component `config`,
# left out of a plain `cmake --install`, which never writes outside its prefix).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(NOT TARGET laneq_actors OR NOT TARGET laneq_persistence)
  message(STATUS "laneq: no install rules (laneq_actors needs RocksDB: LANEQ_WITH_ROCKSDB)")
  return()
endif()

set(LANEQ_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/laneq")
set(_laneq_public_libs laneq_core laneq_protocol laneq_persistence laneq_actors)

# laneq::core, laneq::protocol, laneq::persistence, laneq::actors, in the build tree as well.
foreach(_lib IN LISTS _laneq_public_libs)
  string(REGEX REPLACE "^laneq_" "" _short "${_lib}")
  set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_short})
  add_library(laneq::${_short} ALIAS ${_lib})
endforeach()

install(TARGETS ${_laneq_public_libs} EXPORT laneq-targets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/libqueue/include/laneq"
                  "${PROJECT_SOURCE_DIR}/actors/include/laneq"
                  "${LANEQ_GENERATED_INCLUDE_DIR}/laneq"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dev FILES_MATCHING PATTERN "*.hpp")
install(EXPORT laneq-targets NAMESPACE laneq:: FILE laneqTargets.cmake
  DESTINATION "${LANEQ_INSTALL_CMAKEDIR}" COMPONENT dev)

configure_package_config_file(cmake/laneqConfig.cmake.in
  "${PROJECT_BINARY_DIR}/package/laneqConfig.cmake"
  INSTALL_DESTINATION "${LANEQ_INSTALL_CMAKEDIR}")
# 0.x: a minor version may change the API and the CAF wire format (docs/caf-client.md).
write_basic_package_version_file("${PROJECT_BINARY_DIR}/package/laneqConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/package/laneqConfig.cmake"
              "${PROJECT_BINARY_DIR}/package/laneqConfigVersion.cmake"
  DESTINATION "${LANEQ_INSTALL_CMAKEDIR}" COMPONENT dev)
# Debian's CAF has no CMake config: the package makes CAF::core and CAF::io with our own module.
install(FILES "${PROJECT_SOURCE_DIR}/cmake/caf.cmake" RENAME laneq-caf.cmake
  DESTINATION "${LANEQ_INSTALL_CMAKEDIR}" COMPONENT dev)

# laneq.pc: relative to its own directory, so an installed tree can be moved (--prefix, DESTDIR).
set(_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH LANEQ_PC_TO_PREFIX "/prefix/${_pc_dir}" "/prefix")
string(REGEX REPLACE "/$" "" LANEQ_PC_TO_PREFIX "${LANEQ_PC_TO_PREFIX}")
configure_file(cmake/laneq.pc.in "${PROJECT_BINARY_DIR}/package/laneq.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/package/laneq.pc" DESTINATION "${_pc_dir}" COMPONENT dev)

# The daemon, the CLI, the systemd unit and the sample config.
foreach(_exe laneqd laneq)
  if(TARGET ${_exe})
    install(TARGETS ${_exe} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT runtime)
  endif()
endforeach()
# laneq(1), laneqd(8) and laneq's bash completion (CMakeLists.txt makes them in the build tree).
if(TARGET laneq_cli_docs)
  install(FILES "${LANEQ_CLI_MAN_PAGE}.gz" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1"
    COMPONENT runtime)
  if(TARGET laneqd)
    install(FILES "${LANEQD_MAN_PAGE}" DESTINATION "${CMAKE_INSTALL_MANDIR}/man8" COMPONENT runtime)
  endif()
  install(FILES "${LANEQ_CLI_COMPLETION}"
    DESTINATION "${CMAKE_INSTALL_DATADIR}/bash-completion/completions" COMPONENT runtime)
endif()
install(FILES "${PROJECT_SOURCE_DIR}/packaging/laneqd.service"
  DESTINATION lib/systemd/system COMPONENT runtime)
install(FILES "${PROJECT_SOURCE_DIR}/packaging/laneqd.json"
              "${PROJECT_SOURCE_DIR}/docs/operations.md" "${PROJECT_SOURCE_DIR}/docs/caf-client.md"
              "${PROJECT_SOURCE_DIR}/docs/api.md"
  DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT runtime)
install(FILES "${PROJECT_SOURCE_DIR}/packaging/laneqd.json" DESTINATION /etc/laneq
  COMPONENT config EXCLUDE_FROM_ALL)
