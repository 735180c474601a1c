// Test support: runs programs as child processes (the laneq CLI, the CAF examples) with their
// output in files, and a laneqd daemon on ports it binds itself (the OS picks them) with its own
// data directory, stopped with SIGTERM. The temporary directory and waiting for a child come from
// tests/support.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace laneq::test {

/// What a finished child process left behind.
struct run_result {
  int rc = -1;  ///< exit code; 128 + signal when killed
  std::string out;
  std::string err;
};

/// Starts `argv` with stdout and stderr going to files; returns the pid.
inline pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& out,
                   const std::filesystem::path& err,
                   const std::vector<std::pair<std::string, std::string>>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    dup2(in, 0);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

/// Runs `argv` to completion in `dir`'s files.
inline run_result run(const std::vector<std::string>& argv, const temp_dir& dir,
                      const std::vector<std::pair<std::string, std::string>>& env = {}) {
  static int counter = 0;
  auto n = std::to_string(++counter);
  auto out = dir.path() / ("run-" + n + ".out");
  auto err = dir.path() / ("run-" + n + ".err");
  run_result r;
  r.rc = wait_exit(spawn(argv, out, err, env));
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// laneqd with its own data directory on ports the OS picks and laneqd binds itself
/// (`--http-port 0`, and `--caf-port any` when asked for CAF, else `--caf-port 0`: none), read
/// back from the lines it prints before `laneqd ready`. No port is probed and handed over, so a
/// port cannot be taken by another process between the probe and laneqd's bind.
class daemon {
 public:
  /// `data_dir` empty: a fresh `data` directory inside the daemon's own temporary directory.
  /// `extra`: more arguments (`--config FILE`, say).
  daemon(const std::string& binary, bool with_caf, const std::string& data_dir = {},
         const std::vector<std::string>& extra = {}) {
    auto out = dir_.path() / "laneqd.out";
    auto err = dir_.path() / "laneqd.err";
    std::vector<std::string> args{binary,
                                  "--data-dir",
                                  data_dir.empty() ? (dir_.path() / "data").string() : data_dir,
                                  "--http-port",
                                  "0",
                                  "--caf-port",
                                  with_caf ? "any" : "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = spawn(args, out, err);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto text = slurp(out);
      if (text.find("laneqd ready") != std::string::npos) {
        http_port_ = port_in(text, "laneqd http_port=");
        caf_port_ = static_cast<std::uint16_t>(port_in(text, "laneqd caf_port="));
        if (with_caf && caf_port_ == 0) startup_error_ = "laneqd printed no CAF port: " + text;
        break;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        startup_error_ = "laneqd exited at start: " + slurp(err);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (http_port_ == 0 && startup_error_.empty())
      startup_error_ = "laneqd did not get ready: " + slurp(err);
  }
  ~daemon() { stop(); }
  daemon(const daemon&) = delete;
  daemon& operator=(const daemon&) = delete;

  /// SIGTERM and wait; the exit code (-1 if it was not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int rc = wait_exit(pid_);
    pid_ = -1;
    return rc;
  }
  /// Sends `sig` (SIGSTOP freezes laneqd with its connections open; SIGCONT resumes it).
  void signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  bool ready() const { return startup_error_.empty(); }
  const std::string& startup_error() const { return startup_error_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  /// For a laneqd whose config sets http.tls.
  std::string https_url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(http_port_);
  }
  int http_port() const { return http_port_; }
  std::uint16_t caf_port() const { return caf_port_; }
  const temp_dir& dir() const { return dir_; }

 private:
  /// The number after `prefix` at the start of a line of `text` (0 if there is none).
  static int port_in(const std::string& text, const std::string& prefix) {
    auto at = text.find("\n" + prefix);
    if (at != std::string::npos) {
      ++at;
    } else if (text.rfind(prefix, 0) == 0) {
      at = 0;
    } else {
      return 0;
    }
    return std::atoi(text.c_str() + at + prefix.size());
  }

  temp_dir dir_;
  pid_t pid_ = -1;
  int http_port_ = 0;
  std::uint16_t caf_port_ = 0;
  std::string startup_error_;
};

}  // namespace laneq::test
