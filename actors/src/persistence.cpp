// The RocksDB persistence actor (actors/include/laneq/actors/persistence.hpp,
// docs/design/persistence.md): group commit of store writes into synced WriteBatches, scans,
// stats, and fail-stop on storage errors with recovery by close-and-reopen. The only RocksDB code
// outside the tests.
#include "laneq/actors/persistence.hpp"

#include <algorithm>
#include <bit>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "caf/all.hpp"

#include "laneq/assert.hpp"

namespace laneq {

namespace {

/// Every RocksDB option the store relies on, each with its reason. Everything else keeps
/// RocksDB's default.
rocksdb::Options make_db_options(const persistence_options& opts) {
  rocksdb::Options o;
  // The broker creates its data directory on first start.
  o.create_if_missing = true;
  // Fail on any inconsistency RocksDB can detect (at open and in the background) instead of
  // continuing on damaged data.
  o.paranoid_checks = true;
  // The default point-in-time mode opened a WAL with a flipped byte as OK and silently dropped
  // every record after it (measured: 500 of 1,000 synced keys): only a torn tail, which an
  // unacknowledged write can leave behind, is tolerated; any other corruption fails the open.
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  // Recycled WAL files make old records look like a valid tail; keep every WAL fresh.
  o.recycle_log_file_num = 0;
  // The WAL is written on every Write (no application-driven FlushWAL), so sync=true covers it.
  o.manual_wal_flush = false;
  // fdatasync is enough on the file systems we run on (ext4, xfs); RocksDB syncs directories.
  o.use_fsync = false;
  // Never open by dropping data: a database that cannot be recovered in full must not start.
  o.best_efforts_recovery = false;
  // A clean shutdown flushes memtables, so a restart does not replay a long WAL.
  o.avoid_flush_during_shutdown = false;
  // Flush and compaction share two background threads: the broker host is small (2 cores).
  o.max_background_jobs = 2;
  // LZ4: cheap on CPU; message bodies are often text and compress well.
  o.compression = rocksdb::kLZ4Compression;
  // 64 MiB memtable: large enough that a burst of enqueues does not stall on flushes.
  o.write_buffer_size = 64u << 20;
  // Tests pass a fault-injecting file system; production uses the default environment.
  if (opts.env) o.env = opts.env.get();
  // RocksDB's own LOG file, next to the data, for diagnosing storage problems.
  o.info_log_level = rocksdb::InfoLogLevel::INFO_LEVEL;
  o.max_log_file_size = 16u << 20;  // rotate the LOG at 16 MiB
  o.keep_log_file_num = 10;         // and keep at most 10 of them (default: 1000)
  return o;
}

/// A RocksDB status as text; out of space is named as such.
std::string describe(const rocksdb::Status& s) {
  if (s.IsNoSpace()) return "out of space (" + s.ToString() + ")";
  return s.ToString();
}

/// Opens the database at `dir`; on success `db` holds it.
rocksdb::Status open_db(const rocksdb::Options& o, const std::string& dir,
                        std::unique_ptr<rocksdb::DB>& db) {
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(o, dir, &raw);
  if (s.ok()) {
    LANEQ_ASSERT(raw != nullptr, "DB::Open returned OK without a database");
    db.reset(raw);
  } else {
    LANEQ_ASSERT(raw == nullptr, "DB::Open returned an error and a database");
  }
  return s;
}

/// Closes and deletes the database; returns Close's status.
rocksdb::Status close_db(std::unique_ptr<rocksdb::DB>& db) {
  if (!db) return rocksdb::Status::OK();
  auto s = db->Close();
  db.reset();
  return s;
}

caf::error storage_failed(std::string what) {
  return to_caf(error{errc::storage_failed, std::move(what)});
}

/// Checks the options once, one message per broken rule.
std::string validate(const persistence_options& opts) {
  std::string problems;
  auto add = [&problems](const char* what) {
    if (!problems.empty()) problems += "; ";
    problems += what;
  };
  if (opts.dir.empty()) add("dir must not be empty");
  if (opts.batch_writes_max == 0) add("batch_writes_max must be at least 1");
  if (opts.batch_bytes_max == 0) add("batch_bytes_max must be at least 1");
  if (opts.batch_linger < duration::zero()) add("batch_linger must not be negative");
  if (opts.reopen_interval <= duration::zero()) add("reopen_interval must be positive");
  return problems;
}

class persistence_impl : public store_actor::base {
 public:
  persistence_impl(caf::actor_config& cfg, persistence_options opts, rocksdb::Options db_opts,
                   std::unique_ptr<rocksdb::DB> db)
      : store_actor::base(cfg),
        opts_(std::move(opts)),
        db_opts_(std::move(db_opts)),
        db_(std::move(db)) {
    LANEQ_ASSERT(db_ != nullptr, "the persistence actor starts with an open database");
    last_open_attempt_ = clock().now();
  }

