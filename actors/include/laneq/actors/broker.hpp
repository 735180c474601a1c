// The in-process C++ API: a broker (store + admin actor) on an actor system, and blocking
// clients for code outside actors.
//
// Async form: the typed handles themselves. From any actor:
//   self->request(admin, 5s, create_atom_v, queue_spec("audit").ordered())
//       .then([=](queue_api q, bool created) { ... }, [=](caf::error& e) { ... });
//   self->request(q, 5s, enqueue_atom_v, std::vector<outgoing_message>{...}).then(...);
// Blocking form: `blocking_admin` and `blocking_queue` below.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/persistence.hpp"
#include "laneq/actors/protocol.hpp"

namespace laneq {

/// Registers laneq's message types with a CAF config (call before creating the actor system).
void add_message_types(caf::actor_system_config& cfg);

/// Default time a blocking call waits for the broker.
inline constexpr std::chrono::seconds blocking_timeout_default{30};

/// The actor through which a blocking client waits for its answers, kept from one call to the
/// next: making an actor and stopping it costs a wake-up of CAF's clock thread (CAF 0.17's
/// cleanup cancels the actor's timeouts there), about a tenth of an in-process client's CPU. A
/// call takes the kept actor, or makes one when a call on another thread holds it; a call that
/// timed out stops its actor instead of keeping it (the late answer may still come). A copy
/// starts with none kept. Destroy it before its actor system.
class blocking_caller {
 public:
  explicit blocking_caller(caf::actor_system& sys) : sys_(&sys) {}
  blocking_caller(const blocking_caller& other) : sys_(other.sys_) {}
  blocking_caller& operator=(const blocking_caller& other);
  ~blocking_caller();

  /// The kept actor, or a new one.
  std::unique_ptr<blocking_self> take();
  /// Keeps `self` for the next call (stops it when another is kept already).
  void keep(std::unique_ptr<blocking_self> self);

 private:
  caf::actor_system* sys_;
  std::atomic<blocking_self*> kept_{nullptr};
};

/// How a broker stores and restarts (docs/design/persistence.md, recovery.md).
struct broker_options {
  /// RocksDB data directory; empty: an in-memory store (nothing survives the process).
  std::string data_dir;
  /// false: no queue syncs its writes; an acknowledged write survives a process crash, not a
  /// power loss. true: each queue's own `sync_writes` decides (default on).
  bool sync = true;
  /// Fast delivery after a restart: how long recovered heads wait for their old lease holders.
  duration reclaim_grace = limits::reclaim_grace_default;
  /// Messages a group keeps in memory; the rest of its backlog stays in the store.
  std::size_t group_window = limits::group_window_default;
  /// Messages a group may keep in memory while all groups together hold less than
  /// `window_budget_bytes` (docs/operations.md, "Group windows").
  std::size_t group_window_max = limits::group_window_max_default;
  std::size_t window_budget_bytes = limits::window_budget_bytes_default;
  /// Group-commit bounds and the RocksDB environment; `dir` is taken from `data_dir`.
  persistence_options persistence;
};

/// An in-process broker. Owns its actors: they stop when the broker is destroyed.
class broker {
 public:
  /// Opens a broker: its store (the data directory, or memory), then rebuilds every stored
  /// queue before it returns. Fails (storage_failed, corrupt_record) rather than start with
  /// fewer messages than were stored.
  static result<std::unique_ptr<broker>> open(caf::actor_system& sys, broker_options opts = {});

  /// In memory, production time base (wall clock) and a random nonce seed.
  explicit broker(caf::actor_system& sys);
  /// In memory with a given context (tests pass a fixed epoch and seed).
  broker(caf::actor_system& sys, context_ptr ctx);
  /// A given context and store (tests inject a store that fails on demand, or keep a store
  /// across brokers to crash and recover: `owns_store` false leaves it running when the broker
  /// goes). Stored queues are rebuilt only on `recover_atom` to the admin actor.
  broker(caf::actor_system& sys, context_ptr ctx, store_actor store, broker_options opts = {},
         bool owns_store = true);
  ~broker();
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;

  admin_actor admin() const { return admin_; }
  store_actor store() const { return store_; }
  /// The store's counters and health (`degraded` with its reason after a storage fault).
  /// Blocking: not for use inside an actor.
  result<store_stats> storage_stats(caf::timespan timeout = blocking_timeout_default) const;
  /// An online backup (docs/operations.md "Backup and restore"): a checkpoint of the store in
  /// `dir` (absolute, must not exist), holding every write acknowledged before the call. Errors:
  /// invalid_argument (relative path), already_exists, checkpoint_failed (the path cannot be
  /// written; an in-memory broker), storage_failed (store degraded). Blocking.
  result<checkpoint_info> checkpoint(const std::string& dir,
                                     caf::timespan timeout = blocking_timeout_default) const;
  const context_ptr& context() const { return ctx_; }

