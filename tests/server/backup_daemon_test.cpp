// Online backup through a real laneqd process (docs/operations.md "Backup and restore"): a
// checkpoint taken while a producer enqueues, served by a second laneqd started on it, and the
// refusals (existing directory or staging directory, a file in the path, relative path), and
// missing parent directories, which a checkpoint creates (as `mkdir -p`).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

class backup_daemon : public daemon_test {
 protected:
  backup_daemon() : daemon_test("backup") {}
  reply checkpoint(const std::string& dir) {
    return post(port_, "/v1/admin/checkpoint", json::serialize(json::object{{"dir", dir}}));
  }
};

/// Enqueues batches of 10 into `queue` until stopped; remembers which bodies were acknowledged.
class producer {
 public:
  producer(std::uint16_t port, std::string queue) : port_(port), queue_(std::move(queue)) {
    thread_ = std::thread([this] { run(); });
  }
  ~producer() { stop(); }

  /// Waits until at least `n` messages are acknowledged (false: the producer failed first).
  bool wait_acked(std::size_t n) {
    std::unique_lock lock{mu_};
    cv_.wait(lock, [&] { return acked_.size() >= n || !failure_.empty(); });
    return failure_.empty();
  }
  std::set<std::string> acked() {
    std::lock_guard lock{mu_};
    return acked_;
  }
  /// Every body sent, acknowledged or not.
  std::set<std::string> sent() {
    std::lock_guard lock{mu_};
    return sent_;
  }
  std::string failure() {
    std::lock_guard lock{mu_};
    return failure_;
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    client c{port_};
    for (std::uint64_t batch = 0; !stop_; ++batch) {
      json::array msgs;
      std::vector<std::string> bodies;
      for (int i = 0; i < 10; ++i) {
        bodies.push_back("m" + std::to_string(batch) + "." + std::to_string(i));
        msgs.emplace_back(json::object{{"body", bodies.back()}});
      }
      {
        std::lock_guard lock{mu_};
        sent_.insert(bodies.begin(), bodies.end());
      }
      auto r = c.call(http::verb::post, "/v1/queues/" + queue_ + "/messages",
                      json::serialize(json::object{{"messages", std::move(msgs)}}));
      std::lock_guard lock{mu_};
      if (r.status != 200u) {
        failure_ = "enqueue answered " + std::to_string(r.status) + ": " + r.body;
        cv_.notify_all();
        return;
      }
      acked_.insert(bodies.begin(), bodies.end());
      cv_.notify_all();
    }
  }

  std::uint16_t port_;
  std::string queue_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> sent_;
  std::set<std::string> acked_;
  std::string failure_;
  std::thread thread_;
};

/// Every message of `queue` on the laneqd at `port`: receives until a long poll comes back empty.
std::multiset<std::string> drain(std::uint16_t port, const std::string& queue) {
  std::multiset<std::string> out;
  client c{port};
  while (true) {
    auto r = c.call(http::verb::post, "/v1/queues/" + queue + "/receive",
                    R"({"max": 1000, "lease_ms": 600000, "wait_ms": 1000})");
    EXPECT_EQ(r.status, 200u) << r.body;
    if (r.status != 200u) return out;
    const auto& msgs = r.obj().at("messages").as_array();
    if (msgs.empty()) return out;
    for (const auto& m : msgs) out.insert(std::string{m.as_object().at("body").as_string()});
  }
}

TEST_F(backup_daemon, a_checkpoint_under_load_holds_every_message_acknowledged_before_it) {
  ASSERT_EQ(put(port_, "/v1/queues/orders", "{}").status, 201u);
  auto cp = (dir_ / "checkpoint").string();
  producer p{port_, "orders"};
  ASSERT_TRUE(p.wait_acked(300)) << p.failure();
  // Everything acknowledged before the request is sent must be in the checkpoint.
  auto before = p.acked();
  auto r = checkpoint(cp);
  auto after = p.acked();
  ASSERT_TRUE(p.wait_acked(after.size() + 50)) << p.failure();  // the producer kept going
  p.stop();
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(std::string{r.obj().at("dir").as_string()}, cp);
  EXPECT_GT(r.obj().at("bytes").to_number<std::int64_t>(), 0);
  EXPECT_GT(r.obj().at("files").to_number<std::int64_t>(), 0);
  EXPECT_GE(r.obj().at("ms").as_int64(), 0);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(cp) / "CURRENT"));
  EXPECT_FALSE(std::filesystem::exists(cp + ".tmp"));

  // The running laneqd is untouched: a second laneqd starts on the checkpoint.
  laneqd_process restored;
  ASSERT_EQ(restored.start({"--data-dir", cp, "--http-port", "0", "--caf-port", "0"}), "");
  auto rport = read_port(restored);
  ASSERT_NE(rport, 0) << restored.output();
  auto got = drain(rport, "orders");
  EXPECT_EQ(restored.stop(SIGTERM), 0) << restored.output(true);

  auto sent = p.sent();
  std::set<std::string> unique(got.begin(), got.end());
  EXPECT_EQ(unique.size(), got.size()) << "a message came back twice";
  std::size_t missing = 0;
  for (const auto& b : before)
    if (!unique.contains(b)) ++missing;
  EXPECT_EQ(missing, 0u) << "of " << before.size() << " acknowledged before the checkpoint";
  for (const auto& b : unique) EXPECT_TRUE(sent.contains(b)) << b << " was never sent";
  std::size_t during = 0;
  for (const auto& b : after)
    if (!before.contains(b) && unique.contains(b)) ++during;
  std::cout << "checkpoint: " << before.size() << " acknowledged before the call, "
            << (after.size() - before.size()) << " during it (" << during << " of them in it), "
            << unique.size() << " in the checkpoint, " << sent.size() << " sent in all; " << r.body
            << "\n";

  // The original still serves every acknowledged message, the later ones included.
  auto all = drain(port_, "orders");
  for (const auto& b : p.acked()) EXPECT_TRUE(all.contains(b)) << b;
}

