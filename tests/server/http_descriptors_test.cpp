// laneqd and its file descriptors (issue 22, part 6). A real laneqd under prlimit(1) with more
// idle connections than descriptors: the connection cap fits under the limit, so accepts never
// fail with EMFILE, /healthz answers while the idle connections are open, and the store (WAL,
// table files, a checkpoint) keeps working. In process, descriptors used up outside the cap: the
// acceptor backs off instead of spinning and serves again once descriptors free up.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>
#include <vector>

#include "laneq/server/descriptors.hpp"
#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

const std::string admin = "admin-secret-token-1";

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

std::size_t descriptors_of(pid_t pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/fd"})
    ++n;
  return n;
}

/// A series' value in laneqd's /metrics (-1 when absent), asked with the admin token.
double metric(std::uint16_t port, const std::string& series) {
  auto body = get(port, "/metrics", admin).body;
  auto at = body.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(body.substr(at + series.size() + 2));
}

/// Waits until `done` holds, asking every 50 ms for 60 s at most.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 1200; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  return done();
}

/// Enqueues, receives and acks `n` messages on `q`, then checkpoints into `dir`: the WAL, the
/// memtable's flush into a table file, hard links and copies.
void store_round(std::uint16_t port, const std::string& q, int n, const std::string& dir) {
  std::string batch = R"({"messages": [)";
  for (int i = 0; i < n; ++i) batch += (i ? "," : "") + std::string{R"({"body": "m"})"};
  auto e = post(port, "/v1/queues/" + q + "/messages", batch + "]}", admin);
  ASSERT_EQ(e.status, 200u) << e.body;
  auto r = post(port, "/v1/queues/" + q + "/receive", R"({"max": 1000})", admin);
  ASSERT_EQ(r.status, 200u) << r.body;
  json::array leases;
  for (const auto& m : r.obj().at("messages").as_array()) leases.push_back(m.at("lease"));
  ASSERT_EQ(leases.size(), static_cast<std::size_t>(n)) << r.body;
  auto a = post(port, "/v1/queues/" + q + "/ack",
                json::serialize(json::object{{"leases", std::move(leases)}}), admin);
  ASSERT_EQ(a.status, 200u) << a.body;
  EXPECT_EQ(a.obj().at("acked").as_int64(), n) << a.body;
  auto cp = post(port, "/v1/admin/checkpoint", json::serialize(json::object{{"dir", dir}}), admin);
  EXPECT_EQ(cp.status, 200u) << cp.body;
}

