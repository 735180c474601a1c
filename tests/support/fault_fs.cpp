// The fault-injecting RocksDB FileSystem of the crash tests (tests/support/fault_fs.hpp).
#include "fault_fs.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

namespace laneq::test {

namespace {

using rocksdb::IOStatus;

/// A writable file whose bytes go straight to the real file and whose syncs are recorded.
class fault_file : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  fault_file(std::unique_ptr<rocksdb::FSWritableFile> target, fault_fs* fs,
             std::shared_ptr<fault_fs::file_state> st)
      : rocksdb::FSWritableFileOwnerWrapper(std::move(target)), fs_(fs), st_(std::move(st)) {}

  IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                  rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    auto s = target()->Append(data, o, dbg);
    if (s.ok()) grow_by(data.size());
    return s;
  }
  IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                  const rocksdb::DataVerificationInfo& info,
                  rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    auto s = target()->Append(data, o, info, dbg);
    if (s.ok()) grow_by(data.size());
    return s;
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, std::uint64_t offset,
                            const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    auto s = target()->PositionedAppend(data, offset, o, dbg);
    if (s.ok()) grow_to(offset + data.size());
    return s;
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, std::uint64_t offset,
                            const rocksdb::IOOptions& o, const rocksdb::DataVerificationInfo& info,
                            rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    auto s = target()->PositionedAppend(data, offset, o, info, dbg);
    if (s.ok()) grow_to(offset + data.size());
    return s;
  }
  IOStatus Truncate(std::uint64_t size, const rocksdb::IOOptions& o,
                    rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    auto s = target()->Truncate(size, o, dbg);
    if (s.ok()) {
      fs_->with_state(*st_, [size](fault_fs::file_state& st) {
        st.size = size;
        st.synced = std::min(st.synced, size);
      });
    }
    return s;
  }
  IOStatus Flush(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    return target()->Flush(o, dbg);  // to the OS, not to the disk: nothing becomes durable
  }
  IOStatus RangeSync(std::uint64_t offset, std::uint64_t n, const rocksdb::IOOptions& o,
                     rocksdb::IODebugContext* dbg) override {
    if (auto s = fs_->check_write(); !s.ok()) return s;
    return target()->RangeSync(offset, n, o, dbg);  // starts write-back; durability not promised
  }
  IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    return sync([&] { return target()->Sync(o, dbg); });
  }
  IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    return sync([&] { return target()->Fsync(o, dbg); });
  }
  // Close is forwarded as is: it releases the descriptor and makes nothing durable.

 private:
  template <class F>
  IOStatus sync(F real_sync) {
    if (auto s = fs_->check_sync(); !s.ok()) return s;
    auto pos = fs_->with_state(*st_, [](fault_fs::file_state& st) { return st.size; });
    auto s = real_sync();
    if (!s.ok()) return s;
    return fs_->finish_sync(*st_, pos);
  }
  void grow_by(std::uint64_t n) {
    fs_->with_state(*st_, [n](fault_fs::file_state& st) { st.size += n; });
  }
  void grow_to(std::uint64_t end) {
    fs_->with_state(*st_, [end](fault_fs::file_state& st) { st.size = std::max(st.size, end); });
  }

  fault_fs* fs_;
  std::shared_ptr<fault_fs::file_state> st_;
};

}  // namespace

fault_fs::fault_fs(std::shared_ptr<rocksdb::FileSystem> base) : rocksdb::FileSystemWrapper(base) {}

void fault_fs::inject(fault_kind kind, fault_scope scope) {
  std::lock_guard<std::mutex> guard{mu_};
  fault_ = kind;
  scope_ = scope;
}

std::uint64_t fault_fs::injected_failures() const {
  std::lock_guard<std::mutex> guard{mu_};
  return injected_;
}

void fault_fs::lose_power() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    lost_ = true;
  }
  released_.notify_all();
}

void fault_fs::hold_syncs() {
  std::lock_guard<std::mutex> guard{mu_};
  syncs_held_ = true;
}

