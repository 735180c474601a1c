// A fault-injecting RocksDB FileSystem for the crash tests (RELIABILITY.md T4, T5, T9): it
// simulates a power loss by dropping every byte that was not synced, and makes writes fail with
// out-of-space or I/O errors on demand.
//
// Model. Writes go through to the real file at once (so RocksDB, and a reopen in the same
// process, read what they wrote, as with a page cache); the wrapper remembers, per file, how many
// bytes a successful Sync/Fsync covered. Flush, RangeSync and Close do not make data durable.
// `lose_power()` is the moment the power goes: from then on every mutating call fails, so the
// database still running (and its shutdown) changes nothing on disk. After the database is gone,
// `drop_unsynced()` is the reboot: every tracked file is cut back to its last synced length, and
// files created through the wrapper but never synced are deleted.
//
// Limits of the model (what a real power loss can do that this does not):
// - Directory entries are durable at once: a create, rename or delete is never undone, even
//   without a directory fsync. (RocksDB fsyncs the directory after creating files and renaming
//   CURRENT, so this mostly matters for bugs in RocksDB itself.)
// - Data is lost only at the unsynced end of a file: no reordered, partial or torn sector writes
//   inside the synced region, and the unsynced tail is lost in full, never in part. Torn tails
//   are tested separately by truncating files by hand (tests/crash).
// - Only files written through NewWritableFile/ReopenWritableFile are tracked; random-access
//   read-write files (unused by our options) are not, and ReuseWritableFile (WAL recycling,
//   disabled by our options) is refused.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

namespace laneq::test {

/// Which error the injected fault returns.
enum class fault_kind : std::uint8_t {
  none,      ///< no fault: calls go through
  no_space,  ///< IOStatus::NoSpace(): the disk is full
  io_error,  ///< IOStatus::IOError(): the device failed
};

/// Which calls an injected fault hits.
enum class fault_scope : std::uint8_t {
  all_writes,  ///< file creation, Append, PositionedAppend, Truncate, Flush, Sync, Fsync
  sync_only,   ///< only Sync and Fsync: the bytes reach the file but never become durable
};

/// The file system wrapper. Thread-safe: RocksDB calls it from its writer and background threads
/// while a test thread flips faults.
class fault_fs : public rocksdb::FileSystemWrapper {
 public:
  explicit fault_fs(std::shared_ptr<rocksdb::FileSystem> base = rocksdb::FileSystem::Default());

  static const char* kClassName() { return "laneq_fault_fs"; }
  const char* Name() const override { return kClassName(); }

  // -- faults ----------------------------------------------------------------------------------

  /// Makes the calls in `scope` fail with `kind` until `clear_fault()`.
  void inject(fault_kind kind, fault_scope scope = fault_scope::all_writes);
  /// Lets writes succeed again.
  void clear_fault() { inject(fault_kind::none); }
  /// How many calls failed because of an injected fault.
  std::uint64_t injected_failures() const;

  // -- power loss ------------------------------------------------------------------------------

  /// The power goes out: every later mutating call (writes, syncs, creates, renames, deletes)
  /// fails with an I/O error and changes nothing.
  void lose_power();
  /// The reboot. Preconditions: `lose_power()` was called and no database uses this file system
  /// any more. Cuts every tracked file back to its synced length and deletes files that were
  /// never synced; afterwards the power is back and nothing is tracked (all files count as
  /// synced). Returns the number of bytes dropped.
  std::uint64_t drop_unsynced();
  /// Bytes of `path` a successful sync covered (0 when never synced; the file size for files
  /// the wrapper does not track).
  std::uint64_t synced_size(const std::string& path) const;
  /// Successful Sync/Fsync calls so far.
  std::uint64_t syncs() const;

  // -- holding syncs ---------------------------------------------------------------------------

  /// From now on every Sync/Fsync waits (the bytes are written, not yet durable) until
  /// `release_syncs()` or `lose_power()`; so a test can act while a write waits for its sync.
  void hold_syncs();
  /// Lets the held syncs go on (they fail if the power went out meanwhile).
  void release_syncs();
  /// How many syncs wait now because of `hold_syncs()`.
  std::uint64_t syncs_waiting() const;

  // -- FileSystem overrides --------------------------------------------------------------------

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& dst,
                               const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& dst,
                             const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& f, const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& f, size_t size, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d, const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;

  // -- used by the wrapped files ---------------------------------------------------------------

  /// What the wrapper knows about one written file.
  struct file_state {
    std::uint64_t size = 0;    ///< bytes written (write-through: the real file's size)
    std::uint64_t synced = 0;  ///< bytes covered by the last successful sync
    bool ever_synced = false;  ///< false: the file disappears at the reboot
  };

  /// OK, or the status a write-type call must fail with now (power lost, or injected fault).
  rocksdb::IOStatus check_write();
  /// The same for Sync/Fsync.
  rocksdb::IOStatus check_sync();
  /// Called under no lock after the real sync: records `pos` as synced unless the power went out
  /// meanwhile (then the sync is reported as failed).
  rocksdb::IOStatus finish_sync(file_state& st, std::uint64_t pos);
  /// Runs `f(state)` under the wrapper's lock.
  template <class F>
  auto with_state(file_state& st, F f) {
    std::lock_guard<std::mutex> guard{mu_};
    return f(st);
  }

 private:
  rocksdb::IOStatus fault_status_locked();  // requires mu_

  mutable std::mutex mu_;
  std::condition_variable released_;  ///< syncs no longer held, or the power went out
  bool syncs_held_ = false;
  std::uint64_t syncs_waiting_ = 0;
  std::map<std::string, std::shared_ptr<file_state>> files_;  ///< by path, renames followed
  bool lost_ = false;
  fault_kind fault_ = fault_kind::none;
  fault_scope scope_ = fault_scope::all_writes;
  std::uint64_t injected_ = 0;
  std::uint64_t syncs_ = 0;
};

/// A RocksDB environment whose file I/O goes through `fs` (for persistence_options::env). The
/// environment keeps `fs` alive.
std::shared_ptr<rocksdb::Env> make_env(const std::shared_ptr<fault_fs>& fs);

}  // namespace laneq::test
