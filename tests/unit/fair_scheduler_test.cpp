// Unit tests for fair_scheduler: round-robin fairness, delays and throttles
// (docs/design/fairness.md F1-F5, docs/design/throttling.md T1-T4), and the worked example of
// ordering.md replayed on the pure core (group_state + fair_scheduler).
#include "laneq/fair_scheduler.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "laneq/group_state.hpp"
#include "laneq/key.hpp"
#include "laneq/lease_table.hpp"
#include "laneq/queue_spec.hpp"
#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

constexpr timestamp t0 = timestamp::from_ms(100'000);

/// An item with id = seq = `n` in fairness key `fk` (group 0: unordered).
ready_item item(std::uint64_t n, std::string fk = "", std::uint64_t group = 0,
                std::vector<header_field> headers = {}) {
  return ready_item{test::make_message(n, t0, std::move(fk), std::move(headers)), group_id{group}};
}

ready_item tenant_item(std::uint64_t n, std::string tenant, std::uint64_t group = 0) {
  return item(n, "", group, {{"tenant", std::move(tenant)}});
}

/// Picks until nothing is ready at `now`; returns the ids in pick order.
std::vector<std::uint64_t> drain(fair_scheduler& s, timestamp now) {
  std::vector<std::uint64_t> out;
  while (auto p = s.pick(now)) {
    s.check_invariants();
    out.push_back(p->item.msg.id.value);
  }
  s.check_invariants();
  return out;
}

std::string bucket_name(std::size_t throttle, std::vector<std::optional<std::string>> values) {
  return std::to_string(throttle) + "/" + encode_key(key_values{std::move(values)});
}

using ids = std::vector<std::uint64_t>;

// -- fairness ---------------------------------------------------------------------------------

TEST(fair_scheduler, round_robins_across_fairness_keys) {
  fair_scheduler s;
  s.on_ready(item(1, "A"), t0);
  s.on_ready(item(2, "A"), t0);
  s.on_ready(item(3, "A"), t0);
  s.on_ready(item(4, "B"), t0);
  s.on_ready(item(5, "C"), t0);
  s.on_ready(item(6, "C"), t0);
  s.check_invariants();
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(s.ready_size(), 6u);
  // A, B, C, A, C, A: each key gets one turn per round; B leaves the rotation when empty.
  EXPECT_EQ(drain(s, t0), (ids{1, 4, 5, 2, 6, 3}));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_TRUE(s.rotation().empty());
}

TEST(fair_scheduler, rotation_follows_the_order_keys_first_became_ready) {
  fair_scheduler s;
  s.on_ready(item(1, "B"), t0);
  s.on_ready(item(2, "A"), t0);
  s.on_ready(item(3, "A"), t0);
  s.on_ready(item(4, "A"), t0);
  s.on_ready(item(5, "C"), t0);
  s.on_ready(item(6, "C"), t0);
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"B", "A", "C"}));
  EXPECT_EQ(drain(s, t0), (ids{1, 2, 5, 3, 6, 4}));
}

TEST(fair_scheduler, a_key_that_returns_joins_the_back_of_the_rotation) {
  fair_scheduler s;
  s.on_ready(item(1, "A"), t0);
  s.on_ready(item(2, "B"), t0);
  s.on_ready(item(3, "B"), t0);
  ASSERT_EQ(s.pick(t0)->item.msg.id, message_id{1});  // A leaves the rotation
  s.on_ready(item(4, "A"), t0);
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"B", "A"}));
  EXPECT_EQ(drain(s, t0), (ids{2, 4, 3}));
}

// A key served while alone in the rotation stays linked with its new stamp (fair_scheduler.cpp,
// `served`): a key that joins after that serve still goes after it (F1).
TEST(fair_scheduler, a_key_served_alone_keeps_its_turn_before_a_later_key) {
  fair_scheduler s;
  s.on_ready(item(1, "A"), t0);
  s.on_ready(item(2, "A"), t0);
  s.on_ready(item(3, "A"), t0);
  ASSERT_EQ(s.pick(t0)->item.msg.id, message_id{1});  // A alone: served, stays in the rotation
  s.check_invariants();
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"A"}));
  s.on_ready(item(4, "B"), t0);
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"A", "B"}));
  ASSERT_EQ(s.pick(t0)->item.msg.id, message_id{2});  // A goes behind B
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"B", "A"}));
  EXPECT_EQ(drain(s, t0), (ids{4, 3}));
}