TEST_F(backup_daemon, refusals_name_the_path_and_change_nothing) {
  auto existing = dir_ / "existing";
  std::filesystem::create_directories(existing);
  auto r = checkpoint(existing.string());
  EXPECT_EQ(r.status, 409u) << r.body;
  EXPECT_EQ(r.code(), "already_exists");
  EXPECT_EQ(r.number(), 18);
  EXPECT_NE(r.message().find(existing.string()), std::string::npos) << r.body;
  EXPECT_TRUE(std::filesystem::is_empty(existing));

  // RocksDB stages into DIR.tmp and empties it first: a directory there is refused, untouched.
  auto staged = dir_ / "staged";
  std::filesystem::create_directories(dir_ / "staged.tmp");
  std::ofstream{dir_ / "staged.tmp" / "keep"} << "mine";
  r = checkpoint(staged.string());
  EXPECT_EQ(r.status, 409u) << r.body;
  EXPECT_EQ(r.code(), "already_exists");
  EXPECT_NE(r.message().find("staged.tmp"), std::string::npos) << r.body;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "staged.tmp" / "keep"));
  EXPECT_FALSE(std::filesystem::exists(staged));

  // A parent that is a file: the client named a path that cannot be a directory, 400 naming
  // both the checkpoint and the file in the way.
  std::ofstream{dir_ / "a-file"} << "x";
  auto under_file = (dir_ / "a-file" / "sub" / "cp").string();
  r = checkpoint(under_file);
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.code(), "invalid_argument");
  EXPECT_EQ(r.number(), 8);
  EXPECT_NE(r.message().find(under_file), std::string::npos) << r.body;
  EXPECT_NE(r.message().find((dir_ / "a-file").string() + "' is not a directory"),
            std::string::npos)
      << r.body;

  r = checkpoint("relative/dir");
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.code(), "invalid_argument");

  // Still healthy, and a good request afterwards works.
  EXPECT_EQ(get(port_, "/healthz").status, 200u);
  r = checkpoint((dir_ / "fine").string());
  EXPECT_EQ(r.status, 200u) << r.body;
}

// `laneq backup /var/lib/laneq-checkpoints/today` on a host where the parent does not exist yet
// (README.md) used to answer 500 checkpoint_failed: the parents are created, as by `mkdir -p`.
TEST_F(backup_daemon, a_checkpoint_creates_its_missing_parent_directories) {
  ASSERT_EQ(put(port_, "/v1/queues/orders", "{}").status, 201u);
  ASSERT_EQ(post(port_, "/v1/queues/orders/messages", R"({"body": "kept"})").status, 200u);
  auto parent = dir_ / "checkpoints" / "daily";
  auto cp = (parent / "today").string();
  auto r = checkpoint(cp);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_TRUE(std::filesystem::is_directory(parent));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path{cp} / "CURRENT")) << r.body;
  EXPECT_FALSE(std::filesystem::exists(cp + ".tmp"));

  // A second laneqd serves the message from it.
  laneqd_process restored;
  ASSERT_EQ(restored.start({"--data-dir", cp, "--http-port", "0", "--caf-port", "0"}), "");
  auto rport = read_port(restored);
  ASSERT_NE(rport, 0) << restored.output();
  EXPECT_TRUE(drain(rport, "orders").contains("kept"));
  EXPECT_EQ(restored.stop(SIGTERM), 0) << restored.output(true);
}

}  // namespace
}  // namespace laneq::server::test
