// laneqd as the kill -9 test's child process (RELIABILITY.md T3): start it with OS-picked ports,
// wait until it serves, SIGKILL it and judge how it ended (exit status and stderr). Linux only
// (tests/support/subprocess.hpp: fork, exec, PR_SET_PDEATHSIG).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "subprocess.hpp"

namespace laneq::kill9 {

/// One laneqd process. It gets SIGKILL if the thread that started it ends, so no laneqd
/// outlives a crashed test; the destructor kills one still running.
class laneqd_child {
 public:
  /// Starts `binary --config config --data-dir data_dir --http-port 0 --caf-port any`, its
  /// stderr written to `stderr_path`, and waits up to `timeout` for "laneqd ready". Returns ""
  /// on success, else why not (with what it wrote on stderr).
  std::string start(const std::string& binary, const std::string& config,
                    const std::string& data_dir, const std::string& stderr_path,
                    std::chrono::milliseconds timeout);

  /// SIGKILL, then reaps it. Returns "" when it died of that signal and its stderr shows no
  /// failure (`judge_exit`), else why not, followed by the end of its stderr. "" when nothing
  /// runs.
  std::string kill9();

  bool running() const { return proc_.running(); }
  /// The CAF port it published the remote admin actor on (valid after a successful start).
  std::uint16_t caf_port() const { return caf_port_; }

 private:
  std::string stderr_tail() const;

  test::child_process proc_;  ///< stdout read through a pipe, stderr to `stderr_path_`
  std::string stderr_path_;
  std::uint16_t caf_port_ = 0;
};

}  // namespace laneq::kill9
