// Per-group introspection (`groups`, docs/api.md) on the real actors with simulated time: each
// state with its since/until, the blocked_only filter, and groups leaving the list once idle.
// The throttled state is covered in fairness_throttling_test.cpp (T4).
#include <gtest/gtest.h>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

std::vector<std::string> keys(const std::vector<group_info>& gs) {
  std::vector<std::string> out;
  for (const auto& g : gs) out.push_back(g.key);
  return out;
}

class introspection : public ::testing::Test {
 protected:
  void SetUp() override {
    q = test::make_queue(h, queue_spec("accounts").ordered_by({key::header("account")}));
  }
  std::vector<group_info> groups(bool blocked_only) {
    auto r = h.groups(q, blocked_only);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : std::vector<group_info>{};
  }
  /// The only group listed with blocked_only (a test failure if there is not exactly one).
  group_info only_blocked() {
    auto gs = groups(true);
    EXPECT_EQ(gs.size(), 1u);
    return gs.empty() ? group_info{} : gs.front();
  }

  harness h;
  queue_api q;
};

// A group whose head is in flight reports in_flight since its delivery, until its lease deadline.
TEST_F(introspection, an_in_flight_group_reports_its_delivery_time_and_lease_deadline) {
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  advance_to(h, 2s);
  take_one(h, q, 10s);
  auto g = only_blocked();
  EXPECT_EQ(g.key, "A");
  EXPECT_EQ(g.state, group_status::in_flight);
  EXPECT_EQ(g.since, at(2s));
  EXPECT_EQ(g.until, at(12s));
  EXPECT_EQ(g.backlog, 2u);
  EXPECT_EQ(g.head, ids.value()[0]);
}

// A group whose head was nacked with retry_after reports retry_wait since the nack, until the
// head may go again.
TEST_F(introspection, a_group_in_retry_wait_reports_when_its_head_may_go_again) {
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  auto a1 = take_one(h, q);
  advance_to(h, 3s);
  ASSERT_TRUE(h.nack(q, a1.lease, 4s).ok());
  auto g = only_blocked();
  EXPECT_EQ(g.state, group_status::retry_wait);
  EXPECT_EQ(g.since, at(3s));
  EXPECT_EQ(g.until, at(7s));
  EXPECT_EQ(g.backlog, 2u);
  EXPECT_EQ(g.head, ids.value()[0]);
  advance_to(h, 7s);
  EXPECT_TRUE(groups(true).empty()) << "ready again at t = 7 s";
}

// A group whose head has an enqueue delay reports delayed since enqueued_at, until
// enqueued_at + delay.
TEST_F(introspection, a_delayed_group_reports_its_enqueue_time_and_the_end_of_its_delay) {
  advance_to(h, 1s);
  auto ids = h.enqueue(q, {in_account("A1", "A", 5s), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  advance_to(h, 3s);
  auto g = only_blocked();
  EXPECT_EQ(g.key, "A");
  EXPECT_EQ(g.state, group_status::delayed);
  EXPECT_EQ(g.since, at(1s));
  EXPECT_EQ(g.until, at(6s));
  EXPECT_EQ(g.backlog, 2u);
  EXPECT_EQ(g.head, ids.value()[0]);
}

// A ready group (head offered, waiting for a consumer) is not blocked: it is listed only without
// blocked_only.
TEST_F(introspection, a_ready_group_is_listed_only_without_blocked_only) {
  auto id = test::put(h, q, in_account("A1", "A"));
  EXPECT_TRUE(groups(true).empty());
  auto all = groups(false);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].key, "A");
  EXPECT_EQ(all[0].state, group_status::ready);
  EXPECT_EQ(all[0].backlog, 1u);
  EXPECT_EQ(all[0].head, id);
  EXPECT_EQ(all[0].until, timestamp{});
}

// blocked_only lists the in_flight, retry_wait and delayed groups (not the ready ones), sorted by
// head; a group that has become empty and idle is listed by neither call.
TEST_F(introspection, blocked_only_lists_blocked_groups_by_head_and_idle_groups_are_not_listed) {
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("B1", "B"),
                            in_account("C1", "C", 10s), in_account("D1", "D")})
                  .ok());
  auto ds = take(h, q, 2);
  ASSERT_EQ(ds.size(), 2u);
  ASSERT_TRUE(h.nack(q, ds[1].lease, 5s).ok());  // B1
  auto blocked = groups(true);
  EXPECT_EQ(keys(blocked), (std::vector<std::string>{"A", "B", "C"}));
  ASSERT_EQ(blocked.size(), 3u);
  EXPECT_EQ(blocked[0].state, group_status::in_flight);
  EXPECT_EQ(blocked[1].state, group_status::retry_wait);
  EXPECT_EQ(blocked[2].state, group_status::delayed);
  EXPECT_EQ(keys(groups(false)), (std::vector<std::string>{"A", "B", "C", "D"}));

  ASSERT_TRUE(h.ack(q, ds[0].lease).ok());  // group A is now empty and idle
  EXPECT_EQ(keys(groups(true)), (std::vector<std::string>{"B", "C"}));
  EXPECT_EQ(keys(groups(false)), (std::vector<std::string>{"B", "C", "D"}));
}

}  // namespace
}  // namespace laneq
