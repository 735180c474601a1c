// The actor message protocol in one place: message structs, atoms and every typed interface.
// See ARCHITECTURE.md §3 for who talks to whom.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "laneq/actors/context.hpp"
#include "laneq/engine_io.hpp"
#include "laneq/error.hpp"
#include "laneq/fair_scheduler.hpp"
#include "laneq/group_state.hpp"
#include "laneq/lease.hpp"
#include "laneq/limits.hpp"
#include "laneq/message.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/topic_spec.hpp"

namespace laneq {

/// What the store reports about itself (persistence.md: metrics, health).
struct store_stats {
  std::uint64_t batches = 0;  ///< committed write batches
  std::uint64_t writes = 0;   ///< store_write requests committed
  std::uint64_t ops = 0;      ///< operations committed
  std::uint64_t bytes = 0;    ///< key and value bytes committed
  std::uint64_t syncs = 0;    ///< batches written with sync
  std::uint64_t failed_batches = 0;
  std::uint64_t reopens = 0;  ///< successful close-and-reopen after a failure
  /// Batch sizes in writes: counts of batches with 1, 2-3, 4-7, ... 2^k..2^(k+1)-1 writes.
  std::vector<std::uint64_t> batch_histogram;
  /// How long each committed batch took to write (RocksDB's Write with the WAL's sync; in the
  /// memory store, its map updates): counts per bucket of latency_bounds_s, not cumulative, and
  /// their sum in microseconds.
  std::vector<std::uint64_t> commit_histogram =
      std::vector<std::uint64_t>(latency_bounds_s.size() + 1);
  std::uint64_t commit_sum_us = 0;
  bool degraded = false;  ///< the last batch failed and the store has not reopened since
  std::string reason;     ///< why it is degraded
  /// The data directory's file system: free bytes when last measured, and the reserve below
  /// which enqueues are refused (0 for a store without a disk).
  std::uint64_t free_bytes = 0;
  std::uint64_t reserve_bytes = 0;
  std::uint64_t refused_low_space = 0;  ///< enqueue writes refused below the reserve
  /// Enqueues are being refused for space: free space is below the reserve, or the last
  /// enqueue refused would still not fit (deliveries and acks go on).
  bool low_space = false;

  /// Counts a committed batch of `batch_writes` write requests in `batch_histogram`.
  void count_batch(std::size_t batch_writes) {
    auto bucket = static_cast<std::size_t>(std::bit_width(batch_writes) - 1);
    if (batch_histogram.size() <= bucket) batch_histogram.resize(bucket + 1, 0);
    ++batch_histogram[bucket];
  }
  /// Counts a committed batch that took `took` to write in `commit_histogram`.
  void count_commit(duration took) {
    ++commit_histogram.at(latency_bucket(took));
    commit_sum_us += took.count() > 0 ? static_cast<std::uint64_t>(took.count()) : 0;
  }
};

/// What a group actor of a recovered queue starts from (queue_actor recovery).
struct group_recovery {
  std::vector<message> window;  ///< the first messages of the group, in arrival order
  std::uint64_t beyond = 0;     ///< further messages left in the store
  /// A lease on the head committed before the restart (durable delivery), if any.
  std::vector<lease_token> lease;  ///< zero or one
  timestamp lease_deadline;
  /// Fast delivery: the head waits for its old lease holder until then (reclaim grace).
  timestamp hold_until;
};

/// What a topic enqueue committed into one of its queues.
struct topic_enqueued {
  std::string queue;
  std::vector<message_id> ids;  ///< aligned with the batch (a duplicate has its original's id)
  friend bool operator==(const topic_enqueued&, const topic_enqueued&) = default;
};

/// A queue as `describe` reports it.
struct queue_description {
  std::string summary;  ///< queue_spec::describe()
  queue_stats stats;
  /// The spec's JSON form (`queue_spec_to_json`, serialized): what `GET /v1/queues/{name}`
  /// shows; a string so it crosses to remote CAF programs (a spec's hook cannot).
  std::string spec_json;
};

/// A checkpoint of the store (`checkpoint_atom`, docs/operations.md "Backup and restore"): a
/// directory from which laneqd starts with every write acknowledged before the request.
struct checkpoint_info {
  std::string dir;              ///< the checkpoint's directory, as requested
  std::uint64_t files = 0;      ///< files in it
  std::uint64_t bytes = 0;      ///< their total size (hard-linked files count in full)
  std::int64_t elapsed_us = 0;  ///< from the request's arrival at the store to the checkpoint
};

template <class Inspector>
auto inspect(Inspector& f, waiting_item& x) {
  return f(x.group, x.id, x.throttled, x.since, x.until);
}
template <class Inspector>
auto inspect(Inspector& f, group_recovery& x) {
  return f(x.window, x.beyond, x.lease, x.lease_deadline, x.hold_until);
}
template <class Inspector>
auto inspect(Inspector& f, store_stats& x) {
  return f(x.batches, x.writes, x.ops, x.bytes, x.syncs, x.failed_batches, x.reopens,
           x.batch_histogram, x.commit_histogram, x.commit_sum_us, x.degraded, x.reason,
           x.free_bytes, x.reserve_bytes, x.refused_low_space, x.low_space);
}
template <class Inspector>
auto inspect(Inspector& f, topic_enqueued& x) {
  return f(x.queue, x.ids);
}
template <class Inspector>
auto inspect(Inspector& f, queue_description& x) {
  return f(x.summary, x.stats, x.spec_json);
}
template <class Inspector>
auto inspect(Inspector& f, checkpoint_info& x) {
  return f(x.dir, x.files, x.bytes, x.elapsed_us);
}

/// The queue actor's proof that its group actors have taken the messages it routed to them
/// (actors/src/queue_actor.cpp, `route`). Every group of a routed batch gets a copy with its
/// messages; the copy goes when the group's handler is done with them, that is after the group
/// has offered its new head to the fairness actor. When the last copy goes, the queue actor hears
/// `routed_atom` with the batch's number and only then answers the client. So a receive sent after
/// an enqueue's answer finds an ordered message already offered (docs/api.md, "Receive"), and a
/// group whose message was dropped (a stopped actor) still releases its batch.
class route_receipt {
 public:
  route_receipt() = default;
  route_receipt(const caf::strong_actor_ptr& queue, std::uint64_t batch);

