// A laneq_kill9_broker child process for the kill -9 test (RELIABILITY.md T3): start it, wait
// for its "ready" line, kill it with SIGKILL. Linux/POSIX only (posix_spawn, pipes, poll).
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "kill9_setup.hpp"

namespace laneq::kill9 {

/// One broker process. Its stdin is a pipe we hold open: if the test dies, the broker sees EOF
/// and exits, so no orphan outlives a crashed test run. The destructor kills a running broker.
class broker_process {
 public:
  broker_process() = default;
  ~broker_process();
  broker_process(const broker_process&) = delete;
  broker_process& operator=(const broker_process&) = delete;

  /// Starts `binary --data data_dir --port 0 --grace-ms grace_ms` and waits up to `timeout`
  /// for its ready line. Returns an empty string on success, else why it failed.
  std::string start(const std::string& binary, const std::string& data_dir, std::int64_t grace_ms,
                    std::chrono::milliseconds timeout);

  /// SIGKILL, then reaps the process. No-op when nothing runs.
  void kill9();

  bool running() const { return pid_ > 0; }
  /// The queue ports from the ready line (valid after a successful start).
  const std::array<std::uint16_t, queue_count>& ports() const { return ports_; }

 private:
  void close_pipes();
  pid_t pid_ = -1;
  int stdin_fd_ = -1;   ///< write end of the broker's stdin
  int stdout_fd_ = -1;  ///< read end of the broker's stdout
  std::array<std::uint16_t, queue_count> ports_{};
};

}  // namespace laneq::kill9
