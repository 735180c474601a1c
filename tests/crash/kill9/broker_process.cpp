// Starting and killing laneq_kill9_broker processes (broker_process.hpp).
#include "broker_process.hpp"

#include <vector>

namespace laneq::kill9 {

std::string broker_process::start(const std::string& binary, const std::string& data_dir,
                                  std::int64_t grace_ms, std::chrono::milliseconds timeout) {
  auto started = proc_.start(
      {binary, "--data", data_dir, "--port", "0", "--grace-ms", std::to_string(grace_ms)},
      test::child_options{.capture_stderr = false, .stdin_pipe = true});
  if (!started.empty()) return started;

  // The first line: "ready <ports>".
  auto line = proc_.wait_line("", timeout);
  if (!line) {
    auto got = proc_.output();
    auto why = proc_.eof() ? "the broker exited before it was ready (got '" + got + "')"
                           : "no ready line within " + std::to_string(timeout.count()) +
                                 " ms (got '" + got + "')";
    proc_.kill9();
    return why;
  }
  auto ports = parse_ready_line(*line);
  if (!ports) {
    proc_.kill9();
    return "malformed ready line '" + *line + "'";
  }
  ports_ = *ports;
  return {};
}

}  // namespace laneq::kill9
