// The persistence actor's store protocol on a real RocksDB (docs/design/persistence.md): group
// commit, batch bounds, scans, stats, option validation, restart.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "crash_support.hpp"

namespace laneq::test {
namespace {

class Persistence : public ::testing::Test {
 protected:
  store_actor spawn(persistence_options opts = {}) {
    if (opts.dir.empty()) opts.dir = dir_.sub("db");
    auto r = spawn_persistence(sys_, std::move(opts));
    if (!r) throw std::runtime_error("spawn_persistence: " + to_string(r.err()));
    return r.value();
  }

  static std::string key(int i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "k%05d", i);
    return buf;
  }

  static std::uint64_t sum(const std::vector<std::uint64_t>& xs) {
    return std::accumulate(xs.begin(), xs.end(), std::uint64_t{0});
  }

  temp_dir dir_;
  crash_config cfg_;
  caf::actor_system sys_{cfg_};
};

TEST_F(Persistence, concurrent_writers_share_batches) {
  auto store = spawn();
  store_client c{sys_, store};
  std::vector<store_write> ws;
  for (int i = 0; i < 400; ++i) ws.push_back(store_write{{put(key(i), "v")}, true});
  for (auto& st : c.write_many(std::move(ws))) ASSERT_TRUE(st.ok()) << to_string(st.err());
  auto s = c.stats();
  EXPECT_EQ(s.writes, 400u);
  EXPECT_EQ(s.ops, 400u);
  EXPECT_LT(s.batches, s.writes) << "no two writes shared a batch";
  EXPECT_EQ(s.syncs, s.batches);
  EXPECT_EQ(sum(s.batch_histogram), s.batches);
  EXPECT_FALSE(s.degraded);
  std::printf("400 pipelined writes: %llu batches\n", static_cast<unsigned long long>(s.batches));
  auto all = c.scan_all();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value().size(), 400u);
  stop(sys_, store);
}

TEST_F(Persistence, batch_closes_at_batch_writes_max) {
  persistence_options opts;
  opts.batch_writes_max = 4;
  opts.batch_linger = std::chrono::milliseconds{50};  // only the bound closes a batch early
  auto store = spawn(opts);
  store_client c{sys_, store};
  std::vector<store_write> ws;
  for (int i = 0; i < 100; ++i) ws.push_back(store_write{{put(key(i), "v")}, true});
  for (auto& st : c.write_many(std::move(ws))) ASSERT_TRUE(st.ok());
  auto s = c.stats();
  EXPECT_EQ(s.writes, 100u);
  EXPECT_GE(s.batches, 25u);
  // Buckets: 0 = 1 write, 1 = 2-3, 2 = 4-7: with at most 4 writes, bucket 3 never appears.
  EXPECT_LE(s.batch_histogram.size(), 3u);
  EXPECT_GE(s.batch_histogram.size(), 3u) << "the lingering batches never filled up to 4";
  stop(sys_, store);
}

TEST_F(Persistence, batch_closes_at_batch_bytes_max) {
  persistence_options opts;
  opts.batch_bytes_max = 1000;
  opts.batch_linger = std::chrono::milliseconds{50};
  auto store = spawn(opts);
  store_client c{sys_, store};
  std::vector<store_write> ws;
  for (int i = 0; i < 40; ++i)
    ws.push_back(store_write{{put(key(i), std::string(294, 'x'))}, false});
  for (auto& st : c.write_many(std::move(ws))) ASSERT_TRUE(st.ok());
  auto s = c.stats();
  EXPECT_EQ(s.bytes, 40u * 300u);
  EXPECT_EQ(s.syncs, 0u) << "no member asked for sync";
  // 300 bytes a write: the fourth write reaches 1000 bytes and closes the batch.
  EXPECT_GE(s.batches, 10u);
  EXPECT_LE(s.batch_histogram.size(), 3u);
  stop(sys_, store);
}

TEST_F(Persistence, scan_respects_bounds_and_max) {
  auto store = spawn();
  store_client c{sys_, store};
  std::vector<store_op> ops;
  for (char ch = 'a'; ch <= 'j'; ++ch) ops.push_back(put(std::string(1, ch), std::string(2, ch)));
  ASSERT_TRUE(c.write(std::move(ops)).ok());

  auto keys = [](const result<std::vector<store_entry>>& r) {
    std::string out;
    for (auto& e : r.value()) out += e.key;
    return out;
  };
  EXPECT_EQ(keys(c.scan("b", "e", 100)), "bcd");             // from inclusive, to exclusive
  EXPECT_EQ(keys(c.scan("", "\x7f", 3)), "abc");             // at most max, in key order
  EXPECT_EQ(keys(c.scan("bb", "d", 100)), "c");              // bounds between keys
  EXPECT_EQ(keys(c.scan("e", "e", 100)), "");                // empty range
  EXPECT_EQ(keys(c.scan("f", "b", 100)), "");                // inverted range
  EXPECT_EQ(keys(c.scan("a", "z", 0)), "");                  // max 0
  EXPECT_EQ(c.scan("c", "d", 1).value().at(0).value, "cc");  // values come back

  ASSERT_TRUE(c.write({erase("a"), erase_range("c", "f")}).ok());
  EXPECT_EQ(keys(c.scan_all()), "bfghij");
  stop(sys_, store);
}

TEST_F(Persistence, scan_max_is_capped_at_the_limit) {
  auto store = spawn();
  store_client c{sys_, store};
  std::vector<store_op> ops;
  for (int i = 0; i < static_cast<int>(limits::store_scan_max) + 5; ++i)
    ops.push_back(put(key(i), ""));
  ASSERT_TRUE(c.write(std::move(ops), false).ok());
  auto r = c.scan("", "\x7f", std::numeric_limits<std::uint32_t>::max());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().size(), limits::store_scan_max);
  stop(sys_, store);
}

