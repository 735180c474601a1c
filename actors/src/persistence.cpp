// The RocksDB persistence actor (actors/include/laneq/actors/persistence.hpp,
// docs/design/persistence.md): group commit of store writes into synced WriteBatches, scans,
// stats, and fail-stop on storage errors with recovery by close-and-reopen. The only RocksDB code
// outside the tests.
#include "laneq/actors/persistence.hpp"
#include "laneq/actors/actor_base.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/statvfs.h>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "caf/all.hpp"

#include "laneq/actors/persistence_log.hpp"
#include "laneq/actors/persistence_marker.hpp"
#include "laneq/actors/persistence_memtable.hpp"
#include "laneq/assert.hpp"
#include "laneq/codec.hpp"

namespace laneq {

namespace {

/// Every RocksDB option the store relies on, each with its reason. Everything else keeps
/// RocksDB's default.
rocksdb::Options make_db_options(const persistence_options& opts) {
  rocksdb::Options o;
  // The broker creates its data directory on first start, and never a new database in a
  // directory that holds files (open_db decides, store_marker::inspect_dir).
  o.create_if_missing = false;
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
  // The MANIFEST records every closed WAL and its size; an open with one of them missing or
  // short fails. (RocksDB does not track the live WAL: LANEQ-COMMITTED covers it.)
  o.track_and_verify_wals_in_manifest = true;
  // A clean shutdown flushes memtables (persistence_impl::on_exit), so a restart does not replay
  // a long WAL.
  o.avoid_flush_during_shutdown = false;
  // An open keeps what it replays from the WAL in the memtable instead of writing it to a new
  // table first: laneqd starts on a full disk (an open then needs only a new WAL and MANIFEST,
  // measured on a 20 MiB tmpfs), and serves what it holds while the disk stays full.
  o.avoid_flush_during_recovery = true;
  // A bounded table cache: with RocksDB's default (-1) every table file stays open, and the
  // descriptors a store takes grow with it until they collide with the HTTP connections'.
  o.max_open_files = opts.max_open_files;
  // Flush and compaction share two background threads: the broker host is small (2 cores).
  o.max_background_jobs = 2;
  // LZ4: cheap on CPU; message bodies are often text and compress well.
  o.compression = rocksdb::kLZ4Compression;
  // 64 MiB memtable: large enough that a burst of enqueues does not stall on flushes.
  o.write_buffer_size = 64u << 20;
  // The memtable keeps each lane's entries apart (persistence_memtable.hpp, ADR 0008): a message
  // is put at its lane's end and erased near its start, and with 1,000 groups interleaved
  // RocksDB's skip list searched the whole memtable for every put and erase, most of the store
  // thread's CPU (measured, docs/decisions/0010-performance-history.md). Partitions are message
  // keys' tag, uid and lane; a shorter key is a partition of its own. It orders message keys as
  // numbers, which is RocksDB's order only with the bytewise comparator: keep the default one.
  o.memtable_factory = make_lane_memtable_factory(codec::message_key_lane_prefix_bytes);
  // The memtable takes inserts from one thread at a time (the store writes from one thread).
  o.allow_concurrent_memtable_write = false;
  // Tests pass a fault-injecting file system; production uses the default environment.
  if (opts.env) o.env = opts.env.get();
  // RocksDB's LOG file, next to the data, for diagnosing storage problems, written by our own
  // logger: RocksDB's stopped the process on a full disk (persistence_log.hpp). LOG is moved to
  // LOG.old at 16 MiB.
  o.info_log_level = rocksdb::InfoLogLevel::INFO_LEVEL;
  o.info_log = opts.info_log ? opts.info_log
                             : make_store_logger(opts.dir + "/LOG", 16u << 20, o.info_log_level);
  return o;
}

/// A RocksDB status as text; out of space is named as such.
std::string describe(const rocksdb::Status& s) {
  if (s.IsNoSpace()) return "out of space (" + s.ToString() + ")";
  return s.ToString();
}

/// Creates the missing parent directories of the absolute path `dir`, as `mkdir -p` would. A
/// component that exists but is not a directory is the caller's mistake (invalid_argument); any
/// other failure is checkpoint_failed. Each error names the component.
std::optional<error> create_parents(rocksdb::Env& env, const std::string& dir) {
  for (auto slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    auto parent = dir.substr(0, slash);
    if (parent.back() == '/') continue;  // "//" in the path
    bool is_dir = false;
    if (env.IsDirectory(parent, &is_dir).ok()) {
      if (!is_dir) return error{errc::invalid_argument, "'" + parent + "' is not a directory"};
      continue;
    }
    if (auto s = env.CreateDirIfMissing(parent); !s.ok())
      return error{errc::checkpoint_failed, "cannot create '" + parent + "': " + describe(s)};
  }
  return std::nullopt;
}

// -- WAL tail check ------------------------------------------------------------------------------
//
// kTolerateCorruptedTailRecords treats a record whose length field points past the end of the
// file as a torn tail, but only in the WAL's last (partial) 32 KiB block; elsewhere it reports
// corruption. So one flipped length byte in that last block made RocksDB open "OK" and silently
// drop every later record, acknowledged ones included (measured: 25 of 50 synced keys). A real
// torn tail has nothing intact after the damaged record, and the damaged record's checksum
// matches no prefix of what is left of it. Before every open we read the last block of each WAL
// and refuse when a damaged record is followed by an intact one, or when its body is complete
// (only its length field is damaged: a flip in the very last record's length, otherwise
// indistinguishable from a torn tail). Format (RocksDB db/log_format.h, stable since LevelDB): 32
// KiB blocks of physical records; header = masked CRC32C (4 bytes LE), length (2 bytes LE), type (1
// byte), plus the log number (4 bytes) for the recyclable types 5-8; the CRC covers type, log
// number and payload.
namespace wal {

constexpr std::size_t block_size = 32768;
constexpr std::size_t header_size = 7;
constexpr std::uint32_t crc_mask_delta = 0xa282ead8u;

std::uint32_t get_u32(std::string_view d, std::size_t pos) {
  std::uint32_t x = 0;
  for (std::size_t i = 0; i < 4; ++i)
    x |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(d[pos + i])) << (8 * i);
  return x;
}

/// The size of the intact physical record at `pos` (header included), or 0 if there is none.
/// `d` starts at a block boundary.
std::size_t intact_record_at(std::string_view d, std::size_t pos) {
  if (d.size() - pos < header_size) return 0;
  auto type = static_cast<std::uint8_t>(d[pos + 6]);
  std::size_t hsize = type >= 5 && type <= 8 ? header_size + 4 : header_size;
  if (type == 0 || type > 10) return 0;  // zero (padding) or unknown
  std::size_t len = static_cast<std::uint8_t>(d[pos + 4]) |
                    (static_cast<std::size_t>(static_cast<std::uint8_t>(d[pos + 5])) << 8);
  auto end = pos + hsize + len;
  if (end > d.size() || (pos / block_size) != ((end - 1) / block_size)) return 0;
  auto rot = get_u32(d, pos) - crc_mask_delta;
  auto expected = (rot >> 17) | (rot << 15);
  if (codec::crc32c(d.substr(pos + 6, hsize - 6 + len)) != expected) return 0;
  return hsize + len;
}

/// For a damaged record at `pos`: the payload length whose CRC matches the stored checksum, if
/// any. A torn record never matches (its checksum covers bytes that never reached the disk); a
/// complete record whose length field was damaged does.
std::optional<std::size_t> complete_body_length(std::string_view d, std::size_t pos) {
  if (d.size() - pos < header_size) return std::nullopt;
  auto type = static_cast<std::uint8_t>(d[pos + 6]);
  std::size_t hsize = type >= 5 && type <= 8 ? header_size + 4 : header_size;
  if (d.size() - pos < hsize) return std::nullopt;
  auto rot = get_u32(d, pos) - crc_mask_delta;
  auto expected = (rot >> 17) | (rot << 15);
  auto crc = codec::crc32c(d.substr(pos + 6, hsize - 6));
  auto block_end = std::min(d.size(), (pos / block_size + 1) * block_size);
  for (auto i = pos + hsize;; ++i) {
    if (crc == expected) return i - pos - hsize;
    if (i >= block_end) return std::nullopt;
    crc = codec::crc32c(d.substr(i, 1), crc);
  }
}

/// Corruption if the last block of this WAL holds a damaged record that is not a torn tail: an
/// intact record follows it, or its own body is complete.
rocksdb::Status check_last_block(std::string_view d, const std::string& name,
                                 std::uint64_t block_offset) {
  std::size_t pos = 0;
  while (pos < d.size()) {
    if (block_size - pos % block_size < header_size) break;  // trailer: the block ends
    if (auto n = intact_record_at(d, pos)) {
      pos += n;
      continue;
    }
    if (d.size() - pos >= header_size && d[pos + 6] == 0 && d[pos + 4] == 0 && d[pos + 5] == 0)
      break;  // zero padding: RocksDB skips the rest of the block
    if (auto len = complete_body_length(d, pos))
      return rocksdb::Status::Corruption(
          "WAL " + name + ": the record at offset " + std::to_string(block_offset + pos) +
          " is complete (its checksum matches " + std::to_string(*len) +
          " payload bytes) but its length field is damaged (not a torn tail)");
    for (auto q = pos + 1; q + header_size <= d.size(); ++q) {
      if (intact_record_at(d, q))
        return rocksdb::Status::Corruption("WAL " + name + ": the record at offset " +
                                           std::to_string(block_offset + pos) +
                                           " is damaged but an intact record follows at offset " +
                                           std::to_string(block_offset + q) + " (not a torn tail)");
    }
    break;  // nothing intact follows: a torn tail, which RocksDB tolerates
  }
  return rocksdb::Status::OK();
}

/// The offset in a full (not the last) block `d` of its first damaged record, if any.
std::optional<std::size_t> first_damaged_in_block(std::string_view d) {
  std::size_t pos = 0;
  while (block_size - pos >= header_size) {
    if (auto n = intact_record_at(d, pos)) {
      pos += n;
      continue;
    }
    if (d[pos + 6] == 0 && d[pos + 4] == 0 && d[pos + 5] == 0) break;  // zero padding
    return pos;
  }
  return std::nullopt;
}

/// The WAL files (*.log) in `dir` with their sizes, oldest first; a missing directory has none.
rocksdb::Status wal_files(rocksdb::Env* env, const std::string& dir,
                          std::vector<std::pair<std::string, std::uint64_t>>& out) {
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return rocksdb::Status::OK();  // Open reports it
  for (auto& name : names) {
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".log") != 0) continue;
    std::uint64_t size = 0;
    if (auto s = env->GetFileSize(dir + "/" + name, &size); !s.ok()) return s;
    if (size > 0) out.emplace_back(name, size);
  }
  std::sort(out.begin(), out.end());  // RocksDB numbers them with leading zeros
  return rocksdb::Status::OK();
}