void fault_fs::release_syncs() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    syncs_held_ = false;
  }
  released_.notify_all();
}

std::uint64_t fault_fs::syncs_waiting() const {
  std::lock_guard<std::mutex> guard{mu_};
  return syncs_waiting_;
}

std::uint64_t fault_fs::drop_unsynced() {
  std::map<std::string, std::shared_ptr<file_state>> files;
  {
    std::lock_guard<std::mutex> guard{mu_};
    files.swap(files_);
  }
  std::uint64_t dropped = 0;
  rocksdb::IOOptions io;
  for (auto& [path, st] : files) {
    std::uint64_t size = 0;
    if (!target()->GetFileSize(path, io, &size, nullptr).ok()) continue;  // deleted meanwhile
    if (!st->ever_synced) {
      dropped += size;
      auto s = target()->DeleteFile(path, io, nullptr);
      if (!s.ok())
        throw std::runtime_error("fault_fs: cannot delete " + path + ": " + s.ToString());
    } else if (size > st->synced) {
      dropped += size - st->synced;
      // RocksDB's POSIX file system does not implement Truncate: cut the real file directly.
      // (Its in-memory one, under the simulation's store, does.)
      auto cut = target()->Truncate(path, st->synced, io, nullptr);
      if (cut.IsNotSupported()) {
        std::error_code ec;
        std::filesystem::resize_file(path, st->synced, ec);
        cut = ec ? IOStatus::IOError(ec.message()) : IOStatus::OK();
      }
      if (!cut.ok())
        throw std::runtime_error("fault_fs: cannot truncate " + path + ": " + cut.ToString());
    }
  }
  std::lock_guard<std::mutex> guard{mu_};
  lost_ = false;
  syncs_held_ = false;
  return dropped;
}

std::uint64_t fault_fs::synced_size(const std::string& path) const {
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (auto it = files_.find(path); it != files_.end()) return it->second->synced;
  }
  std::uint64_t size = 0;
  rocksdb::IOOptions io;
  if (!target()->GetFileSize(path, io, &size, nullptr).ok()) return 0;
  return size;
}

std::uint64_t fault_fs::syncs() const {
  std::lock_guard<std::mutex> guard{mu_};
  return syncs_;
}

IOStatus fault_fs::fault_status_locked() {
  switch (fault_) {
    case fault_kind::none: return IOStatus::OK();
    case fault_kind::no_space: ++injected_; return IOStatus::NoSpace("injected by fault_fs");
    case fault_kind::io_error: ++injected_; return IOStatus::IOError("injected by fault_fs");
  }
  return IOStatus::OK();
}

IOStatus fault_fs::check_write() {
  std::lock_guard<std::mutex> guard{mu_};
  if (lost_) return IOStatus::IOError("fault_fs: power lost");
  if (scope_ == fault_scope::sync_only) return IOStatus::OK();
  return fault_status_locked();
}

IOStatus fault_fs::check_sync() {
  std::unique_lock<std::mutex> lock{mu_};
  if (syncs_held_ && !lost_) {
    ++syncs_waiting_;
    released_.wait(lock, [this] { return !syncs_held_ || lost_; });
    --syncs_waiting_;
  }
  if (lost_) return IOStatus::IOError("fault_fs: power lost");
  return fault_status_locked();
}

IOStatus fault_fs::finish_sync(file_state& st, std::uint64_t pos) {
  std::lock_guard<std::mutex> guard{mu_};
  if (lost_) return IOStatus::IOError("fault_fs: power lost during sync");
  st.synced = std::max(st.synced, pos);
  st.ever_synced = true;
  ++syncs_;
  return IOStatus::OK();
}

IOStatus fault_fs::NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                   std::unique_ptr<rocksdb::FSWritableFile>* r,
                                   rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  auto s = target()->NewWritableFile(f, o, r, dbg);
  if (!s.ok()) return s;
  auto st = std::make_shared<file_state>();  // new (or truncated): nothing synced yet
  {
    std::lock_guard<std::mutex> guard{mu_};
    files_[f] = st;
  }
  *r = std::make_unique<fault_file>(std::move(*r), this, std::move(st));
  return IOStatus::OK();
}

