// Deterministic test harness: a laneq broker on CAF's test coordinator with simulated time.
// Used by the actor tests (tests/actors) and the seeded simulation (tests/sim).
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "caf/all.hpp"

#include "faulty_store.hpp"
#include "laneq/actors/broker.hpp"
#include "laneq/actors/memory_store.hpp"

namespace laneq::test {

class sim_store;

/// The store a harness runs its broker on.
enum class harness_store {
  /// memory_store (an ordered map that outlives its brokers): a restart loses nothing, not even
  /// writes still waiting for their batch. The actor tests use it.
  memory,
  /// The real persistence actor on RocksDB over an in-memory file system (sim_store.hpp): a
  /// restart is a power loss that keeps what was synced, and recovers through the same code as
  /// laneqd's start. The simulation uses it.
  rocksdb_mem,
};

/// Epoch of the simulated timeline: t = 0 of a test is this timestamp.
inline constexpr timestamp sim_epoch = timestamp::from_ms(1'000'000);

struct test_config : caf::actor_system_config {
  test_config() {
    laneq::add_message_types(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
  }
};

/// A broker on the test coordinator. Every call runs the actors until they are idle (in FIFO
/// job order, or in an order drawn from `shuffle` when one is set), then reads the reply.
/// The member functions that are not templates live in harness.cpp, compiled once: defined
/// here, every test file instantiated the same CAF messaging code again.
class harness {
 public:
  /// A broker on `store`, which outlives it (see `restart`). For rocksdb_mem,
  /// `opts.persistence` gives the group-commit bounds (its batch linger is a simulated timer).
  explicit harness(std::uint64_t seed = 1, broker_options opts = {},
                   harness_store store = harness_store::memory);

  /// A broker whose store fails writes when `faults` says so.
  harness(std::uint64_t seed, std::shared_ptr<store_faults> faults);

  /// Stops the broker's actors and the store and runs them until they are gone (the actor
  /// system's destructor waits for every actor, and only `run` moves them on the test
  /// coordinator).
  ~harness();

  /// A crash and a restart: every actor of the broker stops (writes the store has not
  /// committed are not answered), then a new broker on the same store rebuilds every queue,
  /// on the same timeline. On rocksdb_mem the store crashes too (a power loss, sim_store.hpp)
  /// and is opened again as laneqd opens it. Returns how many queues it recovered. Queue handles
  /// from before the restart are dead: look the queues up again. Answers to receives still waiting
  /// (long polls, answered with an error as the broker stops) are dropped, as a client's connection
  /// would be.
  result<std::uint64_t> restart(broker_options opts = {});

  /// Draw the order in which ready actors run from `rng` (nullptr: FIFO).
  void shuffle_jobs(std::mt19937_64* rng) { rng_ = rng; }

  /// Runs every ready actor until none is left.
  void run();

  /// Moves simulated time forward, firing due timers, and runs the actors.
  void advance(duration d);

  /// Jumps to the next armed timer, if any; returns whether one fired.
  bool advance_to_next_timer();

  /// Simulated time since the start of the test.
  duration elapsed() { return now() - sim_epoch; }
  timestamp now();

  /// Sends a request and returns the reply (or the error), running the actors in between.
  /// Returns nullopt if no reply came (for example a long poll still waiting).
  template <class T, class Handle, class... Ts>
  std::optional<result<T>> try_ask(const Handle& dest, Ts&&... xs) {
    self_->send(dest, std::forward<Ts>(xs)...);
    run();
    return collect<T>();
  }

  /// Like `try_ask`, but a missing reply is a test failure (returns an unavailable error).
  template <class T, class Handle, class... Ts>
  result<T> ask(const Handle& dest, Ts&&... xs) {
    auto r = try_ask<T>(dest, std::forward<Ts>(xs)...);
    if (!r) return error{errc::unavailable, "no reply"};
    return std::move(*r);
  }

  /// Fire-and-forget send from the test's own actor; collect the reply later.
  template <class Handle, class... Ts>
  void post(const Handle& dest, Ts&&... xs) {
    self_->send(dest, std::forward<Ts>(xs)...);
  }

  /// Takes one reply of type T (or an error) from the test actor's mailbox, if there is one.
  template <class T>
  std::optional<result<T>> collect() {
    std::optional<result<T>> out;
    self_->receive([&](T& x) { out.emplace(std::move(x)); },
                   [&](caf::error& e) { out.emplace(from_caf(e)); },
                   caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }

  /// Creates a queue, failing the test's expectations through the returned result.
  result<queue_api> create(queue_spec spec);

  /// Like `create`, and also reports whether the queue was newly created (false: a queue with
  /// the same spec existed and is returned).
  result<std::pair<queue_api, bool>> create_flagged(queue_spec spec);

  // -- queue operations ------------------------------------------------------------------------

  result<std::vector<message_id>> enqueue(const queue_api& q, std::vector<outgoing_message> b);
  result<message_id> enqueue(const queue_api& q, outgoing_message m);
  result<std::vector<delivery>> receive(const queue_api& q, std::uint32_t max = 1,
                                        duration lease = duration{0});
  /// A long poll: waits up to `wait` for a message; nullopt while it still waits (collect its
  /// answer later with `collect<std::vector<delivery>>()`).
  std::optional<result<std::vector<delivery>>> long_poll(const queue_api& q, std::uint32_t max,
                                                         duration wait);
  status ack(const queue_api& q, const lease_token& l);
  status nack(const queue_api& q, const lease_token& l, duration retry_after = duration{0},
              bool dead = false);
  result<timestamp> extend(const queue_api& q, const lease_token& l, duration by);
  result<std::vector<dead_letter>> dead_letters(const queue_api& q);
  result<std::uint64_t> redrive(const queue_api& q, std::vector<message_id> ids = {});
  result<queue_stats> stats(const queue_api& q);
  result<laneq::groups_page> page_of_groups(const queue_api& q, groups_query query);
  /// Every group, page by page.
  result<std::vector<group_info>> groups(const queue_api& q, bool blocked_only = false);

  result<queue_api> lookup(const std::string& name);

  caf::actor_system& system() { return sys_; }
  /// The test's own actor (replies to `post` land in its mailbox).
  caf::scoped_actor& self() { return self_; }
  const store_actor& store() const { return store_; }
  broker& brk() { return *broker_; }
  caf::scheduler::test_coordinator& sched() { return sched_; }

 private:
  test_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  caf::scoped_actor self_;
  std::uint64_t seed_;
  std::unique_ptr<sim_store> disk_;  ///< rocksdb_mem only
  store_actor store_;
  std::optional<broker> broker_;
  std::mt19937_64* rng_ = nullptr;

  result<std::uint64_t> start(timestamp epoch, broker_options opts);
  /// The store to start with.
  store_actor open_store(harness_store kind, const broker_options& opts);
  /// Takes the answer to a create request (the queue and whether it is new).
  std::optional<result<std::pair<queue_api, bool>>> collect_created();
};

/// Broker options with the given reclaim grace (fast delivery after a restart).
inline broker_options with_grace(duration grace) {
  broker_options o;
  o.reclaim_grace = grace;
  return o;
}

/// A message with a body and optional headers and fairness key.
inline outgoing_message msg(std::string body, std::vector<header_field> headers = {},
                            std::string fairness_key = {}, duration delay = duration{0}) {
  return outgoing_message{std::move(body), std::move(headers), std::move(fairness_key), delay};
}

}  // namespace laneq::test
