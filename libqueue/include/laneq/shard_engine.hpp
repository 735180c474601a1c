// One shard of a queue as a deterministic state machine (docs/decisions/0009): it owns a disjoint
// set of the queue's ordering groups and its share of the unordered messages, and everything the
// queue does with them: admission (limits, hook, dedupe, placement), the groups (each a
// lightweight actor: a `group_state` with its head, window and lease, handling one event at a
// time), fairness and throttles (`fair_scheduler`), leases and their deadlines, long polls, dead
// letters and redrive, read-back of group windows, recovery from the store, introspection.
//
// Inputs are calls that carry `now`; the engine never reads a clock. What it wants done comes out
// as effects (`take_effects`): store writes and reads (each with an id the answer names), replies
// to requests (by the request id the caller chose), log lines, and the time at which `tick` must
// run next. The shard actor (actors/) carries them out; tests and the simulation drive the engine
// directly. No CAF, no RocksDB, no threads, no locks.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include <boost/intrusive/set.hpp>

#include "laneq/codec.hpp"
#include "laneq/deadline_heap.hpp"
#include "laneq/dedupe_window.hpp"
#include "laneq/engine_io.hpp"
#include "laneq/fair_scheduler.hpp"
#include "laneq/group_state.hpp"
#include "laneq/latency.hpp"
#include "laneq/lease.hpp"
#include "laneq/lease_table.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/write_log.hpp"

namespace laneq {

/// Names a request of the caller's (its response promise); the engine echoes it in the reply.
using request_id = std::uint64_t;

/// What a shard is configured with (fixed for its life, but for the spec's hook and key
/// functions, which `adopt` gives back after a restart).
struct shard_config {
  queue_spec spec;
  std::uint64_t uid = 0;  ///< the shard's key prefix in the store (never reused)
  /// The shard's index in its queue: its message ids carry it in their high 16 bits, so ids are
  /// unique across a queue's shards and a lease names its shard.
  std::uint32_t shard = 0;
  bool sync = true;  ///< writes synced before they are answered
  /// A group's window, and how far it grows while the window budget has room; a class of
  /// unordered messages holds `window_max` of them in memory, or its share of the budget once the
  /// budget is used up (docs/design/persistence.md, P12).
  std::size_t window = limits::group_window_default;
  std::size_t window_max = limits::group_window_max_default;
  /// Bytes of messages the shard's group windows may hold before groups stop growing past
  /// `window` (docs/operations.md, "Group windows").
  std::size_t window_budget_bytes = limits::window_budget_bytes_default;
  std::size_t dedupe_entries_max = limits::dedupe_entries_max;
  std::uint64_t epoch = 1;  ///< this broker run (lease nonces, reclaim)
  nonce_source nonces{0, 0};
  duration reclaim_grace = limits::reclaim_grace_default;
  duration store_retry = limits::store_reopen_interval;  ///< before a failed write goes again
  /// Recovered without the on_enqueue hook it had: enqueues are refused until `adopt`.
  bool hook_missing = false;
};

/// A store write the engine wants: answer it with `on_written(id, ...)`.
using engine_write = outgoing_write;

/// A store scan the engine wants: up to `max` entries with from <= key < to, in key order.
/// Answer it with `on_read(id, ...)`.
struct engine_read {
  std::uint64_t id = 0;
  std::string from;
  std::string to;
  std::uint32_t max = 0;
};

/// What a request is answered with.
using engine_answer = std::variant<error, ok_t, std::vector<message_id>, std::vector<delivery>,
                                   std::vector<lease_outcome>, timestamp, std::uint64_t,
                                   std::vector<dead_letter>, std::vector<peeked_message>>;

struct engine_reply {
  request_id to = 0;
  engine_answer value;
};

/// Everything the engine asks for after one or more inputs.
struct engine_effects {
  std::vector<engine_write> writes;  ///< in order: send them to the store in this order
  std::vector<engine_read> reads;
  std::vector<engine_reply> replies;
  std::vector<std::string> log;  ///< lines for the operator (a group stopped at a corrupt record)
  /// The shard cannot go on (its recovery failed): stop it with this error.
  std::optional<error> failed;
  /// When `tick` must run next; none: nothing is due.
  std::optional<timestamp> wake;
  bool empty() const { return writes.empty() && reads.empty() && replies.empty() && log.empty(); }
};

/// Counters of one shard since this broker run started (`recovered`: found in the store).
struct shard_counters {
  std::uint64_t enqueued = 0;
  std::uint64_t delivered = 0;
  std::uint64_t acked = 0;
  std::uint64_t nacked = 0;
  std::uint64_t lease_expired = 0;
  std::uint64_t dead_lettered = 0;
  std::uint64_t redriven = 0;
  std::uint64_t purged = 0;
  std::uint64_t dead_letters_deleted = 0;
  std::uint64_t expired_dead_lettered = 0;  ///< of `dead_lettered` (retention, on_expiry)
  std::uint64_t expired_dropped = 0;
  std::uint64_t dead_letters_expired = 0;  ///< deleted by the dead-letter retention
  std::uint64_t key_missing = 0;
  std::uint64_t deduplicated = 0;
  std::uint64_t rejected = 0;
  std::uint64_t refused_full = 0;  ///< enqueues refused with queue_full (of `rejected`)
  std::uint64_t recovered = 0;
  std::uint64_t window_reads = 0;
  std::uint64_t window_read_messages = 0;
  std::uint64_t class_reads = 0;  ///< of `window_reads`, those of classes of unordered messages
  std::uint64_t corrupt_records = 0;
  /// Receives answered with no message (a sharded queue's gateway counts its own instead).
  std::uint64_t empty_receives = 0;
  std::vector<std::uint64_t> first_delivery =
      std::vector<std::uint64_t>(latency_bounds_s.size() + 1);
  std::uint64_t first_delivery_sum_us = 0;
  /// Delivery to ack, per bucket of latency_bounds_s (queue_stats::receive_to_ack).
  std::vector<std::uint64_t> receive_to_ack =
      std::vector<std::uint64_t>(latency_bounds_s.size() + 1);
  std::uint64_t receive_to_ack_sum_us = 0;
};

class shard_engine {
 public:
  explicit shard_engine(shard_config cfg);
  ~shard_engine();
  shard_engine(const shard_engine&) = delete;
  shard_engine& operator=(const shard_engine&) = delete;