TEST(laneqd_descriptors, under_a_low_limit_the_cap_fits_and_health_answers_while_idle_hold_it) {
  auto dir = temp_dir("nofile");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"limits": {"head_timeout_ms": 60000},
                           "tokens": [{"token": ")"
                     << admin << R"(", "tenant": "*"}]})";
  laneqd_process p;
  // prlimit sets the descriptor limit (soft and hard: laneqd cannot raise it) and execs laneqd.
  auto err = p.laneq::test::child_process::start(
      {"/usr/bin/prlimit", "--nofile=200", LANEQD_BINARY, "--config", cfg.string(), "--data-dir",
       (dir / "db").string(), "--http-port", "0", "--caf-port", "0"});
  ASSERT_EQ(err, "");
  auto cap_line = p.wait_line("laneqd: connection cap ", 60s);
  ASSERT_TRUE(cap_line.has_value()) << p.output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*cap_line, m,
                                std::regex{R"(connection cap (\d+) \(configured 4096, descriptor )"
                                           R"(limit 200\), reserve (\d+))"}))
      << *cap_line;
  const std::size_t cap = std::stoul(m[1]), reserve = std::stoul(m[2]);
  EXPECT_GE(cap, http_bounds::connections_min);
  EXPECT_LT(cap + descriptor_bounds::store_files_min, 200u) << *cap_line;
  EXPECT_NE(cap_line->find("the configured cap needs a descriptor limit of"), std::string::npos);
  auto port = read_port(p);
  ASSERT_NE(port, 0) << p.output();
  auto pid = pid_with_argument((dir / "db").string());
  ASSERT_NE(pid, 0);
  EXPECT_EQ(metric(port, "laneq_http_connections_max"), static_cast<double>(cap));
  ASSERT_EQ(put(port, "/v1/queues/q", "{}", admin).status, 201u);
  store_round(port, "q", 200, (dir / "cp0").string());

  // More idle anonymous connections than descriptors, held open for the rest of the test.
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<client>(port));
  const std::string evicted = R"(laneq_http_connections_refused_total{reason="evicted"})";
  const std::string at_cap = R"(laneq_http_connections_refused_total{reason="cap"})";
  ASSERT_TRUE(eventually([&] {
    return metric(port, evicted) + metric(port, at_cap) >= static_cast<double>(300 - cap);
  })) << p.output();
  EXPECT_TRUE(p.wait_line("laneqd: HTTP connections refused", 30s).has_value()) << p.output();
  // The idle connections outside the reserve cannot be closed for anyone: they are still open
  // while probes, token holders and the store are served.
  EXPECT_GE(metric(port, "laneq_http_connections_anonymous"), static_cast<double>(cap - reserve));
  for (int i = 0; i < 5; ++i) {
    auto health = get(port, "/healthz");
    EXPECT_EQ(health.status, 200u) << health.body;
  }
  EXPECT_EQ(get(port, "/v1/queues").status, 503u);  // anonymous, in the reserve
  for (int round = 1; round <= 5; ++round)
    store_round(port, "q", 200, (dir / ("cp" + std::to_string(round))).string());
  EXPECT_GE(metric(port, "laneq_http_connections_anonymous"), static_cast<double>(cap - reserve));
  EXPECT_LT(descriptors_of(pid), 200u);
  EXPECT_EQ(metric(port, R"(laneq_http_accept_errors_total{reason="emfile"})"), 0);
  EXPECT_EQ(p.output().find("accept failed"), std::string::npos) << p.output();
  EXPECT_EQ(p.output().find("Too many open files"), std::string::npos) << p.output();
  idle.clear();
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

TEST(laneqd_descriptors, a_limit_too_low_to_serve_is_refused_naming_it) {
  auto dir = temp_dir("nofile-low");
  laneqd_process p;
  auto err = p.laneq::test::child_process::start({"/usr/bin/prlimit", "--nofile=60", LANEQD_BINARY,
                                                  "--data-dir", (dir / "db").string(),
                                                  "--http-port", "0", "--caf-port", "0"});
  ASSERT_EQ(err, "");
  auto code = p.wait();
  const auto& out = p.output(true);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("refusing to start: the file descriptor limit (RLIMIT_NOFILE, ulimit -n) is "
                     "60"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("laneqd ready"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "db")) << "the store was opened";
  std::filesystem::remove_all(dir);
}

