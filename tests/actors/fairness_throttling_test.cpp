// Fairness (docs/design/fairness.md) and throttling (docs/design/throttling.md) on the real actors
// with simulated time: round-robin across fairness keys (F1), oldest first within a key (F2),
// group order across fairness keys (F3), fairness-key ordering groups (F4), the throttle window
// bound (T2), a throttled head waiting alone (T3) and throttle introspection (T4).
#include <gtest/gtest.h>

#include <map>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

std::vector<std::string> fairness_keys(const std::vector<delivery>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.msg.fairness_key);
  return out;
}

/// A message of `account` under fairness key `tenant`.
outgoing_message account_of_tenant(std::string body, std::string account, std::string tenant) {
  return msg(std::move(body), hdrs({{"account", std::move(account)}}), std::move(tenant));
}

/// A message with header "tenant" (the throttle key below) and header "account".
outgoing_message throttled_msg(std::string body, std::string tenant, std::string account = "") {
  auto hs = hdrs({{"tenant", std::move(tenant)}});
  if (!account.empty()) hs.push_back(header_field{"account", std::move(account)});
  return msg(std::move(body), std::move(hs));
}

class fairness : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  harness h;
};

class throttling : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  harness h;
};

// -- fairness -------------------------------------------------------------------------------------

// F1: round-robin across fairness keys: a tenant with 100 messages enqueued first does not starve
// two tenants that come later; the first three deliveries cover t1, t2 and t3.
TEST_F(fairness, round_robin_serves_every_fairness_key_in_turn) {
  auto q = make(queue_spec("jobs"));
  std::vector<outgoing_message> t1;
  for (int i = 0; i < 100; ++i) t1.push_back(msg("t1-" + std::to_string(i), {}, "t1"));
  ASSERT_TRUE(h.enqueue(q, std::move(t1)).ok());
  ASSERT_TRUE(h.enqueue(q, {msg("t2-0", {}, "t2"), msg("t2-1", {}, "t2")}).ok());
  ASSERT_TRUE(h.enqueue(q, {msg("t3-0", {}, "t3"), msg("t3-1", {}, "t3")}).ok());
  strings first_three;
  for (int i = 0; i < 3; ++i) first_three.push_back(take_one(h, q).msg.body);
  EXPECT_EQ(first_three, (strings{"t1-0", "t2-0", "t3-0"}));
  auto second = take(h, q, 3);
  EXPECT_EQ(fairness_keys(second), (strings{"t1", "t2", "t3"}));
  EXPECT_EQ(bodies(second), (strings{"t1-1", "t2-1", "t3-1"}));
  EXPECT_EQ(bodies(take(h, q, 3)), (strings{"t1-2", "t1-3", "t1-4"}))
      << "t2 and t3 are drained; t1 goes on";
}

// F2: within a fairness key the oldest message goes first, interleaved with the other keys.
TEST_F(fairness, within_a_fairness_key_the_oldest_message_goes_first) {
  auto q = make(queue_spec("jobs"));
  ASSERT_TRUE(h.enqueue(q, {msg("a0", {}, "t1"), msg("b0", {}, "t2"), msg("a1", {}, "t1"),
                            msg("a2", {}, "t1"), msg("b1", {}, "t2")})
                  .ok());
  strings order;
  for (int i = 0; i < 5; ++i) order.push_back(take_one(h, q).msg.body);
  EXPECT_EQ(order, (strings{"a0", "b0", "a1", "b1", "a2"}));
}

