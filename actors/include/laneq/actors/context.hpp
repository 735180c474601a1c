// What every actor of a broker shares: the time base, the nonce seed and per-queue metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "caf/all.hpp"

#include "laneq/latency.hpp"
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

/// The memory all group windows of a broker share (docs/operations.md, "Group windows"). Every
/// group actor charges the bytes of the messages it holds in memory; while the total is under
/// the budget, groups may hold up to `group_window_max` messages instead of `group_window`, so a
/// deep group reads nothing back from the store. The total can pass the budget by what the groups
/// that saw room take in at once: at most `group_window_max` messages each.
class window_budget {
 public:
  explicit window_budget(std::size_t limit_bytes)
      : limit_(static_cast<std::int64_t>(limit_bytes)) {}

  bool has_room() const { return used_.load(std::memory_order_relaxed) < limit_; }
  void charge(std::int64_t delta_bytes) { used_.fetch_add(delta_bytes, std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> used_{0};
  std::int64_t limit_;
};

using window_budget_ptr = std::shared_ptr<window_budget>;

/// Per-queue counters and gauges, updated by the queue's actors (relaxed atomics: they are
/// observations, never used for decisions).
struct queue_metrics {
  std::atomic<std::uint64_t> enqueued{0};
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::uint64_t> acked{0};
  std::atomic<std::uint64_t> nacked{0};
  std::atomic<std::uint64_t> lease_expired{0};
  std::atomic<std::uint64_t> dead_lettered{0};
  std::atomic<std::uint64_t> redriven{0};
  std::atomic<std::uint64_t> key_missing{0};
  std::atomic<std::uint64_t> deduplicated{0};  ///< enqueues answered with an earlier id
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::uint64_t> recovered{0};  ///< messages found in the store at start
  /// Group windows read back from the store (group_state: a group keeps at most its window
  /// in memory) and the messages those reads returned.
  std::atomic<std::uint64_t> window_reads{0};
  std::atomic<std::uint64_t> window_read_messages{0};
  std::atomic<std::uint64_t> corrupt_records{0};  ///< read back and failed: each stops its group
  std::atomic<std::int64_t> window_bytes{0};      ///< memory_footprint of the messages groups hold
  std::atomic<std::int64_t> in_flight{0};
  std::atomic<std::uint64_t> waiting_receives{0};  ///< long polls waiting (fairness actor)
  /// From enqueue to first delivery (an enqueue delay included), whoever receives: in process,
  /// over CAF remote or over HTTP. Counts per bucket of latency_bounds_s, not cumulative.
  std::array<std::atomic<std::uint64_t>, latency_bounds_s.size() + 1> first_delivery{};
  std::atomic<std::uint64_t> first_delivery_sum_us{0};

  void observe_first_delivery(duration d) {
    add(first_delivery[latency_bucket(d)]);
    add(first_delivery_sum_us, d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0);
  }

  static void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  static std::uint64_t get(const std::atomic<std::uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  }
};

using metrics_ptr = std::shared_ptr<queue_metrics>;

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
