# sanitizers.cmake: LANEQ_SANITIZE=ON builds everything with ASan + UBSan.
# -fno-sanitize=null: UBSan false alarms inside CAF 0.17.6 headers
# (detail/init_fun_factory.hpp), see TOOLCHAIN.md section 4.9.

option(LANEQ_SANITIZE "Build with -fsanitize=address,undefined" OFF)

if(LANEQ_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "LANEQ_SANITIZE needs GCC or Clang")
  endif()
  set(LANEQ_SANITIZER_FLAGS
      -fsanitize=address,undefined -fno-sanitize=null -fno-omit-frame-pointer)
  add_compile_options(${LANEQ_SANITIZER_FLAGS})
  add_link_options(${LANEQ_SANITIZER_FLAGS})
  message(STATUS "laneq: sanitizers ON (${LANEQ_SANITIZER_FLAGS})")
endif()
