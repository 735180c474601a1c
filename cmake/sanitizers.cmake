# sanitizers.cmake: LANEQ_SANITIZE=ON builds everything with ASan + UBSan; LANEQ_TSAN=ON with
# ThreadSanitizer (preset tsan; suppressions and their reasons in tests/tsan/tsan.supp).
# -fno-sanitize=null: UBSan false alarms inside CAF 0.17.6 headers
# (detail/init_fun_factory.hpp), see TOOLCHAIN.md section 4.9.

option(LANEQ_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(LANEQ_TSAN "Build with -fsanitize=thread" OFF)

if(LANEQ_SANITIZE AND LANEQ_TSAN)
  message(FATAL_ERROR "LANEQ_SANITIZE and LANEQ_TSAN exclude each other")
endif()

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

if(LANEQ_TSAN)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "LANEQ_TSAN needs GCC or Clang")
  endif()
  set(LANEQ_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
  add_compile_options(${LANEQ_SANITIZER_FLAGS})
  add_link_options(${LANEQ_SANITIZER_FLAGS})
  # GCC warns (-Wtsan, an error under -Werror) that TSan does not model the
  # std::atomic_thread_fence in Boost.Asio's headers (apps/server). A fence TSan
  # does not see can only add false reports, which would show up in the server
  # tests; it cannot hide a race.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-tsan)
  endif()
  message(STATUS "laneq: ThreadSanitizer ON")
endif()