 private:
  caf::actor_system& sys_;
  context_ptr ctx_;
  store_actor store_;
  admin_actor admin_;
  bool owns_store_ = true;
};

/// Blocking admin calls. Not for use inside an actor (it would block a scheduler thread).
class blocking_admin {
 public:
  blocking_admin(caf::actor_system& sys, admin_actor admin,
                 caf::timespan timeout = blocking_timeout_default);

  /// Creates the queue; the same spec again returns the existing queue.
  result<queue_api> create_queue(queue_spec spec);
  result<queue_api> lookup(const std::string& name);
  result<std::vector<std::string>> list_queues();
  result<queue_description> describe(const std::string& name);
  /// Deletes the queue with every record of it. Without `force`, only an empty one: no message
  /// waiting, delayed or in flight and no dead letter (queue_not_empty otherwise).
  status delete_queue(const std::string& name, bool force = false);
  /// Changes the settings of queue `spec.name()` in place to those of `spec` (docs/api.md,
  /// "Change a queue's settings"); returns the queue's spec as stored. invalid_spec names each
  /// fixed field (ordering, shards, ...) that `spec` would change; queue_not_found.
  result<queue_spec> update_queue(queue_spec spec);
  /// The same with a JSON merge patch of the settings (`{"lease_ms": 60000}`), as HTTP's PATCH.
  result<queue_spec> update_queue(const std::string& name, const std::string& patch_json);
  /// Redrives dead letters of queue `from` (these ids; the first ones when empty, at most
  /// limits::enqueue_batch_max) into queue `to` as new messages there; returns how many
  /// (docs/design/purge.md, "Redrive into another queue").
  result<std::uint64_t> redrive_into(const std::string& from, std::vector<message_id> ids,
                                     const std::string& to);

  /// Creates a topic over existing queues (true: newly created; the same spec again: false).
  result<bool> create_topic(topic_spec spec);
  result<topic_spec> lookup_topic(const std::string& name);
  result<std::vector<topic_spec>> list_topics();
  status delete_topic(const std::string& name);
  /// Enqueues each message into every queue of the topic, all in one store write; per queue, the
  /// ids in batch order (docs/design/lanes.md L10).
  result<std::vector<topic_enqueued>> publish(const std::string& topic,
                                              std::vector<outgoing_message> batch);

 private:
  blocking_caller caller_;
  admin_actor admin_;
  caf::timespan timeout_;
};

/// Blocking queue calls. Not for use inside an actor.
class blocking_queue {
 public:
  blocking_queue(caf::actor_system& sys, queue_api q,
                 caf::timespan timeout = blocking_timeout_default);

  result<std::vector<message_id>> enqueue(std::vector<outgoing_message> batch);
  result<message_id> enqueue(outgoing_message m);
  /// Waits up to `req.wait_us` for the first message (long poll).
  result<std::vector<delivery>> receive(receive_request req);
  status ack(const lease_token& lease);
  /// Acks a batch; returns the leases that failed, with why. An ordered batch's lease acks every
  /// message of it not acked yet.
  result<std::vector<lease_outcome>> ack(std::vector<lease_token> leases);
  /// Acks the first `count` messages of an ordered batch as delivered (those with a batch_index
  /// below `count`); the lease goes on over the rest. Returns how many this acked
  /// (docs/design/ordering.md O12).
  result<std::uint64_t> ack(const lease_token& lease, std::uint32_t count);
  status nack(const lease_token& lease, duration retry_after = duration{0});
  /// Any nack: retry or dead-letter, and for an ordered batch `req.from`, the batch_index of the
  /// message that failed (the messages before it are acked, those after it go back behind it).
  status nack(const lease_token& lease, const nack_request& req);
  status dead_letter(const lease_token& lease);
  result<timestamp> extend(const lease_token& lease, duration by);
  result<std::vector<laneq::dead_letter>> dead_letters(std::uint32_t max = 1000);
  /// Redrives the given dead letters (all of them when `ids` is empty); returns how many.
  result<std::uint64_t> redrive(std::vector<message_id> ids = {});
  /// The dead letters these ids name, in that order.
  result<std::vector<laneq::dead_letter>> dead_letters(std::vector<message_id> ids);
  /// Deletes the dead letters these ids name (every one when empty); returns how many.
  result<std::uint64_t> delete_dead_letters(std::vector<message_id> ids = {});
  /// Removes the waiting messages of the queue, or of one group; in-flight ones stay (their
  /// leases hold). Returns how many (docs/design/purge.md).
  result<std::uint64_t> purge(group_filter which = {});
  /// The first messages of the queue or of one group, without a lease (docs/api.md "Peek").
  result<std::vector<peeked_message>> peek(peek_request req = {});
  result<queue_stats> stats();
  /// One page of the queue's groups (docs/api.md "Groups").
  result<laneq::groups_page> page_of_groups(groups_query q);
  /// Every group, page by page (one request per `limits::groups_page_max` groups examined).
  result<std::vector<group_info>> groups(bool blocked_only = false);

  const queue_api& handle() const { return q_; }

 private:
  blocking_caller caller_;
  queue_api q_;
  caf::timespan timeout_;
};

}  // namespace laneq