// F2: a group head competes with the arrival position of its message, not the time it was
// offered: after A1 is acked, A2 (older) goes before s1 (younger, unordered).
TEST_F(fairness, a_group_head_competes_with_its_arrival_position) {
  auto q = make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .when_ordering_key_missing(missing_ordering_key::unordered));
  ASSERT_TRUE(h.enqueue(q, {test::in_account("A1", "A"), test::in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q);
  ASSERT_EQ(a1.msg.body, "A1");
  put(h, q, msg("s1"));
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2", "s1"}));
}

// F3: when an ordering group spans fairness keys, group order wins over round-robin: after a1
// (t1), round-robin would serve t2 next, but t2's only message a2 is behind a1 in group A.
TEST_F(fairness, group_order_wins_when_a_group_spans_fairness_keys) {
  auto q = make(queue_spec("accounts").ordered_by({key::header("account")}));
  ASSERT_TRUE(h.enqueue(q, {account_of_tenant("a1", "A", "t1"), account_of_tenant("a2", "A", "t2"),
                            account_of_tenant("b1", "B", "t1")})
                  .ok());
  auto a1 = take_one(h, q);
  EXPECT_EQ(a1.msg.body, "a1");
  EXPECT_EQ(take_one(h, q).msg.body, "b1") << "not a2: it waits for a1";
  EXPECT_TRUE(take(h, q, 10).empty());
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  auto a2 = take(h, q, 10);
  ASSERT_EQ(bodies(a2), (strings{"a2"}));
  EXPECT_EQ(a2[0].msg.fairness_key, "t2");
  EXPECT_EQ(a2[0].ordering_key, "A");
}

// F4: with the fairness key in the ordering key every group lies within one fairness key: the
// same account under two tenants is two groups, each ordered on its own.
TEST_F(fairness, an_ordering_key_with_the_fairness_key_keeps_groups_within_a_fairness_key) {
  auto q = make(queue_spec("accounts").ordered_by({key::fairness_key(), key::header("account")}));
  ASSERT_TRUE(h.enqueue(q, {account_of_tenant("a1", "A", "t1"), account_of_tenant("a2", "A", "t1"),
                            account_of_tenant("x1", "A", "t2"), account_of_tenant("x2", "A", "t2")})
                  .ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"a1", "x1"}));
  EXPECT_EQ(first[0].ordering_key, "2:t11:A");
  EXPECT_EQ(first[1].ordering_key, "2:t21:A");
  EXPECT_NE(first[0].lease.group, first[1].lease.group);
  EXPECT_EQ(stats_of(h, q).live_groups, 2u);
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"a2"})) << "x2 is still behind x1";
  ASSERT_TRUE(h.ack(q, first[1].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"x2"}));
}

// -- throttling -----------------------------------------------------------------------------------

// T2: the deliveries charged to a bucket in any window d number at most burst + rate * d
// (rate 2/s, burst 3 per tenant): each tenant gets its burst at once, then one every 500 ms.
TEST_F(throttling, deliveries_per_bucket_stay_within_burst_plus_rate_times_window) {
  auto q = make(queue_spec("jobs").throttle({key::header("tenant")}, 2.0, 3));
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 12; ++i) batch.push_back(throttled_msg("t1-" + std::to_string(i), "t1"));
  for (int i = 0; i < 6; ++i) batch.push_back(throttled_msg("t2-" + std::to_string(i), "t2"));
  ASSERT_TRUE(h.enqueue(q, std::move(batch)).ok());

  std::map<std::string, std::vector<std::int64_t>> times_us;  // per tenant, in delivery order
  std::size_t delivered = 0;
  for (int step = 0; step < 500 && delivered < 18; ++step) {
    auto ds = take(h, q, 100);
    for (const auto& d : ds) {
      const auto* tenant = header_value(d.msg.headers, "tenant");
      ASSERT_NE(tenant, nullptr);
      times_us[*tenant].push_back(h.elapsed().count());
      ASSERT_TRUE(h.ack(q, d.lease).ok());
    }
    delivered += ds.size();
    if (ds.empty()) {
      ASSERT_TRUE(h.advance_to_next_timer()) << "a throttled message has a timer";
    }
  }
  ASSERT_EQ(delivered, 18u);

  for (const auto& [tenant, ts] : times_us) {
    for (std::size_t i = 0; i < ts.size(); ++i)
      for (std::size_t j = i; j < ts.size(); ++j) {
        // j - i + 1 deliveries within [ts[i], ts[j]]: at most 3 + 2/s * window.
        auto n = static_cast<std::int64_t>(j - i + 1);
        EXPECT_LE((n - 3) * 500'000, ts[j] - ts[i])
            << tenant << ": " << n << " deliveries within " << (ts[j] - ts[i]) << " us";
      }
  }
  auto ms = [](std::vector<std::int64_t> ts) {
    for (auto& t : ts) t /= 1000;
    return ts;
  };
  EXPECT_EQ(ms(times_us["t1"]), (std::vector<std::int64_t>{0, 0, 0, 500, 1000, 1500, 2000, 2500,
                                                           3000, 3500, 4000, 4500}));
  EXPECT_EQ(ms(times_us["t2"]), (std::vector<std::int64_t>{0, 0, 0, 500, 1000, 1500}));
}

