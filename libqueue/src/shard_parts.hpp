// The shard engine's private parts, shared by its source files (shard_*.cpp): a group's slot
// and the state of a running recovery. Not installed: the engine's header is the interface.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "laneq/shard_engine.hpp"

namespace laneq {

/// One ordering group (an object, not an actor): its state machine and what the shard keeps
/// about it. Its base is its node in `group_by_lane_`.
struct shard_engine::group_slot : lane_hook {
  group_slot(group_id id, const shard_config& c)
      : state(id, c.spec.attempts_max(), c.window, c.window_max) {}

  group_state state;
  codec::lane_id lane;  ///< where its messages are stored
  /// Its encoded key: the key of its entry in `group_by_key_` (more keys, merged into it by a
  /// lane collision, are in `more_keys_`).
  const std::string* key = nullptr;
  /// Its label when `key` does not give it (see `label`); null otherwise, as most often.
  std::unique_ptr<const std::string> own_label;
  std::uint32_t unsettled = 0;  ///< its writes not durable yet: its next head waits (P10)
  bool next = false;            ///< its head is to be offered once `unsettled` is 0
  bool scheduled = false;       ///< its head is in the fair scheduler (offered, not picked yet)
  bool held = false;            ///< its recovered head waits out the reclaim grace
  bool kept = false;            ///< empty, kept for reuse (`kept_groups_`): not a live group
  std::size_t charged = 0;      ///< its memory_bytes as counted in `window_bytes_`

  /// The ordering key its deliveries carry (lanes.md L5). For a one-component key that is the
  /// value, which is its encoded key less the 4-byte length: then it is not kept twice (a live
  /// idle group's size counts, ADR 0009).
  std::string_view label() const {
    return own_label ? std::string_view{*own_label} : std::string_view{*key}.substr(length_bytes);
  }
  /// Sets the label to `ordering_key`, which the group keeps only if `key` (set before) does not
  /// give it.
  void set_label(std::string ordering_key) {
    if (key->size() < length_bytes || std::string_view{*key}.substr(length_bytes) != ordering_key)
      own_label = std::make_unique<const std::string>(std::move(ordering_key));
  }

 private:
  static constexpr std::size_t length_bytes = 4;  // a component's length in an encoded key
};

inline const shard_engine::lane_of_slot::type& shard_engine::lane_of_slot::operator()(
    const group_slot& g) const {
  return g.lane.bytes;
}
inline std::size_t shard_engine::slot_id_hash::operator()(
    const std::unique_ptr<group_slot>& g) const noexcept {
  return (*this)(g->state.id());
}
inline bool shard_engine::slot_id_equal::operator()(
    const std::unique_ptr<group_slot>& a, const std::unique_ptr<group_slot>& b) const noexcept {
  return a->state.id() == b->state.id();
}
inline bool shard_engine::slot_id_equal::operator()(
    group_id id, const std::unique_ptr<group_slot>& g) const noexcept {
  return g->state.id() == id;
}

/// What a group asks the store to do after an event.
struct shard_engine::group_write {
  std::vector<store_op> ops;
  bool counters = false;  ///< a dead-letter move took a dead-letter order
  bool moves = false;     ///< it moves a message to the dead letters: its client waits (patient)
};

/// A dead-letter listing or redrive under way. A redrive reads back the orders of its dead
/// letters (by id; or the first ones of the list), then the records, then fills its place among
/// the shard's writes.
struct shard_engine::redrive_state {
  /// What it does with the dead letters it reads: puts them back in the queue, answers them, or
  /// deletes them.
  /// (`expire`: the dead-letter retention's sweep, which answers no one.)
  enum class op : std::uint8_t { redrive, list, erase, expire };
  op what = op::redrive;
  request_id r = 0;
  std::uint64_t first_seq = 0;  ///< the arrival seqs it took when it came
  /// Deleting every dead letter: the shard's dead-letter moves when it came (counters_).
  std::uint64_t moved_before = 0;
  std::uint64_t slot = 0;  ///< its place in the write log (write_log::reserve)
  bool due = false;        ///< every earlier write was durable before `slot` was reserved
  std::vector<message_id> ids;
  std::vector<std::optional<std::uint64_t>> orders;  // by id, as the index answers
  std::vector<std::pair<std::uint64_t, dead_letter>> taken;
  std::size_t waiting = 0;  // reads not answered yet
  std::optional<error> failed;
};

/// A class of unordered messages (shard_unordered.cpp, docs/design/persistence.md P12): those the
/// scheduler treats alike (fair_scheduler::class_of), kept in one store lane in arrival order.
/// Every message of the lane up to `loaded` is in memory, and those in `ahead`; the rest,
/// `stored_only`, are read back in order as the ready ones in memory drain.
struct shard_engine::unordered_class {
  std::uint64_t id = 0;
  std::string key;           ///< its key in `classes_` (fair_scheduler::class_of)
  std::string fairness_key;  ///< the backlog by fairness key counts what is in the store too
  codec::lane_id lane;
  std::size_t queued = 0;       ///< in the scheduler: ready, throttled or delayed
  std::size_t delayed = 0;      ///< of those, waiting for their not-before time (in `delayed_`)
  std::size_t in_flight = 0;    ///< leased (in the lease table)
  std::size_t stored_only = 0;  ///< counted, left in the store, past `loaded`
  std::size_t bytes = 0;        ///< memory_footprint of the queued ones (the window budget)
  message_seq loaded;           ///< the last seq read into memory (or passed by a read)
  message_seq told;             ///< the last seq counted as stored only
  std::size_t fetch_max = 0;    ///< what the read under way asked for
  bool fetching = false;
  bool corrupt = false;  ///< a record failed its checks: the class reads no further (fail-stop)
  /// In memory past `loaded`: recovered under a lease beyond the window; a read skips them.
  std::set<message_seq> ahead;

