// The ordering group state machine, one per group in the shard engine's `group_slot`
// (docs/design/ordering.md O3-O7, O12). A group holds its messages in arrival order, offers only
// its head, and keeps at most one delivery in flight: its head, or an ordered batch of its head
// and the messages behind it. Every input takes `now` and returns effects for the engine to carry
// out.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "laneq/compact_fifo.hpp"
#include "laneq/error.hpp"
#include "laneq/held_message.hpp"
#include "laneq/ids.hpp"
#include "laneq/lease.hpp"
#include "laneq/limits.hpp"
#include "laneq/message.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// Why a message left its group for the dead-letter list.
enum class dead_letter_reason : std::uint8_t {
  max_attempts = 1,  ///< its last attempt failed and it had used max_attempts
  requested = 2,     ///< a consumer nacked it with dead_letter
  expired = 3,       ///< it outlived the queue's retention (docs/design/retention.md)
};
std::string_view to_string(dead_letter_reason x);

/// A message on the dead-letter list.
struct dead_letter {
  message msg;
  dead_letter_reason reason = dead_letter_reason::max_attempts;
  timestamp at;
  /// The store lane the message was stored under (`codec::lane_id`'s bytes; all zero: an
  /// unordered message that died before classes of unordered messages had lanes). The dead-letter
  /// move and a redrive use it, never a lane worked out again from the message
  /// (docs/design/lanes.md L7).
  std::array<std::uint8_t, 16> lane{};
  /// False only for a record written before dead letters kept their lane (codec.hpp).
  bool lane_known = false;

  void keep_lane(const std::array<std::uint8_t, 16>& stored) {
    lane = stored;
    lane_known = true;
  }
};

template <class Inspector>
auto inspect(Inspector& f, dead_letter& x) {
  return f(x.msg, x.reason, x.at, x.lane, x.lane_known);
}

/// What a consumer asks for when it gives a message back.
enum class nack_kind : std::uint8_t {
  retry = 1,        ///< deliver again after retry_after (0: at once); the group waits for it
  dead_letter = 2,  ///< move to the dead-letter list now; the group continues
};

/// Why a group is not delivering, for introspection (in_flight, retry_wait, delayed, throttled).
enum class group_status : std::uint8_t {
  ready = 0,       ///< head offered, waiting for a consumer
  in_flight = 1,   ///< head delivered, lease running
  retry_wait = 2,  ///< head nacked or expired, waiting for its retry_after
  delayed = 3,     ///< head has an enqueue delay that has not elapsed
  throttled = 4,   ///< head waits for a throttle token (known to the fair scheduler)
  idle = 5,        ///< no messages
  corrupt = 6,     ///< its next stored record failed its checksum: the group stopped (reason)
  /// Its recovered head waits out the reclaim grace for its old lease holder (fast delivery,
  /// recovery.md R6; known to the shard engine, which holds the head).
  reclaim_grace = 7,
};
/// How many states `group_status` has (the metrics count groups per state).
inline constexpr std::size_t group_status_count = 8;
std::string_view to_string(group_status x);

/// A group as reported by introspection.
struct group_info {
  std::string key;            ///< printable ordering key
  std::uint64_t backlog = 0;  ///< messages in the group, the head included
  group_status state = group_status::idle;
  timestamp since;  ///< when the current state began
  timestamp until;  ///< lease deadline, not-before time or throttle wake (0 if none)
  message_id head;
  std::string reason;  ///< why the group stops at a corrupt record (the record, the failed check)
};

template <class Inspector>
auto inspect(Inspector& f, group_info& x) {
  return f(x.key, x.backlog, x.state, x.since, x.until, x.head, x.reason);
}

/// Messages of the group to read back from the store: up to `max` with seq > `after`.
struct fetch_request {
  message_seq after;
  std::size_t max = 0;
};

/// Effects the shard engine carries out after an input.
struct group_effects {
  /// The head, when the group hands it on for delivery. It stays in the group: the pointer holds
  /// until the group's next input (the engine only notes that it is offered).
  const held_message* offer = nullptr;
  std::vector<dead_letter> dead_letters;  ///< messages that left the group
  /// Acked messages (delete from the store): one, on the hot path, so it is held inline.
  boost::container::small_vector<message_seq, 2> removed;
  std::uint64_t removed_bytes = 0;     ///< their body bytes (the queue's depth in bytes)
  std::optional<message> updated;      ///< the head after a failed attempt (store it again)
  std::optional<fetch_request> fetch;  ///< refill the in-memory window from the store
  bool idle = false;                   ///< group is empty and has nothing in flight
  /// A part of an ordered batch was acked: the lease goes on over the rest (store its record).
  bool batch_rest = false;
};

