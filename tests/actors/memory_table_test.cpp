// The in-memory store's table (actors/include/laneq/actors/memory_table.hpp) against an ordered
// map of whole keys: the same contents and the same scans after every step of random puts,
// erases and range erases over keys shaped as the store's (message keys of a few lanes, short
// keys, keys that are prefixes of others). The failure message names the seed; rerun one with
// LANEQ_MEMORY_TABLE_SEED=<seed>.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "laneq/actors/memory_table.hpp"

namespace laneq {
namespace {

constexpr std::size_t partition_bytes = 4;

class table_model {
 public:
  explicit table_model(std::uint64_t seed) : seed_(seed), rng_(seed) {}

  std::string where() const {
    return "seed " + std::to_string(seed_) +
           " (rerun: LANEQ_MEMORY_TABLE_SEED=" + std::to_string(seed_) + "), step " +
           std::to_string(step_);
  }

  /// A key over a small alphabet with a zero byte in it: many share a partition (4 bytes),
  /// some are shorter than it, some are prefixes of others; a few have suffixes longer than the
  /// 8 bytes the table compares as a number, some ending in zero bytes.
  std::string key() {
    bool longer = std::uniform_int_distribution<int>(0, 9)(rng_) < 3;
    auto n = longer ? std::uniform_int_distribution<std::size_t>(11, 14)(rng_)
                    : std::uniform_int_distribution<std::size_t>(1, 6)(rng_);
    std::string k(n, 'a');
    for (auto& c : k) c = "\0ab"[std::uniform_int_distribution<int>(0, 2)(rng_)];
    if (longer) k.replace(0, 4, "lane");  // long keys crowd into one partition
    return k;
  }

  void step() {
    ++step_;
    auto roll = std::uniform_int_distribution<int>(0, 99)(rng_);
    if (roll < 50) {
      auto k = key();
      auto v = std::to_string(step_);
      table_.put(k, v);
      model_[k] = v;
    } else if (roll < 95) {
      auto k = key();
      table_.erase(k);
      model_.erase(k);
    } else {
      auto [from, to] = range();
      table_.erase_range(from, to);
      model_.erase(model_.lower_bound(from), model_.lower_bound(to));
    }
  }

  std::pair<std::string, std::string> range() {
    auto a = key();
    auto b = key();
    if (b < a) std::swap(a, b);
    return {a, b};
  }

  void check() {
    ASSERT_EQ(table_.size(), model_.size()) << where();
    expect_scan("", "\x7f", model_.size() + 1);
    auto [from, to] = range();
    expect_scan(from, to, std::uniform_int_distribution<std::size_t>(1, 8)(rng_));
  }

  void expect_scan(const std::string& from, const std::string& to, std::size_t max) {
    auto got = table_.scan(from, to, max);
    std::vector<store_entry> want;
    for (auto it = model_.lower_bound(from); it != model_.end() && it->first < to; ++it) {
      if (want.size() >= max) break;
      want.push_back(store_entry{it->first, it->second});
    }
    ASSERT_EQ(got.size(), want.size()) << where() << ", scan [" << from << ", " << to << ")";
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].key, want[i].key) << where() << ", scan [" << from << ", " << to << ")";
      ASSERT_EQ(got[i].value, want[i].value) << where() << ", key " << got[i].key;
    }
  }

 private:
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  std::uint64_t step_ = 0;
  memory_table table_{partition_bytes};
  std::map<std::string, std::string> model_;
};

std::uint64_t seed() {
  if (const char* s = std::getenv("LANEQ_MEMORY_TABLE_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

TEST(memory_table, agrees_with_an_ordered_map_of_whole_keys_under_random_writes) {
  auto s = seed();
  std::printf("memory_table seed %llu\n", static_cast<unsigned long long>(s));
  for (std::uint64_t run = 0; run < 20; ++run) {
    table_model m{s + run};
    for (int i = 0; i < 2000; ++i) {
      m.step();
      m.check();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(memory_table, a_lane_acked_in_order_keeps_no_erased_entries) {
  memory_table t{4};
  for (int i = 0; i < 1000; ++i) t.put("lane" + std::to_string(100000 + i), "v");
  t.put("other", "w");
  EXPECT_EQ(t.partitions(), 2u);  // "lane" and "othe"
  for (int i = 0; i < 999; ++i) t.erase("lane" + std::to_string(100000 + i));
  auto left = t.scan("lane", "lanf", 10);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].key, "lane100999");
  EXPECT_EQ(t.size(), 2u);
  // The backlog took room for 1,024 entries; the drained lane keeps a small part of it.
  EXPECT_LT(t.entries_capacity(), 1024u / 5) << "a drained lane keeps the room of its backlog";
}

TEST(memory_table, keeps_at_most_its_bound_of_emptied_partitions_and_drops_the_oldest) {
  memory_table t{7};  // a key "p" + 6 digits + "/x" is alone in its partition
  auto key = [](std::size_t i) { return "p" + std::to_string(100000 + i) + "/x"; };
  auto lanes = memory_table::idle_partitions_max + 10;
  for (std::size_t i = 0; i < lanes; ++i) {
    t.put(key(i), "v");
    t.erase(key(i));
  }
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.partitions(), memory_table::idle_partitions_max);
  t.put(key(0), "back");  // its partition was among the oldest emptied, dropped: made again
  EXPECT_EQ(t.partitions(), memory_table::idle_partitions_max + 1);
  t.put(key(lanes - 1), "back");  // its partition was kept
  EXPECT_EQ(t.partitions(), memory_table::idle_partitions_max + 1);
  ASSERT_EQ(t.scan("", "z", 10).size(), 2u);
}

TEST(memory_table, an_erased_key_put_again_comes_back_with_its_new_value) {
  memory_table t{4};
  t.put("laneA", "1");
  t.put("laneB", "2");
  t.erase("laneA");
  t.put("laneA", "3");
  auto all = t.scan("", "z", 10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].key, "laneA");
  EXPECT_EQ(all[0].value, "3");
  EXPECT_EQ(all[1].value, "2");
}

}  // namespace
}  // namespace laneq