  const char* name() const override { return "laneq.persistence"; }

  behavior_type make_behavior() override {
    return {
        [this](write_atom, store_write& w) -> caf::result<caf::ok_atom> {
          return on_write(std::move(w));
        },
        [this](scan_atom, const std::string& from, const std::string& to,
               std::uint32_t max) -> caf::result<std::vector<store_entry>> {
          return on_scan(from, to, max);
        },
        [this](stats_atom) -> store_stats { return stats_; },
        [this](commit_atom, std::uint64_t generation) {
          if (generation == generation_ && !members_.empty()) commit();
        },
        [this](reopen_atom) {
          reopen_armed_ = false;
          if (stats_.degraded) try_reopen();
        },
    };
  }

  void on_exit() override {
    // Answer the open batch's members before the database goes away.
    if (!members_.empty()) commit();
    auto s = close_db(db_);
    if (!s.ok() && !stats_.degraded)
      std::cerr << "laneq.persistence: closing " << opts_.dir << " failed: " << describe(s)
                << "\n";
    store_actor::base::on_exit();
  }

 private:
  using promise_type = caf::typed_response_promise<caf::ok_atom>;

  caf::result<caf::ok_atom> on_write(store_write w) {
    if (stats_.degraded) {
      // Rate-limited: a stream of writes must not turn into a stream of reopen attempts.
      if (clock().now() - last_open_attempt_ >= opts_.reopen_interval) try_reopen();
      if (stats_.degraded) return storage_failed("store degraded: " + stats_.reason);
    }
    LANEQ_ASSERT(db_ != nullptr, "a healthy store has an open database");
    // Add the write's operations under a save point, so a rejected write leaves nothing behind.
    batch_.SetSavePoint();
    std::size_t bytes = 0;
    for (auto& op : w.ops) {
      rocksdb::Status s;
      switch (op.what) {
        case store_op::kind::put: s = batch_.Put(op.key, op.value); break;
        case store_op::kind::erase: s = batch_.Delete(op.key); break;
        case store_op::kind::erase_range:
          if (op.value < op.key) {
            rollback();
            return to_caf(error{errc::invalid_argument,
                                "store erase_range: end key sorts before start key"});
          }
          if (op.key == op.value) continue;  // empty range
          s = batch_.DeleteRange(op.key, op.value);
          break;
        default:
          rollback();
          return to_caf(error{errc::invalid_argument, "store op: unknown kind"});
      }
      if (!s.ok()) {
        rollback();
        return to_caf(error{errc::invalid_argument, "store op rejected: " + describe(s)});
      }
      bytes += op.key.size() + op.value.size();
    }
    auto popped = batch_.PopSavePoint();
    LANEQ_ASSERT(popped.ok(), "the save point set above exists");
    bool first = members_.empty();
    members_.push_back(make_response_promise<caf::ok_atom>());
    auto result = members_.back();
    batch_ops_ += w.ops.size();
    batch_bytes_ += bytes;
    batch_sync_ = batch_sync_ || w.sync;
    if (members_.size() >= opts_.batch_writes_max || batch_bytes_ >= opts_.batch_bytes_max) {
      commit();  // a bound is reached: close now; this generation's commit_atom becomes stale
    } else if (first) {
      // Every write already in the mailbox joins before the commit message is processed.
      auto me = caf::actor_cast<store_actor>(this);
      if (opts_.batch_linger > duration::zero())
        delayed_send(me, opts_.batch_linger, commit_atom_v, generation_);
      else
        send(me, commit_atom_v, generation_);
    }
    return result;
  }

  void rollback() {
    auto s = batch_.RollbackToSavePoint();
    LANEQ_ASSERT(s.ok(), "the save point set in on_write exists");
  }

