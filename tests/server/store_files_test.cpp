// Missing and truncated store files, through laneqd (docs/design/persistence.md, "Missing and
// truncated files"; ISSUE 22 part 5): with acknowledged messages in the store, a WAL that is
// deleted, emptied or cut in half, a MANIFEST cut in half, and CURRENT deleted with the WAL must
// each make laneqd refuse to start, naming what is missing, instead of starting empty or
// partial. Before the marker and the directory check each of these started (measured: empty, or
// 3,100 of 6,000 messages). A clean SIGTERM flushes, so its restart replays no WAL.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

namespace fs = std::filesystem;

constexpr int batches = 60;  // 60 × 100 = 6,000 messages
constexpr int per_batch = 100;

class store_files : public ::testing::Test {
 protected:
  void SetUp() override { data_ = temp_dir("store-files"); }

  fs::path db() const { return data_ / "db"; }

  std::uint16_t start(laneqd_process& p) {
    auto port = start_and_read_port(p, data_);
    EXPECT_NE(port, 0) << p.output();
    return port;
  }

  /// Enqueues 6,000 messages, waits past the marker interval and enqueues one more, so the
  /// marker covers every earlier one. Returns how many were acknowledged.
  int fill(std::uint16_t port) {
    EXPECT_EQ(put(port, "/v1/queues/orders", "{}").status, 201u);
    client c{port};
    int acked = 0;
    for (int b = 0; b <= batches; ++b) {
      if (b == batches) std::this_thread::sleep_for(1500ms);  // > store_marker::interval (1 s)
      json::array msgs;
      for (int i = 0; i < (b == batches ? 1 : per_batch); ++i)
        msgs.emplace_back(json::object{{"body", std::string(200, 'x') + std::to_string(i)}});
      auto r = c.call(http::verb::post, "/v1/queues/orders/messages",
                      json::serialize(json::object{{"messages", std::move(msgs)}}));
      EXPECT_EQ(r.status, 200u) << r.body;
      if (r.status == 200u) acked += b == batches ? 1 : per_batch;
    }
    return acked;
  }

  /// Files in the store whose name ends with `suffix` (or starts with it, for MANIFEST).
  std::vector<fs::path> files(const std::string& part) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(db()))
      if (e.path().filename().string().find(part) != std::string::npos) out.push_back(e.path());
    return out;
  }

  /// Fills a store and stops laneqd cleanly (SIGTERM: it flushes, the WAL is empty).
  void fill_and_stop() {
    laneqd_process p;
    auto port = start(p);
    ASSERT_EQ(fill(port), batches * per_batch + 1);
    ASSERT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }

  /// Fills a store and kills laneqd with SIGKILL, so the messages are in the WAL only.
  void fill_and_kill() {
    laneqd_process p;
    auto port = start(p);
    ASSERT_EQ(fill(port), batches * per_batch + 1);
    p.kill9();
    ASSERT_FALSE(files(".log").empty());
  }

  fs::path data_;
};

TEST_F(store_files, a_deleted_wal_is_refused) {
  ASSERT_NO_FATAL_FAILURE(fill_and_kill());
  for (const auto& f : files(".log")) fs::remove(f);
  expect_refusal(db(), {"acknowledged writes are missing", "LANEQ-COMMITTED", db().string()});
}

TEST_F(store_files, a_wal_truncated_to_zero_is_refused) {
  ASSERT_NO_FATAL_FAILURE(fill_and_kill());
  for (const auto& f : files(".log")) fs::resize_file(f, 0);
  expect_refusal(db(), {"acknowledged writes are missing", "LANEQ-COMMITTED"});
}

TEST_F(store_files, a_wal_cut_in_half_is_refused) {
  ASSERT_NO_FATAL_FAILURE(fill_and_kill());
  for (const auto& f : files(".log")) fs::resize_file(f, fs::file_size(f) / 2);
  expect_refusal(db(), {"acknowledged writes are missing", "LANEQ-COMMITTED"});
}

TEST_F(store_files, a_flipped_byte_inside_the_wal_is_refused_naming_the_file_and_offset) {
  fill_and_kill();
  auto wals = files(".log");
  ASSERT_EQ(wals.size(), 1u);
  auto size = fs::file_size(wals[0]);
  ASSERT_GT(size, 4 * 32768u) << "the flip must be in an acknowledged record mid-WAL";
  {
    std::fstream f{wals[0], std::ios::in | std::ios::out | std::ios::binary};
    f.seekg(static_cast<std::streamoff>(size / 2));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put(static_cast<char>(c ^ 0x5a));
  }
  expect_refusal(db(), {wals[0].filename().string(), "offset", db().string()});
}

TEST_F(store_files, a_manifest_cut_in_half_is_refused) {
  ASSERT_NO_FATAL_FAILURE(fill_and_stop());
  auto manifests = files("MANIFEST-");
  ASSERT_EQ(manifests.size(), 1u);
  fs::resize_file(manifests[0], fs::file_size(manifests[0]) / 2);
  expect_refusal(db(), {db().string()});
  EXPECT_FALSE(files(".sst").empty()) << "the table file must not be deleted by a refused start";
}

TEST_F(store_files, current_and_wal_deleted_with_tables_present_is_refused) {
  ASSERT_NO_FATAL_FAILURE(fill_and_stop());
  fs::remove(db() / "CURRENT");
  for (const auto& f : files(".log")) fs::remove(f);
  expect_refusal(db(), {"no CURRENT file", db().string()});
  EXPECT_FALSE(fs::exists(db() / "CURRENT")) << "no new database was created";
}

TEST_F(store_files, a_clean_stop_flushes_so_the_restart_replays_no_wal_and_keeps_everything) {
  ASSERT_NO_FATAL_FAILURE(fill_and_stop());
  EXPECT_FALSE(files(".sst").empty());
  std::uintmax_t wal_bytes = 0;
  for (const auto& f : files(".log")) wal_bytes += fs::file_size(f);
  EXPECT_EQ(wal_bytes, 0u) << "a clean stop left data to replay in the WAL";

  laneqd_process again;
  auto port2 = start(again);
  auto r = get(port2, "/v1/queues/orders");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.obj().at("stats").as_object().at("backlog").to_number<std::int64_t>(),
            batches * per_batch + 1)
      << r.body;
  EXPECT_EQ(again.stop(SIGTERM), 0) << again.output(true);
}

TEST_F(store_files, a_store_from_before_the_marker_starts_and_is_marked) {
  ASSERT_NO_FATAL_FAILURE(fill_and_stop());
  fs::remove(db() / "LANEQ-COMMITTED");
  laneqd_process again;
  ASSERT_NE(start(again), 0);
  EXPECT_EQ(again.stop(SIGTERM), 0) << again.output(true);
  EXPECT_TRUE(fs::exists(db() / "LANEQ-COMMITTED"));
}

}  // namespace
}  // namespace laneq::server::test
