// Test support shared by the tests that run programs (tests/cli, tests/server, tests/crash/kill9):
// waiting for a child, and a child process whose output is read through a pipe. Linux/POSIX only
// (posix_spawn, pipes, poll).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
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
  /// Not empty: the child's stderr goes to this file (created or truncated) instead, so what it
  /// wrote (a sanitizer's report, say) can be read after it died.
  std::string stderr_path{};
  /// true: the child gets SIGKILL when the thread that started it ends (Linux
  /// PR_SET_PDEATHSIG), so a child that does not watch its stdin cannot outlive a crashed test
  /// either. Started with fork and exec instead of posix_spawn.
  bool die_with_parent = false;
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
    int out[2] = {-1, -1};
    int err = -1;
    auto fail = [&](std::string why) {
      for (int fd : {in[0], in[1], out[0], out[1], err}) close_fd(fd);
      return why;
    };
    if (opt.stdin_pipe && ::pipe2(in, O_CLOEXEC) != 0)
      return fail(std::string{"pipe2: "} + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) return fail(std::string{"pipe2: "} + std::strerror(errno));
    if (!opt.stderr_path.empty()) {
      err = ::open(opt.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (err < 0) return fail("open " + opt.stderr_path + ": " + std::strerror(errno));
    } else if (opt.capture_stderr) {
      err = ::fcntl(out[1], F_DUPFD_CLOEXEC, 0);
    }
    std::vector<std::string> all = argv;
    std::vector<char*> cargv;
    for (auto& a : all) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = -1;
    auto spawned = opt.die_with_parent ? fork_exec(cargv, in[0], out[1], err, pid)
                                       : spawn(cargv, in[0], out[1], err, pid);
    close_fd(in[0]);
    close_fd(out[1]);
    close_fd(err);
    stdin_fd_ = in[1];
    out_fd_ = out[0];
    if (!spawned.empty()) {
      close_pipes();
      return spawned;
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
  /// The child's process id (-1 when nothing runs), to send it a signal that does not stop it.
  pid_t pid() const { return pid_; }

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

  /// posix_spawn with the child's stdin, stdout and stderr from these descriptors (-1: keep
  /// ours). dup2 clears O_CLOEXEC on the child's copies.
  static std::string spawn(std::vector<char*>& argv, int in, int out, int err, pid_t& pid) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (in >= 0) posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
    if (err >= 0) posix_spawn_file_actions_adddup2(&fa, err, STDERR_FILENO);
    int rc = ::posix_spawn(&pid, argv.front(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return std::string{"posix_spawn "} + argv.front() + ": " + std::strerror(rc);
    return {};
  }

  /// fork and exec, the child asking for SIGKILL when its parent thread ends. Between fork and
  /// exec the child makes system calls only (async-signal-safe); an exec failure comes back
  /// through a close-on-exec pipe.
  static std::string fork_exec(std::vector<char*>& argv, int in, int out, int err, pid_t& pid) {
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return std::string{"pipe2: "} + std::strerror(errno);
    pid_t parent = ::getpid();
    pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before the prctl
      if ((in >= 0 && ::dup2(in, STDIN_FILENO) < 0) || ::dup2(out, STDOUT_FILENO) < 0 ||
          (err >= 0 && ::dup2(err, STDERR_FILENO) < 0))
        ::_exit(127);
      ::execve(argv.front(), argv.data(), environ);
      int e = errno;
      static_cast<void>(::write(report[1], &e, sizeof e));
      ::_exit(127);
    }
    int e = pid < 0 ? errno : 0;
    ::close(report[1]);
    if (pid > 0) {
      ssize_t got = 0;
      while ((got = ::read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {
      }
      if (got != static_cast<ssize_t>(sizeof e)) e = 0;  // exec succeeded: the pipe closed
      if (e != 0) wait_exit(pid);
    }
    ::close(report[0]);
    if (e != 0)
      return std::string{pid < 0 ? "fork " : "exec "} + argv.front() + ": " + std::strerror(e);
    return {};
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
