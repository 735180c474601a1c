// Test support: laneqd as a child process (tests/support/subprocess.hpp: its output read through
// a pipe), a temporary data directory, and starting it on free ports. The binary comes from the
// LANEQD_BINARY definition.
#pragma once

#include <unistd.h>

#include <csignal>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace laneq::server::test {

using namespace std::chrono_literals;

/// A laneqd child process with its stdout and stderr read through one pipe.
class laneqd_process : public laneq::test::child_process {
 public:
  /// Starts laneqd with `args`; returns "" or what went wrong.
  std::string start(const std::vector<std::string>& args) {
    std::vector<std::string> all{LANEQD_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    return child_process::start(all);
  }
};

/// A fresh directory for a test's data, named after `tag` (not removed afterwards).
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

/// Starts laneqd on `data`/db with an HTTP port the OS picks and no CAF port (and `extra`
/// arguments); returns the HTTP port, read from what laneqd prints.
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

/// A fixture: a laneqd on a fresh data directory named after `tag`, stopped with SIGTERM (exit 0
/// checked) at the end of each test; `restart` keeps the data.
/// laneqd on the data directory `data` must refuse to start: exit non-zero (not by a signal)
/// with output containing each of `words`.
inline void expect_refusal(const std::filesystem::path& data,
                           const std::vector<std::string>& words) {
  using namespace std::chrono_literals;
  laneqd_process p;
  ASSERT_EQ(p.start({"--data-dir", data.string(), "--http-port", "0", "--caf-port", "0"}), "");
  if (p.wait_line("laneqd ready", 60s)) {  // nothing at the end of its output: it exited
    ADD_FAILURE() << "laneqd started on the damaged store:\n" << p.output();
    p.stop(SIGTERM);
    return;
  }
  auto code = p.wait();
  auto out = p.output(true);
  EXPECT_GT(code, 0) << out;
  EXPECT_LT(code, 128) << "ended by a signal: " << out;
  for (const auto& w : words) EXPECT_NE(out.find(w), std::string::npos) << w << "\n" << out;
}

class daemon_test : public ::testing::Test {
 protected:
  explicit daemon_test(std::string tag) : tag_(std::move(tag)) {}
  void SetUp() override {
    dir_ = temp_dir(tag_);
    proc_ = std::make_unique<laneqd_process>();
    port_ = start_and_read_port(*proc_, dir_);
    ASSERT_NE(port_, 0) << proc_->output();
  }
  void TearDown() override {
    if (port_ != 0) {
      EXPECT_EQ(proc_->stop(SIGTERM), 0) << proc_->output(true);
    }
    proc_.reset();
    std::filesystem::remove_all(dir_);
  }
  /// Stops laneqd (exit 0) and starts it again on the same data directory.
  void restart() {
    auto code = proc_->stop(SIGTERM);
    port_ = 0;
    ASSERT_EQ(code, 0) << proc_->output(true);
    proc_ = std::make_unique<laneqd_process>();
    port_ = start_and_read_port(*proc_, dir_);
    ASSERT_NE(port_, 0) << proc_->output();
  }

  std::string tag_;
  std::filesystem::path dir_;
  std::unique_ptr<laneqd_process> proc_;
  std::uint16_t port_ = 0;  ///< 0: not running
};

}  // namespace laneq::server::test