/// One ordering group.
///
/// Phases: `empty` (no message in memory), `offered` (head handed on for delivery, not yet
/// delivered), `in_flight` (head delivered under a lease, alone or as the first of an ordered
/// batch). Only the head ever leaves the group, one at a time, and nothing is delivered while a
/// lease is held (invariants O3, O4, O12).
///
/// An ordered batch (O12) is the head and up to `limits::ordered_batch_max - 1` messages behind
/// it in memory under one lease. An ack may cover a prefix of it (the lease goes on over the
/// rest); a nack or an expiry fails its first message not acked (or the one a nack names, after
/// acking those before it), and the messages behind that one go back to the group as they were:
/// their delivery does not count as an attempt.
///
/// Memory follows live groups, not backlog (docs/design/persistence.md): the group keeps at
/// most `window` messages in memory, its head first, or up to `window_max` while the caller
/// says the broker has memory to spare (`grow`, on every input that can add messages); later
/// arrivals are counted but their payloads stay in the store, and the group reads them back in
/// arrival order (`fetch`, refilling the window or, with `grow`, up to `window_max`) when its
/// window runs half empty. Once a message is left in the store, every later one is too until
/// the reads catch up: nothing overtakes a stored message.
class group_state {
 public:
  enum class phase : std::uint8_t { empty, offered, in_flight };

  group_state(group_id id, std::uint32_t max_attempts,
              std::size_t window = limits::group_window_default, std::size_t window_max = 0)
      : id_(id),
        window_(count_of(window_of(window))),
        window_max_(std::max(window_, count_of(window_max))),
        max_attempts_(static_cast<std::uint16_t>(std::min(max_attempts, attempts_cap))) {}

  /// The window a group keeps for a configured `window`: at least 2 (a head and one behind it).
  static std::size_t window_of(std::size_t window) { return window < 2 ? 2 : window; }

  /// A recovered ordered batch larger than the window (configured smaller since it was
  /// delivered): this group keeps at least `n` messages in memory. Before its first enqueue.
  void widen(std::size_t n) {
    window_ = std::max(window_, count_of(n));
    window_max_ = std::max(window_max_, window_);
  }

  /// From the next input on, the group's window is `n` (at least 2, at most `window_max`): the
  /// shard engine's `window_for` sets it before every input, to the configured window or, once
  /// the window budget is used up, the group's share of it. Messages it holds beyond it stay; it
  /// takes no more until it drains, and its next ordered batch is cut to it.
  void set_window(std::size_t n) {
    window_ = count_of(std::clamp<std::size_t>(window_of(n), 2, window_max_));
  }

  /// Appends messages in arrival (seq) order. Offers the head if the group was empty. `grow`:
  /// the group may hold up to `window_max` messages in memory instead of `window`.
  group_effects on_enqueue(std::vector<message> msgs, timestamp now, bool grow = false) {
    return on_arrivals(std::span<message>{msgs}, now, grow);
  }
  /// The same, moving the messages out of `msgs` (the engine's runs of one enqueue batch).
  group_effects on_arrivals(std::span<message> msgs, timestamp now, bool grow = false);

  /// A recovered group: `count` more of its messages are in the store, after every message
  /// given so far (in arrival order). Returns the fetch that reads them back.
  group_effects on_stored_beyond(std::size_t count, timestamp now, bool grow = false);

  /// A fetch came back: the stored messages after the requested seq, in arrival order.
  group_effects on_fetched(std::vector<message> msgs, timestamp now, bool grow = false);

  /// A fetch failed (the store is degraded): the engine retries later with `retry_fetch`.
  void on_fetch_failed() { fetching_ = false; }
  /// A fetch came back with a record that failed its checksum after `before` (the messages ahead
  /// of it): the group takes those, delivers what it holds, then stops there for good (it never
  /// skips the record, fetches no more) and reports `corrupt` with `reason`.
  group_effects on_corrupt(std::vector<message> before, std::string reason, timestamp now,
                           bool grow = false);
  group_effects retry_fetch(bool grow = false);

  /// After a restart: the head, and with `count` above 1 the messages behind it, are `in flight`
  /// under a lease from before the restart (durable delivery: the committed lease; fast delivery:
  /// a reclaimed token or a partly acked batch's record). `acked`: messages of the batch acked
  /// before the restart (the head is then not the message the token names).
  /// Precondition: phase offered with `count` messages in memory; with `acked` 0 `lease` names
  /// the head; `count + acked` is the lease's batch.
  void on_restored_lease(const lease_token& lease, timestamp deadline, timestamp now,
                         std::size_t count = 1, std::uint32_t acked = 0);
  /// Whether a lease from before a restart on `count` messages from the head (after `acked` of
  /// its batch) still describes them: they are in memory and none of them but a whole batch's
  /// head failed an attempt. One that did failed after the lease was issued (its write committed,
  /// an earlier ack's was lost with the crash, persistence.md P11): the lease is stale, and
  /// taking it back would count that message's next attempt as its first.
  bool restorable(std::size_t count, std::uint32_t acked) const;