 private:
  struct notifier {
    caf::weak_actor_ptr queue;
    std::uint64_t batch = 0;
    notifier(caf::weak_actor_ptr q, std::uint64_t b) : queue(std::move(q)), batch(b) {}
    notifier(const notifier&) = delete;
    notifier& operator=(const notifier&) = delete;
    ~notifier();
  };
  std::shared_ptr<notifier> notifier_;
};

/// Where the fairness actor posts the delivery of a group's offered head (its lease, deadline and
/// delivery time) for the group actor to take at the start of the next message it handles
/// (actors/src/group_actor.cpp, `catch_up`). It replaces a message per delivery. A group needs
/// its lease only once a message about it arrives (an ack, nack or extend, which the client sends
/// after it received the delivery, or the deadline tick, which the fairness actor sends after
/// posting), so the group always finds the post in time; a describe that races with a delivery
/// sees the head as offered, as it would have before. The fairness actor posts at most once per
/// offer, and a group offers again only after it took the last post, so a post is never
/// overwritten. Copies share one slot; one slot per group actor.
class delivery_slot {
 public:
  struct posted {
    lease_token lease;
    timestamp deadline;
    timestamp at;  ///< when it was delivered
  };

  delivery_slot();
  /// Fairness actor: the offered head went out.
  void post(const posted& p) const;
  /// Group actor: the delivery posted since the last take, if any.
  std::optional<posted> take() const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

/// Where the queue actor leaves a group's arrivals, for the group actor to take in at the start of
/// the next message it handles (actors/src/group_actor.cpp, `catch_up`). While the group is busy
/// (its head offered or in flight) it is sure to handle a message again (an ack, nack or extend,
/// or the lease tick), and an arrival changes nothing before then: it only joins the window
/// behind the head. So arrivals for a busy group cost no message and no activation of its own; the
/// queue actor sends a wake-up (with the batch's route receipt) only when the group is not busy,
/// or when `limits::group_inbox_max` messages or `limits::group_inbox_bytes_max` bytes wait.
/// Every arrival goes through the inbox, so the group takes them in arrival order. The group
/// tells the inbox whether it is busy at the end of every message it handles (`settle`), after
/// taking in what came meanwhile. Copies share one inbox; one per group actor.
class arrival_inbox {
 public:
  arrival_inbox();
  /// Queue actor: leaves `m`; true if the group must be woken (it is not busy, or the inbox is
  /// full), false if it will take `m` in when it next handles a message anyway.
  bool leave(message m) const;
  /// Group actor: the arrivals since the last take, in order.
  std::vector<message> take() const;
  /// Group actor, at the end of a message: the arrivals that came while it ran, if any (it takes
  /// them in, then settles again); otherwise records whether it is busy and returns nothing.
  std::vector<message> settle(bool busy) const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

/// One ack batch's outcomes, filled in by the group actors whose leases it holds
/// (actors/src/queue_actor.cpp, the ack handler). Each group records the store operations of its
/// ack, or why it failed; when the last copy goes, the queue actor hears `acked_atom` with all of
/// them, writes the operations as one batch and confirms the acks once it is durable. So a group
/// gets one message per ack and sends none back. A lease whose group never recorded an outcome
/// (its message was dropped because the group had stopped) is reported as not found.
class ack_receipt {
 public:
  ack_receipt() = default;
  ack_receipt(const caf::strong_actor_ptr& queue, std::uint64_t batch,
              std::vector<lease_token> leases);
  /// The lease at `index` is acked once `ops` are durable.
  void acked(std::size_t index, std::vector<store_op> ops) const;
  /// The lease at `index` was not acked.
  void failed(std::size_t index, error why) const;

