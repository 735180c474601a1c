// The writes of one shard in the order its engine made them (docs/design/persistence.md P10,
// P11). Each write goes to the store; what depends on it (a client's answer, an enqueue's routing,
// a group's next head) happens once it and every write made before it are durable, so a power
// loss can never keep a later change and lose an earlier one the engine already acted on.
//
// A failed write is one of two kinds:
// - it *admits* (an enqueue, a redrive) and the store never committed it: nothing was routed
//   yet, so it is dropped; its owner answers `storage_failed` and undoes its bookkeeping
//   (`settle(false)`). One the store committed once (and that went again behind a failed write)
//   is stored whatever a later send does: it is treated as the second kind, but its client hears
//   only once it settles;
// - it changes state already admitted (an ack's erase, a retry's update, a dead-letter move, a
//   lease): its client is answered `storage_failed` at once (a `patient` one waits instead),
//   and the write is sent again after
//   `retry`, in order with every write made after it (a write that succeeded after it is applied
//   again, so the store ends as the engine left it). The writes sent again go as one write,
//   which the store commits whole or not at all: a crash during the replay can never leave a
//   later write's old effect beside an earlier write's new one (a dead-letter record beside the
//   message its later redrive put back). Until then the log is *parked*: new writes
//   wait, and their clients are answered `storage_failed` at once.
// Pure: no clock, no store, no threads. The engine takes the writes to send (`take_outgoing`) and
// reports each answer (`on_answer`).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "laneq/engine_io.hpp"
#include "laneq/error.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// One write a shard asks for.
struct write_request {
  std::vector<store_op> ops;
  /// Adds messages (an enqueue, a redrive): refused by a store low on space, dropped on failure.
  bool admits = false;
  /// The shard's counters record goes with it, computed when the write is sent (so a write sent
  /// again never stores older counters than one sent before it).
  bool counters = false;
  /// The client's part: called once, with nothing when the write is durable, or with the error
  /// of its first failure.
  std::function<void(std::optional<error>)> answer;
  /// The client waits through failures and retries for the write to be durable (a dead-letter
  /// move: its answer says the message is a dead letter, never "maybe").
  bool patient = false;
  /// The engine's part: called once, true when the write and every earlier one are durable,
  /// false when it was dropped.
  std::function<void(bool durable)> settle;
};

/// A write to hand to the store now.
struct outgoing_write {
  std::uint64_t id = 0;
  store_write write;
};

class write_log {
 public:
  /// `sync`: whether writes are synced before the store answers; `retry`: how long a parked log
  /// waits before it sends its failed writes again.
  write_log(bool sync, duration retry) : sync_(sync), retry_(retry) {}

  /// Adds a write; it is sent unless the log is parked or held (then it waits, and a write that
  /// admits is dropped at once).
  void add(write_request w);
  /// A write already durable (a topic's, written by someone else): it settles in order.
  void add_durable(std::function<void()> settle, timestamp now);
  /// A place for a write whose operations are not known yet (a redrive reads its dead letters
  /// first): nothing after it settles until it is filled. Returns its id for `fill`.
  std::uint64_t reserve();
  /// Fills a reserved place with `w` (then sent in its turn), or with nothing (it settles).
  void fill(std::uint64_t id, std::optional<write_request> w, timestamp now);

  /// Holds every new write until `release` (a topic's write is pending: the store must see this
  /// shard's writes in the order of their seqs and counters).
  void hold() { held_ = true; }
  void release() { held_ = false; }

  /// The store answered write `id`: durable (`failure` empty) or failed.
  void on_answer(std::uint64_t id, std::optional<error> failure, timestamp now);

  /// Sends the parked writes again once their retry time has come.
  void on_tick(timestamp now);
  /// When `on_tick` must run next (a parked log's retry).
  std::optional<timestamp> next_wakeup() const { return retry_at_; }

  /// The writes to send now, oldest first; `counters` makes the counters record of a write that
  /// carries one.
  std::vector<outgoing_write> take_outgoing(const std::function<store_op()>& counters);

  /// Answers every client still waiting with `why` (the shard stops); settles nothing.
  void abandon(const error& why);

  bool parked() const { return parked_; }
  /// Writes made and not yet settled.
  std::size_t pending() const { return entries_.size(); }
  /// Writes the store has not answered yet.
  std::size_t in_flight() const { return in_flight_; }

  void check_invariants() const;

 private:
  enum class state : std::uint8_t { reserved, waiting, sent, durable, failed };
  struct entry {
    std::uint64_t id = 0;
    write_request w;  // its `ops` moved to `ops` when added
    /// The write's operations, shared with the store writes that carry them (not copied per send).
    shared_ops ops{};
    state st = state::waiting;
    bool answered = false;        // `w.answer` was called
    bool queued = false;          // in `outbox_`
    bool external = false;        // written by someone else (`add_durable`): never sent
    bool committed_once = false;  // the store committed it (a resend may fail, it stays stored)
    /// Sent as part of a replay: the id of the replay's first write, under which the store
    /// answers all of them (0: sent alone).
    std::uint64_t bundle = 0;
  };
  /// A failed write that may be dropped: it admits and the store never committed it.
  static bool droppable(const entry& e) { return e.w.admits && !e.committed_once; }

  entry* find(std::uint64_t id);
  void answer(entry& e, std::optional<error> failure);
  /// Settles the durable writes at the front, drops the failed ones that admit, and parks at a
  /// failed one that does not.
  void settle_front(timestamp now);
  void resend();
  /// The writes queued by `resend`, as one write.
  std::optional<outgoing_write> replay(const std::function<store_op()>& counters);
  /// Records the store's answer for one write.
  void record(entry& e, const std::optional<error>& failure);
  void queue(entry& e);
  /// Moves `e`'s operations to where its sends share them (`entry::ops`).
  static void keep_ops(entry& e);

  bool sync_;
  duration retry_;
  std::deque<entry> entries_;  // ids increase from the front (a resend leaves gaps)
  std::uint64_t next_id_ = 1;
  std::vector<std::uint64_t> outbox_;  // ids to send, in order
  std::size_t in_flight_ = 0;
  bool parked_ = false;
  bool held_ = false;
  /// The writes queued by the last resend go as one write (a replay, see `resend`).
  bool replay_ = false;
  std::optional<timestamp> retry_at_;
};

}  // namespace laneq