IOStatus fault_fs::ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  auto s = target()->ReopenWritableFile(f, o, r, dbg);
  if (!s.ok()) return s;
  std::uint64_t size = 0;
  rocksdb::IOOptions io;
  if (auto gs = target()->GetFileSize(f, io, &size, dbg); !gs.ok()) return gs;
  auto st = std::make_shared<file_state>();
  st->size = size;
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (auto it = files_.find(f); it != files_.end()) {
      // A tracked file keeps its synced length.
      st->synced = std::min(it->second->synced, size);
      st->ever_synced = it->second->ever_synced;
    } else {
      // A file from before the wrapper (or the last reboot) counts as synced in full.
      st->synced = size;
      st->ever_synced = true;
    }
    files_[f] = st;
  }
  *r = std::make_unique<fault_file>(std::move(*r), this, std::move(st));
  return IOStatus::OK();
}

IOStatus fault_fs::ReuseWritableFile(const std::string&, const std::string&,
                                     const rocksdb::FileOptions&,
                                     std::unique_ptr<rocksdb::FSWritableFile>*,
                                     rocksdb::IODebugContext*) {
  return IOStatus::NotSupported("fault_fs: WAL recycling is not modeled");
}

IOStatus fault_fs::NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& o,
                                   std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                   rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  return target()->NewRandomRWFile(f, o, r, dbg);  // not tracked (see the header)
}

IOStatus fault_fs::RenameFile(const std::string& src, const std::string& dst,
                              const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (lost_) return IOStatus::IOError("fault_fs: power lost");
  }
  auto s = target()->RenameFile(src, dst, o, dbg);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> guard{mu_};
  files_.erase(dst);  // replaced
  if (auto it = files_.find(src); it != files_.end()) {
    auto st = std::move(it->second);
    files_.erase(it);
    files_[dst] = std::move(st);  // the renamed file keeps its synced state
  }
  return s;
}

IOStatus fault_fs::LinkFile(const std::string& src, const std::string& dst,
                            const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  return target()->LinkFile(src, dst, o, dbg);  // the link is not tracked (unused by our options)
}

IOStatus fault_fs::DeleteFile(const std::string& f, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (lost_) return IOStatus::IOError("fault_fs: power lost");
  }
  auto s = target()->DeleteFile(f, o, dbg);
  if (s.ok()) {
    std::lock_guard<std::mutex> guard{mu_};
    files_.erase(f);
  }
  return s;
}

IOStatus fault_fs::Truncate(const std::string& f, size_t size, const rocksdb::IOOptions& o,
                            rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  auto s = target()->Truncate(f, size, o, dbg);
  if (s.ok()) {
    std::lock_guard<std::mutex> guard{mu_};
    if (auto it = files_.find(f); it != files_.end()) {
      it->second->size = size;
      it->second->synced = std::min<std::uint64_t>(it->second->synced, size);
    }
  }
  return s;
}

IOStatus fault_fs::CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  return target()->CreateDir(d, o, dbg);
}

IOStatus fault_fs::CreateDirIfMissing(const std::string& d, const rocksdb::IOOptions& o,
                                      rocksdb::IODebugContext* dbg) {
  if (auto s = check_write(); !s.ok()) return s;
  return target()->CreateDirIfMissing(d, o, dbg);
}

IOStatus fault_fs::DeleteDir(const std::string& d, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (lost_) return IOStatus::IOError("fault_fs: power lost");
  }
  return target()->DeleteDir(d, o, dbg);
}

std::shared_ptr<rocksdb::Env> make_env(const std::shared_ptr<fault_fs>& fs) {
  return std::shared_ptr<rocksdb::Env>(rocksdb::NewCompositeEnv(fs));
}

}  // namespace laneq::test
