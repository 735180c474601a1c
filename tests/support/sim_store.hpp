// The simulation's store (harness_store::rocksdb_mem): the real persistence actor, on RocksDB over
// an in-memory file system, wrapped in the fault-injecting file system (fault_fs.hpp) so that a
// restart of the harness is a power loss. A restart then goes through everything laneqd does at
// start: the same spawn_persistence (directory and marker checks, the WAL tail check, RocksDB's
// WAL replay) and the broker's recovery scan, over keys and values in the real codec.
//
// Determinism: the actor runs on the scheduler (persistence_options::own_thread false), so on
// CAF's test coordinator it runs only when the test runs it, in the simulated job order, and its
// timers (batch linger, reopen) are simulated ones. The free space it checks before an enqueue
// is a fixed figure (the in-memory file system has no disk). RocksDB's own background threads
// (flush, compaction, its periodic statistics) never decide what a read returns or whether a
// write succeeds: the memtable (64 MiB) never fills in an episode, so they find no work.
//
// The crash rule: a crash keeps exactly the bytes the store had synced when it came. Every write
// the store answered asked for a sync (every queue's writes do unless `sync_writes` is off;
// the simulation's queues keep it on), so every answered write survives; the open batch, and a
// write the crash lands on, are lost, as on a real power loss.
#pragma once

#include <memory>

#include "caf/all.hpp"

#include "fault_fs.hpp"
#include "laneq/actors/persistence.hpp"

namespace laneq::test {

class sim_store {
 public:
  sim_store();
  ~sim_store();
  sim_store(const sim_store&) = delete;
  sim_store& operator=(const sim_store&) = delete;

  /// Opens the store as laneqd does (spawn_persistence), its actor on `sys`'s scheduler. `opts`
  /// gives the group-commit bounds; its directory, environment and disk are the simulation's.
  result<store_actor> open(caf::actor_system& sys, persistence_options opts);

  /// The crash, before the broker's actors stop: from now on no write reaches the "disk".
  /// Stop the store's actor with `caf::exit_reason::kill` next (it then closes the database
  /// without committing or flushing anything).
  void lose_power() { fs_->lose_power(); }

  /// The reboot, once the store's actor is gone: every byte that was not synced is dropped.
  void reboot() { (void)fs_->drop_unsynced(); }

 private:
  std::unique_ptr<rocksdb::Env> mem_;  ///< RocksDB's in-memory environment (its file system)
  std::shared_ptr<fault_fs> fs_;       ///< over mem_'s file system
  std::shared_ptr<rocksdb::Env> env_;  ///< the environment the store is opened with
};

}  // namespace laneq::test
