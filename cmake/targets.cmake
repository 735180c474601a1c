# targets.cmake: helpers that add laneq targets only when their sources exist, so the
# tree configures while folders are still empty and picks up new files by itself
# (file(GLOB ... CONFIGURE_DEPENDS) re-globs on every build).

include(GoogleTest)

# laneq_glob(<out-var> <pattern>...): sorted absolute paths, re-checked at build time.
function(laneq_glob out)
  set(_files "")
  foreach(_pattern IN LISTS ARGN)
    file(GLOB _found CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${_pattern}")
    list(APPEND _files ${_found})
  endforeach()
  list(SORT _files)
  set(${out} "${_files}" PARENT_SCOPE)
endfunction()

# When a laneq library has no sources yet, consumers link what it would have linked.
set(_laneq_fallback_laneq_core Threads::Threads OpenSSL::Crypto)
set(_laneq_fallback_laneq_protocol laneq_core CAF::core)
set(_laneq_fallback_laneq_persistence laneq_protocol)
set(_laneq_fallback_laneq_actors laneq_persistence laneq_protocol laneq_core CAF::core)

# laneq_resolve_links(<out-var> <lib>...): replaces missing laneq_* targets by their fallbacks.
function(laneq_resolve_links out)
  set(_result "")
  foreach(_lib IN LISTS ARGN)
    if(TARGET ${_lib})
      list(APPEND _result ${_lib})
    elseif(DEFINED _laneq_fallback_${_lib})
      laneq_resolve_links(_sub ${_laneq_fallback_${_lib}})
      list(APPEND _result ${_sub})
    else()
      list(APPEND _result ${_lib})  # a third-party target: let CMake report it if missing
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _result)
  set(${out} "${_result}" PARENT_SCOPE)
endfunction()

# laneq_add_library(<name> INCLUDE_DIR <dir> [PRIVATE_INCLUDE_DIR <dir>]
#                   SOURCES <cpp>... HEADERS <hpp>... LINK <lib>... DEFINITIONS <def>...)
# STATIC if there are sources, INTERFACE if there are only headers, nothing if neither.
# LINK and DEFINITIONS are PUBLIC.
function(laneq_add_library name)
  cmake_parse_arguments(A "" "INCLUDE_DIR;PRIVATE_INCLUDE_DIR" "SOURCES;HEADERS;LINK;DEFINITIONS" ${ARGN})
  laneq_resolve_links(_links ${A_LINK})
  if(A_SOURCES)
    add_library(${name} STATIC ${A_SOURCES} ${A_HEADERS})
    # The source tree's include directory only while building; an installed library's comes
    # from install(TARGETS ... INCLUDES DESTINATION) (cmake/install.cmake).
    target_include_directories(${name} PUBLIC "$<BUILD_INTERFACE:${A_INCLUDE_DIR}>")
    if(A_PRIVATE_INCLUDE_DIR)
      target_include_directories(${name} PRIVATE "${A_PRIVATE_INCLUDE_DIR}")
    endif()
    target_link_libraries(${name} PUBLIC ${_links})
    target_compile_definitions(${name} PUBLIC ${A_DEFINITIONS})
    laneq_set_warnings(${name})
  elseif(A_HEADERS)
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE "$<BUILD_INTERFACE:${A_INCLUDE_DIR}>")
    target_link_libraries(${name} INTERFACE ${_links})
    target_compile_definitions(${name} INTERFACE ${A_DEFINITIONS})
  else()
    message(STATUS "laneq: ${name} skipped (no sources yet)")
  endif()
endfunction()

# laneq_add_executable(<name> SOURCES <cpp>... LINK <lib>... DEFINITIONS <def>...)
# Returns without a target if there are no sources.
function(laneq_add_executable name)
  cmake_parse_arguments(A "" "" "SOURCES;LINK;DEFINITIONS" ${ARGN})
  if(NOT A_SOURCES)
    message(STATUS "laneq: ${name} skipped (no sources yet)")
    return()
  endif()
  laneq_resolve_links(_links ${A_LINK})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${_links})
  if(LANEQ_JEMALLOC)
    target_link_libraries(${name} PRIVATE ${LANEQ_JEMALLOC_LIBRARY})  # cmake/allocator.cmake
    target_sources(${name} PRIVATE "${PROJECT_SOURCE_DIR}/cmake/jemalloc_conf.cpp")
  endif()
  target_compile_definitions(${name} PRIVATE ${A_DEFINITIONS})
  laneq_set_warnings(${name})
endfunction()

# laneq_add_gtest(<name> LABEL <label> [ALSO_LABELS <label>...] [TIMEOUT <seconds>]
#                 SOURCES <cpp>... LINK <lib>... [PROPERTIES <prop> <value>...]
#                 [HEAVY <gtest filter>])
# A GoogleTest executable whose tests are discovered when ctest runs (PRE_TEST:
# nothing runs at build time, which matters under sanitizers). Every test gets a
# TIMEOUT (default 300 s), and the ctest names are prefixed with "<label>." to keep suites apart;
# ALSO_LABELS are further ctest labels (the tsan test preset selects by them).
# PROPERTIES go to every discovered test (RUN_SERIAL TRUE, RESOURCE_LOCK <name>).
# HEAVY names the tests of the binary that hold the ctest resource lock `heavy` (a gtest filter
# such as "full_disk.*:laneqd_descriptors.*"): they are discovered by a second call with that
# TEST_FILTER, the others by a first call with its negation, so each test is discovered once.
function(laneq_add_gtest name)
  cmake_parse_arguments(A "" "LABEL;TIMEOUT;HEAVY" "ALSO_LABELS;SOURCES;LINK;DEFINITIONS;PROPERTIES"
    ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  laneq_add_executable(${name} SOURCES ${A_SOURCES} LINK ${A_LINK} DEFINITIONS ${A_DEFINITIONS})
  if(NOT TARGET ${name})
    return()
  endif()
  set(_filter "")
  if(A_HEAVY)
    set(_filter TEST_FILTER "-${A_HEAVY}")
  endif()
  gtest_discover_tests(${name}
    TEST_PREFIX "${A_LABEL}."
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    ${_filter}
    PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABEL}" ${A_PROPERTIES})
  if(A_HEAVY)
    gtest_discover_tests(${name}
      TEST_PREFIX "${A_LABEL}."
      TEST_LIST ${name}_HEAVY_TESTS
      DISCOVERY_MODE PRE_TEST
      DISCOVERY_TIMEOUT 60
      TEST_FILTER "${A_HEAVY}"
      PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABEL}" ${A_PROPERTIES} RESOURCE_LOCK heavy)
  endif()
  if(A_ALSO_LABELS)
    laneq_also_label(${name} "${A_LABEL};${A_ALSO_LABELS}")
  endif()
endfunction()

# laneq_also_label(<gtest executable> <labels>): sets LABELS on every test discovered from it.
# GoogleTest's discovery writes a list-valued property as separate words, so the labels are set
# by a ctest include file of our own, read after the discovery's (which lists the tests in
# <name>_TESTS and <name>_HEAVY_TESTS).
function(laneq_also_label name labels)
  set(_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${_file}" "foreach(_t IN LISTS ${name}_TESTS ${name}_HEAVY_TESTS)\n"
    "  set_tests_properties(\"\${_t}\" PROPERTIES LABELS \"${labels}\")\n"
    "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_file}")
endfunction()