TEST_F(Persistence, stats_count_batches_writes_ops_bytes_and_syncs) {
  auto store = spawn();
  store_client c{sys_, store};
  ASSERT_TRUE(c.write({put("a", "12345")}, true).ok());           // 6 bytes
  ASSERT_TRUE(c.write({put("b", "1"), erase("a")}, false).ok());  // 2 + 1 bytes
  ASSERT_TRUE(c.write({erase_range("a", "c")}, true).ok());       // 2 bytes
  auto s = c.stats();
  EXPECT_EQ(s.batches, 3u);  // each write waited for the previous one
  EXPECT_EQ(s.writes, 3u);
  EXPECT_EQ(s.ops, 4u);
  EXPECT_EQ(s.bytes, 11u);
  EXPECT_EQ(s.syncs, 2u);
  EXPECT_EQ(s.failed_batches, 0u);
  EXPECT_EQ(s.reopens, 0u);
  EXPECT_EQ(s.batch_histogram, (std::vector<std::uint64_t>{3}));
  // Every committed batch is timed once: the buckets add up to the batches.
  ASSERT_EQ(s.commit_histogram.size(), latency_bounds_s.size() + 1);
  EXPECT_EQ(std::accumulate(s.commit_histogram.begin(), s.commit_histogram.end(), std::uint64_t{0}),
            3u);
  EXPECT_GT(s.commit_sum_us, 0u);  // two synced writes to a real file take time
  EXPECT_FALSE(s.degraded);
  EXPECT_EQ(s.reason, "");
  stop(sys_, store);
}

TEST_F(Persistence, a_malformed_write_is_refused_alone) {
  auto store = spawn();
  store_client c{sys_, store};
  std::vector<store_write> ws;
  ws.push_back(store_write{{put("a", "1")}, true});
  ws.push_back(store_write{{put("b", "1"), erase_range("z", "c")}, true});  // end before start
  ws.push_back(store_write{{put("c", "1")}, true});
  auto sts = c.write_many(std::move(ws));
  EXPECT_TRUE(sts[0].ok());
  ASSERT_FALSE(sts[1].ok());
  EXPECT_EQ(sts[1].err().code, errc::invalid_argument);
  EXPECT_TRUE(sts[2].ok());
  auto all = c.scan_all();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all.value().size(), 2u);  // nothing of the refused write
  EXPECT_EQ(all.value()[0].key, "a");
  EXPECT_EQ(all.value()[1].key, "c");
  stop(sys_, store);
}

TEST_F(Persistence, options_are_validated_one_message_per_rule) {
  persistence_options opts;
  opts.batch_writes_max = 0;
  opts.reopen_interval = duration::zero();
  auto r = spawn_persistence(sys_, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("dir must not be empty"), std::string::npos);
  EXPECT_NE(r.err().message.find("batch_writes_max"), std::string::npos);
  EXPECT_NE(r.err().message.find("reopen_interval"), std::string::npos);
}

TEST_F(Persistence, an_unopenable_directory_is_storage_failed) {
  persistence_options opts;
  opts.dir = "/proc/laneq-cannot-create-this/db";
  auto r = spawn_persistence(sys_, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::storage_failed) << r.err().message;
}

TEST_F(Persistence, data_survives_a_clean_restart_and_the_directory_is_released) {
  auto store = spawn();
  {
    store_client c{sys_, store};
    ASSERT_TRUE(c.write({put("a", "1"), put("b", "2")}).ok());
  }
  stop(sys_, store);
  store = spawn();  // fails if the first actor still held the database lock
  store_client c{sys_, store};
  auto all = c.scan_all();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value().size(), 2u);
  stop(sys_, store);
}

TEST_F(Persistence, a_checkpoint_commits_the_open_batch_first_and_opens_as_a_store) {
  persistence_options opts;
  opts.batch_linger = std::chrono::hours{1};  // the write waits in the open batch
  auto store = spawn(opts);
  store_client c{sys_, store};
  {
    caf::scoped_actor self{sys_};
    auto pending = self->request(store, store_client::timeout, write_atom_v,
                                 store_write{{put("a", "1"), put("b", "2")}, true});
    auto cp = c.checkpoint(dir_.sub("cp"));
    ASSERT_TRUE(cp.ok()) << to_string(cp.err());
    EXPECT_EQ(cp.value().dir, dir_.sub("cp"));
    EXPECT_GT(cp.value().files, 0u);
    EXPECT_GT(cp.value().bytes, 0u);
    bool written = false;
    pending.receive([&](caf::ok_atom) { written = true; },
                    [&](caf::error& e) { FAIL() << to_string(from_caf(e)); });
    EXPECT_TRUE(written);
  }
  // The same directory again, a relative one: refused, naming the path.
  auto again = c.checkpoint(dir_.sub("cp"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.err().code, errc::already_exists);
  EXPECT_NE(again.err().message.find(dir_.sub("cp")), std::string::npos) << again.err().message;
  auto relative = c.checkpoint("cp2");
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.err().code, errc::invalid_argument);
  stop(sys_, store);

  persistence_options copy;
  copy.dir = dir_.sub("cp");
  auto opened = spawn_persistence(sys_, copy);
  ASSERT_TRUE(opened.ok()) << to_string(opened.err());
  store_client c2{sys_, opened.value()};
  auto all = c2.scan_all();
  ASSERT_TRUE(all.ok()) << to_string(all.err());
  ASSERT_EQ(all.value().size(), 2u);
  EXPECT_EQ(all.value()[0].key, "a");
  EXPECT_EQ(all.value()[1].value, "2");
  stop(sys_, opened.value());
}

}  // namespace
}  // namespace laneq::test
