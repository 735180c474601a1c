// The admin actor: the broker's registry of queues. Creates a queue (idempotent for the same
// spec, an error for a different one), finds, lists, describes and deletes queues, and at start
// rebuilds every queue from the store (docs/design/recovery.md). Queue specs are stored before a
// create is answered; a delete removes every record of the queue in one write. It also keeps the
// topics and runs topic enqueues, one at a time, each as one store write (docs/design/lanes.md).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/codec.hpp"
#include "laneq/lease.hpp"

namespace laneq {

/// Broker-wide settings the admin actor hands to every queue.
struct admin_actor_config {
  context_ptr ctx;
  store_actor store;
  bool sync = true;  ///< false: no queue syncs its writes (survives a process crash only)
  duration reclaim_grace = limits::reclaim_grace_default;
  std::size_t group_window = limits::group_window_default;
  std::size_t group_window_max = limits::group_window_max_default;
  /// How long a queue's actors wait before they send a failed store write again.
  duration store_retry = limits::store_reopen_interval;
  /// The broker's window budget, split evenly over its shards (docs/operations.md, "Group
  /// windows").
  std::size_t window_budget_bytes = limits::window_budget_bytes_default;
};

class admin_actor_impl : public actor_base<admin_actor> {
 public:
  admin_actor_impl(caf::actor_config& cfg, admin_actor_config ac);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.admin"; }
  void on_exit() override;

 private:
  struct entry {
    queue_spec spec;
    queue_control handle;  ///< its shard actor, or the gateway of its shards
    std::uint64_t uid = 0;
    std::vector<std::uint64_t> shard_uids;  ///< shards 1 to n-1 (shard 0 has `uid`)
    bool hook_missing = false;  ///< recovered; the spec had a hook nobody has given back yet
  };
  caf::result<queue_api> find(const std::string& name);
  /// create_atom: creates queue `spec.name()`, or finds it when it has the same definition.
  caf::result<queue_api, bool> create_queue(queue_spec& spec);
  /// update_atom: queue `name`'s settings as `make` derives them from its spec (queue_spec::
  /// updated, queue_spec_patched), stored, then applied by every shard before the answer.
  caf::result<queue_spec> update_queue(
      const std::string& name, const std::function<result<queue_spec>(const queue_spec&)>& make);
  /// describe_atom: queue `name`'s summary, stats and spec.
  caf::result<queue_description> describe_queue(const std::string& name);
  /// drop_atom: deletes queue `name` and, in one write, every record of it; unless `force`, only
  /// when it holds no message and no dead letter (queue_not_empty otherwise).
  caf::result<caf::ok_atom> drop_queue(const std::string& name, bool force);
  /// Deletes queue `name` now (it exists and is in no topic) and answers `promise`.
  void drop_now(const std::string& name, caf::typed_response_promise<caf::ok_atom> promise);
  /// redrive_atom with a target (admin_redrive.cpp): dead letters of queue `from` into queue `to`.
  caf::result<std::uint64_t> redrive_into(const std::string& from, std::vector<message_id> ids,
                                          const std::string& to);
  /// The dead letters a redrive into another queue took are enqueued there: enqueues them, then
  /// deletes them from `from`'s dead letters.
  void redrive_taken(const std::string& from, const std::string& to, std::vector<dead_letter> dls,
                     caf::typed_response_promise<std::uint64_t> promise);
  /// Each shard's share of the window budget, with `extra` shards about to come.
  std::size_t budget_share(std::size_t extra = 0) const;
  /// Tells every queue its share (after queues came or went).
  void share_budget();
  /// Whether a queue's writes are synced before they are answered.
  bool syncs(const queue_spec& spec) const;
  /// Spawns a queue incarnation: its shard actor, or its shards and their gateway.
  queue_control spawn_queue(const codec::queue_record& rec, bool hook_missing);
  /// Spawns shard `index` of a queue, whose records are under `uid`.
  shard_actor spawn_shard(const queue_spec& spec, std::uint64_t uid, std::uint32_t index,
                          bool hook_missing);
  caf::result<std::uint64_t> recover();
  void recover_queues(caf::typed_response_promise<std::uint64_t> promise);
  void recover_topics(caf::typed_response_promise<std::uint64_t> promise, std::uint64_t queues);
  caf::result<bool> create_topic(topic_spec& spec);
  /// topic_atom, lookup_atom: topic `name`'s spec.
  caf::result<topic_spec> find_topic(const std::string& name) const;
  /// topic_atom, drop_atom: deletes topic `name` (its queues stay).
  caf::result<caf::ok_atom> drop_topic(const std::string& name);
  using publish_promise = caf::typed_response_promise<std::vector<topic_enqueued>>;
  /// publish_atom: a topic enqueue into topic `name`, run now or after those before it.
  caf::result<std::vector<topic_enqueued>> publish_to(const std::string& name,
                                                      std::vector<outgoing_message>& batch);
  /// A topic enqueue in progress: what its queues prepared (admin_actor.cpp).
  struct publish_gather;
  /// Runs one topic enqueue: prepare in every queue, one write, settle every queue.
  void publish(const topic_spec& topic, std::vector<outgoing_message> batch,
               publish_promise promise);
  /// Once every queue has answered its prepare: writes their messages in one write, or fails.
  void publish_commit(const std::shared_ptr<publish_gather>& g);
  void publish_next();

  admin_actor_config ac_;
  std::map<std::string, entry> queues_;
  std::map<std::string, topic_spec> topics_;
  std::map<std::string, std::string> topic_of_queue_;  ///< a queue is in at most one topic
  /// Topic enqueues run one at a time (a queue holds its writes while one is prepared there; two
  /// at once could wait on each other); the others wait here in arrival order.
  std::deque<std::function<void()>> publishes_;
  bool publishing_ = false;
  std::uint64_t next_uid_ = 1;  ///< numbers queue incarnations (store keys); never reused
  std::uint64_t epoch_ = 0;     ///< broker runs over this store (0: never recovered)
  nonce_source nonces_;         ///< the lease key (persisted with the store)
};

}  // namespace laneq