  // -- client requests: each is answered by one reply to `r` (now or later) --------------------

  /// Answered with the ids (a duplicate has its original's id) once the batch is durable and its
  /// messages are deliverable. `parsed`: the bodies already parsed as JSON (a topic enqueue).
  void enqueue(request_id r, std::vector<outgoing_message> batch, timestamp now);
  /// Answered with the deliveries; a long poll (`wait_us`) waits for the first one. With durable
  /// delivery, once the leases are committed. `batch` above 1: each group's head goes out with
  /// up to `batch - 1` messages behind it as one ordered batch under one lease (ordering.md O12).
  void receive(request_id r, const receive_request& req, timestamp now);
  /// Answered with the leases that failed once the acks' erases are durable. An ordered batch's
  /// lease acks every message of it not acked yet.
  void ack(request_id r, const std::vector<lease_token>& leases, timestamp now);
  /// Acks the first `count` messages of an ordered batch (as delivered: batch_index below
  /// `count`); the lease goes on over the rest. Answered with how many messages this acked, once
  /// durable (O12).
  void ack(request_id r, const lease_token& lease, std::uint32_t count, timestamp now);
  /// Answered ok once durable. For an ordered batch, `req.from` acks the messages before it and
  /// returns the rest, behind the failed one, to its group (O12).
  void nack(request_id r, const lease_token& lease, const nack_request& req, timestamp now);
  /// Answered with the new deadline (durable delivery: once committed).
  void extend(request_id r, const lease_token& lease, std::int64_t by_us, timestamp now);
  /// Answered, without a lease, with how many messages are ready once some are (at once if
  /// some are now), or with 0 at `deadline`: a sharded queue's gateway watches every shard for a
  /// long poll that found nothing, then receives from the first shard that answers (gateway.hpp).
  void watch(request_id r, timestamp deadline, timestamp now);
  /// Answered with the first `max` dead letters.
  void dead_letters(request_id r, std::uint32_t max, timestamp now);
  /// Answered with how many were redriven (every dead letter, up to the batch bound, if empty).
  void redrive(request_id r, const std::vector<message_id>& ids, timestamp now);
  /// Answered with the dead letters `ids` names, in that order (dead_letter_not_found for an id
  /// that is not one).
  void dead_letters(request_id r, const std::vector<message_id>& ids, timestamp now);
  /// Answered with how many dead letters were deleted, once durable: those `ids` names
  /// (dead_letter_not_found, and nothing deleted, if one is not a dead letter), or every one when
  /// `ids` is empty.
  void delete_dead_letters(request_id r, const std::vector<message_id>& ids, timestamp now);

  /// Answered, once durable, with how many waiting messages it removed: every message of the
  /// shard, or of the group `which` names, that arrived before the purge and is not in flight
  /// (docs/design/purge.md). In-flight messages keep their lease.
  void purge(request_id r, const group_filter& which, timestamp now);
  /// Answered with the first `req.limit` messages of the shard, or of one group, read from the
  /// store once every earlier write is durable: per group in arrival order, groups in lane-id
  /// order (docs/design/purge.md, "Peek"). Changes nothing.
  void peek(request_id r, const peek_request& req, timestamp now);

