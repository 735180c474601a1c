// The RocksDB persistence actor: the only code that talks to RocksDB (docs/design/persistence.md).
// It implements the store interface (protocol.hpp) on its own thread: every write joins the open
// batch, a batch closes on a count, byte or time bound and is written as one WriteBatch (synced
// when any member asked for sync), and each writer is answered only after its batch is durable.
// A failed batch answers every member with storage_failed; the store then reports degraded and
// recovers by closing and reopening the database.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "laneq/actors/protocol.hpp"
#include "laneq/limits.hpp"

namespace rocksdb {
class Env;
class Logger;
}  // namespace rocksdb

namespace laneq {

/// The most a store keeps free by default (persistence_options::reserve_bytes).
inline constexpr std::uint64_t store_reserve_bytes_max = 64u << 20;

/// persistence_options::max_open_files unless told: RocksDB's own default (-1) keeps every
/// table file open, so a growing store takes ever more descriptors.
inline constexpr int store_open_files_default = 1024;

/// The size of the file system holding the data directory (persistence_options::measure_disk).
struct disk_space {
  std::uint64_t free = 0;      ///< bytes an unprivileged writer may still use
  std::uint64_t capacity = 0;  ///< bytes in all
};

struct persistence_options {
  std::string dir;  ///< database directory, created if missing
  std::size_t batch_writes_max = limits::store_batch_writes_max;
  std::size_t batch_bytes_max = limits::store_batch_bytes_max;
  /// How long an open batch waits for more writers before it is written (0: it closes as soon
  /// as the writes already in the mailbox have joined).
  duration batch_linger = limits::store_batch_linger_default;
  duration reopen_interval = limits::store_reopen_interval;
  /// Enqueues are refused while the data directory's file system has less free space than this,
  /// so acks, deliveries and a restart keep room to write; 0: a twentieth of the file system,
  /// at most store_reserve_bytes_max.
  std::uint64_t reserve_bytes = 0;
  /// Table files RocksDB keeps open at most (its max_open_files; at least 20). A table that does
  /// not fit is opened for each read and closed again. laneqd derives it from its descriptor
  /// limit (apps/server/include/laneq/server/descriptors.hpp).
  int max_open_files = store_open_files_default;
  /// RocksDB environment (tests: a fault-injecting file system); null for the default.
  std::shared_ptr<rocksdb::Env> env;
  /// RocksDB's information log; null: LOG in `dir` (persistence_log.hpp). (The simulation's
  /// in-memory file system has no real directory to write it to.)
  std::shared_ptr<rocksdb::Logger> info_log;
  /// Measures the file system holding `dir` (nullopt: unknown, the last figures stay); null:
  /// statvfs(2) of `dir`. (The simulation's in-memory file system has no disk to measure.)
  std::function<std::optional<disk_space>(const std::string& dir)> measure_disk;
  /// true: the actor runs on a thread of its own (RocksDB's calls block). false: on the actor
  /// system's scheduler, like every other actor; on CAF's test coordinator it is then run by
  /// the test, in the simulated job order (the simulation, tests/support/sim_store.hpp).
  bool own_thread = true;
};

/// Opens (or creates) the database in the calling thread, then spawns the persistence actor (on
/// its own thread unless `opts.own_thread` is false). An exit with `caf::exit_reason::kill` is
/// a crash: the open batch is dropped unanswered and nothing is flushed (a clean stop commits
/// it and flushes the memtables). Fails with storage_failed when the directory cannot be opened and
/// with corrupt_record when RocksDB finds corruption: the broker must refuse to start then.
result<store_actor> spawn_persistence(caf::actor_system& sys, persistence_options opts);

}  // namespace laneq