/// Reads `n` bytes at `offset` of `file` into `scratch`; `got` views them.
rocksdb::Status read_at(rocksdb::FSRandomAccessFile& file, std::uint64_t offset, std::size_t n,
                        std::string& scratch, std::string_view& got) {
  scratch.resize(n);
  rocksdb::Slice s;
  auto st = file.Read(offset, n, rocksdb::IOOptions{}, &s, scratch.data(), nullptr);
  got = std::string_view{s.data(), s.size()};
  return st;
}

rocksdb::Status open_wal(rocksdb::Env* env, const std::string& path,
                         std::unique_ptr<rocksdb::FSRandomAccessFile>& file) {
  return env->GetFileSystem()->NewRandomAccessFile(path, rocksdb::FileOptions{}, &file, nullptr);
}

/// Runs check_last_block on every WAL file (*.log) in `dir`. A missing directory is fine.
rocksdb::Status check_tails(rocksdb::Env* env, const std::string& dir) {
  std::vector<std::pair<std::string, std::uint64_t>> wals;
  if (auto s = wal_files(env, dir, wals); !s.ok()) return s;
  for (auto& [name, size] : wals) {
    auto start = (size - 1) / block_size * block_size;
    std::unique_ptr<rocksdb::FSRandomAccessFile> file;
    if (auto s = open_wal(env, dir + "/" + name, file); !s.ok()) return s;
    std::string scratch;
    std::string_view got;
    if (auto s = read_at(*file, start, size - start, scratch, got); !s.ok()) return s;
    auto checked = check_last_block(got, name, start);
    if (!checked.ok()) return checked;
  }
  return rocksdb::Status::OK();
}