  /// Places a topic's batch (docs/design/lanes.md L10) and answers the ids and the operations
  /// that store it, for the topic to write with its other queues'. Holds this shard's writes
  /// until `settle`.
  result<topic_prepared> prepare(std::vector<outgoing_message> batch,
                                 const std::vector<shared_json>& parsed, timestamp now);
  /// The topic's write committed (true) or failed; answered once the committed messages are
  /// deliverable.
  void settle(request_id r, bool committed, timestamp now);

  // -- introspection (answered at once) ---------------------------------------------------------

  /// The counters and gauges, the gauges measured at `now` (one pass over the live groups and
  /// the scheduler's items: the caller asks when scraped, not per message).
  queue_stats stats(timestamp now) const;
  /// Receives waiting for messages (long polls, and those reading from the store): the one
  /// gauge of `stats` without its pass over the groups.
  std::size_t waiting_receives() const { return pending_.size() + reading_.size(); }
  result<groups_page> groups(const groups_query& q, timestamp now) const;

  // -- the store and time -----------------------------------------------------------------------

  /// Rebuilds the shard from the store (recovery.md); answered with ok or the error that stops
  /// it. Requests that come meanwhile wait. Deferred while key functions are missing (`adopt`).
  void recover(request_id r, timestamp now);
  /// The queue was created again with this spec (its hook and key functions).
  void adopt(queue_spec spec, timestamp now);
  /// The queue's settings changed (`queue_spec::updated`: its fixed fields are this spec's).
  /// From `now`: receives lease for the new lease, an attempt counts against the new
  /// max_attempts when it ends, throttle buckets keep their tokens and refill at the new rate,
  /// new enqueues store the new headers and remember dedupe keys for the new window, a new
  /// retention applies to what the shard holds from the next sweep (retention.md RT10). Delivery
  /// durability stays what the shard started with until the broker restarts (a lease is recorded
  /// or not when granted; switching under leases in flight would leave records behind or miss
  /// them), docs/api.md "Change a queue's settings".
  void update(queue_spec spec, timestamp now);
  void on_written(std::uint64_t write, std::optional<error> failure, timestamp now);
  void on_read(std::uint64_t read, result<std::vector<store_entry>> page, timestamp now);
  void tick(timestamp now);
  /// The shard's share of the broker's window budget changed (queues came or went).
  void set_window_budget(std::size_t bytes) { cfg_.window_budget_bytes = bytes; }
  /// Answers every waiting request with `why` (the shard stops).
  void stop(const error& why);

  /// The effects of the inputs since the last call, with the next wake-up.
  engine_effects take_effects();

  // -- queries ----------------------------------------------------------------------------------

  const shard_config& config() const { return cfg_; }
  const shard_counters& counters() const { return counters_; }
  std::size_t live_groups() const { return groups_.size() - kept_count_; }
  /// Emptied groups kept for reuse (not live; at most limits::kept_groups_max).
  std::size_t kept_groups() const { return kept_count_; }
  /// Aborts on a broken invariant of the whole shard.
  void check_invariants() const;

