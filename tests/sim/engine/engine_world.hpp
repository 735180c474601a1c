// The engine simulation's world (docs/guarantees.md, "The engine simulation"): the shard engines
// of an episode's queues (one engine per queue, libqueue/include/laneq/shard_engine.hpp), driven
// without CAF over one memory store that outlives every broker run, on one simulated timeline.
// The store holds the engines' writes and commits them in order at later steps (one write at a
// time: applied and answered, or failed and not applied), answers reads at later steps (a window
// fetch may fail), and the clients read their replies at later steps, so requests overlap. A
// crash drops every write not yet committed (never applied, never answered), every read and
// every reply not yet read, and starts a new engine per queue (epoch + 1) that recovers from the
// store, as laneqd does at start.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../support/engine_driver.hpp"
#include "../checks.hpp"
#include "laneq/shard_engine.hpp"

namespace laneq::sim {

using test::memory_map;

/// A reply the engine gave and the client has not read yet.
struct pending_reply {
  engine_reply reply;
  timestamp at;  ///< when the engine gave it
};

/// What the world did, for the coverage of an episode.
struct world_counts {
  std::uint64_t writes_committed = 0;
  std::uint64_t writes_failed = 0;  ///< answered with an injected store failure
  std::uint64_t reads_failed = 0;   ///< window fetches answered with an injected failure
  std::uint64_t crashes = 0;
  std::uint64_t crashes_losing_writes = 0;
  std::uint64_t writes_lost = 0;
  std::uint64_t replies_lost = 0;
  /// Long polls that waited and were served when an enqueue's (or a redrive's) write committed.
  std::uint64_t polls_served_by_enqueue = 0;
};

class engine_world {
 public:
  /// Reports what the world itself finds broken (a recovery that failed, a corrupt record); it
  /// must throw.
  using fail_fn = std::function<void(check, const std::string&)>;
  /// Hears that queue `q`'s engine finished its recovery at `t` (its reclaim grace starts).
  using recovered_fn = std::function<void(std::size_t q, timestamp t)>;

  /// One queue per config, each on its own uid in one store; each engine starts by recovering.
  engine_world(std::vector<shard_config> queues, timestamp start, fail_fn fail,
               recovered_fn recovered);
  ~engine_world();

  std::size_t queues() const { return engines_.size(); }
  shard_engine& engine(std::size_t q) { return *engines_[q].engine; }
  const shard_config& config(std::size_t q) const { return engines_[q].cfg; }
  timestamp now() const { return now_; }
  const memory_map& store() const { return store_; }
  const world_counts& counts() const { return counts_; }

  /// Runs a client request on queue `q`'s engine (`call` gets the engine and now) and files its
  /// effects.
  template <class F>
  void request(std::size_t q, F call) {
    call(*engines_[q].engine, now_);
    collect(q);
  }

  /// Moves time on; every engine acts on it.
  void advance(duration d);
  /// The earliest wake-up any engine asked for.
  std::optional<timestamp> next_wake() const;

  // -- the store ------------------------------------------------------------------------------

  std::size_t writes_held() const { return writes_.size(); }
  std::size_t reads_held() const { return reads_.size(); }
  /// The oldest held write: applied and answered, or, while the store is degraded, answered
  /// with a store failure and not applied. False when none is held.
  bool commit_next();
  /// The store fails a write and goes degraded, as the persistence actor does (fail-stop,
  /// actors/src/persistence.cpp, which handles its mailbox at once): it fails every write it
  /// holds now and every write that reaches it until it reopens, `reopen` later. So no write is
  /// committed after an earlier one failed until the engine sends them again, in order: the
  /// write log's replay (write_log.hpp) then never goes over later commits (docs/guarantees.md,
  /// "The engine simulation", says what a store that did would break).
  void fail_store(duration reopen);
  bool degraded() const;
  /// The oldest held read, answered from the store as it is now; a window fetch fails when
  /// `fail` (a recovery read never does: the shard would stop). False when none is held.
  bool answer_next_read(bool fail);
  /// Commits every held write and answers every held read until the engines ask for nothing.
  void settle();

  // -- replies --------------------------------------------------------------------------------

  std::deque<pending_reply>& inbox(std::size_t q) { return engines_[q].inbox; }
  bool recovering(std::size_t q) const { return engines_[q].recovering; }

  // -- crashes --------------------------------------------------------------------------------

  /// Every engine stops at once; what was not committed is lost; each queue's new engine (its
  /// epoch one higher) recovers from the store. Returns how many writes the crash lost.
  std::size_t crash();
  /// Queue `q`'s counters over every engine run so far (each run starts at 0).
  shard_counters counters(std::size_t q) const;

  void check_invariants() const;

 private:
  struct slot {
    shard_config cfg;
    std::unique_ptr<shard_engine> engine;
    std::deque<pending_reply> inbox;
    std::optional<timestamp> wake;
    bool recovering = false;
    request_id recover_request = 0;
  };
  struct held_write {
    std::size_t q = 0;
    engine_write w;
    bool doomed = false;  ///< it reached the store while degraded: it fails at once
  };
  struct held_read {
    std::size_t q = 0;
    engine_read r;
    bool recovery = false;
  };

  void collect(std::size_t q);
  /// Fails the writes that reached the store while it was degraded, now.
  void fail_doomed();
  void start_engine(std::size_t q);

  fail_fn fail_;
  recovered_fn recovered_;
  timestamp now_;
  memory_map store_;
  std::vector<slot> engines_;
  std::deque<held_write> writes_;  ///< in the order the engines made them
  std::deque<held_read> reads_;
  world_counts counts_;
  std::optional<timestamp> degraded_until_;
  bool failing_ = false;
  std::vector<shard_counters> ended_;  ///< per queue: the engine runs that ended, added up
  request_id next_recover_ = request_id{1} << 62;
};

/// Adds `b`'s counters to `a`'s.
void add_counters(shard_counters& a, const shard_counters& b);

}  // namespace laneq::sim
