// RocksDB's information log written with write(2), so a full disk cannot crash laneqd through
// RocksDB's logger (actors/include/laneq/actors/persistence_log.hpp).
#include "laneq/actors/persistence_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <mutex>

namespace laneq {

namespace {

class store_logger final : public rocksdb::Logger {
 public:
  store_logger(std::string path, std::size_t max_bytes, rocksdb::InfoLogLevel level)
      : rocksdb::Logger(level), path_(std::move(path)), max_bytes_(max_bytes) {
    open_file();
  }

  ~store_logger() override {
    if (fd_ >= 0) ::close(fd_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[4096];
    auto n = format_line(line, sizeof line, format, ap);
    std::lock_guard lock{mutex_};
    if (fd_ < 0 || size_ >= max_bytes_) rotate();
    if (fd_ >= 0 && write_all(line, n)) {
      size_ += n;
      reported_ = false;
      return;
    }
    if (!reported_) {
      reported_ = true;
      std::cerr << "laneq.persistence: cannot write RocksDB's log " << path_ << " ("
                << std::strerror(errno) << "); its lines are dropped until it can\n";
    }
  }

  std::size_t GetLogFileSize() const override {
    std::lock_guard lock{mutex_};
    return size_;
  }

 protected:
  rocksdb::Status CloseImpl() override {
    std::lock_guard lock{mutex_};
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return rocksdb::Status::OK();
  }

 private:
  /// "2026/12/03-09:30:01.123456 <thread> message\n", cut to fit `cap`; returns its length.
  static std::size_t format_line(char* out, std::size_t cap, const char* format, va_list ap) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    ::localtime_r(&ts.tv_sec, &t);
    auto n = static_cast<std::size_t>(std::snprintf(
        out, cap, "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
        t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(ts.tv_nsec / 1000)));
    va_list copy;
    va_copy(copy, ap);
    auto body = std::vsnprintf(out + n, cap - n, format, copy);
    va_end(copy);
    if (body > 0) n = std::min(cap - 2, n + static_cast<std::size_t>(body));
    if (out[n - 1] != '\n') out[n++] = '\n';
    return n;
  }

  bool write_all(const char* p, std::size_t n) {
    while (n > 0) {
      auto w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }

  void open_file() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    struct stat st {};
    size_ = fd_ >= 0 && ::fstat(fd_, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  }

  /// Starts a new file once the current one is full (or reopens one that could not be opened).
  void rotate() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::rename(path_.c_str(), (path_ + ".old").c_str());
    }
    open_file();
  }

  const std::string path_;
  const std::size_t max_bytes_;
  // Not shared between actors: RocksDB logs from its own flush, compaction and writer threads.
  mutable std::mutex mutex_;
  int fd_ = -1;
  std::size_t size_ = 0;
  bool reported_ = false;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> make_store_logger(std::string path, std::size_t max_bytes,
                                                   rocksdb::InfoLogLevel level) {
  return std::make_shared<store_logger>(std::move(path), max_bytes, level);
}

}  // namespace laneq