 private:
  struct group_slot;
  /// A group's node in `group_by_lane_`, inside its slot: the index allocates nothing of its own
  /// (a live idle group's size counts, ADR 0009).
  using lane_hook = boost::intrusive::set_base_hook<boost::intrusive::optimize_size<true>>;
  /// The key of a group in `group_by_lane_`: its lane's bytes.
  struct lane_of_slot {
    using type = std::array<std::uint8_t, 16>;
    const type& operator()(const group_slot& g) const;
  };
  using lane_index = boost::intrusive::set<group_slot, boost::intrusive::base_hook<lane_hook>,
                                           boost::intrusive::key_of_value<lane_of_slot>>;
  /// Hash and equality of the slots in `groups_` by their group's id, which also find a slot by
  /// an id: the set holds the slots themselves, one 16-byte node each (a map from id to slot took
  /// 32). Neither can throw, so libstdc++ keeps no hash in the nodes.
  struct slot_id_hash {
    using is_transparent = void;
    std::size_t operator()(group_id id) const noexcept { return std::hash<group_id>{}(id); }
    std::size_t operator()(const std::unique_ptr<group_slot>& g) const noexcept;
  };
  struct slot_id_equal {
    using is_transparent = void;
    bool operator()(const std::unique_ptr<group_slot>& a,
                    const std::unique_ptr<group_slot>& b) const noexcept;
    bool operator()(group_id id, const std::unique_ptr<group_slot>& g) const noexcept;
    bool operator()(const std::unique_ptr<group_slot>& g, group_id id) const noexcept {
      return (*this)(id, g);
    }
  };
  /// Hashes an encoded key for `group_by_key_`. A hasher of its own that cannot throw: libstdc++
  /// then keeps no copy of the hash in each node (48 bytes, not 64, per live group); a key is
  /// short, and hashing it again on a rehash is cheap.
  struct key_hash {
    std::size_t operator()(const std::string& key) const noexcept {
      return std::hash<std::string_view>{}(key);
    }
  };
  struct recovery;
  struct group_write;
  struct unordered_class;
  struct recovered_lane;
  struct pending_receive {
    request_id r = 0;
    std::uint32_t max = 1;
    duration lease{0};
    timestamp deadline;
    std::uint32_t batch = 1;
  };
  struct placed {
    message msg;
    placement where;
    codec::lane_id lane;
    group_id group;  ///< its group when admitted, if it was live (`route` looks it up by id)
  };
  struct admitted {
    std::vector<placed> batch;
    std::vector<message_id> ids;
    std::vector<std::string> new_keys;
    std::vector<store_op> ops;
    std::uint64_t duplicates = 0;
    /// Dedupe keys of duplicates whose original's write is not durable yet: the answer waits.
    std::vector<std::string> waits_on;
  };
  /// A receive that took what memory held of a class of unordered messages whose next ones are
  /// being read back from the store: it waits for the read, then takes on (P12).
  struct reading_receive {
    request_id r = 0;
    std::uint32_t max = 1;
    std::uint32_t batch = 1;
    duration lease{0};
    timestamp deadline;  ///< a long poll's; or when it came (it waits for nothing else)
    std::vector<delivery> out;
  };
  /// A request that waits for recovery to finish.
  struct held_request {
    request_id r = 0;
    std::function<void()> run;
  };
  enum class read_kind : std::uint8_t {
    fetch,          ///< a group's window read back
    recovery,       ///< a range recovery reads
    dead_list,      ///< a listing of dead letters
    redrive_index,  ///< a redrive's lookup of a message's dead-letter order
    redrive_dead,   ///< a redrive's dead-letter records
    unordered,      ///< a class of unordered messages read back
    peek,           ///< a peek's messages
    discarded,      ///< a read-back a purge made moot: its answer is dropped
  };
  /// What a read is for.
  struct read_slot {
    read_kind kind = read_kind::fetch;
    group_id group{};        ///< fetch
    request_id request = 0;  ///< dead_list
    std::size_t index = 0;   ///< redrive_index: which id; unordered: the class's id
  };
  struct redrive_state;

  // admission (shard_admission.cpp)
  result<admitted> admit(std::vector<outgoing_message>& batch, timestamp t,
                         const std::vector<shared_json>* parsed);
  void settle_dedupe(const admitted& a, bool committed);
  /// A duplicate in `a` names an original whose write failed (its answer must not claim it).
  std::optional<error> original_failed(const admitted& a) const;
  /// The store lane of a message placed at `where`: its group's, or its class's (unordered).
  /// With `live`: the id of the live group that has the lane, if one has (0 otherwise).
  codec::lane_id lane_of(const placement& where, const message& m, group_id* live = nullptr) const;
  placement stored_placement(const message& m, const codec::lane_id& lane) const;
  store_op counters_op() const;
  /// Messages stored and not acked or dead-lettered (waiting, delayed, in flight).
  std::uint64_t depth_messages() const;
  /// Takes `n` purged messages' body bytes off the depth: at the shard's mean body size, as a
  /// purge erases messages of the store without reading them; exact again once the shard holds
  /// no message, and at the next start (docs/api.md "Backpressure").
  void release_purged_bytes(std::uint64_t n);
  /// Takes `bytes` (a message acked or dead-lettered) off the depth.
  void release_bytes(std::uint64_t bytes);
  /// `queue_full` if storing `batch` would take the shard past its share of the queue's
  /// max_depth (docs/api.md "Backpressure").
  std::optional<error> over_depth(const std::vector<placed>& batch) const;
  /// Admitted messages are written (`durable`) or not: they leave the admitting count.
  void admitted_settled(const admitted& a, bool durable);