// Unordered messages are kept whole in reused slots: after picks, purges and a retention take in
// between, each message comes back with its own body.
TEST(fair_scheduler, unordered_messages_come_back_whole_as_slots_are_reused) {
  fair_scheduler s;
  std::uint64_t next = 1;
  std::set<std::uint64_t> present;
  auto add = [&](int n) {
    for (int i = 0; i < n; ++i, ++next) {
      s.on_ready(item(next, next % 3 == 0 ? "A" : "B"), t0);
      present.insert(next);
    }
  };
  auto pick_some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto p = s.pick(t0);
      ASSERT_TRUE(p.has_value());
      auto id = p->item.msg.id.value;
      EXPECT_EQ(p->item.msg.body, "body-" + std::to_string(id));
      EXPECT_EQ(p->item.msg.seq, message_seq{id});
      EXPECT_EQ(present.erase(id), 1u) << "picked once";
    }
  };
  add(10);
  pick_some(4);
  add(6);
  // A purge of the even seqs, then a retention take of those divisible by 5.
  auto even = std::count_if(present.begin(), present.end(), [](auto n) { return n % 2 == 0; });
  EXPECT_EQ(s.remove_if([](group_id, message_seq q) { return q.value % 2 == 0; }),
            static_cast<std::size_t>(even));
  std::erase_if(present, [](auto n) { return n % 2 == 0; });
  s.check_invariants();
  auto taken = s.take_unordered_if([](const message& m) { return m.id.value % 5 == 0; });
  for (const auto& m : taken) {
    EXPECT_EQ(m.body, "body-" + std::to_string(m.id.value));
    EXPECT_EQ(present.erase(m.id.value), 1u);
  }
  s.check_invariants();
  add(5);
  pick_some(static_cast<int>(present.size()));
  EXPECT_TRUE(present.empty());
  EXPECT_EQ(s.pick(t0), std::nullopt);
  s.check_invariants();
}

TEST(fair_scheduler, within_a_key_the_oldest_seq_goes_first) {
  fair_scheduler s;
  s.on_ready(item(5, "A"), t0);
  s.on_ready(item(3, "A"), t0);
  s.on_ready(item(9, "A"), t0);
  s.on_ready(item(4, "A"), t0);
  EXPECT_EQ(drain(s, t0), (ids{3, 4, 5, 9}));
}

TEST(fair_scheduler, pick_on_an_empty_scheduler_is_nothing) {
  fair_scheduler s;
  EXPECT_EQ(s.pick(t0), std::nullopt);
  EXPECT_EQ(s.next_wakeup(), std::nullopt);
  EXPECT_EQ(s.size(), 0u);
}

TEST(fair_scheduler, a_picked_group_may_offer_its_next_head) {
  fair_scheduler s;
  s.on_ready(item(1, "A", 7), t0);
  auto p = s.pick(t0);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->item.group, group_id{7});
  EXPECT_TRUE(p->charged.empty()) << "no throttles, no buckets";
  s.on_ready(item(2, "A", 7), t0);
  s.check_invariants();  // would abort if group 7 were still present
  EXPECT_EQ(drain(s, t0), (ids{2}));
}

TEST(fair_scheduler, at_most_one_item_per_group) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  auto insert_twice = [] {
    fair_scheduler s;
    s.on_ready(item(1, "A", 7), t0);
    s.on_ready(item(2, "B", 7), t0);
    s.check_invariants();
  };
  EXPECT_DEATH(insert_twice(), "INVARIANT VIOLATED: at most one item per ordering group");
  auto insert_while_delayed = [] {
    fair_scheduler s;
    auto delayed = item(1, "A", 7);
    delayed.msg.not_before = t0 + 5s;
    s.on_ready(delayed, t0);
    s.on_ready(item(2, "A", 7), t0);
    s.check_invariants();
  };
  EXPECT_DEATH(insert_while_delayed(), "INVARIANT VIOLATED: at most one item per ordering group");
  // Unordered items (group 0) are never limited.
  fair_scheduler s;
  s.on_ready(item(1, "A"), t0);
  s.on_ready(item(2, "A"), t0);
  EXPECT_EQ(s.size(), 2u);
}

TEST(fair_scheduler, backlog_counts_ready_and_waiting_items_per_fairness_key) {
  fair_scheduler s;
  s.on_ready(item(1, "A"), t0);
  s.on_ready(item(2, "A", 3), t0);
  auto delayed = item(3, "A");
  delayed.msg.not_before = t0 + 1s;
  s.on_ready(delayed, t0);
  s.on_ready(item(4, "B"), t0);
  auto only_delayed = item(5, "C");
  only_delayed.msg.not_before = t0 + 1s;
  s.on_ready(only_delayed, t0);
  auto backlog = s.backlog_by_fairness_key();
  EXPECT_EQ(backlog,
            (std::unordered_map<std::string, std::uint64_t>{{"A", 3}, {"B", 1}, {"C", 1}}));
  EXPECT_EQ(s.ready_size(), 3u);
  EXPECT_EQ(s.waiting_size(), 2u);
  EXPECT_EQ(s.size(), 5u);
}

// -- delays -----------------------------------------------------------------------------------

