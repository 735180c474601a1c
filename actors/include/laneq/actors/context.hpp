// What every actor of a broker is given: the time base and the nonce seed; and the one-timer
// helper the shard actor arms for its engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "caf/all.hpp"

#include "laneq/time.hpp"

namespace laneq {

/// Maps CAF's actor clock onto the broker timeline (microseconds since the Unix epoch).
/// Production reads the wall clock once at start; tests pass a fixed epoch, and CAF's test
/// coordinator then drives time through `advance_time`.
struct time_base {
  timestamp epoch_at_start;
  caf::actor_clock::time_point clock_at_start;

  timestamp now(const caf::actor_clock& clock) const {
    auto elapsed = std::chrono::duration_cast<duration>(clock.now() - clock_at_start);
    return epoch_at_start + elapsed;
  }
};

/// Broker-wide settings every actor gets.
struct broker_context {
  time_base time;
  std::uint64_t seed = 0;       ///< first half of the lease nonce key (tests: a fixed value)
  std::uint64_t nonce_key = 0;  ///< second half of the lease nonce key
};

using context_ptr = std::shared_ptr<const broker_context>;

/// Makes a context on `sys`'s clock: wall-clock epoch, random seed.
context_ptr make_context(caf::actor_system& sys);
/// Makes a context with a fixed epoch and seed (deterministic tests).
context_ptr make_context(caf::actor_system& sys, timestamp epoch, std::uint64_t seed);

/// One CAF timer for the earliest deadline of a state machine ("timeouts are data"). Arming an
/// earlier deadline supersedes the armed one; stale ticks carry an old generation and are
/// ignored.
class deadline_timer {
 public:
  /// Arms a tick for `deadline` unless an earlier or equal one is armed already.
  template <class Self, class Atom>
  void arm(Self* self, Atom atom, timestamp deadline, timestamp now) {
    if (armed_ && *armed_ <= deadline) return;
    armed_ = deadline;
    ++generation_;
    auto delay = deadline > now ? deadline - now : duration{0};
    self->delayed_send(self, delay, atom, generation_);
  }

  /// True if the tick with `generation` is the armed one; it is then disarmed.
  bool fire(std::uint64_t generation) {
    if (generation != generation_ || !armed_) return false;
    armed_.reset();
    return true;
  }

 private:
  std::optional<timestamp> armed_;
  std::uint64_t generation_ = 0;
};

}  // namespace laneq
