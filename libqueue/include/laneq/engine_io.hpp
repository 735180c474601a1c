// The requests, answers and store operations of a queue, as plain structs: what a shard engine
// (laneq/shard_engine.hpp) takes and gives, and what the actor protocol (actors/protocol.hpp)
// carries between processes. No CAF here: `inspect` overloads are plain templates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "laneq/error.hpp"
#include "laneq/group_state.hpp"
#include "laneq/lease.hpp"
#include "laneq/limits.hpp"
#include "laneq/message.hpp"

namespace laneq {

/// A receive call: up to `max` messages, leased for `lease_us` (0: the queue's default), waiting
/// up to `wait_us` for the first one (long poll; 0: answer at once). `batch` above 1 takes up to
/// that many consecutive messages of one ordering group as one ordered batch under one lease
/// (docs/design/ordering.md O12); `max` still bounds the messages of the whole answer.
struct receive_request {
  std::uint32_t max = 1;
  std::int64_t lease_us = 0;
  std::int64_t wait_us = 0;
  std::uint32_t batch = 1;  ///< 1 to limits::ordered_batch_max
};

/// How a consumer gives a message back. For an ordered batch, `from` is the `batch_index` of the
/// message that failed: the messages before it are acked, it is retried or dead-lettered, and the
/// messages after it return to their group behind it (docs/design/ordering.md O12).
struct nack_request {
  /// `from` when none is given: the batch's first message not acked yet.
  static constexpr std::uint32_t first_unacked = 0xFFFFFFFF;
  nack_kind kind = nack_kind::retry;
  std::int64_t retry_after_us = 0;
  std::uint32_t from = first_unacked;
};

/// One delivered message with its lease.
struct delivery {
  message msg;
  lease_token lease;
  timestamp deadline;
  /// The message's ordering key (docs/design/lanes.md L5): the key itself, or `tenant/queue` for
  /// the keyless lane and an `ordered()` queue; empty when unordered.
  std::string ordering_key;
  /// Its place in its ordered batch, from 0 (every message of a batch carries the same lease);
  /// 0 for a message delivered alone. It stays as delivered after a part of the batch is acked.
  std::uint32_t batch_index = 0;
};

/// One ordering group, named by its key as deliveries and the groups listing show it
/// (`delivery::ordering_key`), or the whole queue (`one` false): what a purge or a peek concerns.
struct group_filter {
  bool one = false;
  std::string key;
};

/// A peek (docs/api.md "Peek"): the first `limit` messages (1 to limits::peek_max) of the queue or
/// of one group, read without a lease.
struct peek_request {
  std::uint32_t limit = limits::peek_default;
  group_filter group;
};

/// A message as a peek shows it: as stored, no lease taken, nothing changed. `in_flight`: it is
/// leased now (`lease_deadline` says until when).
struct peeked_message {
  message msg;
  std::string ordering_key;  ///< as `delivery::ordering_key`; empty when unordered
  bool in_flight = false;
  timestamp lease_deadline;
};

/// The outcome of one lease in a batch ack: only failures are listed.
struct lease_outcome {
  lease_token lease;
  error err;
};

/// One change to the store. A batch applies its operations in order, atomically.
struct store_op {
  enum class kind : std::uint8_t {
    put = 1,          ///< key -> value
    erase = 2,        ///< key
    erase_range = 3,  ///< every key in [key, value)
  };
  kind what = kind::put;
  std::string key;
  std::string value;
};

/// Operations made once and never changed again: a shard's write log keeps them (it may send
/// them again) while the store commits them, so both hold the same copy, as a CAF message's
/// contents are shared between its sender and receiver. Neither ever writes to it.
using shared_ops = std::shared_ptr<const std::vector<store_op>>;

/// A write: operations committed together, in order: those of `shared` first (a shard's writes,
/// kept by its write log), then `ops` (made for this write alone). `sync`: durable against power
/// loss before the answer (false: durable against a process crash only, ARCHITECTURE.md §4).
/// `admits`: the write adds new messages (an enqueue); the persistence actor refuses it while the
/// disk is below its free space reserve, so acks, deliveries and restarts keep the room they need
/// (persistence.md).
struct store_write {
  std::vector<store_op> ops;
  bool sync = true;
  bool admits = false;
  std::vector<shared_ops> shared{};
};

/// Calls `f` on each operation of `w` in commit order; stops at the first call that returns
/// false, and then returns false.
template <class F>
bool each_op(const store_write& w, F&& f) {
  for (const auto& part : w.shared)
    for (const auto& op : *part)
      if (!f(op)) return false;
  for (const auto& op : w.ops)
    if (!f(op)) return false;
  return true;
}

/// The number of operations of `w`.
inline std::size_t op_count(const store_write& w) {
  auto n = w.ops.size();
  for (const auto& part : w.shared) n += part->size();
  return n;
}

/// One key and value read back by a scan.
struct store_entry {
  std::string key;
  std::string value;
};

/// Messages of one fairness key that are ready or waiting for delivery (unordered messages and
/// group heads in the shard's fair scheduler; messages queued behind a group head are not
/// counted).
struct fairness_backlog {
  std::string key;  ///< the fairness key; "" with `other` set: every key beyond the bound
  std::uint64_t backlog = 0;
  bool other = false;
};

/// Counters and gauges of one queue.
struct queue_stats {
  std::string name;
  // Counters (since this broker started; `recovered` counts what it found in the store).
  std::uint64_t enqueued = 0;
  std::uint64_t delivered = 0;
  std::uint64_t acked = 0;
  std::uint64_t nacked = 0;
  std::uint64_t lease_expired = 0;
  std::uint64_t dead_lettered = 0;
  std::uint64_t redriven = 0;
  std::uint64_t purged = 0;                ///< waiting messages removed by a purge
  std::uint64_t dead_letters_deleted = 0;  ///< dead letters deleted (not redriven)
  /// Messages that outlived the queue's retention (docs/design/retention.md): moved to the dead
  /// letters (also counted in `dead_lettered`) or dropped; dead letters that outlived theirs.
  std::uint64_t expired_dead_lettered = 0;
  std::uint64_t expired_dropped = 0;
  std::uint64_t dead_letters_expired = 0;
  std::uint64_t key_missing = 0;   ///< messages that lacked an ordering key component
  std::uint64_t rejected = 0;      ///< enqueues refused (missing key, hook, limits)
  std::uint64_t recovered = 0;     ///< messages found in the store at start
  std::uint64_t deduplicated = 0;  ///< enqueues answered with an earlier message's id (dedupe)
  std::uint64_t refused_full = 0;  ///< enqueues refused with queue_full (max_depth)
  /// Dedupe keys forgotten before their window was over: the window held its entry bound
  /// (limits::dedupe_entries_max per shard), and the oldest went first.
  std::uint64_t dedupe_evictions = 0;
  /// Store reads of group windows (a group holds at most `group_window` messages in memory and
  /// reads the rest back in order as its window drains), and the messages they returned.
  std::uint64_t window_reads = 0;
  std::uint64_t window_read_messages = 0;
  /// Message records that failed their checksum or format check when a group read them back:
  /// each stops its group (fail-stop, docs/design/persistence.md).
  std::uint64_t corrupt_records = 0;
  // Gauges.
  std::uint64_t backlog = 0;        ///< messages in the queue, in flight included
  std::uint64_t backlog_bytes = 0;  ///< their body bytes (the depth max_depth.bytes bounds)
  std::uint64_t in_flight = 0;
  std::uint64_t live_groups = 0;
  std::uint64_t dead_letters = 0;
  std::uint64_t waiting_receives = 0;
  std::uint64_t window_bytes = 0;  ///< memory of the messages its groups hold (window budget)
  /// Messages waiting for their not-before time (an enqueue delay, or a nack's retry_after):
  /// unordered ones in memory and group heads (docs/operations.md "Metrics"; the messages queued
  /// behind a group's head, and unordered ones left in the store past their class's window, are
  /// not counted).
  std::uint64_t delayed = 0;
  /// Live groups per state, indexed by `group_status` (group_status_count entries; a group whose
  /// head waits for a throttle token counts as throttled, as `groups?state=` reports it).
  std::vector<std::uint64_t> groups_by_state;
  /// How long the item waiting longest for a consumer has waited at the time of the stats, in
  /// microseconds (0: none): unordered messages and group heads that are ready or held back by a
  /// throttle, counted from when they became deliverable (enqueue, or becoming a group's head;
  /// end of the enqueue delay; return after a nack or an expired lease). Neither in flight nor
  /// delayed items count.
  std::int64_t oldest_waiting_us = 0;
  /// Age of the oldest dead letter at the time of the stats, in microseconds (0: none). After a
  /// redrive of chosen ids it may name one redriven since the list was last empty (an upper bound).
  std::int64_t oldest_dead_letter_us = 0;
  /// Receives (and long polls) answered with no message: counted by the shard, or for a sharded
  /// queue by its gateway (which asks each shard without waiting, so a shard's count is not the
  /// queue's).
  std::uint64_t empty_receives = 0;
  // Histogram: enqueue to first delivery, counts per bucket of latency_bounds_s (the
  // last one unbounded), and the sum of the observed times.
  std::vector<std::uint64_t> first_delivery;
  std::uint64_t first_delivery_sum_us = 0;
  // Histogram: delivery to ack (the lease's start to the ack that ended it), as `first_delivery`.
  std::vector<std::uint64_t> receive_to_ack;
  std::uint64_t receive_to_ack_sum_us = 0;
  /// The largest per-fairness-key backlogs, at most limits::fairness_backlog_keys_max of them,
  /// plus one `other` entry summing the rest (bounded metric cardinality).
  std::vector<fairness_backlog> fairness;
};

/// A topic enqueue's first phase in one queue (docs/design/lanes.md L10): the queue has placed
/// the messages and answers their ids and the store operations that commit them. It holds its
/// other writes until the topic tells it the outcome (`settle_atom`).
struct topic_prepared {
  std::vector<message_id> ids;
  std::vector<store_op> ops;
  bool sync = true;
};

/// A request for one page of a queue's groups (`groups_atom`, docs/api.md "Groups"). Groups are
/// listed in lane-id order, which does not change while a group lives, nor across a restart.
struct groups_query {
  /// The lane id (16 bytes) after which the page starts (`groups_page::next` of the previous
  /// page); empty: from the first group.
  std::string after;
  std::uint32_t limit = limits::groups_page_default;  ///< 1 to limits::groups_page_max groups
  bool blocked_only = false;                          ///< only groups that cannot deliver now
};

/// One page of a queue's groups. A page examines at most `limit * groups_page_scan_factor`
/// groups, so a `blocked_only` page may hold fewer than `limit` groups and still have a `next`.
struct groups_page {
  std::vector<group_info> groups;  ///< in lane-id order
  std::string next;                ///< `groups_query::after` of the next page; empty: the last
};

template <class Inspector>
auto inspect(Inspector& f, error& x) {
  return f(x.code, x.message);
}
template <class Inspector>
auto inspect(Inspector& f, outgoing_message& x) {
  return f(x.body, x.headers, x.fairness_key, x.delay);
}
template <class Inspector>
auto inspect(Inspector& f, receive_request& x) {
  return f(x.max, x.lease_us, x.wait_us, x.batch);
}
template <class Inspector>
auto inspect(Inspector& f, nack_request& x) {
  return f(x.kind, x.retry_after_us, x.from);
}
template <class Inspector>
auto inspect(Inspector& f, delivery& x) {
  return f(x.msg, x.lease, x.deadline, x.ordering_key, x.batch_index);
}
template <class Inspector>
auto inspect(Inspector& f, group_filter& x) {
  return f(x.one, x.key);
}
template <class Inspector>
auto inspect(Inspector& f, peek_request& x) {
  return f(x.limit, x.group);
}
template <class Inspector>
auto inspect(Inspector& f, peeked_message& x) {
  return f(x.msg, x.ordering_key, x.in_flight, x.lease_deadline);
}
template <class Inspector>
auto inspect(Inspector& f, lease_outcome& x) {
  return f(x.lease, x.err);
}
template <class Inspector>
auto inspect(Inspector& f, store_op& x) {
  return f(x.what, x.key, x.value);
}
/// A write is read (serialized, printed) as one list of its operations in commit order, and made
/// (deserialized) as a write of its own operations only.
template <class Inspector>
std::enable_if_t<Inspector::reads_state, typename Inspector::result_type> inspect(Inspector& f,
                                                                                  store_write& x) {
  if (x.shared.empty()) return f(x.ops, x.sync, x.admits);
  std::vector<store_op> all;
  all.reserve(op_count(x));
  each_op(x, [&all](const store_op& op) {
    all.push_back(op);
    return true;
  });
  return f(all, x.sync, x.admits);
}
template <class Inspector>
std::enable_if_t<Inspector::writes_state, typename Inspector::result_type> inspect(Inspector& f,
                                                                                   store_write& x) {
  x.shared.clear();
  return f(x.ops, x.sync, x.admits);
}
template <class Inspector>
auto inspect(Inspector& f, store_entry& x) {
  return f(x.key, x.value);
}
template <class Inspector>
auto inspect(Inspector& f, fairness_backlog& x) {
  return f(x.key, x.backlog, x.other);
}
template <class Inspector>
auto inspect(Inspector& f, queue_stats& x) {
  return f(x.name, x.enqueued, x.delivered, x.acked, x.nacked, x.lease_expired, x.dead_lettered,
           x.redriven, x.purged, x.dead_letters_deleted, x.expired_dead_lettered, x.expired_dropped,
           x.dead_letters_expired, x.key_missing, x.rejected, x.recovered, x.deduplicated,
           x.refused_full, x.dedupe_evictions, x.backlog_bytes, x.window_reads,
           x.window_read_messages, x.corrupt_records, x.backlog, x.in_flight, x.live_groups,
           x.dead_letters, x.waiting_receives, x.window_bytes, x.first_delivery,
           x.first_delivery_sum_us, x.fairness, x.delayed, x.groups_by_state, x.oldest_waiting_us,
           x.oldest_dead_letter_us, x.empty_receives, x.receive_to_ack, x.receive_to_ack_sum_us);
}
template <class Inspector>
auto inspect(Inspector& f, topic_prepared& x) {
  return f(x.ids, x.ops, x.sync);
}
template <class Inspector>
auto inspect(Inspector& f, groups_query& x) {
  return f(x.after, x.limit, x.blocked_only);
}
template <class Inspector>
auto inspect(Inspector& f, groups_page& x) {
  return f(x.groups, x.next);
}

}  // namespace laneq