// A page of the groups listing asks only for its groups' waiting items.
TEST(fair_scheduler, waiting_of_some_groups_lists_only_theirs) {
  fair_scheduler s;
  for (std::uint64_t g = 1; g <= 3; ++g) {
    auto delayed = item(g, "A", g);
    delayed.msg.not_before = t0 + 2s;
    s.on_ready(delayed, t0);
  }
  auto some = s.waiting(std::unordered_set<group_id>{group_id{1}, group_id{3}, group_id{9}});
  ASSERT_EQ(some.size(), 2u);
  EXPECT_NE(some[0].group, group_id{2});
  EXPECT_NE(some[1].group, group_id{2});
  EXPECT_EQ(s.waiting().size(), 3u);
}

TEST(fair_scheduler, future_not_before_waits_until_its_time) {
  fair_scheduler s;
  auto delayed = item(1, "A", 4);
  delayed.msg.not_before = t0 + 2s;
  s.on_ready(delayed, t0);
  s.check_invariants();
  EXPECT_EQ(s.ready_size(), 0u);
  EXPECT_EQ(s.waiting_size(), 1u);
  EXPECT_EQ(s.next_wakeup(), t0 + 2s);
  auto waiting = s.waiting();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].id, message_id{1});
  EXPECT_EQ(waiting[0].group, group_id{4});
  EXPECT_FALSE(waiting[0].throttled);
  EXPECT_EQ(waiting[0].since, t0);
  EXPECT_EQ(waiting[0].until, t0 + 2s);

  EXPECT_EQ(s.pick(t0), std::nullopt);
  EXPECT_EQ(s.pick(t0 + 2s - 1us), std::nullopt);
  auto p = s.pick(t0 + 2s);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->item.msg.id, message_id{1});
  EXPECT_EQ(s.next_wakeup(), std::nullopt);
  EXPECT_EQ(s.size(), 0u);
}

TEST(fair_scheduler, on_tick_moves_due_items_to_ready) {
  fair_scheduler s;
  auto early = item(1, "A");
  early.msg.not_before = t0 + 1s;
  auto late = item(2, "B");
  late.msg.not_before = t0 + 3s;
  s.on_ready(late, t0);
  s.on_ready(early, t0);
  EXPECT_EQ(s.next_wakeup(), t0 + 1s);
  s.on_tick(t0 + 1s);
  s.check_invariants();
  EXPECT_EQ(s.ready_size(), 1u);
  EXPECT_EQ(s.waiting_size(), 1u);
  EXPECT_EQ(s.rotation(), (std::vector<std::string>{"A"}));
  EXPECT_EQ(s.next_wakeup(), t0 + 3s);
}

TEST(fair_scheduler, not_before_in_the_past_is_ready_at_once) {
  fair_scheduler s;
  auto past = item(1, "A");
  past.msg.not_before = t0 - 1s;
  s.on_ready(past, t0);
  EXPECT_EQ(s.ready_size(), 1u);
  EXPECT_EQ(s.next_wakeup(), std::nullopt);
}

TEST(fair_scheduler, a_delayed_item_holds_back_nothing_else) {
  fair_scheduler s;
  auto delayed = item(1, "A", 1);
  delayed.msg.not_before = t0 + 5s;
  s.on_ready(delayed, t0);
  s.on_ready(item(2, "A", 2), t0);
  s.on_ready(item(3, "A"), t0);
  EXPECT_EQ(drain(s, t0), (ids{2, 3}));
  EXPECT_EQ(drain(s, t0 + 5s), (ids{1}));
}

// -- throttles --------------------------------------------------------------------------------

TEST(fair_scheduler, throttle_lets_a_tenant_burst_then_holds_it_to_the_rate) {
  fair_scheduler s{{throttle_spec{{key::header("tenant")}, 1.0, 2}}};
  s.on_ready(tenant_item(1, "x"), t0);
  s.on_ready(tenant_item(2, "x"), t0);
  s.on_ready(tenant_item(3, "x"), t0);
  s.on_ready(tenant_item(4, "y"), t0);
  s.on_ready(tenant_item(5, "x"), t0);

  auto first = s.pick(t0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->item.msg.id, message_id{1});
  EXPECT_EQ(first->charged, std::vector<std::string>{bucket_name(0, {"x"})});
  // Tenant x has burst 2: items 1 and 2 go at once; 3 and 5 wait; y's item still flows.
  EXPECT_EQ(drain(s, t0), (ids{2, 4}));
  EXPECT_EQ(s.ready_size(), 0u);
  EXPECT_EQ(s.waiting_size(), 2u);
  EXPECT_EQ(s.bucket_count(), 2u);

  auto waiting = s.waiting();
  ASSERT_EQ(waiting.size(), 2u);
  for (const auto& w : waiting) {
    EXPECT_TRUE(w.throttled) << w.id.value;
    EXPECT_EQ(w.since, t0) << w.id.value;
    EXPECT_EQ(w.until, t0 + 1s) << w.id.value;
  }
  ASSERT_EQ(s.next_wakeup(), t0 + 1s);
  EXPECT_EQ(s.pick(t0 + 1s - 1us), std::nullopt);
  // One token per second: the oldest waiting item goes first, the other waits another second.
  EXPECT_EQ(drain(s, *s.next_wakeup()), (ids{3}));
  ASSERT_EQ(s.next_wakeup(), t0 + 2s);
  EXPECT_EQ(s.waiting().at(0).until, t0 + 2s);
  EXPECT_EQ(s.waiting().at(0).since, t0) << "it has been throttled since t0, without a break";
  EXPECT_EQ(drain(s, *s.next_wakeup()), (ids{5}));
  EXPECT_EQ(s.size(), 0u);
}