/// Where RocksDB's bare "checksum mismatch" is, when a WAL holds it: "WAL <file>: the record at
/// offset N fails its checksum" for the first damaged record before a WAL's last block (the last
/// block is check_tails'), or empty.
std::string locate_damage(rocksdb::Env* env, const std::string& dir) {
  std::vector<std::pair<std::string, std::uint64_t>> wals;
  if (!wal_files(env, dir, wals).ok()) return {};
  for (auto& [name, size] : wals) {
    std::unique_ptr<rocksdb::FSRandomAccessFile> file;
    if (!open_wal(env, dir + "/" + name, file).ok()) continue;
    std::string scratch;
    std::string_view got;
    for (std::uint64_t at = 0; at + block_size < size; at += block_size) {
      if (!read_at(*file, at, block_size, scratch, got).ok() || got.size() < block_size) break;
      if (auto pos = first_damaged_in_block(got))
        return "WAL " + name + ": the record at offset " + std::to_string(at + *pos) +
               " fails its checksum";
    }
  }
  return {};
}

}  // namespace wal

/// Closes and deletes the database; returns Close's status.
rocksdb::Status close_db(std::unique_ptr<rocksdb::DB>& db) {
  if (!db) return rocksdb::Status::OK();
  auto s = db->Close();
  db.reset();
  return s;
}