  // groups (shard_groups.cpp)
  group_slot& group_for(const placement& where, const codec::lane_id& lane,
                        group_id id = group_id{});
  group_slot* find_group(group_id id);
  group_slot* owner_of(const lease_token& l);
  void route(std::vector<placed> batch, timestamp t);
  /// Carries out a group's effects; returns the store operations to write for it.
  group_write apply(group_slot& g, group_effects&& fx);
  /// The same, adding to `w` (an ack batch's writes, without a vector per group).
  void apply(group_slot& g, group_effects&& fx, group_write& w);
  /// Writes `w` for group `g` (its next head waits for it); `answer` hears the outcome. Ends
  /// with `offer_when_settled`: `g` may be gone after it.
  void write_for(group_slot& g, group_write w, std::function<void(std::optional<error>)> answer,
                 timestamp t);
  void offer_when_settled(group_slot& g, timestamp t);
  /// Keeps `g` for reuse once it is empty and nothing waits on it (`kept_groups_`).
  void keep_if_idle(group_slot& g);
  /// A kept group that gets work again is live.
  void revive(group_slot& g);
  /// Drops the kept groups beyond the bound or kept too long.
  void drop_kept(timestamp now);
  /// Removes a kept group from every index; `g` is gone.
  void drop(group_slot& g);
  bool may_grow() const;
  /// The window budget's share of one live group or class of unordered messages, in bytes.
  std::size_t budget_share_bytes() const;
  /// Before an input to `g`: sets the window it fills without growing (the configured window,
  /// or once the window budget is used up its share of it) and answers whether it may grow.
  bool window_for(group_slot& g);
  /// `g`'s share of the window budget, in messages (docs/design/persistence.md, "Memory
  /// follows live groups").
  std::size_t budget_share(const group_slot& g) const;
  void expire_if_due(group_slot& g, timestamp t);
  void reclaim(group_slot& g, const lease_token& lease, timestamp t);
  /// `count` messages from the head are in flight under `lease`, `acked` of its batch before them.
  void restore_lease(group_slot& g, const lease_token& lease, timestamp deadline, timestamp t,
                     std::size_t count = 1, std::uint32_t acked = 0);
  /// The grace of a recovered head is over: it is offered to every consumer.
  void release_hold(group_slot& g, timestamp t);
  /// What `g` keeps for its old lease holder, if it was recovered in fast delivery.
  struct reclaim_entry;
  reclaim_entry* reclaim_of(const group_slot& g);
  void fetch(group_slot& g, const fetch_request& req);
  void on_fetched(group_id id, result<std::vector<store_entry>> page, timestamp t);
  /// The attempt under `lease` is over: with `recorded`, its lease record goes with it.
  std::vector<store_op> end_attempt(const lease_token& lease, std::vector<store_op> ops,
                                    bool recorded);
  /// The delivery durability the shard started with (`update` does not change it).
  bool durable() const { return durable_; }
  /// Whether `g`'s lease has a record in the store: every lease in durable delivery; in fast
  /// delivery an ordered batch acked in part (its token no longer names the head, O12).
  bool lease_recorded(const group_slot& g) const;
  /// The record of `g`'s lease as it stands (the batch's messages not acked yet).
  codec::lease_record record_of(const group_slot& g) const;
  std::vector<store_op> move_dead(std::vector<dead_letter> dls, const codec::lane_id& lane);

  // unordered messages, by class (shard_unordered.cpp)
  /// The class of `m`, made if it has none yet.
  unordered_class& class_for(const message& m);
  /// Whether `m` is of the class used last (known without building its key).
  bool of_last_class(const message& m) const;
  unordered_class* find_class(std::uint64_t id);
  /// The store lane of a class: a hash of the queue and the class, never a group's lane.
  codec::lane_id class_lane(const std::string& key) const;
  /// The store lane of `m`'s class.
  codec::lane_id class_lane_of(const message& m) const;
  /// Whether `lane`, whose first message is `m`, holds a class of unordered messages.
  bool is_class_lane(const message& m, const codec::lane_id& lane) const;
  /// Messages of `c` that may wait in memory to be delivered (the rest stay in the store).
  std::size_t class_window(const unordered_class& c) const;
  /// A routed unordered message (its write is durable): into memory, or counted in the store.
  void arrive_unordered(message m, timestamp t);
  /// Hands `m` of class `c` to the scheduler.
  void queue_unordered(unordered_class& c, message m, timestamp t);
  /// `m`, taken out of the scheduler, leaves `c`'s queued ones (its memory, its delay).
  void unqueue_unordered(unordered_class& c, const message& m, timestamp t);
  /// `m`, picked from the scheduler, goes in flight.
  void picked_unordered(unordered_class& c, const message& m);
  /// A message of `c` in flight is gone (acked or dead-lettered).
  void left_unordered(unordered_class& c);
  /// Delayed unordered messages whose time has come count as ready.
  void ready_delayed(timestamp t);
  void fetch_class(unordered_class& c);
  void on_class_fetched(std::uint64_t id, result<std::vector<store_entry>> page, timestamp t);
  void maybe_drop_class(unordered_class& c);
  /// Takes on for the receives that waited for a read-back.
  void resume_reading(timestamp t);
  /// Whether lease `l`, handed out to a receive that waits, is still in flight.
  bool still_leased(const lease_token& l);
  /// Takes the deadlines of the leases in `out` away while their receive waits for a read-back:
  /// no attempt runs out before its consumer has the message, however long the store takes.
  void hold_leases(const std::vector<delivery>& out);
  /// Gives the leases in `out` their deadline, `t + lease`, as their receive is answered.
  void start_leases(std::vector<delivery>& out, duration lease, timestamp t);
  /// A receive that took `rr.out` waits for a class's read-back.
  void wait_for_read(reading_receive rr, timestamp t);
  /// Answers a receive with `out`, or lets it wait (a long poll that found nothing yet).
  void finish_receive(reading_receive rr, timestamp t);
  /// A recovered unordered message of `c`: in flight again under its durable lease, or queued.
  void recover_unordered(recovery& r, unordered_class& c, message m, timestamp t);
  void recover_class(recovery& r, const codec::lane_id& stored, recovered_lane& lane, timestamp t);
  /// Unordered messages stored before classes (lane 0) move to their class's lane.
  void recover_lane_zero(recovery& r, timestamp t);