TEST(fair_scheduler, throttle_on_an_unordered_item_holds_nothing_else_back) {
  fair_scheduler s{{throttle_spec{{key::header("tenant")}, 1.0, 1}}};
  s.on_ready(tenant_item(1, "x"), t0);
  s.on_ready(tenant_item(2, "x"), t0);
  s.on_ready(tenant_item(3, "y", 5), t0);
  s.on_ready(tenant_item(4, "z"), t0);
  // 2 is older than 3 and 4 but waits for x's bucket without delaying them.
  EXPECT_EQ(drain(s, t0), (ids{1, 3, 4}));
  ASSERT_EQ(s.waiting().size(), 1u);
  EXPECT_EQ(s.waiting()[0].id, message_id{2});
  EXPECT_TRUE(s.waiting()[0].throttled);
}

// A purge (docs/design/purge.md U6): items leave whether ready, delayed or waiting for a token;
// the rest are served as before.
TEST(fair_scheduler, remove_if_takes_items_from_every_place_they_wait) {
  fair_scheduler s{{throttle_spec{{key::header("tenant")}, 1.0, 1}}};
  s.on_ready(tenant_item(1, "x"), t0);
  s.on_ready(tenant_item(2, "x"), t0);  // waits for x's token once 1 took it
  s.on_ready(tenant_item(3, "y", 7), t0);
  s.on_ready(tenant_item(4, "z", 8), t0);
  auto later = tenant_item(5, "y");
  later.msg.not_before = t0 + 10s;
  s.on_ready(later, t0);
  auto first = s.pick(t0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->item.msg.id, message_id{1});
  ASSERT_TRUE(s.pick(t0).has_value());  // 3 (2 is parked on x's bucket)
  s.check_invariants();
  ASSERT_EQ(s.waiting().size(), 2u) << "2 throttled, 5 delayed";
  // Every unordered item goes; group 8's head stays.
  EXPECT_EQ(s.remove_if([](group_id g, message_seq) { return !g; }), 2u);
  s.check_invariants();
  EXPECT_TRUE(s.waiting().empty());
  EXPECT_EQ(drain(s, t0 + 20s), (ids{4}));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.remove_if([](group_id, message_seq) { return true; }), 0u);
  s.check_invariants();
  // x's bucket lives on and has refilled meanwhile: a new item of x goes.
  s.on_ready(tenant_item(6, "x"), t0 + 20s);
  EXPECT_EQ(drain(s, t0 + 20s), (ids{6}));
}

TEST(fair_scheduler, a_throttled_group_head_holds_back_only_its_own_group) {
  fair_scheduler s{{throttle_spec{{key::header("tenant")}, 1.0, 1}}};
  s.on_ready(tenant_item(1, "x", 1), t0);
  ASSERT_EQ(drain(s, t0), (ids{1}));
  s.on_ready(tenant_item(2, "x", 1), t0);  // group 1's next head: x's bucket is empty
  s.on_ready(tenant_item(3, "y", 2), t0);
  EXPECT_EQ(drain(s, t0), (ids{3}));
  ASSERT_EQ(s.waiting().size(), 1u);
  EXPECT_EQ(s.waiting()[0].group, group_id{1});
  EXPECT_TRUE(s.waiting()[0].throttled);
  s.on_ready(tenant_item(4, "y", 2), t0 + 1ms);  // group 2 goes on
  EXPECT_EQ(drain(s, t0 + 1s), (ids{2, 4}));
}

TEST(fair_scheduler, an_item_charged_to_two_buckets_waits_for_the_emptier_one) {
  fair_scheduler s{
      {throttle_spec{{key::header("tenant")}, 10.0, 1}, throttle_spec{{}, 1.0, 2}}};  // queue-wide
  s.on_ready(tenant_item(1, "x"), t0);
  s.on_ready(tenant_item(2, "y"), t0);
  s.on_ready(tenant_item(3, "z"), t0);
  auto p = s.pick(t0);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->charged, (std::vector<std::string>{bucket_name(0, {"x"}), bucket_name(1, {})}));
  EXPECT_EQ(drain(s, t0), (ids{2}));
  EXPECT_EQ(s.next_wakeup(), t0 + 1s) << "the queue-wide bucket refills slower than z's";
  EXPECT_EQ(drain(s, t0 + 1s), (ids{3}));
}