 private:
  struct gather;
  std::shared_ptr<gather> gather_;
};

/// Converts a laneq error to a CAF error (category atom "laneq", the message as context).
caf::error to_caf(const error& e);
/// Converts back; CAF's own errors (timeouts, dead actors) become `unavailable`.
error from_caf(const caf::error& e);

/// The exit reason with which the admin stops a queue's actors when the queue is deleted.
caf::error queue_deleted_reason(const std::string& queue);
/// What a call still waiting on a queue (a long poll, an ack) is answered when the queue's actors
/// stop for `reason`: `queue_deleted` when the queue was deleted, otherwise `unavailable` (the
/// broker is shutting down), so a client does not take a broker's shutdown for a deleted queue.
error stopped_queue_error(const caf::error& reason, const std::string& queue);

/// CAF's scheduler as laneq's programs run it (laneqd, the benchmarks, the load generator):
/// `threads` workers (0: one per core; CAF's own default, max(4, cores), put a fifth of laneqd's
/// CPU samples in task switches on a 2-core host) and no sleep-polling phase. A worker that runs
/// dry spins briefly (CAF's aggressive phase), then sleeps on its condition variable, where any
/// message from outside wakes it; CAF's default first polls 500 times with a 50 us sleep each. On
/// this 2-core host that polling cost half of laneqd's CPU at 2,000 msg/s and about 15% of it
/// under full load, with no loss in latency (benchmarks/README.md, "What changed since the last
/// figures").
void tune_scheduler(caf::actor_system_config& cfg, std::size_t threads = 0);

}  // namespace laneq

// The queue spec carries the on_enqueue hook (a std::function), so it never crosses a process
// boundary; the daemon's remote interface uses a serializable description instead.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::queue_spec)
// Bodies parsed once per topic enqueue, shared read-only by the topic's queues (in process only).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<laneq::shared_json>)
// A receipt notifies its queue actor in process; it never crosses a process boundary.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::route_receipt)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::ack_receipt)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::delivery_slot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::arrival_inbox)

CAF_BEGIN_TYPE_ID_BLOCK(laneq, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(laneq, (laneq::message))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::message>))
CAF_ADD_TYPE_ID(laneq, (laneq::outgoing_message))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::outgoing_message>))
CAF_ADD_TYPE_ID(laneq, (laneq::message_id))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::message_id>))
CAF_ADD_TYPE_ID(laneq, (laneq::group_id))
CAF_ADD_TYPE_ID(laneq, (laneq::timestamp))
CAF_ADD_TYPE_ID(laneq, (laneq::lease_token))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::lease_token>))
CAF_ADD_TYPE_ID(laneq, (laneq::receive_request))
CAF_ADD_TYPE_ID(laneq, (laneq::nack_request))
CAF_ADD_TYPE_ID(laneq, (laneq::delivery))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::delivery>))
CAF_ADD_TYPE_ID(laneq, (laneq::lease_outcome))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::lease_outcome>))
CAF_ADD_TYPE_ID(laneq, (laneq::dead_letter))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::dead_letter>))
CAF_ADD_TYPE_ID(laneq, (laneq::group_info))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::group_info>))
CAF_ADD_TYPE_ID(laneq, (laneq::waiting_item))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::waiting_item>))
CAF_ADD_TYPE_ID(laneq, (laneq::queue_stats))
CAF_ADD_TYPE_ID(laneq, (laneq::queue_description))
CAF_ADD_TYPE_ID(laneq, (laneq::error))
CAF_ADD_TYPE_ID(laneq, (laneq::store_write))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::store_op>))
CAF_ADD_TYPE_ID(laneq, (laneq::store_entry))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::store_entry>))
CAF_ADD_TYPE_ID(laneq, (laneq::store_stats))
CAF_ADD_TYPE_ID(laneq, (laneq::group_recovery))
CAF_ADD_TYPE_ID(laneq, (laneq::topic_spec))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::topic_spec>))
CAF_ADD_TYPE_ID(laneq, (laneq::topic_prepared))
CAF_ADD_TYPE_ID(laneq, (laneq::topic_enqueued))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::topic_enqueued>))
CAF_ADD_TYPE_ID(laneq, (laneq::checkpoint_info))
CAF_ADD_TYPE_ID(laneq, (laneq::groups_query))
CAF_ADD_TYPE_ID(laneq, (laneq::groups_page))
CAF_ADD_ATOM(laneq, laneq, enqueue_atom, "enqueue")
CAF_ADD_ATOM(laneq, laneq, receive_atom, "receive")
CAF_ADD_ATOM(laneq, laneq, ack_atom, "ack")
CAF_ADD_ATOM(laneq, laneq, nack_atom, "nack")
CAF_ADD_ATOM(laneq, laneq, extend_atom, "extend")
CAF_ADD_ATOM(laneq, laneq, dlq_atom, "dlq")
CAF_ADD_ATOM(laneq, laneq, redrive_atom, "redrive")
CAF_ADD_ATOM(laneq, laneq, stats_atom, "stats")
CAF_ADD_ATOM(laneq, laneq, groups_atom, "groups")
CAF_ADD_ATOM(laneq, laneq, offer_atom, "offer")
CAF_ADD_ATOM(laneq, laneq, idle_atom, "idle")
CAF_ADD_ATOM(laneq, laneq, tick_atom, "tick")
CAF_ADD_ATOM(laneq, laneq, describe_atom, "describe")
CAF_ADD_ATOM(laneq, laneq, create_atom, "create")
CAF_ADD_ATOM(laneq, laneq, list_atom, "list")
CAF_ADD_ATOM(laneq, laneq, drop_atom, "drop")
CAF_ADD_ATOM(laneq, laneq, lookup_atom, "lookup")
CAF_ADD_ATOM(laneq, laneq, dead_atom, "dead")
CAF_ADD_ATOM(laneq, laneq, waiting_atom, "waiting")
CAF_ADD_ATOM(laneq, laneq, commit_atom, "commit")
CAF_ADD_ATOM(laneq, laneq, stop_atom, "stop")
CAF_ADD_ATOM(laneq, laneq, write_atom, "write")
CAF_ADD_ATOM(laneq, laneq, scan_atom, "scan")
CAF_ADD_ATOM(laneq, laneq, reopen_atom, "reopen")
CAF_ADD_ATOM(laneq, laneq, recover_atom, "recover")
CAF_ADD_ATOM(laneq, laneq, fetch_atom, "fetch")
CAF_ADD_ATOM(laneq, laneq, release_atom, "release")
CAF_ADD_ATOM(laneq, laneq, topic_atom, "topic")
CAF_ADD_ATOM(laneq, laneq, publish_atom, "publish")
CAF_ADD_ATOM(laneq, laneq, prepare_atom, "prepare")
CAF_ADD_ATOM(laneq, laneq, settle_atom, "settle")
CAF_ADD_ATOM(laneq, laneq, checkpoint_atom, "checkpoint")
CAF_ADD_ATOM(laneq, laneq, routed_atom, "routed")
CAF_ADD_ATOM(laneq, laneq, acked_atom, "acked")
CAF_END_TYPE_ID_BLOCK(laneq)

