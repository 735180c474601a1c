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
#include "laneq/actors/wire.hpp"
#include "laneq/engine_io.hpp"
#include "laneq/error.hpp"
#include "laneq/fair_scheduler.hpp"
#include "laneq/group_state.hpp"
#include "laneq/latency.hpp"
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
  /// RocksDB's own figures, read when the stats are asked for (all 0 for the memory store):
  /// estimated live data, estimated bytes compaction has to rewrite, the write rate RocksDB
  /// slows writers to (0: not slowed), whether writes are stopped, and write stalls since start
  /// (stops and slowdowns, RocksDB's io_stalls.total_stop / total_slowdown).
  std::uint64_t live_data_bytes = 0;
  std::uint64_t pending_compaction_bytes = 0;
  std::uint64_t delayed_write_rate = 0;
  bool write_stopped = false;
  std::uint64_t write_stops = 0;
  std::uint64_t write_slowdowns = 0;

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
auto inspect(Inspector& f, store_stats& x) {
  return f(x.batches, x.writes, x.ops, x.bytes, x.syncs, x.failed_batches, x.reopens,
           x.batch_histogram, x.commit_histogram, x.commit_sum_us, x.degraded, x.reason,
           x.free_bytes, x.reserve_bytes, x.refused_low_space, x.low_space, x.live_data_bytes,
           x.pending_compaction_bytes, x.delayed_write_rate, x.write_stopped, x.write_stops,
           x.write_slowdowns);
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

/// Converts a laneq error to a CAF error (category atom "laneq", the message as context).
caf::error to_caf(const error& e);
/// Converts back; CAF's own errors (timeouts, dead actors) become `unavailable`.
error from_caf(const caf::error& e);
/// The error a client sees when the store could not make a change to `queue` durable:
/// `storage_failed` naming the queue.
error storage_error(const std::string& queue, const caf::error& e);

/// The exit reason with which the admin stops a queue's actors when the queue is deleted.
caf::error queue_deleted_reason(const std::string& queue);
/// What a call still waiting on a queue (a long poll, an ack) is answered when the queue's actors
/// stop for `reason`: `queue_deleted` when the queue was deleted, otherwise `unavailable` (the
/// broker is shutting down), so a client does not take a broker's shutdown for a deleted queue.
error stopped_queue_error(const caf::error& reason, const std::string& queue);

/// The scheduler workers laneq's programs run with unless told otherwise, on a host with `cores`
/// cores: one fewer than the cores, at least 1. The core left over is for the threads that are not
/// CAF workers: laneqd's store thread, HTTP and RocksDB's background jobs, or an application's
/// own threads calling the blocking API. An actor woken from such a thread is queued on the next
/// worker in turn (CAF 0.17), so with a worker per core a shard's actor changes core at nearly
/// every wake-up, away from its caches. With one worker on the 2-core host, in process with 2
/// producer and 8 consumer threads, 1,000 groups took a median of 840,000 msg/s against 746,000
/// with two (5 alternating pairs), and laneqd over HTTP 5-16% more
/// (docs/decisions/0010-performance-history.md, 0013-shard-engine-performance-history.md).
std::size_t default_scheduler_threads(unsigned cores);

/// CAF's scheduler as laneq's programs run it (laneqd, the benchmarks, the load generator):
/// `threads` workers (0: `default_scheduler_threads` of this host; CAF's own default, max(4,
/// cores), put a fifth of laneqd's CPU samples in task switches on a 2-core host) and no
/// sleep-polling phase. A worker that runs dry spins briefly (CAF's aggressive phase), then
/// sleeps on its condition variable, where any message from outside wakes it; CAF's default
/// first polls 500 times with a 50 us sleep each. On this 2-core host that polling cost half of
/// laneqd's CPU at 2,000 msg/s and about 15% of it under full load, with no loss in latency
/// (docs/decisions/0010-performance-history.md, "2026-11-30: no sleep-polling, huge pages, 64 KiB
/// HTTP reads").
void tune_scheduler(caf::actor_system_config& cfg, std::size_t threads = 0);

}  // namespace laneq

