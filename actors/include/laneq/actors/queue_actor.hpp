// The queue actor: one per queue, the entry point for producers and consumers. It validates and
// places each enqueued message (ordering key, missing-key policy, on_enqueue hook), assigns its
// id and arrival seq, has the store make it durable, then routes it to its group actor (spawned on
// the group's first message) or, unordered, straight to the fairness actor. It routes acks, nacks
// and extends by the group named in the lease, keeps the dead-letter list, answers stats and
// per-group introspection, and rebuilds the queue from the store after a restart
// (docs/design/recovery.md). It keeps the queue's dedupe window and takes part in topic
// enqueues (docs/design/lanes.md).
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/actors/queue_storage.hpp"
#include "laneq/queue_spec.hpp"

namespace laneq {

struct queue_actor_config {
  context_ptr ctx;
  metrics_ptr metrics;
  queue_spec spec;
  store_actor store;
  /// Storage settings; `uid` names this incarnation in the store, so a queue deleted and created
  /// again under the same name never sees a late write of its predecessor.
  storage_ptr storage;
  /// Recovered without the on_enqueue hook it had: enqueues wait until the hook is given again.
  /// (Key functions missing from a recovered spec are `queue_spec::functions_missing`.)
  bool hook_missing = false;
};

class queue_actor_impl : public actor_base<queue_actor> {
 public:
  queue_actor_impl(caf::actor_config& cfg, queue_actor_config qc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.queue"; }
  void on_exit() override;

 private:
  struct group_entry {
    group_id id;
    group_actor handle;
    /// Its encoded key, plus any key whose lane id collides with it (lanes.md L6: merged).
    std::vector<std::string> keys;
    codec::lane_id lane;       // where its messages are stored
    arrival_inbox inbox;       // where its arrivals wait for it
    bool wake_due = false;     // to be sent a wake-up for the batch being routed (`route`)
    std::uint64_t routed = 0;  // messages sent to this incarnation
    /// Its recovered head, while a token of the previous run may name it (`reclaimable_`).
    std::optional<message_id> reclaim_head;
    /// Idle since then, after `routed` messages: it stops once idle for `group_idle_linger`.
    std::optional<timestamp> idle_since;
  };
  struct placed {
    message msg;
    placement where;
    codec::lane_id lane;
    /// The live group of its key when it was placed (0: none yet); `route` takes it if it still
    /// lives rather than look the key up again.
    group_id group;
  };
  struct recovery;  // state of a running recovery (queue_actor.cpp)
  /// One entry of the dedupe window (lanes.md L8).
  struct dedupe_entry {
    message_id id;
    timestamp expires;
    bool confirmed = false;  ///< the original's write is durable
  };
  /// An admitted batch: the messages to store, and the id each input gets.
  struct admitted {
    std::vector<placed> batch;
    std::vector<message_id> ids;  ///< aligned with the input; a duplicate has its original's id
    std::vector<std::string> new_keys;  ///< dedupe keys this batch added
    std::vector<store_op> ops;          ///< dedupe records to write with the batch
    std::uint64_t duplicates = 0;
    bool waits_for_original = false;  ///< a duplicate of a message whose write is not durable yet
  };
  using ids_promise = caf::typed_response_promise<std::vector<message_id>>;

  timestamp now() const { return qc_.ctx->time.now(clock()); }
  /// Validates a batch and turns it into placed messages, or the first error. `parsed`: the
  /// bodies already parsed as JSON (a topic enqueue), aligned with the batch.
  result<admitted> admit(std::vector<outgoing_message>& batch, timestamp t,
                         const std::vector<shared_json>* parsed = nullptr);
  /// Enqueues a batch and answers `promise` once it is durable.
  void enqueue_batch(std::vector<outgoing_message> batch, ids_promise promise);
  /// The outcome of an admitted batch's write: confirms or forgets its dedupe keys.
  void settle_dedupe(const admitted& a, bool committed);
  /// Runs `f` now, or after the pending topic write or the deferred recovery (FIFO). If the
  /// queue stops first, `drop` runs instead with the reason, to answer whoever waits.
  void run_or_hold(std::function<void()> f, std::function<void(const error&)> drop);
  void release_held();
  /// Makes `batch` durable together with `ops`, then routes it; `finish` runs once the batch is
  /// routed (or with the error).
  template <class Done>
  void persist_and_route(std::vector<placed> batch, std::vector<store_op> ops, Done finish);
  /// Hands `batch` to its groups' inboxes and the fairness actor; `routed` runs once every group
  /// it woke has taken its messages (`route_receipt`), so an answer given then is seen by any
  /// later receive (a busy group's arrivals are behind a head already offered).
  void route(std::vector<placed> batch, std::function<void()> routed);
  /// The group of `lane`, made if none lives. `key` names it for later lookups: a key whose lane
  /// is `lane` (a placement's group key) or one no placement produces (`stored_placement`).
  group_entry& group_for(const std::string& key, const std::string& label,
                         const codec::lane_id& lane, group_id id = group_id{});
  /// The lane of `where`'s key, and its live group if there is one (0: none).
  std::pair<codec::lane_id, group_id> lane_and_group(const placement& where) const;
  codec::lane_id lane_of(const placement& where) const;
  /// `m` with its placement, lane and live group (`placed`).
  placed placed_at(message m, placement where) const;
  /// The placement of a message stored under `lane`: its key's when the key still resolves to
  /// that lane, else one that keeps the stored lane (docs/design/lanes.md L7).
  placement stored_placement(const message& m, const codec::lane_id& lane) const;
  /// `m` placed under the lane it was stored under, with that lane's live group (`placed`).
  placed placed_under(message m, const codec::lane_id& lane) const;
  std::vector<store_op> counters_op() const;
  /// Reads every record of one kind of this queue, page by page; `each` may stop it with an
  /// error, and `done` gets the outcome.
  template <class Each, class Done>
  void scan_all(std::string from, std::string to, Each each, Done finished);
  void recover(std::shared_ptr<recovery> r);
  void finish_recovery(recovery& r);
  group_entry* find_group(group_id id);
  /// A group reported idle after `received` messages: it lingers, and its report is checked again
  /// once `group_idle_linger` is over (`end_lingers`).
  void on_idle(group_id id, std::uint64_t received);
  /// Stops the groups whose linger is over and that are still idle; arms the next check.
  void end_lingers();
  void arm_linger_check(timestamp t);
  void stop_group(group_entry& entry);
  /// The group is busy again: it no longer lingers.
  void wake(group_entry& entry);
  /// The group holding the lease: its live incarnation, or a held head after a restart.
  group_entry* owner_of(const lease_token& l);
  /// One page of groups (docs/api.md "Groups"): picks the page's groups from `group_by_lane_`
  /// (O(log n + examined)), then has them describe themselves, a window at a time.
  caf::result<groups_page> describe_groups(groups_query q);
  struct groups_gather;  // state of a page being gathered (queue_actor.cpp)
  void describe_next(const std::shared_ptr<groups_gather>& g);
  queue_stats stats() const;

  queue_actor_config qc_;
  fairness_actor fairness_;
  std::shared_ptr<std::optional<error>> fairness_stopped_;  ///< fairness_actor_config::stopped
  offer_box offers_;  ///< shared by the fairness actor and the groups
  std::uint64_t next_id_ = 1;
  std::uint64_t next_seq_ = 1;
  std::uint64_t next_group_ = 1;
  /// Fast delivery after a restart: the groups of recovered heads, by message id, so a token of
  /// the previous run (whose group id is gone) reaches the group: within the grace to reclaim
  /// the lease, and after it while a reclaimed lease runs. Dropped when the group goes idle.
  std::unordered_map<message_id, group_id> reclaimable_;
  std::unordered_map<std::string, group_id> group_by_key_;          // by encoded key (saves a hash)
  std::map<std::array<std::uint8_t, 16>, group_id> group_by_lane_;  // one group per lane
  std::unordered_map<group_id, group_entry> groups_;
  std::size_t lingering_ = 0;  ///< groups with `idle_since` set
  /// Each idle report that started a linger, in order, so by the end of its linger: one timer
  /// for all of them (a delayed message per idle group was an entry in CAF's clock and a
  /// wake-up of its thread each; 7% of the instructions when every message idles its group).
  struct linger_check {
    timestamp due;
    group_id id;
    std::uint64_t received = 0;
  };
  std::deque<linger_check> linger_checks_;
  bool linger_armed_ = false;
  std::map<std::uint64_t, dead_letter> dead_letters_;  // by dead-letter order
  std::unordered_map<message_id, std::uint64_t> dead_letter_order_;
  std::uint64_t next_dead_letter_ = 1;
  /// The dedupe window by encoded key, and its keys in expiry order (the window is fixed, so
  /// insertion order is expiry order).
  std::unordered_map<std::string, dedupe_entry> dedupe_;
  std::deque<std::pair<timestamp, std::string>> dedupe_expiry_;
  /// A topic enqueue prepared here, waiting for its write (lanes.md L10); writes of this queue
  /// wait in `held_` meanwhile, so the store sees them in seq order.
  std::optional<admitted> topic_batch_;
  /// Recovery waits for the key functions of a recovered spec (lanes.md L3).
  bool recovery_deferred_ = false;
  bool recovering_ = false;
  /// Work held back by a pending topic write or recovery. The closures keep response promises,
  /// which are strong references to this actor: `on_exit` drops them, answering each waiter.
  struct held_work {
    std::function<void()> run;
    std::function<void(const error&)> drop;
  };
  std::deque<held_work> held_;
  /// Writes a dead-letter move (its store operations without the counters, which are added as
  /// of each attempt) and answers `promise` once it is durable; a failed move is sent again, in
  /// order with the other failed ones, every `store_retry` (`retry_moves`).
  using move_promise = caf::typed_response_promise<caf::ok_atom>;
  void move_dead(std::vector<store_op> ops, move_promise promise);
  void retry_moves();
  struct failed_move {
    std::vector<store_op> ops;
    move_promise promise;
  };
  std::vector<failed_move> failed_moves_;
  /// An ack batch being gathered: the outcomes of its groups (one `acked_atom`), of the fairness
  /// actor, and of the handler itself; `remaining` counts who has yet to report.
  struct ack_gather {
    caf::typed_response_promise<std::vector<lease_outcome>> promise;
    std::vector<lease_outcome> failed;
    std::vector<store_op> ops;
    std::size_t remaining = 0;
    void add(std::vector<store_op>& more, std::vector<lease_outcome>& more_failed);
  };
  /// One report is in; after the last, writes the batch's operations and answers.
  void ack_done(ack_gather& g);
  std::unordered_map<std::uint64_t, std::shared_ptr<ack_gather>> acking_;
  std::uint64_t next_ack_ = 1;
  /// Routed batches whose groups have not all taken their messages yet, by batch number: what
  /// runs when they have.
  std::unordered_map<std::uint64_t, std::function<void()>> routing_;
  std::uint64_t next_routing_ = 1;
};

}  // namespace laneq
