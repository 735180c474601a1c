// Test support: laneqd as a child process (its output read through a pipe), a temporary data
// directory, and starting it on free ports. The binary comes from the LANEQD_BINARY definition.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

extern char** environ;

namespace laneq::server::test {

using namespace std::chrono_literals;

/// A laneqd child process with its stdout (and optionally stderr) read through pipes.
class laneqd_process {
 public:
  ~laneqd_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  /// Starts laneqd with `args`; returns "" or what went wrong.
  std::string start(const std::vector<std::string>& args) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return std::string{"pipe2: "} + std::strerror(errno);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDERR_FILENO);
    std::vector<std::string> all{LANEQD_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, LANEQD_BINARY, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    out_ = out[0];
    if (rc != 0) return std::string{"posix_spawn: "} + std::strerror(rc);
    return {};
  }

  /// Reads output until a line starting with `prefix` arrives; returns that line.
  std::optional<std::string> wait_line(const std::string& prefix, std::chrono::seconds timeout) {
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
    while (drain && read_some(5000ms)) {
    }
    return text_;
  }

  /// Sends `sig` and waits for the exit; returns the exit code (or 128 + signal).
  int stop(int sig) {
    ::kill(pid_, sig);
    return wait();
  }

  int wait() {
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  bool read_some(std::chrono::milliseconds timeout) {
    pollfd p{out_, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n <= 0) return false;
    char buf[4096];
    auto got = ::read(out_, buf, sizeof buf);
    if (got <= 0) return false;
    text_.append(buf, static_cast<std::size_t>(got));
    return true;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string text_;
  std::size_t scanned_ = 0;
};

inline std::filesystem::path temp_dir(const std::string& tag) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("laneqd-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

/// Waits for laneqd's "http_port=" and "ready" lines; returns the port (0 on failure).
inline std::uint16_t read_port(laneqd_process& p) {
  auto port_line = p.wait_line("laneqd http_port=", 60s);
  EXPECT_TRUE(port_line.has_value()) << p.output();
  if (!port_line) return 0;
  EXPECT_TRUE(p.wait_line("laneqd ready", 60s).has_value()) << p.output();
  return static_cast<std::uint16_t>(std::stoi(port_line->substr(port_line->find('=') + 1)));
}

/// Starts laneqd on `data`/db with free ports (and `extra` arguments); returns the HTTP port.
inline std::uint16_t start_and_read_port(laneqd_process& p, const std::filesystem::path& data,
                                         std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--data-dir", (data / "db").string(), "--http-port",
                                "0",          "--caf-port",           "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto err = p.start(args);
  EXPECT_EQ(err, "");
  if (!err.empty()) return 0;
  return read_port(p);
}

}  // namespace laneq::server::test