// The queue spec carries the on_enqueue hook (a std::function), so it never crosses a process
// boundary; the daemon's remote interface uses a serializable description instead.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::queue_spec)
// Bodies parsed once per topic enqueue, shared read-only by the topic's queues (in process only).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<laneq::shared_json>)

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
CAF_ADD_TYPE_ID(laneq, (laneq::queue_stats))
CAF_ADD_TYPE_ID(laneq, (laneq::queue_description))
CAF_ADD_TYPE_ID(laneq, (laneq::error))
CAF_ADD_TYPE_ID(laneq, (laneq::store_write))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::store_op>))
CAF_ADD_TYPE_ID(laneq, (laneq::store_entry))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::store_entry>))
CAF_ADD_TYPE_ID(laneq, (laneq::store_stats))
CAF_ADD_TYPE_ID(laneq, (laneq::topic_spec))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::topic_spec>))
CAF_ADD_TYPE_ID(laneq, (laneq::topic_prepared))
CAF_ADD_TYPE_ID(laneq, (laneq::topic_enqueued))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::topic_enqueued>))
CAF_ADD_TYPE_ID(laneq, (laneq::checkpoint_info))
CAF_ADD_TYPE_ID(laneq, (laneq::groups_query))
CAF_ADD_TYPE_ID(laneq, (laneq::groups_page))
CAF_ADD_TYPE_ID(laneq, (laneq::group_filter))
CAF_ADD_TYPE_ID(laneq, (laneq::peek_request))
CAF_ADD_TYPE_ID(laneq, (laneq::peeked_message))
CAF_ADD_TYPE_ID(laneq, (std::vector<laneq::peeked_message>))
CAF_ADD_ATOM(laneq, laneq, enqueue_atom, "enqueue")
CAF_ADD_ATOM(laneq, laneq, receive_atom, "receive")
CAF_ADD_ATOM(laneq, laneq, ack_atom, "ack")
CAF_ADD_ATOM(laneq, laneq, nack_atom, "nack")
CAF_ADD_ATOM(laneq, laneq, extend_atom, "extend")
CAF_ADD_ATOM(laneq, laneq, dlq_atom, "dlq")
CAF_ADD_ATOM(laneq, laneq, redrive_atom, "redrive")
CAF_ADD_ATOM(laneq, laneq, stats_atom, "stats")
CAF_ADD_ATOM(laneq, laneq, groups_atom, "groups")
CAF_ADD_ATOM(laneq, laneq, tick_atom, "tick")
CAF_ADD_ATOM(laneq, laneq, describe_atom, "describe")
CAF_ADD_ATOM(laneq, laneq, create_atom, "create")
CAF_ADD_ATOM(laneq, laneq, list_atom, "list")
CAF_ADD_ATOM(laneq, laneq, drop_atom, "drop")
CAF_ADD_ATOM(laneq, laneq, lookup_atom, "lookup")
CAF_ADD_ATOM(laneq, laneq, commit_atom, "commit")
CAF_ADD_ATOM(laneq, laneq, write_atom, "write")
CAF_ADD_ATOM(laneq, laneq, scan_atom, "scan")
CAF_ADD_ATOM(laneq, laneq, reopen_atom, "reopen")
CAF_ADD_ATOM(laneq, laneq, recover_atom, "recover")
CAF_ADD_ATOM(laneq, laneq, topic_atom, "topic")
CAF_ADD_ATOM(laneq, laneq, publish_atom, "publish")
CAF_ADD_ATOM(laneq, laneq, prepare_atom, "prepare")
CAF_ADD_ATOM(laneq, laneq, settle_atom, "settle")
CAF_ADD_ATOM(laneq, laneq, checkpoint_atom, "checkpoint")
CAF_ADD_ATOM(laneq, laneq, budget_atom, "budget")
CAF_ADD_ATOM(laneq, laneq, watch_atom, "watch")
CAF_ADD_ATOM(laneq, laneq, update_atom, "update")
CAF_ADD_ATOM(laneq, laneq, purge_atom, "purge")
CAF_ADD_ATOM(laneq, laneq, peek_atom, "peek")
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