  /// An empty group that is kept for reuse frees the room its window grew to (a few messages'
  /// room stays).
  void release_memory() { messages_.release(4); }

  /// How many messages from the head, at most `max`, may go out together as an ordered batch at
  /// `now`: the offered head and the messages behind it in memory, within the window, up to the
  /// first whose not-before time lies ahead (O10), and before the first that entered the queue
  /// at or before `expired_by` (it outlived the retention: docs/design/retention.md). At least
  /// 1. Precondition: phase offered.
  std::size_t batchable(std::size_t max, timestamp now,
                        timestamp expired_by = timestamp{INT64_MIN}) const;

  /// The engine delivered the offered head under `lease`, due back by `deadline`; with `count`
  /// above 1, the `count - 1` messages behind it too, as one ordered batch (each message's
  /// attempts count its delivery).
  /// Precondition: phase offered, `lease` names the head and its next attempt and has `batch`
  /// `count`, and `count` is at most `batchable`.
  void on_delivered(const lease_token& lease, timestamp deadline, timestamp now,
                    std::size_t count = 1);

  /// Acknowledges the in-flight head or batch: it leaves the group; the next head is offered.
  /// With `count` (an ordered batch's first `count` messages as delivered, O12): the messages of
  /// them not acked yet leave the group, and the lease goes on over the rest (`batch_rest`)
  /// unless none is left. A `count` not above the messages acked already, or above the batch, is
  /// invalid_argument.
  result<group_effects> on_ack(const lease_token& lease, timestamp now, bool grow = false,
                               std::optional<std::uint32_t> count = std::nullopt);

  /// Gives the in-flight head back: retry (after `retry_after`) or dead-letter now. A retry that
  /// has used max_attempts dead-letters instead. For an ordered batch, `from` (the batch_index of
  /// the message that failed; none: the first not acked) acks the messages before it; it is
  /// retried or dead-lettered, and the messages after it go back behind it. A `from` of a message
  /// acked already, or past the batch, is invalid_argument.
  result<group_effects> on_nack(const lease_token& lease, nack_kind kind, duration retry_after,
                                timestamp now, bool grow = false,
                                std::optional<std::uint32_t> from = std::nullopt);

  /// A purge (docs/design/purge.md): every message but the first `keep` in memory leaves the
  /// group, and those counted in the store are forgotten (the engine erases their records, and
  /// drops the answer of a read under way). Returns how many left. With `keep` 0 the group is
  /// empty; otherwise what is kept stays as it was (in flight, or a head held after a restart).
  /// Precondition: `keep` covers the lease's batch and is at most what memory holds.
  std::uint64_t on_purge(std::size_t keep, timestamp now);

  /// Retention (docs/design/retention.md): while nothing is in flight, the messages from the
  /// head on that entered the queue at or before `cutoff` leave the group, as dead letters
  /// (reason expired) or, with `drop`, in `removed`; the next head is offered, or read back.
  /// In flight, nothing expires: the messages wait for the attempt to end.
  group_effects on_expire(timestamp cutoff, bool drop, timestamp now, bool grow = false);
  /// Extends the in-flight lease to `now + by`; returns the new deadline.
  result<timestamp> on_extend(const lease_token& lease, duration by, timestamp now);

  /// The lease's deadline came (the engine caught up with it). An expired lease is a failed
  /// attempt (O5) of its first message not acked; a batch's messages behind it go back behind it
  /// (O12). A lease that was extended meanwhile returns its new deadline in `rearm`.
  group_effects on_lease_timer(timestamp now, std::optional<timestamp>* rearm = nullptr,
                               bool grow = false);

  // -- queries ---------------------------------------------------------------------------------

