// What the seeded simulations (sim_test.cpp, overlap_test.cpp) share about their checks: the kinds
// of check a failure names ("INVARIANT VIOLATED (<kind>)", which the canaries' ctest tests look
// for, tests/README.md), the exception a checker throws, and how they read their environment.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>

namespace laneq::sim {

inline std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  if (const char* v = std::getenv(name); v && *v) return std::strtoull(v, nullptr, 10);
  return fallback;
}

/// The kinds of check; a failure names its kind, and each canary must be caught by its own
/// (tests/README.md).
enum class check {
  api,          // an operation failed or answered in a way the API does not allow
  in_flight,    // G4/O4: two leases in flight in one group (or on one message)
  lost,         // G1/G2: an acknowledged enqueue is missing
  order,        // G3/O3: a delivery that is not its group's head
  stale_lease,  // O5: an ack, nack or extend of a stale lease succeeded
  live_lease,   // O5: an ack, nack or extend of a live lease failed
  not_before,   // O5/O6/O10: delivered before its not-before time
  duplicate,    // R8: delivered again after a confirmed ack, or while a dead letter
  reclaim,      // R6: a recovered head delivered within the reclaim grace
  fairness,     // G5/F1
  throttle,     // G6/T2
  accounting,   // stats, counters and dead letters equal the model's
  recovery,     // the restart itself
};

inline const char* name_of(check c) {
  switch (c) {
    case check::api: return "api";
    case check::in_flight: return "in-flight";
    case check::lost: return "lost";
    case check::order: return "order";
    case check::stale_lease: return "stale-lease";
    case check::live_lease: return "live-lease";
    case check::not_before: return "not-before";
    case check::duplicate: return "duplicate";
    case check::reclaim: return "reclaim";
    case check::fairness: return "fairness";
    case check::throttle: return "throttle";
    case check::accounting: return "accounting";
    case check::recovery: return "recovery";
  }
  return "?";
}

class checker_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace laneq::sim
