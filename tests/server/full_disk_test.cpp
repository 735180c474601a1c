// A full disk, on a real small file system (a 20 MiB tmpfs mounted by the test, so it runs as
// root, as CI does), through laneqd (docs/design/persistence.md, "A full disk"; guarantees G7).
// Before the fix laneqd died on SIGABRT inside RocksDB's logger (`sync_without_flush_called_`,
// exit 134; reproduced again on 2026-12-03 with the previous build) and aborted again when
// restarted on the still-full disk. Now: the enqueue that does not fit is refused with
// storage_failed by the free-space reserve, /healthz says degraded and why, laneqd keeps running
// and serving what it holds (receive and ack), it starts again on the full disk, and once there
// is space its health is ok again and it takes enqueues, with every acknowledged message kept.
#include <sys/mount.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

namespace fs = std::filesystem;

/// A tmpfs of `mib` MiB mounted on a fresh directory for the test's life.
class small_fs {
 public:
  explicit small_fs(int mib) : dir_(temp_dir("full-disk")) {
    auto opts = "size=" + std::to_string(mib) + "m";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0)
      error_ = "mount tmpfs on " + dir_.string() + ": " + std::strerror(errno) +
               " (this test needs root, as CI has)";
  }
  ~small_fs() {
    if (error_.empty()) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  /// Grows or shrinks the file system in place.
  std::string resize(int mib) {
    auto opts = "size=" + std::to_string(mib) + "m";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT, opts.c_str()) != 0)
      return std::string{"remount: "} + std::strerror(errno);
    return {};
  }
  const fs::path& dir() const { return dir_; }
  const std::string& error() const { return error_; }

 private:
  fs::path dir_;
  std::string error_;
};

/// 4 messages of 60,000 bytes.
std::string big_batch() {
  json::array msgs;
  for (int i = 0; i < 4; ++i) msgs.emplace_back(json::object{{"body", std::string(60000, 'x')}});
  return json::serialize(json::object{{"messages", std::move(msgs)}});
}

/// Enqueues big batches until one is refused; returns the refusal (status 0: none in 1,000).
reply fill(std::uint16_t port, int& acked) {
  client c{port};
  auto body = big_batch();
  for (int i = 0; i < 1000; ++i) {
    auto r = c.call(http::verb::post, "/v1/queues/q/messages", body);
    if (r.status != 200u) return r;
    acked += 4;
  }
  return {};
}

std::int64_t backlog(std::uint16_t port) {
  auto r = get(port, "/v1/queues/q");
  EXPECT_EQ(r.status, 200u) << r.body;
  if (r.status != 200u) return -1;
  return r.obj().at("stats").as_object().at("backlog").to_number<std::int64_t>();
}

TEST(full_disk, laneqd_answers_storage_failed_keeps_running_restarts_full_and_recovers) {
  small_fs disk{20};
  ASSERT_EQ(disk.error(), "");
  int acked = 0;
  {
    laneqd_process p;
    auto port = start_and_read_port(p, disk.dir());
    ASSERT_NE(port, 0) << p.output();
    ASSERT_EQ(put(port, "/v1/queues/q", "{}").status, 201u);
    auto refused = fill(port, acked);
    ASSERT_EQ(refused.status, 503u) << refused.body;
    EXPECT_EQ(refused.code(), "storage_failed");
    EXPECT_NE(refused.message().find("would leave less than its reserve"), std::string::npos)
        << refused.body;
    ASSERT_GT(acked, 0);
    // Health says why enqueues fail (G7: an error and a degraded state).
    auto health = get(port, "/healthz");
    EXPECT_EQ(health.status, 503u) << health.body;
    EXPECT_EQ(health.obj().at("status").as_string(), "degraded") << health.body;
    EXPECT_NE(health.body.find("low disk space"), std::string::npos) << health.body;
    // Still serving: a receive hands out a stored message and its ack is stored.
    auto m = post(port, "/v1/queues/q/receive", R"({"max": 1, "lease_ms": 60000})");
    ASSERT_EQ(m.status, 200u) << m.body;
    auto got = m.obj().at("messages").as_array();
    ASSERT_EQ(got.size(), 1u) << m.body;
    auto ack = post(port, "/v1/queues/q/ack",
                    json::serialize(json::object{{"lease", got[0].as_object().at("lease")}}));
    EXPECT_EQ(ack.status, 200u) << ack.body;
    --acked;
    auto metrics = get(port, "/metrics");
    EXPECT_NE(metrics.body.find("laneq_store_refused_low_space_total 1\n"), std::string::npos)
        << metrics.body;
    EXPECT_NE(metrics.body.find("laneq_store_low_space 1\n"), std::string::npos) << metrics.body;
    // Killed on the full disk, as a crash would leave it.
    EXPECT_EQ(p.stop(SIGKILL), 128 + SIGKILL) << "laneqd died before the kill:\n" << p.output(true);
  }
  EXPECT_GT(fs::space(disk.dir()).capacity, 0u);

  // It starts again on the still-full disk and holds every acknowledged message (and maybe the
  // refused batch: a failed write may have happened, docs/design/persistence.md P2).
  int refused_batches = 1;
  laneqd_process again;
  auto port = start_and_read_port(again, disk.dir());
  ASSERT_NE(port, 0) << again.output();
  EXPECT_GE(backlog(port), acked);
  EXPECT_LE(backlog(port), acked + 4 * refused_batches);

  // Space returns: health says so by itself (no enqueue needed to find out), and enqueues are
  // taken again.
  ASSERT_EQ(disk.resize(200), "");
  reply health;
  for (int i = 0; i < 120; ++i) {  // a hang guard: each /healthz measures the free space again
    health = get(port, "/healthz");
    if (health.status == 200u) break;
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_EQ(health.status, 200u) << health.body;
  client c{port};
  auto body = big_batch();
  reply r;
  for (int i = 0; i < 120; ++i) {
    r = c.call(http::verb::post, "/v1/queues/q/messages", body);
    if (r.status == 200u) break;
    ++refused_batches;
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_EQ(r.status, 200u) << r.body;
  acked += 4;
  EXPECT_EQ(get(port, "/healthz").status, 200u);
  EXPECT_EQ(again.stop(SIGTERM), 0) << again.output(true);

  laneqd_process third;
  port = start_and_read_port(third, disk.dir());
  ASSERT_NE(port, 0) << third.output();
  EXPECT_GE(backlog(port), acked);
  EXPECT_LE(backlog(port), acked + 4 * refused_batches);
  EXPECT_EQ(third.stop(SIGTERM), 0) << third.output(true);
}

}  // namespace
}  // namespace laneq::server::test
