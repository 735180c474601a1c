// laneqd out of file descriptors (issue 22, part 6): with a low RLIMIT_NOFILE and more idle
// connections than descriptors, the acceptor backs off instead of spinning a core on EMFILE, and
// /healthz answers again once the idle connections close. A real laneqd under prlimit(1).
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

/// CPU seconds (user and system) the process `pid` has used, from /proc/<pid>/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat{std::istreambuf_iterator<char>{in}, {}};
  std::istringstream fields{stat.substr(stat.rfind(')') + 2)};  // from field 3, the state
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i)
    if (i >= 14) ticks += std::stod(f);  // utime, stime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// The process whose command line contains `needle` (0 when none).
pid_t pid_with_argument(const std::string& needle) {
  for (const auto& e : std::filesystem::directory_iterator{"/proc"}) {
    std::ifstream in{e.path() / "cmdline"};
    std::string cmdline{std::istreambuf_iterator<char>{in}, {}};
    if (cmdline.find(needle) != std::string::npos && cmdline.find("prlimit") == std::string::npos)
      return static_cast<pid_t>(std::stol(e.path().filename().string()));
  }
  return 0;
}

TEST(laneqd_descriptors, out_of_descriptors_the_acceptor_backs_off_and_health_returns) {
  auto dir = temp_dir("nofile");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"limits": {"head_timeout_ms": 60000}})";
  laneqd_process p;
  // prlimit sets the descriptor limit and execs laneqd in its own process.
  auto err = p.laneq::test::child_process::start(
      {"/usr/bin/prlimit", "--nofile=200", LANEQD_BINARY, "--config", cfg.string(), "--data-dir",
       (dir / "db").string(), "--http-port", "0", "--caf-port", "0"});
  ASSERT_EQ(err, "");
  auto port = read_port(p);
  ASSERT_NE(port, 0) << p.output();
  auto pid = pid_with_argument((dir / "db").string());
  ASSERT_NE(pid, 0);
  // More idle connections than descriptors: the rest wait in the listen backlog.
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<client>(port));
  EXPECT_TRUE(p.wait_line("laneqd: HTTP accept failed", 30s).has_value()) << p.output();
  // Its share of a core: CPU time over the wall time it was measured in (at least 2 s; on a
  // loaded machine the sleep runs longer, and the share is still taken over the whole of it).
  auto before = cpu_seconds(pid);
  auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(2s);
  auto after = cpu_seconds(pid);
  std::chrono::duration<double> wall = std::chrono::steady_clock::now() - started;
  auto busy = (after - before) / wall.count();
  // A spinning acceptor uses a whole core; backing off, a few accepts a second.
  EXPECT_LT(busy, 0.2) << "laneqd used " << busy * 100 << "% of a core out of descriptors";
  idle.clear();
  auto health = get(port, "/healthz");
  EXPECT_EQ(health.status, 200u) << health.body;
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laneq::server::test