  /// Writes the open batch as one WriteBatch and answers every member.
  void commit() {
    LANEQ_ASSERT(!members_.empty(), "commit of an empty batch");
    auto members = std::move(members_);
    members_.clear();
    auto ops = batch_ops_;
    auto bytes = batch_bytes_;
    rocksdb::WriteOptions wo;
    wo.sync = batch_sync_;
    rocksdb::Status s;
    if (db_ && !stats_.degraded) {
      s = db_->Write(wo, &batch_);
    } else {
      s = rocksdb::Status::Aborted("store degraded: " + stats_.reason);
    }
    batch_.Clear();
    batch_ops_ = 0;
    batch_bytes_ = 0;
    batch_sync_ = false;
    ++generation_;  // a commit_atom still in flight for the closed batch is now stale
    if (!s.ok()) {
      if (!stats_.degraded) {
        stats_.degraded = true;
        stats_.reason = "write batch failed: " + describe(s);
        last_open_attempt_ = clock().now();
      }
      ++stats_.failed_batches;
      for (auto& p : members) p.deliver(storage_failed(stats_.reason));
      arm_reopen();
      return;
    }
    ++stats_.batches;
    stats_.writes += members.size();
    stats_.ops += ops;
    stats_.bytes += bytes;
    if (wo.sync) ++stats_.syncs;
    auto bucket = static_cast<std::size_t>(std::bit_width(members.size()) - 1);
    if (stats_.batch_histogram.size() <= bucket) stats_.batch_histogram.resize(bucket + 1, 0);
    ++stats_.batch_histogram[bucket];
    for (auto& p : members) p.deliver(caf::ok_atom_v);
  }

  caf::result<std::vector<store_entry>> on_scan(const std::string& from, const std::string& to,
                                                std::uint32_t max) {
    if (!db_) return storage_failed("store degraded: " + stats_.reason);
    std::vector<store_entry> out;
    auto n = std::min(max, limits::store_scan_max);
    if (n == 0 || !(from < to)) return out;
    rocksdb::Slice upper{to};
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;  // a flipped bit in an SST block is an error, not data
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator(ro)};
    for (it->Seek(from); it->Valid() && out.size() < n; it->Next())
      out.push_back(store_entry{it->key().ToString(), it->value().ToString()});
    auto s = it->status();
    if (s.IsCorruption())
      return to_caf(error{errc::corrupt_record, "store scan: " + describe(s)});
    if (!s.ok()) return storage_failed("store scan: " + describe(s));
    return out;
  }

  /// Closes the database (if open) and opens it again with the same options.
  void try_reopen() {
    LANEQ_ASSERT(stats_.degraded, "reopen of a healthy store");
    last_open_attempt_ = clock().now();
    // The close status of a database that already failed adds nothing to the reason.
    auto closed = close_db(db_);
    (void)closed;
    auto s = open_db(db_opts_, opts_.dir, db_);
    if (s.ok()) {
      stats_.degraded = false;
      stats_.reason.clear();
      ++stats_.reopens;
      return;
    }
    stats_.reason = "reopen failed: " + describe(s);
    arm_reopen();
  }

  void arm_reopen() {
    if (reopen_armed_) return;
    reopen_armed_ = true;
    delayed_send(caf::actor_cast<store_actor>(this), opts_.reopen_interval, reopen_atom_v);
  }

  persistence_options opts_;
  rocksdb::Options db_opts_;
  std::unique_ptr<rocksdb::DB> db_;  ///< null only while degraded after a failed reopen
  store_stats stats_;
  // The open batch.
  rocksdb::WriteBatch batch_;
  std::vector<promise_type> members_;
  std::size_t batch_ops_ = 0;
  std::size_t batch_bytes_ = 0;
  bool batch_sync_ = false;
  std::uint64_t generation_ = 0;  ///< of the open batch; commit_atoms of older ones are stale
  // Recovery.
  bool reopen_armed_ = false;
  caf::actor_clock::time_point last_open_attempt_;
};

}  // namespace

result<store_actor> spawn_persistence(caf::actor_system& sys, persistence_options opts) {
  if (auto problems = validate(opts); !problems.empty())
    return error{errc::invalid_argument, "persistence options: " + problems};
  auto db_opts = make_db_options(opts);
  std::unique_ptr<rocksdb::DB> db;
  auto s = open_db(db_opts, opts.dir, db);
  if (s.IsCorruption())
    return error{errc::corrupt_record, "refusing to start: the store in " + opts.dir +
                                           " is corrupt: " + describe(s)};
  if (!s.ok())
    return error{errc::storage_failed, "cannot open the store in " + opts.dir + ": " + describe(s)};
  return sys.spawn<persistence_impl, caf::detached>(std::move(opts), std::move(db_opts),
                                                    std::move(db));
}

}  // namespace laneq
