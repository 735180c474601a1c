// The fair scheduler, owned by the shard engine (docs/design/fairness.md F1-F5 and
// docs/design/throttling.md T1-T4). It holds everything that may be delivered next: the offered
// head of each ordering group and every unordered message. Delivery order: round-robin across
// fairness keys; within a key, the oldest deliverable item (lowest arrival seq). Items whose
// not-before time lies ahead wait in a delay heap; items whose throttle bucket is empty wait for
// their bucket, holding back nothing but themselves (and so only their own group).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "laneq/held_message.hpp"
#include "laneq/ids.hpp"
#include "laneq/message.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/time.hpp"
#include "laneq/token_bucket.hpp"

namespace laneq {

/// Something the scheduler can deliver: an unordered message (group 0) or a group's head.
struct ready_item {
  message msg;
  group_id group;
};

/// A deliverable item handed out by `pick`, with the throttle buckets it was charged to. An
/// unordered message comes whole; a group's head comes as its id and seq only: the
/// scheduler does not keep a copy of it (its group holds the message).
struct picked_item {
  ready_item item;
  std::vector<std::string> charged;  ///< "<throttle index>/<encoded key>" per bucket charged
};

/// Introspection of an item that is waiting inside the scheduler.
struct waiting_item {
  group_id group;
  message_id id;
  bool throttled = false;  ///< false: waiting for its not-before time
  timestamp since;
  timestamp until;
};

/// Round-robin fair scheduler with delays and token-bucket throttles. Not thread-safe; owned by
/// one shard engine.
class fair_scheduler {
 public:
  explicit fair_scheduler(std::vector<throttle_spec> throttles = {});
  ~fair_scheduler();
  fair_scheduler(fair_scheduler&&) noexcept;
  fair_scheduler& operator=(fair_scheduler&&) noexcept;

  /// Adds an item. Precondition: no item of the same group (other than group 0) is present; the
  /// caller knows which of its groups' heads it handed over (the scheduler keeps no index of
  /// them: a live idle group's size counts, ADR 0009), and `check_invariants` checks it. A
  /// group's head is read (keys, not-before time) but not kept.
  void on_ready(ready_item item, timestamp now);
  /// Adds a group's head, read but not copied (its group keeps it). Precondition as above.
  void on_head(const message& head, group_id group, timestamp now);
  /// The same for a head as its group's window holds it (held_message.hpp).
  void on_head(const held_message& head, group_id group, timestamp now);

  /// The next item to deliver at `now`, or nullopt. Takes a token from every throttle bucket
  /// the item belongs to.
  std::optional<picked_item> pick(timestamp now);

  /// A message behind a group's picked head joins its ordered batch (docs/design/ordering.md
  /// O12): takes a token from every throttle bucket `m` belongs to if each has one at `now` that
  /// no released waiter is owed, and returns true; otherwise takes nothing and returns false (the
  /// batch ends before `m`). One token per message, as if each were picked (throttling.md T2).
  bool try_charge(const message& m, timestamp now);
  bool try_charge(const held_message& m, timestamp now);

  /// Removes every item, ready or waiting, for which `drop(group, seq)` is true (group 0: an
  /// unordered message), and returns how many. Throttle buckets keep their tokens. A purge
  /// (docs/design/purge.md).
  std::size_t remove_if(const std::function<bool(group_id, message_seq)>& drop);
  /// Takes out every unordered message, ready or waiting, that `take` accepts, and returns them
  /// (in no particular order). Retention (docs/design/retention.md).
  std::vector<message> take_unordered_if(const std::function<bool(const message&)>& take);

  /// The class of an unordered message: what the scheduler tells such messages apart by (their
  /// fairness key and the throttle buckets they take tokens from). Messages of one class differ
  /// only in arrival seq and not-before time, so the shard keeps each class in one store lane in
  /// arrival order and reads it back from there (docs/design/persistence.md, P12).
  std::string class_of(const message& m) const;

  /// The queue's throttles changed rate or burst (its settings were updated, throttling.md T5):
  /// every live bucket keeps its tokens (cut to the new burst) and refills at the new rate from
  /// `now`; waiters are woken when the new rate gives them a token. Precondition: the same
  /// throttles, in the same order, with the same keys (the buckets an item belongs to stay).
  void set_throttles(std::vector<throttle_spec> throttles, timestamp now);

  /// Moves items whose not-before time or throttle wake time has come into the ready set.
  void on_tick(timestamp now);

  /// Earliest time at which a waiting item may become ready.
  std::optional<timestamp> next_wakeup() const;

  std::size_t ready_size() const { return ready_count_; }
  std::size_t waiting_size() const;
  std::size_t size() const { return ready_count_ + waiting_size(); }
  /// Fairness keys that currently have ready items, in rotation order.
  std::vector<std::string> rotation() const;
  /// Number of items per fairness key (ready or waiting).
  std::unordered_map<std::string, std::uint64_t> backlog_by_fairness_key() const;
  /// When the item waiting longest for a consumer became deliverable: the latest of when it came
  /// and its not-before time, over the ready items and those held back by a throttle (delayed
  /// items do not count); none when there are none. One pass over the items (metrics).
  std::optional<timestamp> oldest_deliverable_since() const;
  /// Items waiting for time or a token.
  std::vector<waiting_item> waiting() const;
  /// The waiting items of the groups in `groups` (one pass over the waiting items, no copy of
  /// the others: a page of the groups listing).
  std::vector<waiting_item> waiting(const std::unordered_set<group_id>& groups) const;
  /// The groups whose head is in the scheduler (ready or waiting): one pass over every item, for
  /// invariant checks. Aborts if a group has two.
  std::unordered_set<group_id> groups() const;
  /// Live throttle buckets (full buckets are dropped: they behave exactly like new ones).
  std::size_t bucket_count() const;

  /// Aborts on a broken invariant.
  void check_invariants() const;

 private:
  struct impl;
  /// `remove_if`, moving the unordered messages that go into `taken` (when not null).
  std::size_t remove_entries(const std::function<bool(group_id, message_seq)>& drop,
                             std::vector<message>* taken);
  /// The waiting items whose group `keep` accepts.
  template <class Keep>
  std::vector<waiting_item> waiting_if(Keep keep) const;

  std::unique_ptr<impl> impl_;
  std::size_t ready_count_ = 0;
};

}  // namespace laneq
