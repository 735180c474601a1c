// Always-on invariant checks: a broken invariant stops the process (STYLE.md "Errors, assertions").
#pragma once

#include <cstdio>
#include <cstdlib>

namespace laneq::detail {

[[noreturn]] inline void assertion_failed(const char* cond, const char* msg, const char* file,
                                          int line) {
  std::fprintf(stderr, "laneq: INVARIANT VIOLATED: %s (%s) at %s:%d\n", msg, cond, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace laneq::detail

/// Checks `cond` in every build type; on failure prints condition, message and location, then
/// aborts. Use for invariants, never for input validation (that returns an `error`).
#define LANEQ_ASSERT(cond, msg)                                                     \
  do {                                                                              \
    if (!(cond)) ::laneq::detail::assertion_failed(#cond, msg, __FILE__, __LINE__); \
  } while (false)