/// The sequence a read-only open of `dir` reaches (it replays the WAL but writes and deletes
/// nothing: a read-write open deletes table files its MANIFEST does not name before we could
/// refuse).
rocksdb::Status read_only_sequence(const rocksdb::Options& o, const std::string& dir,
                                   std::uint64_t& seq) {
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::OpenForReadOnly(o, dir, &raw);
  std::unique_ptr<rocksdb::DB> db{raw};
  if (!s.ok()) return s;
  seq = db->GetLatestSequenceNumber();
  return db->Close();
}

/// Opens the database at `dir` after checking its WAL tails; on success `db` holds it. A missing
/// or empty directory gets a new database; one that holds files must be a complete store: it
/// needs CURRENT, and it must reach the sequence its LANEQ-COMMITTED marker records (checked by a
/// read-only open first, so a refused store is left as it was found).
rocksdb::Status open_db(rocksdb::Options o, const std::string& dir,
                        std::unique_ptr<rocksdb::DB>& db) {
  auto env = o.env ? o.env : rocksdb::Env::Default();
  store_marker::dir_state state{};
  if (auto s = store_marker::inspect_dir(*env, dir, state); !s.ok()) return s;
  std::optional<std::uint64_t> marked;
  if (auto s = store_marker::read(*env, dir, marked); !s.ok()) return s;
  if (auto s = wal::check_tails(env, dir); !s.ok()) return s;
  if (marked) {
    std::uint64_t seq = 0;
    if (auto s = read_only_sequence(o, dir, seq); !s.ok()) return s;
    if (auto s = store_marker::check_complete(dir, seq, *marked); !s.ok()) return s;
  }
  o.create_if_missing = state == store_marker::dir_state::empty;
  if (o.create_if_missing) {  // before RocksDB's first LOG line
    if (auto s = env->CreateDirIfMissing(dir); !s.ok()) return s;
  }
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(o, dir, &raw);
  if (!s.ok()) {
    LANEQ_ASSERT(raw == nullptr, "DB::Open returned an error and a database");
    return s;
  }
  LANEQ_ASSERT(raw != nullptr, "DB::Open returned OK without a database");
  db.reset(raw);
  // A new store, or one from before the marker: mark it now, so a later loss is seen.
  if (!marked) s = store_marker::write(*env, dir, db->GetLatestSequenceNumber());
  if (!s.ok()) (void)close_db(db);
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
  if (opts.max_open_files != -1 && opts.max_open_files < 20)
    add("max_open_files must be -1 (no bound) or at least 20");
  return problems;
}

class persistence_impl : public actor_base<store_actor> {
 public:
  persistence_impl(caf::actor_config& cfg, persistence_options opts, rocksdb::Options db_opts,
                   std::unique_ptr<rocksdb::DB> db)
      : actor_base<store_actor>(cfg),
        opts_(std::move(opts)),
        db_opts_(std::move(db_opts)),
        db_(std::move(db)) {
    LANEQ_ASSERT(db_ != nullptr, "the persistence actor starts with an open database");
    last_open_attempt_ = clock().now();
    measure_space(last_open_attempt_);  // the first enqueue must not find the figures empty
  }

  const char* name() const override { return "laneq.persistence"; }

