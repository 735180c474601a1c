// The fairness actor: one per queue, a thin adapter over `fair_scheduler` and `lease_table`
// (docs/design/fairness.md, docs/design/throttling.md). It holds every deliverable item (the
// offered head of each group and every unordered message), applies throttles at the moment of
// delivery, answers receives (with long polls), and owns the leases of unordered messages.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/actors/queue_storage.hpp"
#include "laneq/deadline_heap.hpp"
#include "laneq/fair_scheduler.hpp"
#include "laneq/lease_table.hpp"

namespace laneq {

struct fairness_actor_config {
  context_ptr ctx;
  metrics_ptr metrics;
  std::string queue_name;
  storage_ptr storage;
  std::vector<throttle_spec> throttles;
  duration lease_default = limits::lease_default;
  std::uint32_t max_attempts = limits::max_attempts_default;
  queue_actor queue;
  store_actor store;
  offer_box offers;  ///< where the queue's groups offer their heads
  /// Written by the queue actor as it stops, before it lets go of this actor: the answer for the
  /// receives still waiting (`stopped_queue_error`). Shared, because this actor may be destroyed
  /// without ever handling the exit that its link sends.
  std::shared_ptr<std::optional<error>> stopped = std::make_shared<std::optional<error>>();
};

class fairness_actor_impl : public actor_base<fairness_actor> {
 public:
  fairness_actor_impl(caf::actor_config& cfg, fairness_actor_config fc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.fairness"; }
  void on_exit() override;

 private:
  struct offered_group {
    group_actor handle;
    std::string label;
    delivery_slot slot;  ///< where the head's delivery is posted
  };
  /// A delivered group head's lease, watched for its deadline. Weak: a group that stops is not
  /// kept alive by its watch.
  struct lease_watch {
    lease_token lease;
    caf::weak_actor_ptr group;
  };
  struct pending_receive {
    caf::typed_response_promise<std::vector<delivery>> promise;
    std::uint32_t max;
    duration lease;
    timestamp deadline;
  };

  timestamp now() const { return fc_.ctx->time.now(clock()); }
  /// Picks up to `max` items and leases them.
  std::vector<delivery> take(std::uint32_t max, duration lease, timestamp t);
  /// Answers a receive. Durable delivery commits the leases first (ARCHITECTURE.md §4).
  void hand_out(caf::typed_response_promise<std::vector<delivery>> promise,
                std::vector<delivery> out);
  /// Writes without waiting / answers once durable.
  void write(std::vector<store_op> ops);
  template <class T>
  caf::result<T> write_then(std::vector<store_op> ops, T answer);
  /// Store operations that end the attempt of an unordered message under `lease`.
  std::vector<store_op> end_attempt(const lease_token& lease, std::vector<store_op> ops) const;
  /// Answers waiting receives while items are ready.
  void serve_pending(timestamp t);
  /// Returns an unordered message to the scheduler or dead-letters it; returns the store
  /// operations (the updated attempt count and not-before time). A dead letter is moved by the
  /// queue actor; with `moved`, that promise is set and answered once the move is durable.
  using move_promise = caf::typed_response_promise<caf::ok_atom>;
  std::vector<store_op> retry_or_dead_letter(message m, duration retry_after, bool force_dead,
                                             timestamp t,
                                             std::optional<move_promise>* moved = nullptr);
  void rearm(timestamp t);
  /// Ends every unordered lease whose deadline has passed: a failed attempt each (O5). Runs on
  /// the timer and before any ack, nack or extend.
  void expire_leases(timestamp t);
  void watch(const group_actor& g, const lease_token& lease, timestamp deadline);
  /// Brings everything time-driven up to `t` (lease expiry, due delays and throttle wakes) and
  /// serves waiting receives, oldest first, before a handler acts: nothing depends on timer
  /// latency, and a new receive never overtakes an older long poll.
  void catch_up(timestamp t);
  void check();

  fairness_actor_config fc_;
  fair_scheduler sched_;
  lease_table leases_;
  std::unordered_map<group_id, offered_group> offered_;
  /// Per group with a head in flight (by the lease's group id): its newest lease and that
  /// lease's deadline. An extend replaces it; the group's next offer (its lease ended with an
  /// ack, nack or expiry) removes it, so no group gets a stale tick for every message it
  /// delivered, and memory follows the heads in flight.
  deadline_heap<group_id, lease_watch> watches_;
  std::deque<pending_receive> pending_;
  std::multiset<timestamp> pending_deadlines_;  // of pending_, for the timer
  deadline_timer timer_;
};

}  // namespace laneq
