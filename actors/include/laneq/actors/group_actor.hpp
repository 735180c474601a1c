// The group actor: one per non-empty ordering group, a thin adapter over `group_state`
// (docs/design/ordering.md O3-O7). It holds the group's head and a bounded window of the next
// messages (the rest stay in the store and are read back in order; the window grows while the
// broker's window budget has room, and the actor charges what it holds to it), offers its head to
// the fairness actor, writes what its state machine decides to the store, and tells the queue actor
// when it has gone idle. It learns of a delivery from the slot the fairness actor posts it to, and
// of arrivals from the inbox the queue actor leaves them in, at the start of its next message
// (`delivery_slot`, `arrival_inbox`), not from messages of their own. Its lease
// deadline is watched by the fairness actor (one timer per queue, weak references), so a stopped
// group is freed at once instead of living on inside a pending CAF timer until its lease would have
// ended.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/actors/queue_storage.hpp"
#include "laneq/group_state.hpp"

namespace laneq {

/// Everything a group actor needs at spawn.
struct group_actor_config {
  context_ptr ctx;
  metrics_ptr metrics;
  storage_ptr storage;
  group_id id;
  codec::lane_id lane;  ///< the group's messages in the store
  std::string label;    ///< printable ordering key
  std::uint32_t max_attempts = limits::max_attempts_default;
  fairness_actor fairness;
  queue_actor queue;
  store_actor store;
  arrival_inbox inbox;  ///< shared with the queue actor's entry for the group
  offer_box offers;     ///< the queue's: where the group offers its head to the fairness actor
};

class group_actor_impl : public actor_base<group_actor> {
 public:
  group_actor_impl(caf::actor_config& cfg, group_actor_config gc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.group"; }
  void on_exit() override;

 private:
  /// The handling of one message: it starts by catching up and ends by settling the inbox,
  /// whichever way the handler returns. Every handler but `stop` and `recover` opens one.
  class turn {
   public:
    explicit turn(group_actor_impl& self) : self_(self), at(self.catch_up()) {}
    ~turn() { self_.settle(); }
    turn(const turn&) = delete;
    turn& operator=(const turn&) = delete;

   private:
    group_actor_impl& self_;

   public:
    const timestamp at;  ///< when the handling started
  };

  timestamp now() const { return gc_.ctx->time.now(clock()); }
  /// Takes the delivery the fairness actor posted since the last message, if any (the head is
  /// now in flight), then the arrivals waiting in the inbox, and returns the current time.
  timestamp catch_up();
  /// Takes in what arrived while the message was handled, then tells the inbox whether the group
  /// is busy (so the queue actor need not wake it for the next arrival).
  void settle();
  void take_in(std::vector<message> arrived, timestamp t);
  /// Offers the head to the fairness actor, with the slot for its delivery.
  void offer(message head);
  /// The first outcome of a write or a dead-letter move (nothing: durable).
  using write_done = std::function<void(std::optional<error>)>;
  /// Carries out `fx` and returns the store operations it implies (the caller writes them,
  /// waiting for them when a client is owed an answer). A head to offer waits in `next_` until
  /// every write of the group is durable (`offer_when_settled`).
  std::vector<store_op> apply(group_effects fx, write_done moved = nullptr);
  /// Writes `ops` (in order after the group's earlier writes); `answered` hears the first outcome
  /// (nothing: durable). A failed write is sent again, with every write after it, every
  /// `store_reopen_interval` until it is durable (`retry_writes`).
  void write(std::vector<store_op> ops, write_done answered = nullptr);
  /// Answers `promise` once `ops` are durable (or with the storage error).
  template <class T>
  caf::result<T> write_then(std::vector<store_op> ops, T answer);
  /// Records the answer to write number `n`; once every write is answered, arms a retry of the
  /// failed ones or offers the waiting head.
  void on_written(std::uint64_t n, bool ok);
  void retry_writes();
  /// True while a write of the group is not yet durable, or a dead-letter move not yet answered.
  bool settling() const { return !unsettled_.empty() || !parked_.empty() || moves_pending_ > 0; }
  /// Offers the head waiting in `next_` once nothing is settling; then reports idle if due.
  void offer_when_settled();
  void fetch(const fetch_request& req);
  /// Tells the queue actor the group is idle, once nothing is owed to a client.
  void report_idle();
  /// Accounts for the end of the attempt under `lease` and adds its store operations.
  std::vector<store_op> end_attempt(const lease_token& lease, std::vector<store_op> ops);
  /// Ends the lease if its deadline has passed: a failed attempt (O5). Runs on the lease timer
  /// and before any ack, nack or extend, so no answer ever depends on timer latency.
  void expire_if_due(timestamp t);
  /// During the reclaim grace after a restart: adopts a lease token of the previous run for the
  /// held head, if this broker issued it (fast delivery, ARCHITECTURE.md §4).
  void reclaim(const lease_token& lease, timestamp t);
  void restore_lease(const lease_token& lease, timestamp deadline, timestamp t);
  /// Adds `delta` bytes to the queue's window_bytes gauge and the broker's window budget.
  void charge(std::int64_t delta);
  /// True while the broker's window budget lets groups hold more than `group_window` (passed to
  /// every input of the state machine that can take messages in: arrivals and reads back).
  bool may_grow() const;
  void check();
  /// A fetched record failed its checksum after `before`: counts and logs it; the group takes
  /// `before` and stops there (group_state::on_corrupt).
  void stop_at_corrupt(std::vector<message> before, const std::string& key, const error& e,
                       timestamp t);

  group_actor_config gc_;
  group_state state_;
  /// The head, held back from the fairness actor until the reclaim grace ends.
  std::optional<message> held_;
  delivery_slot slot_;  ///< where the fairness actor posts the head's delivery
  bool idle_due_ = false;
  /// The head the group offers next, waiting until the writes that end its predecessor are
  /// durable: otherwise a power loss could bring the predecessor back after this one ran.
  std::optional<message> next_;
  /// The group's writes not yet answered durable, in order (their ops kept for a retry), the
  /// first numbered `first_unsettled_`.
  struct unsettled_write {
    std::vector<store_op> ops;
    bool answered = false;
    bool ok = false;
  };
  std::deque<unsettled_write> unsettled_;
  std::uint64_t first_unsettled_ = 0;
  std::vector<store_op> parked_;   ///< failed writes and those after them, waiting for the retry
  std::size_t moves_pending_ = 0;  ///< dead-letter moves the queue actor has not answered
  std::size_t charged_ = 0;        ///< the state's memory_bytes as charged to the budget
};

}  // namespace laneq
