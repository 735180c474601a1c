// A laneq_kill9_broker child process for the kill -9 test (RELIABILITY.md T3): start it, wait
// for its "ready" line, kill it with SIGKILL. Linux/POSIX only (posix_spawn, pipes, poll).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "kill9_setup.hpp"
#include "subprocess.hpp"

namespace laneq::kill9 {

/// One broker process. Its stdin is a pipe we hold open: if the test dies, the broker sees EOF
/// and exits, so no orphan outlives a crashed test run. The destructor kills a running broker.
class broker_process {
 public:
  /// Starts `binary --data data_dir --port 0 --grace-ms grace_ms` and waits up to `timeout`
  /// for its ready line. Returns an empty string on success, else why it failed.
  std::string start(const std::string& binary, const std::string& data_dir, std::int64_t grace_ms,
                    std::chrono::milliseconds timeout);

  /// SIGKILL, then reaps the process. No-op when nothing runs.
  void kill9() { proc_.kill9(); }

  bool running() const { return proc_.running(); }
  /// The queue ports from the ready line (valid after a successful start).
  const std::array<std::uint16_t, queue_count>& ports() const { return ports_; }

 private:
  test::child_process proc_;  ///< stdin a pipe held here, stdout read, stderr inherited
  std::array<std::uint16_t, queue_count> ports_{};
};

}  // namespace laneq::kill9