TEST(fair_scheduler, full_buckets_are_dropped) {
  // Pruning is amortized: it runs once the bucket count reaches a threshold (64, then twice the
  // count that survived the last pruning). 64 tenants at t0 set the threshold to 128; 64 more at
  // t0 + 1 s reach it, and the first 64, full again by then, are dropped.
  fair_scheduler s{{throttle_spec{{key::header("tenant")}, 1.0, 1}}};
  for (std::uint64_t n = 1; n <= 64; ++n) s.on_ready(tenant_item(n, "t" + std::to_string(n)), t0);
  EXPECT_EQ(drain(s, t0).size(), 64u);
  EXPECT_EQ(s.bucket_count(), 64u);
  for (std::uint64_t n = 65; n <= 128; ++n)
    s.on_ready(tenant_item(n, "t" + std::to_string(n)), t0 + 1s);
  EXPECT_EQ(drain(s, t0 + 1s).size(), 64u);
  EXPECT_EQ(s.bucket_count(), 64u);
  // A dropped bucket behaves exactly like a new, full one.
  s.on_ready(tenant_item(129, "t1"), t0 + 1s);
  EXPECT_EQ(drain(s, t0 + 1s), (ids{129}));
}

// -- randomized throttle bound ------------------------------------------------------------------

struct bucket_rule {
  std::int64_t rate_milli_per_s;  // tokens per second x 1000 (exact: rates have 3 decimals)
  std::int64_t burst;
};

/// The first window in which `times` (sorted) holds more deliveries than burst + rate * length,
/// described for the failure message; nullopt when every window is within the bound.
std::optional<std::string> first_overdelivery(const std::vector<timestamp>& times,
                                              bucket_rule rule) {
  for (std::size_t i = 0; i < times.size(); ++i) {
    for (std::size_t j = i; j < times.size(); ++j) {
      auto count = static_cast<std::int64_t>(j - i + 1);
      auto length_us = (times[j] - times[i]).count();
      // count <= burst + rate * length  <=>  (count - burst) * 1e9 <= rate_milli * length_us
      if ((count - rule.burst) * 1'000'000'000 > rule.rate_milli_per_s * length_us)
        return std::to_string(count) + " deliveries in [" + std::to_string(times[i].us) + ", " +
               std::to_string(times[j].us) + "] us, burst " + std::to_string(rule.burst) +
               ", rate " + std::to_string(rule.rate_milli_per_s) + "/1000 per s";
    }
  }
  return std::nullopt;
}

std::uint64_t seed_from_env(std::uint64_t fallback) {
  if (const char* s = std::getenv("LANEQ_UNIT_SEED")) return std::strtoull(s, nullptr, 10);
  return fallback;
}

std::string reproduce_command(std::uint64_t seed) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  return "seed " + std::to_string(seed) + "; reproduce: LANEQ_UNIT_SEED=" + std::to_string(seed) +
         " build/dev/bin/laneq_unit_tests --gtest_filter='" + info->test_suite_name() + "." +
         info->name() + "'";
}

TEST(fair_scheduler, window_checker_catches_an_overdelivering_bucket) {
  // Canary for the checker below: a log that breaks the bound must be caught.
  bucket_rule rule{1000, 2};  // 1/s, burst 2
  EXPECT_EQ(first_overdelivery({t0, t0, t0 + 1s, t0 + 2s}, rule), std::nullopt);
  EXPECT_NE(first_overdelivery({t0, t0, t0}, rule), std::nullopt);
  EXPECT_NE(first_overdelivery({t0, t0, t0 + 1s - 1us}, rule), std::nullopt);
  EXPECT_NE(first_overdelivery({t0, t0 + 10s, t0 + 10s, t0 + 10s, t0 + 11s, t0 + 11s}, rule),
            std::nullopt);
}