// T3: a group head waiting on an empty bucket holds back only its own group: a younger group of
// another tenant goes first.
TEST_F(throttling, a_throttled_head_holds_back_only_its_own_group) {
  auto q = make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .throttle({key::header("tenant")}, 1.0, 1));
  ASSERT_TRUE(h.enqueue(q, {throttled_msg("a1", "t1", "A"), throttled_msg("a2", "t1", "A")}).ok());
  auto a1 = take_one(h, q);
  ASSERT_EQ(a1.msg.body, "a1");
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  EXPECT_TRUE(take(h, q, 10).empty()) << "a2 waits for tenant t1's next token";
  put(h, q, throttled_msg("b1", "t2", "B"));
  put(h, q, throttled_msg("c1", "t1", "C"));
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"b1"}))
      << "group B (tenant t2) flows; c1 waits on t1's bucket, not on group A";
  advance_to(h, 999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  advance_to(h, 1s);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"a2"})) << "the older of the two waiting on t1";
  advance_to(h, 2s);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"c1"}));
}

// T3: on an unordered queue a throttled message holds back nothing: younger messages of other
// tenants are delivered.
TEST_F(throttling, on_an_unordered_queue_a_throttled_message_holds_nothing_back) {
  auto q = make(queue_spec("jobs").throttle({key::header("tenant")}, 1.0, 1));
  ASSERT_TRUE(h.enqueue(q, {throttled_msg("m1", "t1"), throttled_msg("m2", "t1"),
                            throttled_msg("m3", "t2"), throttled_msg("m4", "t3")})
                  .ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"m1", "m3", "m4"}));
  advance_to(h, 1s);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"m2"}));
}

// T4: introspection reports a group whose head waits on an empty bucket as throttled, since it
// found the bucket empty, until the bucket's next token time; it is delivered then.
TEST_F(throttling, introspection_reports_a_throttled_group_until_its_next_token) {
  auto q = make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .throttle({key::header("tenant")}, 2.0, 1));
  auto ids = h.enqueue(q, {throttled_msg("a1", "t1", "A"), throttled_msg("a2", "t1", "A")});
  ASSERT_TRUE(ids.ok());
  auto a1 = take_one(h, q);  // t = 0: takes t1's only token; the next comes at t = 500 ms
  advance_to(h, 100ms);
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  EXPECT_TRUE(take(h, q, 10).empty());
  auto blocked = h.groups(q, true);
  ASSERT_TRUE(blocked.ok());
  ASSERT_EQ(blocked.value().size(), 1u);
  const auto& g = blocked.value()[0];
  EXPECT_EQ(g.key, "A");
  EXPECT_EQ(g.state, group_status::throttled);
  EXPECT_EQ(g.since, at(100ms));
  EXPECT_EQ(g.until, at(500ms));
  EXPECT_EQ(g.backlog, 1u);
  EXPECT_EQ(g.head, ids.value()[1]);
  advance_to(h, 499ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  advance_to(h, 500ms);
  auto a2 = take(h, q, 10);
  ASSERT_EQ(bodies(a2), (strings{"a2"}));
  auto after = h.groups(q, true);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after.value().size(), 1u);
  EXPECT_EQ(after.value()[0].state, group_status::in_flight);
}

}  // namespace
}  // namespace laneq