  // dead letters (shard_dead_letters.cpp)
  void on_dead_list(request_id r, result<std::vector<store_entry>> page);
  void read_dead_letters(redrive_state& s);
  void on_redrive_index(request_id r, std::size_t i, result<std::vector<store_entry>> page);
  void on_redrive_dead(request_id r, result<std::vector<store_entry>> page);
  void redrive_in_given_order(redrive_state& s);
  void redrive_taken(redrive_state& s);
  /// A listing or deletion by ids (not a redrive) found its dead letters.
  void dead_letters_taken(redrive_state& s);
  void erase_dead_letters(redrive_state& s);
  /// Sends `w`, the erases of `n` dead letters, in the write slot `s` holds, and ends `s`: the
  /// answer is the write's (the count, or the error at once); the counts follow its settle.
  void write_dead_deletes(redrive_state& s, write_request w, std::uint64_t n);
  /// Starts a read of the dead letters of `s` (kind: what it is for) once every earlier write is
  /// durable, in its place among the shard's writes.
  void start_dead_op(std::unique_ptr<redrive_state> s);

  // retention (shard_retention.cpp)
  /// Messages that entered the queue at or before this time have outlived the retention at `t`
  /// (none without one).
  std::optional<timestamp> expiry_cutoff(timestamp t) const;
  /// `g`'s head was offered: its expiry, if the queue has a retention.
  void schedule_expiry(const group_slot& g);
  /// An unordered message went into the scheduler: the sweep comes by its expiry.
  void note_unordered_expiry(const message& m);
  /// When the next sweep is due (tick must run then), if one is.
  std::optional<timestamp> next_expiry() const;
  /// The sweeps that are due at `t`, if the last one was long enough ago.
  void expire_due(timestamp t);
  void expire_groups(timestamp cutoff, timestamp t);
  /// `g`'s messages from its head on that entered at or before `cutoff` expire.
  /// Precondition: `g`'s head is out of the scheduler, and nothing of it is in flight.
  void expire_head(group_slot& g, timestamp cutoff, timestamp t);
  void expire_unordered(timestamp cutoff, duration age, timestamp t);
  /// Unordered messages expire: taken out of the scheduler (`queued`), or just read back.
  void expire_messages(std::vector<message> gone, timestamp t, bool queued = true);
  /// `g`'s head, offered by a read-back (not in the scheduler yet), has expired: then it and
  /// the due ones behind it expire now, not at the next sweep (a backlog in the store drains at
  /// the speed of its reads). Returns whether it did.
  bool expire_fetched_head(group_slot& g, timestamp t);
  void expire_dead_letters(duration age, timestamp t);
  /// The first dead letters were read back: the due ones are deleted.
  void expire_dead_taken(redrive_state& s);

  // purge and peek (shard_purge.cpp)
  /// Removes `g`'s waiting messages (seq below `end`); returns how many, with their erases.
  std::uint64_t purge_group(group_slot& g, message_seq end, std::vector<store_op>& ops,
                            timestamp t);
  /// Removes every waiting unordered message (seq below `end`); returns how many.
  std::uint64_t purge_unordered(message_seq end, std::vector<store_op>& ops, timestamp t);
  void purge_now(request_id r, const group_filter& which, message_seq end, timestamp t);
  /// The store reads under way for group `g` (or class `cls`) answer into nothing.
  void discard_reads(group_id g, std::optional<std::uint64_t> cls);
  void on_peek(request_id r, result<std::vector<store_entry>> page);
  group_slot* group_by_label(std::string_view key);
  /// Answers a redrive that writes nothing (with `failed`, or 0 when `answer`) and gives up its
  /// place.
  void end_redrive(redrive_state& s, std::optional<error> failed, bool answer = true);