TEST(laneqd_descriptors, the_soft_limit_is_raised_to_the_hard_limit_at_start) {
  auto dir = temp_dir("nofile-raise");
  laneqd_process p;
  auto err = p.laneq::test::child_process::start(
      {"/usr/bin/prlimit", "--nofile=100:1000", LANEQD_BINARY, "--data-dir", (dir / "db").string(),
       "--http-port", "0", "--caf-port", "0"});
  ASSERT_EQ(err, "");
  auto line = p.wait_line("laneqd: connection cap ", 60s);
  ASSERT_TRUE(line.has_value()) << p.output();
  EXPECT_NE(line->find("descriptor limit 1000)"), std::string::npos) << *line;
  EXPECT_NE(line->find("raised from 100 "), std::string::npos) << *line;
  ASSERT_NE(read_port(p), 0) << p.output();
  auto pid = pid_with_argument((dir / "db").string());
  ASSERT_NE(pid, 0);
  std::ifstream limits{"/proc/" + std::to_string(pid) + "/limits"};
  std::string text{std::istreambuf_iterator<char>{limits}, {}};
  EXPECT_TRUE(std::regex_search(text, std::regex{R"(Max open files\s+1000\s+1000)"})) << text;
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

/// Uses up every descriptor of this process below a lowered soft limit; restores both on
/// destruction.
class descriptors_used_up {
 public:
  descriptors_used_up() {
    ::getrlimit(RLIMIT_NOFILE, &before_);
    int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    rlimit low{static_cast<rlim_t>(lowest_free) + 16, before_.rlim_max};
    ::close(lowest_free);
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers_.push_back(fd);
    errno_ = errno;
  }
  ~descriptors_used_up() { release(); }
  int error() const { return errno_; }
  void release() {
    for (int fd : fillers_) ::close(fd);
    fillers_.clear();
    ::setrlimit(RLIMIT_NOFILE, &before_);
  }

 private:
  rlimit before_{};
  std::vector<int> fillers_;
  int errno_ = 0;
};

/// Connects the socket `fd` (opened earlier: connecting takes no new descriptor) to `port`.
bool connect_to(int fd, std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

/// Sends GET /healthz on `fd` and reads the status line.
std::string health_status_line(int fd) {
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return "send failed";
  std::string got;
  char buf[512];
  while (got.find("\r\n") == std::string::npos) {
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got + " (closed)";
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got.substr(0, got.find("\r\n"));
}

// Descriptors taken outside the connection cap (CAF clients, say): accept fails with EMFILE and
// the listening socket stays readable. The acceptor waits 100 ms between tries (a spinning one
// failed about 25,000 times a second), says so, and serves the waiting connections once
// descriptors free up.
TEST(http_descriptors, out_of_descriptors_the_acceptor_backs_off_and_serves_once_they_free_up) {
#if defined(__SANITIZE_ADDRESS__)  // the dev preset: ASan and UBSan together
  // UBSan's vptr check probes memory through a pipe; with no descriptor left it cannot, and
  // reports each virtual call (boost::system's error categories) as a bad vptr (measured with
  // a 20-line program). The release run of this test is the check.
  GTEST_SKIP() << "UBSan reports false bad vptrs while the process is out of descriptors";
#endif
  in_process_server srv;
  auto& counts = srv.connections();
  std::vector<int> socks;
  for (int i = 0; i < 3; ++i) socks.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  testing::internal::CaptureStderr();
  std::chrono::steady_clock::time_point first, sixth;
  {
    descriptors_used_up used;
    ASSERT_EQ(used.error(), EMFILE);
    for (int fd : socks) ASSERT_TRUE(connect_to(fd, srv.port()));  // into the listen backlog
    ASSERT_TRUE(eventually([&] { return counts.accept_emfile >= 1; }));
    first = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return counts.accept_emfile >= 6; }));
    sixth = std::chrono::steady_clock::now();
  }
  auto log = testing::internal::GetCapturedStderr();
  // Five back-offs of at least 100 ms each lie between the first failure seen and the sixth.
  EXPECT_GE(sixth - first, std::chrono::milliseconds{450});
  EXPECT_NE(log.find("laneqd: HTTP accept failed: Too many open files"), std::string::npos) << log;
  ASSERT_TRUE(eventually([&] { return counts.open == socks.size(); })) << counts.open;
  EXPECT_EQ(counts.accept_enfile, 0u);
  EXPECT_EQ(counts.accept_other, 0u);
  for (int fd : socks) {
    EXPECT_EQ(health_status_line(fd), "HTTP/1.1 200 OK");
    ::close(fd);
  }
}

// More idle connections than the cap: each new one takes the place of the oldest idle one in
// the reserve, so a probe still gets in while the idle connections outside the reserve stay.
TEST(http_descriptors, idle_connections_beyond_the_cap_do_not_lock_out_a_probe) {
  http_limits limits;
  limits.connections = 8;
  limits.connections_reserve = 2;
  limits.head_timeout_ms = 60'000;
  in_process_server srv{limits, {{admin, "*"}}};
  auto& counts = srv.connections();
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(std::make_unique<client>(srv.port()));
  ASSERT_TRUE(eventually([&] { return counts.evicted == 12 && counts.open == 8; }))
      << counts.evicted << " evicted, " << counts.open << " open";
  EXPECT_EQ(get(srv.port(), "/healthz").status, 200u);
  EXPECT_EQ(get(srv.port(), "/v1/queues", admin).status, 200u);
  // The probe took an idle one's place; the token holder too unless the probe had left.
  EXPECT_GE(counts.evicted, 13u);
  EXPECT_EQ(counts.refused_cap, 0u);
  EXPECT_GE(counts.anonymous, 6u);  // the six outside the reserve were never closed
  EXPECT_EQ(counts.max, 8u);
}

}  // namespace
}  // namespace laneq::server::test
