// Starting, killing and judging laneqd child processes (laneqd_child.hpp).
#include "laneqd_child.hpp"

#include <charconv>
#include <csignal>
#include <fstream>
#include <sstream>
#include <vector>

#include "checker.hpp"

namespace laneq::kill9 {

namespace {

/// Shown with a failure: the end of a stderr file.
constexpr std::size_t stderr_shown_max = 16 * 1024;

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string laneqd_child::start(const std::string& binary, const std::string& config,
                                const std::string& data_dir, const std::string& stderr_path,
                                std::chrono::milliseconds timeout) {
  stderr_path_ = stderr_path;
  caf_port_ = 0;
  auto started = proc_.start(
      {binary, "--config", config, "--data-dir", data_dir, "--http-port", "0", "--caf-port", "any"},
      test::child_options{.stderr_path = stderr_path, .die_with_parent = true});
  if (!started.empty()) return started;
  auto failed = [&](const std::string& why) {
    auto status = proc_.stop(SIGKILL);
    proc_.kill9();
    auto ended = judge_exit(status, read_file(stderr_path_));
    return why + " (stdout: '" + proc_.output() + "')" + (ended.empty() ? "" : "; " + ended) +
           "\n" + stderr_tail();
  };
  auto port = proc_.wait_line("laneqd caf_port=", timeout);
  if (!port) return failed(proc_.eof() ? "laneqd exited before it served" : "no caf_port line");
  auto digits = port->substr(port->find('=') + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || value == 0 || value > 65535)
    return failed("bad caf_port line '" + *port + "'");
  caf_port_ = static_cast<std::uint16_t>(value);
  if (!proc_.wait_line("laneqd ready", timeout)) return failed("no 'laneqd ready' line");
  return {};
}

std::string laneqd_child::kill9() {
  if (!proc_.running()) return {};
  auto status = proc_.stop(SIGKILL);
  proc_.kill9();  // closes the pipes
  auto why = judge_exit(status, read_file(stderr_path_));
  if (why.empty()) return {};
  return "laneqd (stderr " + stderr_path_ + "): " + why + "\n" + stderr_tail();
}

std::string laneqd_child::stderr_tail() const {
  auto text = read_file(stderr_path_);
  if (text.empty()) return "its stderr was empty\n";
  auto from = text.size() > stderr_shown_max ? text.size() - stderr_shown_max : 0;
  return "its stderr" + std::string{from > 0 ? " (the end)" : ""} + ":\n" + text.substr(from);
}

}  // namespace laneq::kill9