  // deliveries and leases (shard_delivery.cpp)
  void catch_up(timestamp t);
  /// Up to `max` deliveries. Sets `waits` if it stopped at, or came short with, a class of
  /// unordered messages whose next ones are being read back (memory holds none of its ready
  /// ones), so that the receive waits for them.
  std::vector<delivery> take(std::uint32_t max, std::uint32_t batch, duration lease, timestamp t,
                             bool& waits);
  /// Delivers group `g`'s picked head, and up to `room - 1` messages behind it as an ordered
  /// batch, into `out`.
  void deliver_group(group_slot& g, std::size_t room, duration lease, timestamp t,
                     std::vector<delivery>& out);
  /// The lease of `m`'s next attempt (`M`: a message, or a group's held_message).
  template <class M>
  lease_token lease_for(group_id group, const M& m, std::uint32_t batch) const;
  void count_first_delivery(const message& m, timestamp t);
  /// Counts `messages` acked at `t` under a lease granted at `since` (receive-to-ack histogram).
  void count_ack(timestamp since, timestamp t, std::uint64_t messages);
  void hand_out(request_id r, std::vector<delivery> out);
  void serve_pending(timestamp t);
  void end_polls(timestamp t);
  /// Answers the watchers once something is ready (or their deadline passed).
  void notify_watchers(timestamp t);
  /// Ends unordered lease `l` by an ack: the store operations that do it, or why it cannot.
  result<std::vector<store_op>> ack_unordered(const lease_token& l, timestamp t);
  void ack_one(const lease_token& l, timestamp t, std::vector<store_op>& ops,
               std::vector<lease_outcome>& failed, std::vector<group_id>& touched);
  std::vector<store_op> retry_or_dead_letter(message m, duration retry_after, bool force_dead,
                                             timestamp t, bool& moved);
  void expire_leases(timestamp t);

  // recovery (shard_recovery.cpp)
  void start_recovery(timestamp t);
  void on_recovery_page(std::vector<store_entry> page, timestamp t);
  std::optional<error> take_record(recovery& r, const store_entry& e, timestamp t);
  std::optional<error> take_message(recovery& r, const store_entry& e);
  void finish_recovery(timestamp t);
  void recover_group(recovery& r, const codec::lane_id& stored, recovered_lane& lane, timestamp t);
  void fail_recovery(error e);
  /// Keeps a request that came while recovery runs, for after it.
  void hold(request_id r, std::function<void()> f);
  void release_held();

  /// The gauges of `stats` that take a pass over the groups and items: groups per state,
  /// delayed messages, the oldest waiting item's and dead letter's ages.
  void measure(queue_stats& s, timestamp now) const;
  /// check_invariants' parts: one group (`scheduled`: the groups whose heads the scheduler
  /// holds; `held`: those a receive waiting for a read-back holds), and the unordered classes
  /// (returns the memory they count in the window budget).
  void check_group_invariants(const group_slot& g, const std::unordered_set<group_id>& scheduled,
                              const std::unordered_set<group_id>& held) const;
  std::size_t check_class_invariants(std::size_t scheduled_groups) const;

  void reply(request_id r, engine_answer a);
  void read(read_slot slot, std::string from, std::string to, std::uint32_t max);

  shard_config cfg_;
  bool durable_ = false;
  shard_counters counters_;
  write_log writes_;
  fair_scheduler sched_;
  lease_table leases_;  // unordered messages in flight
  dedupe_window dedupe_;
  engine_effects fx_;
  timestamp last_now_;

  std::uint64_t next_id_ = 1;
  std::uint64_t next_seq_ = 1;
  std::uint64_t next_dead_ = 1;
  std::uint64_t next_group_ = 1;
  std::uint64_t next_read_ = 1;