  group_id id() const { return id_; }
  phase current_phase() const { return phase_; }
  std::size_t backlog() const { return messages_.size() + stored_only_; }
  /// Messages whose payload is in memory (at most `window_max`).
  std::size_t in_memory() const { return messages_.size(); }
  /// What they take packed (held_message::footprint), summed.
  std::size_t memory_bytes() const { return memory_bytes_; }
  const held_message* head() const { return messages_.empty() ? nullptr : &messages_.front(); }
  /// The `i`-th message in memory, the head being 0. Precondition: `i < in_memory()`.
  const held_message& at(std::size_t i) const { return messages_[i]; }
  std::optional<lease_token> lease() const { return lease_ ? lease_->current : std::nullopt; }
  /// Messages in flight under the lease, from the head on (0 when none is held).
  std::uint32_t batch_left() const { return lease_ ? lease_->batch : 0; }
  /// Messages of the lease's ordered batch acked so far: the head's `batch_index`.
  std::uint32_t batch_acked() const { return lease_ ? lease_->acked : 0; }
  /// When the lease in flight is due back (0 when none is held).
  timestamp lease_deadline() const { return leased() ? lease_->deadline : timestamp{}; }
  /// Messages ever added (enqueued, or counted as stored at recovery); the unit tests compare it
  /// with what they routed.
  std::uint64_t received_total() const { return received_; }
  /// Introspection (throttle state is added by the shard engine, from the fair scheduler).
  group_info describe(timestamp now) const;
  /// When the current state began: in flight, when the lease was granted (or restored).
  timestamp since() const { return since_; }
  /// Aborts on a broken invariant.
  void check_invariants() const;

 private:
  /// A lease is in flight (without copying its token, as `lease()` does).
  bool leased() const { return lease_ && lease_->current; }
  result<ok_t> check_lease(const lease_token& lease) const;
  void start_lease(const lease_token& lease, timestamp deadline, timestamp now, std::size_t count,
                   std::uint32_t acked);
  /// The batch's messages before the one at `batch_index` `upto` leave the group (acked).
  void pop_acked(group_effects& fx, std::uint32_t upto);
  /// The batch's messages behind the head go back to the group as they were (not attempted).
  void return_behind();
  /// The head fails (nack or expiry) and the batch's messages behind it go back behind it.
  group_effects fail_batch(group_effects fx, timestamp now, duration retry_after,
                           dead_letter_reason reason, bool force_dead_letter, bool grow);
  group_effects fail_head(group_effects fx, timestamp now, duration retry_after,
                          dead_letter_reason reason, bool force_dead_letter, bool grow);
  void advance(group_effects& fx, timestamp now, bool grow);
  /// The head has left (with its leases): the next is offered, or the group is empty (or
  /// reads its next head back).
  void after_head(group_effects& fx, timestamp now, bool grow);
  void take_fetched(std::vector<message> msgs);
  group_effects after_fetch(timestamp now, bool grow);
  void offer_head(group_effects& fx);
  void maybe_fetch(group_effects& fx, bool grow);
  void push(message m);
  void pop_head();

  /// The head's lease: the one it is in flight under, and the last one that failed (its token
  /// gets lease_expired, not lease_not_found, while the head waits for its next attempt). Apart
  /// from the group, so that a group that is not delivering does not carry it: a live idle
  /// group's size counts (ADR 0009, "at most 512 bytes per live idle group").
  struct lease_state {
    std::optional<lease_token> current;
    std::optional<lease_token> last;  // the previous lease of the head, for lease_expired
    timestamp deadline;               // when `current` is due back
    message_id failed_head;           // the head when `last` ended
    std::uint32_t batch = 0;          // messages in flight under `current`, from the head on
    std::uint32_t acked = 0;          // messages of the lease's batch acked so far
  };

  /// Attempts fit 16 bits (a spec allows at most limits::max_attempts_max).
  static constexpr std::uint32_t attempts_cap = 0xffff;
  static_assert(limits::max_attempts_max <= attempts_cap);
  /// Window sizes fit 32 bits: the server's configuration allows at most a million messages,
  /// and no window can hold four billion.
  static std::uint32_t count_of(std::size_t n) {
    return static_cast<std::uint32_t>(std::min<std::size_t>(n, 0xffffffffu));
  }

  // In an order that leaves no padding between members, and narrow where the bounds allow: a
  // live group's size counts.
  group_id id_;
  compact_fifo<held_message> messages_;  // packed (held_message.hpp)
  /// Null unless the head is in flight or its last lease failed, or a head left and others wait
  /// behind it (kept for their leases; freed when the group empties).
  std::unique_ptr<lease_state> lease_;
  timestamp since_;  // start of the current phase
  std::uint64_t received_ = 0;
  std::size_t memory_bytes_ = 0;  // footprint of the messages in memory
  std::size_t stored_only_ = 0;   // messages beyond the window: counted, payload in the store
  message_seq loaded_;            // seq of the last message whose payload was in memory
  message_seq told_;              // seq of the last message counted as stored only
  /// Why the group stops at a corrupt record (null: it does not).
  std::unique_ptr<const std::string> corrupt_;
  std::uint32_t window_;
  std::uint32_t window_max_;
  std::uint32_t fetch_max_ = 0;  // what the outstanding fetch asked for
  std::uint16_t max_attempts_;
  phase phase_ = phase::empty;
  bool fetching_ = false;
};

}  // namespace laneq
