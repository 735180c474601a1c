# warnings.cmake: strict warnings (as errors) for laneq's own targets only.
# Third-party headers (CAF, RocksDB, Boost, GTest) come in through imported
# targets and are SYSTEM includes, so these flags never apply to them.

option(LANEQ_WERROR "Treat warnings as errors in laneq targets" ON)

function(laneq_set_warnings target)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    return()  # nothing is compiled; never push our flags onto consumers
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
      -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual)
    if(LANEQ_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