namespace laneq {

// -- interfaces ---------------------------------------------------------------------------------

/// The store: an ordered key-value store with group commit. The key layout is libqueue's
/// (`laneq/storage.hpp`); the store knows nothing of queues. Two implementations: the in-memory
/// store (tests, and a broker without a data directory) and the RocksDB persistence actor.
///   write: answered once the write is durable (its batch committed); a failed batch answers
///          every member with storage_failed. A failed write is applied wholly or not at all
///          (when only the sync failed, its record may be back after a restart): callers
///          treat it as "may have happened", never as done.
///   scan:  up to `max` entries with from <= key < to, in key order.
///   checkpoint: commits the open batch, then writes a consistent copy of the store into a new
///          directory (absolute path, must not exist); a store without a data directory refuses.
using store_actor =
    caf::typed_actor<caf::replies_to<write_atom, store_write>::with<caf::ok_atom>,
                     caf::replies_to<scan_atom, std::string, std::string,
                                     std::uint32_t>::with<std::vector<store_entry>>,
                     caf::replies_to<stats_atom>::with<store_stats>,
                     caf::replies_to<checkpoint_atom, std::string>::with<checkpoint_info>,
                     caf::reacts_to<commit_atom, std::uint64_t>,  // closes the batch of that
                                                                  // generation
                     caf::reacts_to<reopen_atom>>;                // retries opening a failed store

/// One ordering group (one per non-empty group).
using group_actor =
    // arrivals wait in its inbox (arrival_inbox): take them in
    caf::typed_actor<caf::reacts_to<enqueue_atom, route_receipt>,
                     // writes the ack's erase and records the outcome in the receipt at that
                     // index once it is durable (or failed)
                     caf::reacts_to<ack_atom, lease_token, ack_receipt, std::uint32_t>,
                     caf::replies_to<nack_atom, lease_token, nack_request>::with<caf::ok_atom>,
                     caf::replies_to<extend_atom, lease_token, std::int64_t>::with<timestamp>,
                     caf::replies_to<describe_atom>::with<group_info>,
                     caf::reacts_to<tick_atom, lease_token>,  // lease deadline reached
                     caf::reacts_to<recover_atom, group_recovery>,
                     caf::reacts_to<fetch_atom>,    // retry reading the window back
                     caf::reacts_to<release_atom>,  // the reclaim grace is over
                     caf::reacts_to<write_atom>,    // send the failed writes again
                     caf::reacts_to<stop_atom>>;

/// The fairness actor: holds deliverable heads and unordered messages, serves receives.
using fairness_actor = caf::typed_actor<
    // group heads wait in the queue's offer_box: take them in
    caf::reacts_to<offer_atom>,
    // unordered messages, from the queue actor
    caf::reacts_to<enqueue_atom, std::vector<message>>,
    caf::replies_to<receive_atom, receive_request>::with<std::vector<delivery>>,
    // answers the failed leases and the store operations of the others
    caf::replies_to<ack_atom, std::vector<lease_token>>::with<std::vector<lease_outcome>,
                                                              std::vector<store_op>>,
    caf::replies_to<nack_atom, lease_token, nack_request>::with<caf::ok_atom>,
    caf::replies_to<extend_atom, lease_token, std::int64_t>::with<timestamp>,
    // the waiting items of these groups (a page of `groups`)
    caf::replies_to<waiting_atom, std::vector<group_id>>::with<std::vector<waiting_item>>,
    caf::replies_to<stats_atom>::with<queue_stats>,  // only `fairness` is filled in
    caf::reacts_to<extend_atom, group_actor, lease_token, timestamp>,  // a group head's new
                                                                       // deadline
    caf::reacts_to<recover_atom, std::vector<message>, std::vector<delivery>>,  // after a restart
    caf::reacts_to<tick_atom, std::uint64_t>>;

/// A queue as clients see it (in process, and later over CAF's middleman).
using queue_api = caf::typed_actor<
    caf::replies_to<enqueue_atom, std::vector<outgoing_message>>::with<std::vector<message_id>>,
    caf::replies_to<receive_atom, receive_request>::with<std::vector<delivery>>,
    caf::replies_to<ack_atom, std::vector<lease_token>>::with<std::vector<lease_outcome>>,
    caf::replies_to<nack_atom, lease_token, nack_request>::with<caf::ok_atom>,
    caf::replies_to<extend_atom, lease_token, std::int64_t>::with<timestamp>,
    caf::replies_to<dlq_atom, std::uint32_t>::with<std::vector<dead_letter>>,
    caf::replies_to<redrive_atom, std::vector<message_id>>::with<std::uint64_t>,
    caf::replies_to<stats_atom>::with<queue_stats>,
    caf::replies_to<groups_atom, groups_query>::with<groups_page>>;

/// What the admin actor asks of a queue, whichever engine runs it: the client API plus recovery,
/// the spec given again, and a topic enqueue's two phases.
using queue_control = queue_api::extend<
    // load the queue from the store
    caf::replies_to<recover_atom>::with<caf::ok_atom>,
    // adopt a spec (its hook)
    caf::reacts_to<create_atom, queue_spec>,
    // a topic enqueue: place, answer the ops, hold writes
    caf::replies_to<prepare_atom, std::vector<outgoing_message>,
                    std::vector<shared_json>>::with<topic_prepared>,
    // the topic's write committed (true) or failed (false); answered once
    // the committed messages are deliverable
    caf::replies_to<settle_atom, bool>::with<caf::ok_atom>>;

/// The queue actor: the client API plus what its group and fairness actors report.
using queue_actor = queue_control::extend<
    // move to the dead letters; answered once the move is durable (or failed)
    caf::replies_to<dead_atom, std::vector<dead_letter>>::with<caf::ok_atom>,
    caf::reacts_to<idle_atom, group_id, std::uint64_t>,
    // send the failed dead-letter moves again
    caf::reacts_to<write_atom>,
    // the lingers of groups gone idle are over: stop those still idle
    caf::reacts_to<tick_atom>,
    // every group has taken the routed batch of that number
    caf::reacts_to<routed_atom, std::uint64_t>,
    // the groups' outcomes of the ack batch of that number (`ack_receipt`)
    caf::reacts_to<acked_atom, std::uint64_t, std::vector<store_op>, std::vector<lease_outcome>>>;

/// A shard actor (actors/shard_actor.hpp): one shard of a queue, driving a `shard_engine`. With
/// one shard it is the queue itself.
using shard_actor = queue_control::extend<
    // the engine's wake-up of that generation (deadline_timer)
    caf::reacts_to<tick_atom, std::uint64_t>>;

/// The admin actor: creates, finds, lists and deletes queues.
using admin_actor = caf::typed_actor<
    caf::replies_to<create_atom, queue_spec>::with<queue_api, bool>,  // bool: newly created
    caf::replies_to<lookup_atom, std::string>::with<queue_api>,
    caf::replies_to<list_atom>::with<std::vector<std::string>>,
    caf::replies_to<describe_atom, std::string>::with<queue_description>,
    caf::replies_to<drop_atom, std::string>::with<caf::ok_atom>,
    caf::replies_to<recover_atom>::with<std::uint64_t>,  // load every queue; answers how many
    // topics (docs/design/lanes.md L9-L11): create (bool: newly created), look up, list, drop
    caf::replies_to<create_atom, topic_spec>::with<bool>,
    caf::replies_to<topic_atom, lookup_atom, std::string>::with<topic_spec>,
    caf::replies_to<topic_atom, list_atom>::with<std::vector<topic_spec>>,
    caf::replies_to<topic_atom, drop_atom, std::string>::with<caf::ok_atom>,
    // one message per batch entry into every queue of the topic, in one store write
    caf::replies_to<publish_atom, std::string,
                    std::vector<outgoing_message>>::with<std::vector<topic_enqueued>>,
    // an online backup: the store's checkpoint into a new directory (store_actor above)
    caf::replies_to<checkpoint_atom, std::string>::with<checkpoint_info>>;

/// Where group actors leave the heads they offer, for the fairness actor to take in all at once
/// (actors/src/fairness_actor.cpp, `offer_atom`). An offer used to be a message of its own: with
/// an ack batch of 100 leases, 100 groups each sent one, and each cost a mailbox element, a
/// handler match and the fairness actor's per-message work. Now the first offer into an empty box
/// wakes the fairness actor (`offer_atom`, sent while the box is locked, so a later offer's
/// effects cannot overtake the wake-up) and the fairness actor takes everything in the box. An
/// offer is in the box before the group's handler ends, so before its route receipt goes: a
/// receive sent after an enqueue's answer still finds the head offered. One box per queue.
class offer_box {
 public:
  struct offer {
    group_id group;
    group_actor handle;
    std::string label;  ///< the group's printable ordering key
    message head;
    delivery_slot slot;  ///< where the head's delivery is posted
  };

  offer_box();
  /// The fairness actor the box wakes (held weakly); set once, before any group offers.
  void wake_up(const fairness_actor& fairness) const;
  /// Group actor: leaves its head; the first offer into an empty box wakes the fairness actor.
  void leave(offer o) const;
  /// Fairness actor: every offer left since the last take, in order.
  std::vector<offer> take() const;
  /// Drops this copy's share of the box (an exiting actor: the offers in it hold group handles).
  void release() { state_.reset(); }

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace laneq