  behavior_type make_behavior() override {
    return {
        [this](write_atom, store_write& w) -> caf::result<caf::ok_atom> {
          return on_write(std::move(w));
        },
        [this](scan_atom, const std::string& from, const std::string& to, std::uint32_t max)
            -> caf::result<std::vector<store_entry>> { return on_scan(from, to, max); },
        [this](stats_atom) -> store_stats {
          measure_space(clock().now());
          measure_db();
          return stats_;
        },
        [this](checkpoint_atom, const std::string& dir) -> caf::result<checkpoint_info> {
          return on_checkpoint(dir);
        },
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
    if (fail_state() == caf::exit_reason::kill) {
      // A crash (the simulation's, tests/support/sim_store.hpp): the database is closed as it
      // stands; the open batch is never written and its members never answered.
      members_.clear();
      (void)close_db(db_);
      store_actor::base::on_exit();
      return;
    }
    // Answer the open batch's members before the database goes away.
    if (!members_.empty()) commit();
    // A clean stop flushes the memtables (RocksDB flushes at Close only without a WAL), so a
    // restart does not replay a long WAL, and marks everything as committed.
    if (db_ && !stats_.degraded) {
      auto flushed = db_->Flush(rocksdb::FlushOptions{});
      if (flushed.ok())
        mark_committed(true);
      else
        std::cerr << "laneq.persistence: flushing " << opts_.dir
                  << " at shutdown failed: " << describe(flushed) << "\n";
    }
    auto s = close_db(db_);
    if (!s.ok() && !stats_.degraded)
      std::cerr << "laneq.persistence: closing " << opts_.dir << " failed: " << describe(s) << "\n";
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
    if (w.admits) {
      if (auto refused = check_space(w)) return *refused;
    }
    // Add the write's operations under a save point, so a rejected write leaves nothing behind.
    batch_.SetSavePoint();
    std::size_t bytes = 0;
    std::optional<error> rejected;
    each_op(w, [&](const store_op& op) {
      rejected = add_to_batch(op);
      bytes += op.key.size() + op.value.size();
      return !rejected;
    });
    if (rejected) {
      rollback();
      return to_caf(*rejected);
    }
    auto popped = batch_.PopSavePoint();
    LANEQ_ASSERT(popped.ok(), "the save point set above exists");
    bool first = members_.empty();
    members_.push_back(make_response_promise<caf::ok_atom>());
    auto result = members_.back();
    batch_ops_ += op_count(w);
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

  /// Refuses an enqueue that would take the disk below its reserve (storage_failed, naming the
  /// free and reserved bytes). Free space is measured at most every space_check_interval; the
  /// bytes admitted since are counted against it.
  std::optional<caf::error> check_space(const store_write& w) {
    std::uint64_t bytes = 0;
    each_op(w, [&bytes](const store_op& op) {
      bytes += op.key.size() + op.value.size();
      return true;
    });
    auto now = clock().now();
    if (now - last_space_check_ >= space_check_interval) measure_space(now);
    if (stats_.free_bytes >= stats_.reserve_bytes + admitted_since_check_ + bytes) {
      admitted_since_check_ += bytes;
      refused_bytes_ = 0;
      update_low_space();
      return std::nullopt;
    }
    ++stats_.refused_low_space;
    refused_bytes_ = bytes;
    stats_.low_space = true;
    auto kib = [](std::uint64_t b) { return std::to_string(b >> 10) + " KiB"; };
    auto free_now = stats_.free_bytes - std::min(stats_.free_bytes, admitted_since_check_);
    return storage_failed("the disk holding " + opts_.dir + " has about " + kib(free_now) +
                          " free, and this enqueue of " + kib(bytes) +
                          " would leave less than its reserve of " + kib(stats_.reserve_bytes) +
                          ": new messages are refused until space returns (deliveries and acks "
                          "go on)");
  }

  void measure_space(caf::actor_clock::time_point now) {
    last_space_check_ = now;
    admitted_since_check_ = 0;
    auto disk = opts_.measure_disk ? opts_.measure_disk(opts_.dir) : statvfs_of(opts_.dir);
    if (!disk) return;  // keep the last figures
    stats_.free_bytes = disk->free;
    stats_.reserve_bytes = opts_.reserve_bytes != 0
                               ? opts_.reserve_bytes
                               : std::min(store_reserve_bytes_max, disk->capacity / 20);
    update_low_space();
  }

  /// RocksDB's live data, compaction debt and write stalls (the metrics page asks for them; a
  /// figure RocksDB cannot give keeps its last value).
  void measure_db() {
    if (!db_) return;
    auto prop = [this](const std::string& name, std::uint64_t& into) {
      std::uint64_t v = 0;
      if (db_->GetIntProperty(name, &v)) into = v;
    };
    prop(rocksdb::DB::Properties::kEstimateLiveDataSize, stats_.live_data_bytes);
    prop(rocksdb::DB::Properties::kEstimatePendingCompactionBytes, stats_.pending_compaction_bytes);
    prop(rocksdb::DB::Properties::kActualDelayedWriteRate, stats_.delayed_write_rate);
    std::uint64_t stopped = 0;
    prop(rocksdb::DB::Properties::kIsWriteStopped, stopped);
    stats_.write_stopped = stopped != 0;
    std::map<std::string, std::string> cf;
    if (!db_->GetMapProperty(rocksdb::DB::Properties::kCFStats, &cf)) return;
    auto count = [&cf](const char* key, std::uint64_t& into) {
      auto it = cf.find(key);
      if (it == cf.end()) return;
      // RocksDB prints the counts as integers or as doubles ("3" or "3.000000").
      char* end = nullptr;
      auto v = std::strtod(it->second.c_str(), &end);
      if (end != it->second.c_str() && v >= 0) into = static_cast<std::uint64_t>(v);
    };
    count("io_stalls.total_stop", stats_.write_stops);
    count("io_stalls.total_slowdown", stats_.write_slowdowns);
  }

  /// Low on space (health says degraded): below the reserve, or the last enqueue refused for
  /// space would still not fit. Cleared by the measurement that finds room, or an admitted write.
  void update_low_space() {
    stats_.low_space =
        stats_.reserve_bytes > 0 &&
        stats_.free_bytes < stats_.reserve_bytes + admitted_since_check_ + refused_bytes_;
  }

  static std::optional<disk_space> statvfs_of(const std::string& dir) {
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
    return disk_space{static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize,
                      static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize};
  }

  /// Adds one operation to the open batch, or says why it cannot be added.
  std::optional<error> add_to_batch(const store_op& op) {
    rocksdb::Status s;
    switch (op.what) {
      case store_op::kind::put: s = batch_.Put(op.key, op.value); break;
      case store_op::kind::erase: s = batch_.Delete(op.key); break;
      case store_op::kind::erase_range:
        if (op.value < op.key)
          return error{errc::invalid_argument, "store erase_range: end key sorts before start key"};
        if (op.key == op.value) return std::nullopt;  // empty range
        s = batch_.DeleteRange(op.key, op.value);
        break;
      default: return error{errc::invalid_argument, "store op: unknown kind"};
    }
    if (!s.ok()) return error{errc::invalid_argument, "store op rejected: " + describe(s)};
    return std::nullopt;
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
#if LANEQ_CANARY_EARLY_ANSWER
    // Canary (CMakeLists.txt, broker_power_loss_canary_early_answer_must_be_caught): the batch
    // is answered first and synced after, which the broker power-loss test must catch.
    const bool sync_after_answer = wo.sync;
    wo.sync = false;
#endif
    rocksdb::Status s;
    auto started = std::chrono::steady_clock::now();
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
    stats_.count_batch(members.size());
    stats_.count_commit(
        std::chrono::duration_cast<duration>(std::chrono::steady_clock::now() - started));
    if (wo.sync) mark_committed(false);
    for (auto& p : members) p.deliver(caf::ok_atom_v);
#if LANEQ_CANARY_EARLY_ANSWER
    if (sync_after_answer) (void)db_->SyncWAL();
#endif
  }

  /// Records the store's sequence in LANEQ-COMMITTED after a synced commit, at most once per
  /// marker interval (or now, when `force`). A failure is reported, not fatal: the marker only
  /// detects lost files later, and the next interval tries again.
  void mark_committed(bool force) {
    auto now = clock().now();
    if (!force && now - last_mark_ < store_marker::interval) return;
    last_mark_ = now;
    auto env = db_opts_.env ? db_opts_.env : rocksdb::Env::Default();
    if (auto s = store_marker::write(*env, opts_.dir, db_->GetLatestSequenceNumber()); !s.ok())
      std::cerr << "laneq.persistence: cannot update " << store_marker::file_name << " in "
                << opts_.dir << ": " << describe(s) << "\n";
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
    if (s.IsCorruption()) return to_caf(error{errc::corrupt_record, "store scan: " + describe(s)});
    if (!s.ok()) return storage_failed("store scan: " + describe(s));
    return out;
  }

  /// A RocksDB checkpoint of the live database in `dir` (hard links to the immutable files when
  /// `dir` is on the data directory's file system, copies otherwise; the WAL is copied). The open
  /// batch is committed first, so every write answered before this request is in it. Missing
  /// parents of `dir` are created.
  caf::result<checkpoint_info> on_checkpoint(const std::string& dir) {
    auto started = std::chrono::steady_clock::now();
    auto named = [&dir](std::string what) { return "checkpoint '" + dir + "': " + what; };
    if (dir.empty() || dir.front() != '/')
      return to_caf(error{errc::invalid_argument, named("the directory must be an absolute path")});
    auto env = db_opts_.env ? db_opts_.env : rocksdb::Env::Default();
    if (auto s = env->FileExists(dir); s.ok())
      return to_caf(error{errc::already_exists, named("exists already (a checkpoint goes into a "
                                                      "new directory)")});
    else if (!s.IsNotFound())
      return to_caf(error{errc::checkpoint_failed, named("cannot check the path: " + describe(s))});
    // RocksDB stages the checkpoint in `dir`.tmp and empties that directory first: never point it
    // at something that is already there.
    if (env->FileExists(dir + ".tmp").ok())
      return to_caf(error{errc::already_exists,
                          named("its staging directory " + dir + ".tmp exists already")});
    if (!members_.empty()) commit();
    if (stats_.degraded || !db_) return storage_failed(named("store degraded: " + stats_.reason));
    if (auto e = create_parents(*env, dir)) return to_caf(error{e->code, named(e->message)});
    rocksdb::Checkpoint* raw = nullptr;
    auto s = rocksdb::Checkpoint::Create(db_.get(), &raw);
    std::unique_ptr<rocksdb::Checkpoint> cp{raw};
    // log_size_for_flush 0: the memtables are always flushed first, so the checkpoint needs no
    // long WAL replay when laneqd starts on it.
    if (s.ok()) s = cp->CreateCheckpoint(dir, 0);
    if (!s.ok()) {
      // RocksDB removes its staging directory itself when it fails.
      if (s.IsInvalidArgument() && env->FileExists(dir).ok())
        return to_caf(error{errc::already_exists, named("exists already: " + describe(s))});
      return to_caf(error{errc::checkpoint_failed, named(describe(s))});
    }
    checkpoint_info out;
    out.dir = dir;
    std::vector<std::string> names;
    if (auto listed = env->GetChildren(dir, &names); !listed.ok())
      return to_caf(error{errc::checkpoint_failed,
                          named("written, but cannot be listed: " + describe(listed))});
    for (const auto& name : names) {
      std::uint64_t size = 0;
      if (name == "." || name == "..") continue;
      if (env->GetFileSize(dir + "/" + name, &size).ok()) {
        ++out.files;
        out.bytes += size;
      }
    }
    out.elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - started)
                         .count();
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
  caf::actor_clock::time_point last_mark_;  ///< of LANEQ-COMMITTED
  // Free space (check_space).
  static constexpr auto space_check_interval = std::chrono::milliseconds(100);
  caf::actor_clock::time_point last_space_check_;
  std::uint64_t admitted_since_check_ = 0;
  std::uint64_t refused_bytes_ = 0;  ///< of the last enqueue refused for space, until one fits
};

}  // namespace

result<store_actor> spawn_persistence(caf::actor_system& sys, persistence_options opts) {
  if (auto problems = validate(opts); !problems.empty())
    return error{errc::invalid_argument, "persistence options: " + problems};
  auto db_opts = make_db_options(opts);
  std::unique_ptr<rocksdb::DB> db;
  auto s = open_db(db_opts, opts.dir, db);
  if (s.IsCorruption()) {
    auto where = wal::locate_damage(db_opts.env ? db_opts.env : rocksdb::Env::Default(), opts.dir);
    return error{errc::corrupt_record, "refusing to start: the store in " + opts.dir +
                                           " is corrupt: " + describe(s) +
                                           (where.empty() ? "" : " (" + where + ")")};
  }
  if (!s.ok())
    return error{errc::storage_failed, "cannot open the store in " + opts.dir + ": " + describe(s)};
  if (!opts.own_thread)
    return sys.spawn<persistence_impl>(std::move(opts), std::move(db_opts), std::move(db));
  return sys.spawn<persistence_impl, caf::detached>(std::move(opts), std::move(db_opts),
                                                    std::move(db));
}

}  // namespace laneq
