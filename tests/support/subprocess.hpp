// Test support shared by the tests that run programs (tests/cli, tests/server, tests/crash/kill9):
// waiting for a child, and a child process whose output is read through a pipe. Linux/POSIX only
// (posix_spawn, pipes, poll).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace laneq::test {

/// Waits for `pid`; the exit code, or 128 + the signal that ended it.
inline int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

/// How `child_process::start` connects the child.
struct child_options {
  bool capture_stderr = true;  ///< false: the child writes to this process's stderr
  /// true: the child's stdin is a pipe held open here, so a child that exits on EOF does not
  /// outlive a crashed test run; false: it inherits this process's stdin.
  bool stdin_pipe = false;
};

/// A child process whose stdout (and stderr, unless it is inherited) is read through a pipe.
/// The destructor kills a child still running with SIGKILL.
class child_process {
 public:
  child_process() = default;
  ~child_process() { kill9(); }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Starts `argv` (argv[0] is the binary's path); returns "" or what went wrong.
  std::string start(const std::vector<std::string>& argv, child_options opt = {}) {
    kill9();
    text_.clear();
    scanned_ = 0;
    eof_ = false;
    int in[2] = {-1, -1};
    int out[2];
    if (opt.stdin_pipe && ::pipe2(in, O_CLOEXEC) != 0)
      return std::string{"pipe2: "} + std::strerror(errno);
    if (::pipe2(out, O_CLOEXEC) != 0) {
      auto why = std::string{"pipe2: "} + std::strerror(errno);
      close_fd(in[0]);
      close_fd(in[1]);
      return why;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // dup2 clears O_CLOEXEC on the child's copies.
    if (opt.stdin_pipe) posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    if (opt.capture_stderr) posix_spawn_file_actions_adddup2(&fa, out[1], STDERR_FILENO);
    std::vector<std::string> all = argv;
    std::vector<char*> cargv;
    for (auto& a : all) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, all.front().c_str(), &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close_fd(in[0]);
    close_fd(out[1]);
    stdin_fd_ = in[1];
    out_fd_ = out[0];
    if (rc != 0) {
      close_pipes();
      return "posix_spawn " + all.front() + ": " + std::strerror(rc);
    }
    pid_ = pid;
    return {};
  }

  /// Reads output until a line starting with `prefix` arrives; returns that line (without its
  /// newline), or nothing at the timeout or the end of the output (see `eof`).
  std::optional<std::string> wait_line(const std::string& prefix,
                                       std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (auto nl = text_.find('\n', scanned_); nl != std::string::npos;
           nl = text_.find('\n', scanned_)) {
        auto line = text_.substr(scanned_, nl - scanned_);
        scanned_ = nl + 1;
        if (line.rfind(prefix, 0) == 0) return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(left)) return std::nullopt;
    }
  }

  /// Everything read so far (for failure messages), after draining to EOF when `drain`.
  const std::string& output(bool drain = false) {
    using namespace std::chrono_literals;
    while (drain && read_some(5000ms)) {
    }
    return text_;
  }

  /// Whether the output has ended (the child closed it, usually by exiting).
  bool eof() const { return eof_; }
  bool running() const { return pid_ > 0; }

  /// Sends `sig` and waits for the exit; returns the exit code (or 128 + signal; -1 when nothing
  /// runs).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    return wait();
  }

  /// Waits for the exit; returns the exit code (or 128 + signal; -1 when nothing runs).
  int wait() {
    if (pid_ <= 0) return -1;
    int rc = wait_exit(pid_);
    pid_ = -1;
    return rc;
  }

  /// SIGKILL, reaps the child and closes the pipes. No-op when nothing runs.
  void kill9() {
    if (pid_ > 0) stop(SIGKILL);
    close_pipes();
  }

 private:
  static void close_fd(int fd) {
    if (fd >= 0) ::close(fd);
  }
  void close_pipes() {
    close_fd(stdin_fd_);
    close_fd(out_fd_);
    stdin_fd_ = out_fd_ = -1;
  }

  /// Appends what arrives within `timeout`; false at the timeout or the end of the output.
  bool read_some(std::chrono::milliseconds timeout) {
    if (out_fd_ < 0 || eof_) return false;
    auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{out_fd_, POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      char buf[4096];
      auto got = ::read(out_fd_, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        eof_ = true;
        return false;
      }
      text_.append(buf, static_cast<std::size_t>(got));
      return true;
    }
  }

  pid_t pid_ = -1;
  int stdin_fd_ = -1;  ///< write end of the child's stdin (with `stdin_pipe`)
  int out_fd_ = -1;    ///< read end of the child's stdout (and stderr)
  std::string text_;
  std::size_t scanned_ = 0;
  bool eof_ = false;
};

}  // namespace laneq::test