/// A queue as clients see it (in process, and later over CAF's middleman).
using queue_api = caf::typed_actor<
    caf::replies_to<enqueue_atom, std::vector<outgoing_message>>::with<std::vector<message_id>>,
    caf::replies_to<receive_atom, receive_request>::with<std::vector<delivery>>,
    caf::replies_to<ack_atom, std::vector<lease_token>>::with<std::vector<lease_outcome>>,
    // an ordered batch's first `count` messages as delivered (docs/design/ordering.md O12):
    // answers how many this acked; the lease goes on over the rest
    caf::replies_to<ack_atom, lease_token, std::uint32_t>::with<std::uint64_t>,
    caf::replies_to<nack_atom, lease_token, nack_request>::with<caf::ok_atom>,
    caf::replies_to<extend_atom, lease_token, std::int64_t>::with<timestamp>,
    caf::replies_to<dlq_atom, std::uint32_t>::with<std::vector<dead_letter>>,
    caf::replies_to<redrive_atom, std::vector<message_id>>::with<std::uint64_t>,
    // the dead letters these ids name, in that order (dead_letter_not_found for one that is not)
    caf::replies_to<dlq_atom, std::vector<message_id>>::with<std::vector<dead_letter>>,
    // deletes the dead letters these ids name (every one when empty); answers how many
    caf::replies_to<dlq_atom, drop_atom, std::vector<message_id>>::with<std::uint64_t>,
    // removes the waiting messages of the queue or of one group; answers how many
    // (docs/design/purge.md)
    caf::replies_to<purge_atom, group_filter>::with<std::uint64_t>,
    // the first messages of the queue or of one group, without a lease
    caf::replies_to<peek_atom, peek_request>::with<std::vector<peeked_message>>,
    caf::replies_to<stats_atom>::with<queue_stats>,
    caf::replies_to<groups_atom, groups_query>::with<groups_page>>;

/// What the admin actor asks of a queue, whichever engine runs it: the client API plus recovery,
/// the spec given again, and a topic enqueue's two phases.
using queue_control = queue_api::extend<
    // load the queue from the store
    caf::replies_to<recover_atom>::with<caf::ok_atom>,
    // adopt a spec (its hook)
    caf::reacts_to<create_atom, queue_spec>,
    // the queue's settings changed (queue_spec::updated, shard_engine::update): answered once
    // every shard applies them
    caf::replies_to<update_atom, queue_spec>::with<caf::ok_atom>,
    // a topic enqueue: place, answer the ops, hold writes
    caf::replies_to<prepare_atom, std::vector<outgoing_message>,
                    std::vector<shared_json>>::with<topic_prepared>,
    // the topic's write committed (true) or failed (false); answered once
    // the committed messages are deliverable
    caf::replies_to<settle_atom, bool>::with<caf::ok_atom>,
    // its share of the broker's window budget, in bytes (the admin splits it evenly)
    caf::reacts_to<budget_atom, std::uint64_t>>;

/// A shard actor (actors/shard_actor.hpp): one shard of a queue, driving a `shard_engine`. With
/// one shard it is the queue itself; with several, the queue's gateway (gateway_actor.hpp)
/// routes to them.
using shard_actor = queue_control::extend<
    // answered with how many messages are ready, once some are, or 0 at the deadline (no lease)
    caf::replies_to<watch_atom, timestamp>::with<std::uint64_t>,
    // the engine's wake-up of that generation (deadline_timer)
    caf::reacts_to<tick_atom, std::uint64_t>>;

/// The admin actor: creates, finds, lists and deletes queues.
using admin_actor = caf::typed_actor<
    caf::replies_to<create_atom, queue_spec>::with<queue_api, bool>,  // bool: newly created
    caf::replies_to<lookup_atom, std::string>::with<queue_api>,
    caf::replies_to<list_atom>::with<std::vector<std::string>>,
    caf::replies_to<describe_atom, std::string>::with<queue_description>,
    // deletes an empty queue (queue_not_empty otherwise); with force (true) whatever it holds
    caf::replies_to<drop_atom, std::string>::with<caf::ok_atom>,
    // changes a queue's settings in place (docs/api.md "Change a queue's settings"): the
    // requested spec's changeable settings (queue_spec::updated), or a JSON merge patch of them
    // (name, patch; queue_spec_patched). Answered with the queue's spec once it is stored and
    // every shard applies it; invalid_spec names each fixed field the request changes.
    caf::replies_to<update_atom, queue_spec>::with<queue_spec>,
    caf::replies_to<update_atom, std::string, std::string>::with<queue_spec>,
    caf::replies_to<drop_atom, std::string, bool>::with<caf::ok_atom>,
    // redrives dead letters of queue `from` (these ids; the first ones when empty) into queue
    // `to` as new messages there; answers how many (docs/design/purge.md, "Redrive into another
    // queue")
    caf::replies_to<redrive_atom, std::string, std::vector<message_id>,
                    std::string>::with<std::uint64_t>,
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

}  // namespace laneq