TEST(fair_scheduler, deliveries_per_bucket_stay_within_burst_plus_rate_times_window) {
  const auto seed = seed_from_env(0x5eed'2024);
  SCOPED_TRACE(reproduce_command(seed));
  std::mt19937_64 rng{seed};
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>{lo, hi}(rng);
  };
  const std::vector<std::int64_t> rates_milli{300, 500, 1000, 2500, 10'000};
  std::vector<bucket_rule> rules{
      {rates_milli[static_cast<std::size_t>(uniform(0, 4))], uniform(1, 4)},
      {rates_milli[static_cast<std::size_t>(uniform(0, 4))] * 4, uniform(1, 8)},
  };
  std::vector<throttle_spec> throttles{
      {{key::header("tenant")},
       static_cast<double>(rules[0].rate_milli_per_s) / 1000.0,
       static_cast<std::uint32_t>(rules[0].burst)},
      {{key::fairness_key()},
       static_cast<double>(rules[1].rate_milli_per_s) / 1000.0,
       static_cast<std::uint32_t>(rules[1].burst)},
  };
  fair_scheduler s{throttles};

  const std::vector<std::string> tenants{"x", "y", "z"};
  const std::vector<std::string> fairness_keys{"f1", "f2"};
  std::map<std::string, std::vector<timestamp>> charged;
  std::set<std::uint64_t> present_groups;
  std::uint64_t next = 1;
  std::size_t picks = 0;
  std::size_t throttled_seen = 0;
  timestamp now = t0;

  for (int step = 0; step < 4000; ++step) {
    auto action = uniform(0, 9);
    if (action < 4 && s.size() < 40) {  // a bounded backlog keeps the run fast
      auto n = next++;
      auto m = test::make_message(n, now, fairness_keys[static_cast<std::size_t>(uniform(0, 1))],
                                  {{"tenant", tenants[static_cast<std::size_t>(uniform(0, 2))]}});
      if (uniform(0, 4) == 0) m.not_before = now + duration{uniform(1, 2'000'000)};
      auto g = static_cast<std::uint64_t>(uniform(0, 6));  // 0: unordered
      if (g != 0 && !present_groups.insert(g).second) g = 0;
      s.on_ready(ready_item{m, group_id{g}}, now);
    } else if (action < 8) {
      if (auto p = s.pick(now)) {
        ++picks;
        present_groups.erase(p->item.group.value);
        ASSERT_EQ(p->charged.size(), 2u);
        for (const auto& b : p->charged) charged[b].push_back(now);
      }
    } else if (action == 8 || !s.next_wakeup()) {
      now = now + duration{uniform(0, 400'000)};
    } else {
      now = std::max(now, *s.next_wakeup());
    }
    for (const auto& w : s.waiting()) throttled_seen += w.throttled ? 1u : 0u;
    s.check_invariants();
  }
  EXPECT_GT(picks, 100u);
  EXPECT_GT(throttled_seen, 0u) << "the run never hit a throttle, so it checks nothing";
  for (const auto& [bucket, times] : charged) {
    auto throttle = static_cast<std::size_t>(std::stoul(bucket.substr(0, bucket.find('/'))));
    ASSERT_LT(throttle, rules.size());
    auto violation = first_overdelivery(times, rules[throttle]);
    EXPECT_EQ(violation, std::nullopt) << "bucket " << testing::PrintToString(bucket);
  }
}

// -- ordering.md worked example on the pure core ------------------------------------------------

/// The broker's moving parts, minus actors: one group_state per ordering group, the fair
/// scheduler, and the lease table for unordered messages.
class example_broker {
 public:
  static constexpr duration lease_d = 30s;

  explicit example_broker(queue_spec spec) : spec_(std::move(spec)), sched_(spec_.throttles()) {}

  void enqueue(std::uint64_t seq, const std::string& name, std::optional<std::string> account,
               timestamp now) {
    auto m = test::make_message(seq, now);
    if (account) m.headers.push_back({"account", *account});
    names_[seq] = name;
    bool missing = false;
    auto placed = place(spec_, m, &missing);
    ASSERT_TRUE(placed.ok()) << placed.err().message;
    EXPECT_EQ(missing, !account.has_value());
    if (!placed.value().ordered) {
      sched_.on_ready(ready_item{m, group_id{0}}, now);
      return;
    }
    auto [it, fresh] = group_of_key_.try_emplace(placed.value().group_key, 0);
    if (fresh) {
      it->second = groups_.size() + 1;
      labels_[it->second] = placed.value().ordering_key;
      groups_.emplace(it->second, group_state{group_id{it->second}, spec_.attempts_max()});
    }
    offer(it->second, groups_.at(it->second).on_enqueue({m}, now), now);
  }

  /// A free worker asks for a message: returns its name, or "idle".
  std::string receive(int worker, timestamp now) {
    auto picked = sched_.pick(now);
    check();
    if (!picked) return "idle";
    const auto& m = picked->item.msg;
    // A group's head comes without its attempts: its group holds it.
    auto attempts =
        picked->item.group ? groups_.at(picked->item.group.value).head()->attempts : m.attempts;
    lease_token lease{picked->item.group, m.id, attempts + 1, nonces_.next()};
    if (lease.group) {
      groups_.at(lease.group.value).on_delivered(lease, now + lease_d, now);
    } else {
      auto delivered = m;
      delivered.attempts = lease.attempt;
      unordered_.grant(lease, delivered, now + lease_d, now);
    }
    holding_[worker] = lease;
    auto name = names_.at(m.id.value);
    processed_[lease.group.value].push_back(name);
    check();
    return name;
  }

  void ack(int worker, timestamp now) {
    auto lease = take_lease(worker);
    if (lease.group) {
      auto fx = groups_.at(lease.group.value).on_ack(lease, now);
      ASSERT_TRUE(fx.ok()) << fx.err().message;
      offer(lease.group.value, fx.value(), now);
    } else {
      ASSERT_TRUE(unordered_.release(lease).ok());
    }
    check();
  }

  void nack_retry(int worker, duration retry_after, timestamp now) {
    auto lease = take_lease(worker);
    ASSERT_TRUE(lease.group) << "the example only nacks a keyed message";
    auto fx = groups_.at(lease.group.value).on_nack(lease, nack_kind::retry, retry_after, now);
    ASSERT_TRUE(fx.ok()) << fx.err().message;
    offer(lease.group.value, fx.value(), now);
    check();
  }

  group_info group(const std::string& label, timestamp now) const {
    for (const auto& [id, l] : labels_)
      if (l == label) return groups_.at(id).describe(now);
    ADD_FAILURE() << "no group " << label;
    return {};
  }

  /// Names delivered, in order, for the group labelled `label` ("" : unordered messages).
  std::vector<std::string> processed(const std::string& label) const {
    std::uint64_t id = 0;
    for (const auto& [gid, l] : labels_)
      if (l == label) id = gid;
    auto it = processed_.find(id);
    return it == processed_.end() ? std::vector<std::string>{} : it->second;
  }

  fair_scheduler& scheduler() { return sched_; }

 private:
  void offer(std::uint64_t group, const group_effects& fx, timestamp now) {
    if (fx.offer) sched_.on_head(*fx.offer, group_id{group}, now);
  }

  lease_token take_lease(int worker) {
    auto it = holding_.find(worker);
    EXPECT_NE(it, holding_.end()) << "worker " << worker << " holds nothing";
    if (it == holding_.end()) return {};
    auto lease = it->second;
    holding_.erase(it);
    return lease;
  }

  void check() const {
    sched_.check_invariants();
    unordered_.check_invariants();
    for (const auto& [id, g] : groups_) g.check_invariants();
  }

  queue_spec spec_;
  fair_scheduler sched_;
  lease_table unordered_;
  nonce_source nonces_{1, 2};
  std::map<std::string, std::uint64_t> group_of_key_;
  std::map<std::uint64_t, group_state> groups_;
  std::map<std::uint64_t, std::string> labels_;
  std::map<std::uint64_t, std::string> names_;
  std::map<int, lease_token> holding_;
  std::map<std::uint64_t, std::vector<std::string>> processed_;
};

TEST(ordering, worked_example_pure_core) {
  auto spec = queue_spec("account-events")
                  .ordered_by({key::header("account")})
                  .when_ordering_key_missing(missing_ordering_key::unordered);
  ASSERT_TRUE(spec.validate().empty());
  example_broker broker{spec};
  auto t = [](std::int64_t s) { return timestamp::from_ms(s * 1000); };
  const std::string A = "A";
  const std::string B = "B";
  constexpr int W1 = 1;
  constexpr int W2 = 2;

  // Arrivals, in order: a1 (A) a2 (A) s1 (-) b1 (B) s2 (-) a3 (A) b2 (B).
  broker.enqueue(1, "a1", "A", t(0));
  broker.enqueue(2, "a2", "A", t(0));
  broker.enqueue(3, "s1", std::nullopt, t(0));
  broker.enqueue(4, "b1", "B", t(0));
  broker.enqueue(5, "s2", std::nullopt, t(0));
  broker.enqueue(6, "a3", "A", t(0));
  broker.enqueue(7, "b2", "B", t(0));

  // t=0 start: W1 a1, W2 s1; a2, a3 behind a1.
  EXPECT_EQ(broker.receive(W1, t(0)), "a1");
  EXPECT_EQ(broker.receive(W2, t(0)), "s1");
  EXPECT_EQ(broker.group(A, t(0)).state, group_status::in_flight);
  EXPECT_EQ(broker.group(A, t(0)).backlog, 3u);

  // t=1 W2 acks s1: W2 b1 (a2 is behind a1, so b1 is the oldest deliverable).
  broker.ack(W2, t(1));
  EXPECT_EQ(broker.receive(W2, t(1)), "b1");

  // t=2 W1 acks a1: W1 a2; a3 behind a2, b2 behind b1.
  broker.ack(W1, t(2));
  EXPECT_EQ(broker.receive(W1, t(2)), "a2");
  EXPECT_EQ(broker.group(A, t(2)).backlog, 2u);
  EXPECT_EQ(broker.group(B, t(2)).state, group_status::in_flight);
  EXPECT_EQ(broker.group(B, t(2)).backlog, 2u);

  // t=3 W2 acks b1: W2 s2 (older than b2).
  broker.ack(W2, t(3));
  EXPECT_EQ(broker.receive(W2, t(3)), "s2");

  // t=4 W1 nacks a2, retry after 5s: W1 b2; a2 not before t=9, a3 behind a2.
  broker.nack_retry(W1, 5s, t(4));
  EXPECT_EQ(broker.scheduler().next_wakeup(), t(9));
  EXPECT_EQ(broker.group(A, t(4)).state, group_status::retry_wait);
  EXPECT_EQ(broker.group(A, t(4)).until, t(9));
  EXPECT_EQ(broker.receive(W1, t(4)), "b2");

  // t=5 W2 acks s2: W2 idle; group A waits on a2.
  broker.ack(W2, t(5));
  EXPECT_EQ(broker.receive(W2, t(5)), "idle");

  // t=6 W1 acks b2: both idle; group B is done.
  broker.ack(W1, t(6));
  EXPECT_EQ(broker.receive(W1, t(6)), "idle");
  EXPECT_EQ(broker.group(B, t(6)).state, group_status::idle);
  EXPECT_EQ(broker.receive(W2, t(8)), "idle") << "a3 must not overtake a2";

  // t=9 a2 eligible: W1 a2 (second attempt); a3 behind a2.
  ASSERT_EQ(broker.scheduler().next_wakeup(), t(9));
  EXPECT_EQ(broker.receive(W1, t(9)), "a2");
  EXPECT_EQ(broker.receive(W2, t(9)), "idle");
  EXPECT_EQ(broker.group(A, t(9)).backlog, 2u);

  // t=10 W1 acks a2: W1 a3.
  broker.ack(W1, t(10));
  EXPECT_EQ(broker.receive(W1, t(10)), "a3");

  EXPECT_EQ(broker.processed(A), (std::vector<std::string>{"a1", "a2", "a2", "a3"}));
  EXPECT_EQ(broker.processed(B), (std::vector<std::string>{"b1", "b2"}));
  EXPECT_EQ(broker.processed(""), (std::vector<std::string>{"s1", "s2"}));
}

}  // namespace
}  // namespace laneq

namespace laneq {
namespace {

// F1/F5 under a shared throttle: keys that wait on one bucket take turns as tokens come; a key
// that waited keeps its place in the rotation instead of losing it to the key served last.
TEST(fair_scheduler, keys_sharing_one_bucket_take_turns) {
  fair_scheduler s{{throttle_spec{{}, 1.0, 1}}};  // one queue-wide bucket, 1 token per second
  for (std::uint64_t i = 1; i <= 5; ++i) s.on_ready(item(i, "A"), t0);
  for (std::uint64_t i = 6; i <= 10; ++i) s.on_ready(item(i, "B"), t0);
  std::vector<std::uint64_t> order;
  auto t = t0;
  for (int i = 0; i < 20 && order.size() < 10; ++i) {
    while (auto p = s.pick(t)) order.push_back(p->item.msg.id.value);
    if (auto next = s.next_wakeup()) t = *next;
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{1, 6, 2, 7, 3, 8, 4, 9, 5, 10}));
  s.check_invariants();
}

// A token wakes only as many waiters as there are tokens, not every item parked on the bucket.
TEST(fair_scheduler, a_token_releases_one_waiter_not_all) {
  fair_scheduler s{{throttle_spec{{}, 1.0, 1}}};
  for (std::uint64_t i = 1; i <= 1000; ++i) s.on_ready(item(i, "t" + std::to_string(i % 7)), t0);
  ASSERT_TRUE(s.pick(t0).has_value());
  EXPECT_FALSE(s.pick(t0).has_value());
  EXPECT_EQ(s.waiting_size(), 999u);
  s.on_tick(t0 + 1s);
  EXPECT_EQ(s.ready_size(), 1u) << "one token, one waiter released";
  EXPECT_EQ(s.waiting_size(), 998u);
  s.check_invariants();
}

// T4: while nobody receives, a bucket's wakes release no more waiters than it has tokens, so an
// idle throttled queue does not show its waiters as ready (docs/design/throttling.md). Before
// released waiters counted against their bucket, this run had 15 items ready at 8 s.
TEST(fair_scheduler, an_idle_bucket_releases_no_more_waiters_than_it_has_tokens) {
  fair_scheduler s{{throttle_spec{{}, 1.0, 2}}};
  for (std::uint64_t i = 1; i <= 20; ++i) s.on_ready(item(i), t0);
  EXPECT_EQ(drain(s, t0), (ids{1, 2}));
  auto t = t0;
  int wakes = 0;
  while (t < t0 + 8s) {  // no receive: only the bucket's wakes
    auto next = s.next_wakeup();
    ASSERT_TRUE(next.has_value());
    t = *next;
    s.on_tick(t);
    ++wakes;
    EXPECT_LE(s.ready_size(), 2u) << "wake " << wakes;
    s.check_invariants();
  }
  EXPECT_GE(wakes, 7);
  EXPECT_EQ(s.ready_size(), 2u) << "the bucket is full: two tokens, two waiters released";
  EXPECT_EQ(drain(s, t), (ids{3, 4}));
  EXPECT_EQ(s.waiting_size(), 16u);
}

}  // namespace
}  // namespace laneq
