// Unit tests for deadline_heap: deadlines by key, earliest first, with memory that follows the
// live keys (the shard engine's lease deadlines, reclaim graces and read retries).
#include "laneq/deadline_heap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

constexpr timestamp t0 = timestamp::from_ms(1'000);

TEST(deadline_heap, pops_due_keys_earliest_first_and_ties_in_key_order) {
  deadline_heap<int> h;
  h.set(3, t0 + 20ms);
  h.set(1, t0 + 10ms);
  h.set(7, t0 + 10ms);
  h.set(2, t0 + 10ms);
  EXPECT_EQ(h.next(), t0 + 10ms);
  EXPECT_TRUE(h.pop_due(t0 + 9ms).empty());
  EXPECT_EQ(h.pop_due(t0 + 10ms), (std::vector<int>{1, 2, 7}));
  EXPECT_EQ(h.next(), t0 + 20ms);
  EXPECT_EQ(h.pop_due(t0 + 1s), (std::vector<int>{3}));
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.next(), std::nullopt);
}

TEST(deadline_heap, setting_again_replaces_the_deadline) {
  deadline_heap<int> h;
  h.set(1, t0 + 10ms);
  h.set(1, t0 + 50ms);  // an extend
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.deadline(1), t0 + 50ms);
  EXPECT_EQ(h.next(), t0 + 50ms);  // the replaced entry does not surface
  EXPECT_TRUE(h.pop_due(t0 + 49ms).empty());
  EXPECT_EQ(h.pop_due(t0 + 50ms), (std::vector<int>{1}));
  h.set(2, t0 + 50ms);
  h.set(2, t0 + 5ms);  // earlier, too
  EXPECT_EQ(h.pop_due(t0 + 5ms), (std::vector<int>{2}));
  EXPECT_TRUE(h.empty());
  h.check_invariants();
}

TEST(deadline_heap, an_erased_key_never_comes_due) {
  deadline_heap<int> h;
  h.set(1, t0 + 10ms);
  h.set(2, t0 + 20ms);
  EXPECT_TRUE(h.erase(1));
  EXPECT_FALSE(h.erase(1));
  EXPECT_EQ(h.deadline(1), std::nullopt);
  EXPECT_EQ(h.next(), t0 + 20ms);
  EXPECT_EQ(h.pop_due(t0 + 1s), (std::vector<int>{2}));
  h.check_invariants();
}

// The reason it exists: a lease acked long before its deadline used to keep its heap entry until
// it reached the top. One message held to the end of its lease (it has the earliest deadline)
// kept the entries of every lease granted and acked meanwhile: with 30 s leases at 100,000
// msg/s, three million entries. (The shard engine keeps group heads' deadlines in a heap of its
// own, `group_leases_`, which an ack clears the same way.)
TEST(deadline_heap, memory_follows_the_live_keys_not_every_deadline_set) {
  deadline_heap<int> h;
  h.set(-1, t0 + 1s);  // held by a slow consumer: the top, all along
  for (int i = 0; i < 100'000; ++i) {
    h.set(i, t0 + 30s + std::chrono::microseconds{i});  // delivered under a 30 s lease
    if (i >= 10) h.erase(i - 10);                       // and acked soon after
    ASSERT_EQ(h.heap_size(), h.size());
  }
  EXPECT_EQ(h.size(), 11u);
  EXPECT_EQ(h.pop_due(t0 + 1s), (std::vector<int>{-1}));
  EXPECT_EQ(h.pop_due(timestamp::max()).size(), 10u);
  EXPECT_EQ(h.heap_size(), 0u);
  // Extends of the same keys, over and over, are bounded the same way.
  for (int round = 0; round < 10'000; ++round) {
    h.set(round % 5, t0 + std::chrono::milliseconds{round});
    ASSERT_EQ(h.heap_size(), h.size());
  }
  h.check_invariants();
}

// Random sets, erases and pops against a std::map model: the same keys come due in the same
// order, and the heap holds one entry per key throughout.
TEST(deadline_heap, random_operations_match_a_model) {
  auto seed = test::seed_from_env(20261201);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int round = 0; round < 20; ++round) {
    deadline_heap<std::uint32_t> h;
    std::map<std::uint32_t, timestamp> model;
    auto now = t0;
    const auto keys = 1 + rng() % 200;
    for (int step = 0; step < 5'000; ++step) {
      auto key = static_cast<std::uint32_t>(rng() % keys);
      switch (rng() % 4) {
        case 0:
        case 1: {
          auto d = now + std::chrono::microseconds{rng() % 1000};
          h.set(key, d);
          model[key] = d;
          break;
        }
        case 2: ASSERT_EQ(h.erase(key), model.erase(key) == 1); break;
        default: {
          now = now + std::chrono::microseconds{rng() % 300};
          std::vector<std::pair<timestamp, std::uint32_t>> due;
          for (auto it = model.begin(); it != model.end();) {
            if (it->second <= now) {
              due.emplace_back(it->second, it->first);
              it = model.erase(it);
            } else {
              ++it;
            }
          }
          std::sort(due.begin(), due.end());
          std::vector<std::uint32_t> expected;
          for (const auto& d : due) expected.push_back(d.second);
          ASSERT_EQ(h.pop_due(now), expected) << "round " << round << " step " << step;
        }
      }
      ASSERT_EQ(h.size(), model.size());
      std::optional<timestamp> earliest;
      for (const auto& [k, d] : model)
        if (!earliest || d < *earliest) earliest = d;
      ASSERT_EQ(h.next(), earliest);
      if (step % 10 == 0) h.check_invariants();
    }
  }
}

}  // namespace
}  // namespace laneq