  /// The live groups, found by id.
  std::unordered_set<std::unique_ptr<group_slot>, slot_id_hash, slot_id_equal> groups_;
  /// By encoded key: a message finds its group without hashing its key to a lane.
  std::unordered_map<std::string, group_slot*, key_hash> group_by_key_;
  /// One group per lane, in lane order (the groups listing pages through it). Declared after
  /// `groups_`, which owns the slots: it is emptied before they go.
  lane_index group_by_lane_;
  /// Emptied groups kept for reuse, each with when it emptied, oldest first. Building a group
  /// costs its lane id (a SHA-256) and five allocations, and with consumers that keep up a group
  /// empties after nearly every message; a kept group stays in the indexes above, marked `kept`,
  /// and is not live (stats, listings, the window budget). An entry is current while its group
  /// is kept and has been empty since that time; stale ones are skipped. At most
  /// limits::kept_groups_max entries, none kept past limits::kept_group_for (`drop_kept`).
  std::deque<std::pair<group_id, timestamp>> kept_groups_;
  std::size_t kept_count_ = 0;  // groups marked kept
  /// Keys of groups beyond the first: two keys whose lanes collide are one group (lanes.md L6).
  std::unordered_map<group_id, std::vector<std::string>> more_keys_;
  /// Fast delivery after a restart: recovered heads by message id, so a token of the previous
  /// run (whose group id is gone) reaches its group; dropped when the group goes.
  std::unordered_map<message_id, group_id> reclaimable_;
  /// What a group recovered in fast delivery keeps for its old lease holder (few groups, and
  /// only after a restart: kept here, not in every group).
  struct reclaim_entry {
    message_id head;  ///< its key in `reclaimable_`
    /// The held head is the rest of an ordered batch acked in part before the restart; only
    /// this record's token takes it back (its record is erased if none does).
    std::optional<codec::lease_record> record;
  };
  std::unordered_map<group_id, reclaim_entry> reclaims_;
  deadline_heap<group_id> group_leases_;  // lease deadlines of group heads in flight
  deadline_heap<group_id> holds_;         // ends of reclaim graces
  deadline_heap<group_id> fetch_retries_;
  std::size_t window_bytes_ = 0;  // what the groups hold in memory (the window budget)

  std::deque<pending_receive> pending_;
  std::multiset<timestamp> pending_deadlines_;
  struct watcher {
    request_id r = 0;
    timestamp deadline;
  };
  std::vector<watcher> watchers_;

  /// The classes of unordered messages that have messages (docs/design/persistence.md, P12), by
  /// key (fair_scheduler::class_of) and by id.
  std::unordered_map<std::string, std::unique_ptr<unordered_class>> classes_;
  std::unordered_map<std::uint64_t, unordered_class*> class_by_id_;
  /// Lane ids of class keys met lately, whether their class lives or not: with consumers that
  /// keep up, a class empties and is made again for most messages, and its lane id is a
  /// SHA-256. A pure function's memo (at most limits::class_lanes_cached, then started afresh).
  mutable std::unordered_map<std::string, codec::lane_id> class_lanes_;
  std::uint64_t next_class_ = 1;
  unordered_class* last_class_ = nullptr;  // the class used last (class_for's shortcut)
  /// When each delayed unordered message in the scheduler becomes ready (its class counts it as
  /// delayed until then), by the class's id.
  std::multimap<timestamp, std::uint64_t> delayed_;
  deadline_heap<std::uint64_t> class_retries_;  // reads back to try again after a failed one
  std::set<std::uint64_t> fetching_;            // classes whose read is under way
  std::deque<reading_receive> reading_;

  std::uint64_t dead_count_ = 0;  // dead letters in the store (they are not held in memory)
  /// Body bytes of the messages `depth_messages` counts; of the admitted batches not settled yet.
  std::uint64_t depth_bytes_ = 0;
  std::uint64_t admitting_ = 0;
  std::uint64_t admitting_bytes_ = 0;
  /// When the oldest dead letter died (or one redriven by id since the list was last empty).
  std::optional<timestamp> oldest_dead_at_;
  /// Dead-letter listings and redrives under way, by request.
  std::unordered_map<request_id, std::unique_ptr<redrive_state>> dead_ops_;

  /// Retention (shard_retention.cpp): when each offered group head outlives it; the earliest
  /// such time of an unordered message in the scheduler (a hint: the sweep finds the next);
  /// when the last sweep ran, and when dead letters may be swept next.
  deadline_heap<group_id> expiries_;
  std::optional<timestamp> unordered_expiry_;
  timestamp last_sweep_{INT64_MIN / 2};
  timestamp dead_sweep_after_;
  /// The request id of the dead-letter retention's own sweep in `dead_ops_` (it answers no
  /// one; callers number their requests from 1 up and never reach it).
  static constexpr request_id retention_request = ~request_id{0};

  std::unordered_map<std::uint64_t, read_slot> reads_;

  std::unique_ptr<recovery> recovery_;
  std::optional<request_id> recover_request_;
  bool recovery_deferred_ = false;
  std::optional<admitted> topic_batch_;
  std::deque<held_request> held_;
  bool stopped_ = false;
};

}  // namespace laneq
