// Per-group introspection (`groups`, docs/api.md) on the real actors with simulated time: each
// state with its since/until, the blocked_only filter, and groups leaving the list once idle.
// The throttled state is covered in fairness_throttling_test.cpp (T4).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "actor_test_helpers.hpp"
#include "laneq/codec.hpp"
#include "laneq/key.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

/// The keys listed, sorted (groups are listed in lane-id order, a hash of the key).
std::vector<std::string> keys(const std::vector<group_info>& gs) {
  std::vector<std::string> out;
  for (const auto& g : gs) out.push_back(g.key);
  std::sort(out.begin(), out.end());
  return out;
}

/// The state of each group listed, by key.
std::map<std::string, group_status> states(const std::vector<group_info>& gs) {
  std::map<std::string, group_status> out;
  for (const auto& g : gs) out[g.key] = g.state;
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

// blocked_only lists the in_flight, retry_wait and delayed groups (not the ready ones); a group
// that has become empty and idle is listed by neither call.
TEST_F(introspection, blocked_only_lists_blocked_groups_and_idle_groups_are_not_listed) {
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("B1", "B"),
                            in_account("C1", "C", 10s), in_account("D1", "D")})
                  .ok());
  auto ds = take(h, q, 2);
  ASSERT_EQ(ds.size(), 2u);
  ASSERT_TRUE(h.nack(q, ds[1].lease, 5s).ok());  // B1
  auto blocked = groups(true);
  EXPECT_EQ(keys(blocked), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(states(blocked), (std::map<std::string, group_status>{{"A", group_status::in_flight},
                                                                  {"B", group_status::retry_wait},
                                                                  {"C", group_status::delayed}}));
  EXPECT_EQ(keys(groups(false)), (std::vector<std::string>{"A", "B", "C", "D"}));

  ASSERT_TRUE(h.ack(q, ds[0].lease).ok());  // group A is now empty and idle
  EXPECT_EQ(keys(groups(true)), (std::vector<std::string>{"B", "C"}));
  EXPECT_EQ(keys(groups(false)), (std::vector<std::string>{"B", "C", "D"}));
}

// -- pages (issue 22 §5) ------------------------------------------------------------------------

/// `n` groups, each with one ready message: keys G000, G001, ...
void fill_groups(harness& h, const queue_api& q, int n) {
  std::vector<outgoing_message> batch;
  for (int i = 0; i < n; ++i) {
    auto key = std::to_string(1000 + i).substr(1);
    batch.push_back(in_account("m" + key, "G" + key));
  }
  ASSERT_TRUE(h.enqueue(q, std::move(batch)).ok());
}

/// Pages through the groups with `query`; every page is checked against `query.limit`.
std::vector<groups_page> all_pages(harness& h, const queue_api& q, groups_query query) {
  std::vector<groups_page> pages;
  do {
    auto page = h.page_of_groups(q, query);
    EXPECT_TRUE(page.ok());
    if (!page.ok() || pages.size() > 1000) break;
    EXPECT_LE(page.value().groups.size(), query.limit);
    query.after = page.value().next;
    pages.push_back(std::move(page.value()));
  } while (!query.after.empty());
  return pages;
}

// A page holds at most `limit` groups, in lane-id order; a cursor follows every page but the
// last, and paging lists each group once.
TEST_F(introspection, pages_hold_at_most_limit_groups_in_lane_order_each_listed_once) {
  fill_groups(h, q, 25);
  auto pages = all_pages(h, q, groups_query{{}, 10, false});
  ASSERT_EQ(pages.size(), 3u);
  EXPECT_EQ(pages[0].groups.size(), 10u);
  EXPECT_EQ(pages[1].groups.size(), 10u);
  EXPECT_EQ(pages[2].groups.size(), 5u);
  std::vector<group_info> listed;
  for (auto& p : pages)
    for (auto& g : p.groups) listed.push_back(g);
  auto ks = keys(listed);
  EXPECT_EQ(std::set<std::string>(ks.begin(), ks.end()).size(), 25u) << "each once";
  std::vector<std::array<std::uint8_t, 16>> lanes;
  for (const auto& g : listed)
    lanes.push_back(codec::make_lane_id("accounts", encode_key(key_values{{g.key}})).bytes);
  EXPECT_TRUE(std::is_sorted(lanes.begin(), lanes.end())) << "in lane-id order";
  EXPECT_EQ(keys(h.groups(q, false).value()), ks) << "the paging helper agrees";
}

// A blocked_only page examines at most 10 x limit groups: with 30 ready groups and one in
// flight, pages of limit 1 answer short (empty) with a cursor rather than scan to the end.
TEST_F(introspection, a_blocked_page_examines_at_most_ten_times_its_limit_and_answers_short) {
  fill_groups(h, q, 30);
  auto d = take_one(h, q);
  auto pages = all_pages(h, q, groups_query{{}, 1, true});
  std::size_t empty_with_cursor = 0;
  std::vector<group_info> listed;
  for (auto& p : pages) {
    if (p.groups.empty() && !p.next.empty()) ++empty_with_cursor;
    for (auto& g : p.groups) listed.push_back(g);
  }
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, d.ordering_key);
  EXPECT_EQ(listed[0].state, group_status::in_flight);
  EXPECT_GE(pages.size(), 3u) << "30 groups, 10 examined per page";
  EXPECT_LE(pages.size(), 4u);
  EXPECT_GE(empty_with_cursor, 1u);
}

// A limit outside 1..groups_page_max or a cursor that is no lane id is invalid_argument.
TEST_F(introspection, a_page_with_a_bad_limit_or_cursor_is_invalid_argument) {
  fill_groups(h, q, 3);
  for (auto query :
       {groups_query{{}, 0, false}, groups_query{{}, limits::groups_page_max + 1, false},
        groups_query{"short", 10, false}}) {
    auto r = h.page_of_groups(q, query);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.err().code, errc::invalid_argument);
  }
}

}  // namespace
}  // namespace laneq