  /// Queued messages that may be delivered now or when a token comes: what the window counts.
  std::size_t ready() const { return queued - delayed; }
  bool live() const { return queued + in_flight + stored_only > 0 || fetching; }
};

/// A lane as recovery found it.
struct shard_engine::recovered_lane {
  std::vector<message> window;  ///< the first messages, payloads decoded
  std::uint64_t beyond = 0;     ///< the rest: counted, left in the store
  std::size_t room = 0;         ///< messages to decode: the window, or a leased batch's size
  bool unordered = false;       ///< a class of unordered messages (its head says so)
  std::vector<message> ahead;   ///< a class's messages beyond the window under a lease
  message_seq last;             ///< the lane's last seq
};

/// The ranges a recovery reads, in order.
enum class recovery_phase : std::uint8_t { counters, leases, dead_index, dead, messages, dedupe };

/// A recovery in progress: the store's records of the shard, read range by range.
struct shard_engine::recovery {
  recovery_phase at = recovery_phase::counters;
  std::string to;  ///< end of the range being read
  std::map<std::array<std::uint8_t, 16>, recovered_lane> lanes;
  std::vector<message> lane_zero;  ///< unordered messages stored before classes had lanes
  /// By the seq of the (first still leased) message each names (seqs are unique in a shard);
  /// taken out as messages take them up: what is left at the end is stale, and erased.
  std::unordered_map<std::uint64_t, codec::lease_record> leases;
  std::uint64_t messages = 0;
  std::size_t decoded_bytes = 0;  ///< memory_footprint of the group messages decoded so far
  struct dedupe_entry {
    timestamp expires;
    std::string key;
    message_id id;
  };
  std::vector<dedupe_entry> dedupe;
  std::unordered_set<message_id> indexed;  ///< dead letters with an index record
  std::vector<store_op> expired;  ///< dedupe records past their window, index records missing
};

/// "queue 'name': " + the error's message, as a client sees a store failure.
error storage_failure(const std::string& queue, error e);

// The shard's records (laneq/codec.hpp's layout under the shard's uid).
inline store_op put_message(std::uint64_t uid, const codec::lane_id& lane, const message& m) {
  return {store_op::kind::put, codec::message_key(uid, lane, m.seq), codec::encode_message(m)};
}
inline store_op erase_message(std::uint64_t uid, const codec::lane_id& lane, message_seq seq) {
  return {store_op::kind::erase, codec::message_key(uid, lane, seq), {}};
}
inline store_op put_lease(std::uint64_t uid, const codec::lease_record& l) {
  return {store_op::kind::put, codec::lease_key(uid, l.lease.msg), codec::encode_lease(l)};
}
inline store_op erase_lease(std::uint64_t uid, message_id id) {
  return {store_op::kind::erase, codec::lease_key(uid, id), {}};
}
inline store_op erase_dead(std::string key) {
  return store_op{store_op::kind::erase, std::move(key), {}};
}

}  // namespace laneq
