# ccache.cmake: use ccache as the compiler launcher when it is installed.
# ccache honours CCACHE_DIR from the environment (default ~/.cache/ccache).

option(LANEQ_USE_CCACHE "Use ccache as compiler launcher when found" ON)

if(LANEQ_USE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(CCACHE_PROGRAM ccache)
  if(CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER "${CCACHE_PROGRAM}" CACHE STRING "C++ compiler launcher")
    message(STATUS "laneq: using ccache (${CCACHE_PROGRAM})")
  endif()
endif()
