// laneqd as a process: it starts on a temporary data directory, serves, exits 0 on SIGTERM, and
// a restarted laneqd finds the message enqueued before; a broken config exits 2 naming every
// error. The binary comes from the LANEQD_BINARY definition (CMakeLists.txt).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "server_test_support.hpp"

extern char** environ;

namespace laneq::server::test {
namespace {

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

std::filesystem::path temp_dir(const std::string& tag) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("laneqd-test-" + tag + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::uint16_t start_and_read_port(laneqd_process& p, const std::filesystem::path& data) {
  auto err = p.start({"--data-dir", (data / "db").string(), "--http-port", "0", "--caf-port",
                      "0"});
  EXPECT_EQ(err, "");
  auto port_line = p.wait_line("laneqd http_port=", 60s);
  EXPECT_TRUE(port_line.has_value()) << p.output();
  if (!port_line) return 0;
  EXPECT_TRUE(p.wait_line("laneqd ready", 60s).has_value()) << p.output();
  return static_cast<std::uint16_t>(std::stoi(port_line->substr(port_line->find('=') + 1)));
}

TEST(laneqd_process, sigterm_exits_0_and_a_restart_finds_the_enqueued_message) {
  auto dir = temp_dir("restart");
  std::string id;
  {
    laneqd_process p;
    auto port = start_and_read_port(p, dir);
    ASSERT_NE(port, 0);
    auto created = put(port, "/v1/queues/orders", R"({"ordering": {"mode": "queue"}})");
    ASSERT_EQ(created.status, 201u) << created.body;
    auto sent = post(port, "/v1/queues/orders/messages", R"({"body": "survives"})");
    ASSERT_EQ(sent.status, 200u) << sent.body;
    id = std::string{sent.obj().at("ids").as_array()[0].as_string()};
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  {
    laneqd_process p;
    auto port = start_and_read_port(p, dir);
    ASSERT_NE(port, 0);
    auto r = post(port, "/v1/queues/orders/receive", R"({"max": 10})");
    ASSERT_EQ(r.status, 200u) << r.body;
    const auto& msgs = r.obj().at("messages").as_array();
    ASSERT_EQ(msgs.size(), 1u) << r.body;
    EXPECT_EQ(msgs[0].as_object().at("id").as_string(), id);
    EXPECT_EQ(msgs[0].as_object().at("body").as_string(), "survives");
    EXPECT_EQ(p.stop(SIGINT), 0) << p.output(true);
  }
  std::filesystem::remove_all(dir);
}

TEST(laneqd_process, a_broken_config_exits_2_naming_every_error) {
  auto dir = temp_dir("config");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"http": {"port": "x"}, "tokens": [{"token": "short", "tenant": "a"}],
                          "colour": 1})";
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto code = p.wait();
  const auto& out = p.output(true);
  EXPECT_EQ(code, 2) << out;
  for (auto field : {"http.port", "tokens[0].token", "colour"})
    EXPECT_NE(out.find(field), std::string::npos) << field << " in:\n" << out;
  std::filesystem::remove_all(dir);
}

TEST(laneqd_process, configured_queues_exist_at_start) {
  auto dir = temp_dir("queues");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                     << R"(", "http": {"port": 0}, "caf": {"port": 0},
                          "queues": {"audit": {"ordering": {"mode": "queue"}}}})";
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto port_line = p.wait_line("laneqd http_port=", 60s);
  ASSERT_TRUE(port_line.has_value()) << p.output();
  ASSERT_TRUE(p.wait_line("laneqd ready", 60s).has_value()) << p.output();
  auto port = static_cast<std::uint16_t>(std::stoi(port_line->substr(port_line->find('=') + 1)));
  auto l = get(port, "/v1/queues");
  ASSERT_EQ(l.status, 200u);
  ASSERT_EQ(l.obj().at("queues").as_array().size(), 1u);
  EXPECT_EQ(l.obj().at("queues").as_array()[0].as_string(), "audit");
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laneq::server::test
