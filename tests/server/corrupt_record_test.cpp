// Records that fail laneq's own checksum (libqueue codec, persistence.md P3), through laneqd
// (ISSUE 22 part 4): the test stops laneqd, flips a byte in the value of one message record with
// RocksDB directly, and starts laneqd again. A bad record inside a group's window (read by
// recovery) makes laneqd refuse to start naming the record; one deep in a lane (read back only
// when the group gets there) stops that group alone, which `groups?state=blocked` and
// laneq_corrupt_records_total report, while the other groups keep delivering.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "laneq/codec.hpp"
#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

namespace fs = std::filesystem;

constexpr int per_lane = 100;  // beyond the recovery window (64, persistence.md P8)

class corrupt_record : public ::testing::Test {
 protected:
  void SetUp() override { data_ = temp_dir("corrupt-record"); }

  std::uint16_t start(laneqd_process& p, std::vector<std::string> extra = {}) {
    auto port = start_and_read_port(p, data_, std::move(extra));
    EXPECT_NE(port, 0) << p.output();
    return port;
  }

  /// A config without the reclaim grace, so a restarted laneqd offers its heads at once.
  fs::path no_reclaim_grace() const {
    auto path = data_ / "no-grace.json";
    std::ofstream{path} << R"({"reclaim_grace_ms": 0})";
    return path;
  }

  /// Lanes a and b with `per_lane` messages each, then a clean stop.
  void fill() {
    laneqd_process p;
    auto port = start(p);
    ASSERT_EQ(put(port, "/v1/queues/q",
                  R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})")
                  .status,
              201u);
    for (const char* lane : {"a", "b"}) {
      json::array msgs;
      for (int i = 0; i < per_lane; ++i)
        msgs.emplace_back(json::object{{"body", std::to_string(i)},
                                       {"headers", json::object{{"account", lane}}}});
      auto r = post(port, "/v1/queues/q/messages",
                    json::serialize(json::object{{"messages", std::move(msgs)}}));
      ASSERT_EQ(r.status, 200u) << r.body;
    }
    ASSERT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }

  /// Flips a byte in the value of the `nth` (0-based, in key order) ordered message record, with
  /// RocksDB directly; returns the record's seq (0 if there is no such record) and sets
  /// `account` to its lane's header.
  std::uint64_t corrupt(int nth, std::string* account = nullptr) {
    rocksdb::DB* raw = nullptr;
    auto s = rocksdb::DB::Open(rocksdb::Options{}, (data_ / "db").string(), &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::unique_ptr<rocksdb::DB> db{raw};
    if (!db) return 0;
    std::string key;
    std::string value;
    std::uint64_t seq = 0;
    {  // the iterator must go before the database closes
      std::unique_ptr<rocksdb::Iterator> it{db->NewIterator({})};
      int seen = 0;
      for (it->SeekToFirst(); it->Valid() && seq == 0; it->Next()) {
        auto parts = codec::parse_message_key(it->key().ToString());
        if (!parts || parts.value().lane.unordered() || seen++ < nth) continue;
        key = it->key().ToString();
        value = it->value().ToString();
        seq = parts.value().seq.value;
        auto m = codec::decode_message(value);
        EXPECT_TRUE(m.ok());
        if (m && account) *account = m.value().headers.at(0).value;
      }
    }
    if (seq != 0) {
      value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x5a);
      EXPECT_TRUE(db->Put({}, key, value).ok());
      EXPECT_TRUE(db->Flush({}).ok());
    }
    EXPECT_TRUE(db->Close().ok());
    return seq;
  }

  fs::path data_;
};

TEST_F(corrupt_record, a_bad_record_in_a_recovered_window_is_refused_naming_it) {
  ASSERT_NO_FATAL_FAILURE(fill());
  auto seq = corrupt(3);
  ASSERT_NE(seq, 0u);
  expect_refusal(data_ / "db", {(data_ / "db").string(), "queue 'q'",
                                "seq " + std::to_string(seq) + " of lane ", "checksum"});
}

TEST_F(corrupt_record, a_bad_record_deep_in_a_lane_stops_only_its_group) {
  ASSERT_NO_FATAL_FAILURE(fill());
  std::string damaged;
  auto seq = corrupt(80, &damaged);  // the 81st record of the first lane, beyond its window of 64
  ASSERT_EQ(seq, 81u);
  laneqd_process p;
  auto port = start(p, {"--config", no_reclaim_grace().string()});
  // Drains everything deliverable: the other lane in full, the damaged one up to its bad record.
  std::map<std::string, std::vector<int>> bodies;  // per lane, in delivery order
  int total = 0;
  const int deliverable = per_lane + 80;
  for (int empty = 0; empty < 3 && total < deliverable;) {  // 3 empty long polls: no more comes
    auto r = post(port, "/v1/queues/q/receive", R"({"max": 50, "wait_ms": 2000})");
    ASSERT_EQ(r.status, 200u) << r.body;
    auto msgs = json::parse(r.body).as_object().at("messages").as_array();
    empty = msgs.empty() ? empty + 1 : 0;
    for (auto& v : msgs) {
      const auto& m = v.as_object();
      auto lane = std::string(m.at("headers").as_object().at("account").as_string());
      bodies[lane].push_back(std::stoi(std::string(m.at("body").as_string())));
      auto a =
          post(port, "/v1/queues/q/ack", json::serialize(json::object{{"lease", m.at("lease")}}));
      ASSERT_EQ(a.status, 200u) << a.body;
      ++total;
    }
  }
  auto more = post(port, "/v1/queues/q/receive", R"({"max": 50, "wait_ms": 500})");
  EXPECT_EQ(more.body.find("\"lease\""), std::string::npos) << "past the bad record: " << more.body;
  auto in_order = [](int n) {
    std::vector<int> out(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = i;
    return out;
  };
  EXPECT_EQ(bodies[damaged], in_order(80)) << "the damaged lane stops before seq " << seq;
  EXPECT_EQ(bodies[damaged == "a" ? "b" : "a"], in_order(per_lane)) << "the other lane in full";

  auto g = get(port, "/v1/queues/q/groups?state=blocked");
  ASSERT_EQ(g.status, 200u) << g.body;
  auto groups = json::parse(g.body).as_object().at("groups").as_array();
  ASSERT_EQ(groups.size(), 1u) << g.body;
  const auto& grp = groups[0].as_object();
  EXPECT_EQ(grp.at("state").as_string(), "corrupt") << g.body;
  EXPECT_EQ(grp.at("backlog").as_int64(), per_lane - 80) << g.body;
  auto reason = std::string(grp.at("reason").as_string());
  for (const auto& w : std::vector<std::string>{"seq 81", "checksum"})
    EXPECT_NE(reason.find(w), std::string::npos) << w << "\n" << g.body;
  auto metrics = get(port, "/metrics").body;
  EXPECT_NE(metrics.find("laneq_corrupt_records_total{queue=\"q\"} 1\n"), std::string::npos)
      << "laneq_corrupt_records_total missing or not 1";
  auto logged = p.wait_line("laneq.shard: queue 'q', group ", 60s);
  ASSERT_TRUE(logged.has_value()) << p.output();
  EXPECT_NE(logged->find("stops at a corrupt record: the message record at seq 81"),
            std::string::npos)
      << *logged;
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
}

}  // namespace
}  // namespace laneq::server::test
