// The worked example of ordering.md as an acceptance test: queue account-events ordered by
// account (Unordered for messages without one), two workers taking one message at a time,
// arrivals a1 a2 s1 b1 s2 a3 b2, and every row of the table for t = 0 ... 10 asserted on the
// real actors with simulated time (docs/design/ordering.md O3-O6).
#include <gtest/gtest.h>

#include <map>

#include "harness.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::harness;
using test::msg;

class worked_example : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = h.create(queue_spec("account-events")
                                .ordered_by({key::header("account")})
                                .when_ordering_key_missing(missing_ordering_key::unordered));
    ASSERT_TRUE(created.ok()) << to_string(created.err());
    q = created.value();
    struct arrival {
      const char* name;
      const char* account;
    };
    for (auto a :
         {arrival{"a1", "A"}, arrival{"a2", "A"}, arrival{"s1", nullptr}, arrival{"b1", "B"},
          arrival{"s2", nullptr}, arrival{"a3", "A"}, arrival{"b2", "B"}}) {
      std::vector<header_field> hs;
      if (a.account) hs.push_back({"account", a.account});
      auto id = h.enqueue(q, msg(a.name, hs));
      ASSERT_TRUE(id.ok()) << to_string(id.err());
    }
  }

  /// The worker takes one message if it is idle; returns what it holds ("idle" if nothing).
  std::string take(int worker) {
    auto& slot = held[worker];
    if (!slot) {
      auto got = h.receive(q, 1, 60s);
      EXPECT_TRUE(got.ok());
      if (got.ok() && !got.value().empty()) slot = got.value().front();
    }
    return slot ? slot->msg.body : "idle";
  }

  void ack(int worker) {
    ASSERT_TRUE(held[worker].has_value());
    auto st = h.ack(q, held[worker]->lease);
    ASSERT_TRUE(st.ok()) << to_string(st.err());
    processed.push_back(held[worker]->msg.body);
    held[worker].reset();
  }

  void nack_retry_after(int worker, duration d) {
    ASSERT_TRUE(held[worker].has_value());
    auto st = h.nack(q, held[worker]->lease, d);
    ASSERT_TRUE(st.ok()) << to_string(st.err());
    processed.push_back(held[worker]->msg.body + " (nacked)");
    held[worker].reset();
  }

  void at(duration t) { h.advance(t - h.elapsed()); }

  harness h;
  queue_api q;
  std::map<int, std::optional<delivery>> held;
  std::vector<std::string> processed;
};

TEST_F(worked_example, every_row_of_the_table_holds) {
  // t=0  start: W1 a1, W2 s1; a2, a3 behind a1.
  EXPECT_EQ(take(1), "a1");
  EXPECT_EQ(take(2), "s1");
  // t=1  W2 acks s1: W1 a1, W2 b1.
  at(1s);
  ack(2);
  EXPECT_EQ(take(1), "a1");
  EXPECT_EQ(take(2), "b1");
  // t=2  W1 acks a1: W1 a2, W2 b1; a3 behind a2, b2 behind b1.
  at(2s);
  ack(1);
  EXPECT_EQ(take(1), "a2");
  EXPECT_EQ(take(2), "b1");
  // t=3  W2 acks b1: W1 a2, W2 s2.
  at(3s);
  ack(2);
  EXPECT_EQ(take(1), "a2");
  EXPECT_EQ(take(2), "s2");
  // t=4  W1 nacks a2, retry after 5 s: W1 b2, W2 s2; a2 not before t=9.
  at(4s);
  nack_retry_after(1, 5s);
  EXPECT_EQ(take(1), "b2");
  EXPECT_EQ(take(2), "s2");
  {
    auto blocked = h.groups(q, true);
    ASSERT_TRUE(blocked.ok());
    bool a_waits = false;
    for (const auto& g : blocked.value())
      if (g.key == "A") {
        a_waits = true;
        EXPECT_EQ(g.state, group_status::retry_wait);
        EXPECT_EQ(g.until, test::sim_epoch + duration{9s});
        EXPECT_EQ(g.backlog, 2u);  // a2 and a3
      }
    EXPECT_TRUE(a_waits) << "group A must report that it waits on a2's retry_after";
  }
  // t=5  W2 acks s2: W1 b2, W2 idle (group A waits on a2).
  at(5s);
  ack(2);
  EXPECT_EQ(take(1), "b2");
  EXPECT_EQ(take(2), "idle");
  // t=6  W1 acks b2: both idle.
  at(6s);
  ack(1);
  EXPECT_EQ(take(1), "idle");
  EXPECT_EQ(take(2), "idle");
  // t=8.999: a2 is still held.
  at(8999ms);
  EXPECT_EQ(take(1), "idle");
  // t=9  a2 eligible: W1 a2; a3 behind a2.
  at(9s);
  EXPECT_EQ(take(1), "a2");
  EXPECT_EQ(held[1]->msg.attempts, 2u);
  EXPECT_EQ(take(2), "idle");
  // t=10 W1 acks a2: W1 a3.
  at(10s);
  ack(1);
  EXPECT_EQ(take(1), "a3");
  ack(1);

  // Group A is processed a1, a2, a2 (retry), a3; group B b1, b2, unaffected by A's failure.
  std::vector<std::string> group_a, group_b;
  for (const auto& p : processed) {
    if (p[0] == 'a') group_a.push_back(p);
    if (p[0] == 'b') group_b.push_back(p);
  }
  EXPECT_EQ(group_a, (std::vector<std::string>{"a1", "a2 (nacked)", "a2", "a3"}));
  EXPECT_EQ(group_b, (std::vector<std::string>{"b1", "b2"}));
  auto s = h.stats(q);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value().acked, 7u);
  EXPECT_EQ(s.value().nacked, 1u);
  EXPECT_EQ(s.value().backlog, 0u);
  EXPECT_EQ(s.value().live_groups, 0u) << "idle groups are gone";
}

}  // namespace
}  // namespace laneq
