// Unit tests for lease_table: leases of in-flight unordered messages (docs/design/ordering.md O4,
// O5).
#include "laneq/lease_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

constexpr timestamp t0 = timestamp::from_ms(5'000);

message make_message(std::uint64_t id, std::uint32_t attempts = 1) {
  auto m = test::make_message(id, t0);
  m.attempts = attempts;
  return m;
}

lease_token lease_of(const message& m, std::uint64_t nonce = 99) {
  return lease_token{group_id{0}, m.id, m.attempts, nonce};
}

std::vector<std::uint64_t> ids(const std::vector<message>& ms) {
  std::vector<std::uint64_t> out;
  for (const auto& m : ms) out.push_back(m.id.value);
  return out;
}

TEST(lease_table, grant_records_the_delivery_window) {
  lease_table t;
  auto m = make_message(1);
  t.grant(lease_of(m), m, t0 + 30s, t0);
  t.check_invariants();
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.window(m.id), (std::pair{t0, t0 + 30s}));
  EXPECT_EQ(t.window(message_id{2}), std::nullopt);
  EXPECT_EQ(t.next_deadline(), t0 + 30s);
}

TEST(lease_table, release_returns_the_message_and_forgets_the_lease) {
  lease_table t;
  auto m = make_message(1);
  t.grant(lease_of(m), m, t0 + 30s, t0);
  auto released = t.release(lease_of(m));
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released.value(), m);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.next_deadline(), std::nullopt);
  EXPECT_EQ(t.window(m.id), std::nullopt);
  t.check_invariants();
}

TEST(lease_table, release_of_an_unknown_lease_is_lease_not_found) {
  lease_table t;
  auto m = make_message(1);
  auto r = t.release(lease_of(m));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_not_found);
  EXPECT_NE(r.err().message.find(to_string(lease_of(m))), std::string::npos) << r.err().message;
}

TEST(lease_table, releasing_twice_is_lease_not_found_the_second_time) {
  lease_table t;
  auto m = make_message(1);
  t.grant(lease_of(m), m, t0 + 30s, t0);
  ASSERT_TRUE(t.release(lease_of(m)).ok());
  auto again = t.release(lease_of(m));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.err().code, errc::lease_not_found);
}

TEST(lease_table, release_with_an_older_attempt_is_lease_expired) {
  lease_table t;
  auto m = make_message(1, 3);
  t.grant(lease_of(m), m, t0 + 30s, t0);
  auto old = lease_token{group_id{0}, m.id, 2, 99};
  auto r = t.release(old);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_expired);
  EXPECT_EQ(t.size(), 1u) << "a refused release keeps the live lease";
  EXPECT_TRUE(t.release(lease_of(m)).ok());
}

TEST(lease_table, release_with_the_same_attempt_but_another_nonce_is_lease_not_found) {
  lease_table t;
  auto m = make_message(1, 2);
  t.grant(lease_of(m, 1), m, t0 + 30s, t0);
  auto forged = t.release(lease_of(m, 2));
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.err().code, errc::lease_not_found);
  auto newer = t.release(lease_token{group_id{0}, m.id, 3, 1});
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.err().code, errc::lease_not_found);
  EXPECT_EQ(t.size(), 1u);
}

TEST(lease_table, expire_due_returns_due_leases_in_deadline_order) {
  lease_table t;
  auto m1 = make_message(1);
  auto m2 = make_message(2);
  auto m3 = make_message(3);
  auto m4 = make_message(4);
  t.grant(lease_of(m1), m1, t0 + 30s, t0);
  t.grant(lease_of(m2), m2, t0 + 10s, t0);
  t.grant(lease_of(m3), m3, t0 + 20s, t0);
  t.grant(lease_of(m4), m4, t0 + 25s, t0);
  EXPECT_EQ(t.next_deadline(), t0 + 10s);
  EXPECT_TRUE(t.expire_due(t0 + 10s - 1us).empty());
  EXPECT_EQ(ids(t.expire_due(t0 + 25s)), (std::vector<std::uint64_t>{2, 3, 4}));
  t.check_invariants();
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.next_deadline(), t0 + 30s);
  EXPECT_EQ(ids(t.expire_due(t0 + 30s)), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(t.next_deadline(), std::nullopt);
}

TEST(lease_table, expired_lease_can_no_longer_be_released) {
  lease_table t;
  auto m = make_message(1);
  t.grant(lease_of(m), m, t0 + 10s, t0);
  ASSERT_EQ(t.expire_due(t0 + 10s).size(), 1u);
  auto r = t.release(lease_of(m));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_not_found);
}

TEST(lease_table, extend_moves_the_deadline_and_expiry_follows_it) {
  lease_table t;
  auto m = make_message(1);
  t.grant(lease_of(m), m, t0 + 10s, t0);
  auto extended = t.extend(lease_of(m), 20s, t0 + 5s);
  ASSERT_TRUE(extended.ok());
  EXPECT_EQ(extended.value(), t0 + 25s);
  EXPECT_EQ(t.next_deadline(), t0 + 25s);
  EXPECT_EQ(t.window(m.id), (std::pair{t0, t0 + 25s}));
  t.check_invariants();
  EXPECT_TRUE(t.expire_due(t0 + 10s).empty()) << "the old deadline no longer counts";
  EXPECT_TRUE(t.expire_due(t0 + 25s - 1us).empty());
  EXPECT_EQ(ids(t.expire_due(t0 + 25s)), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.next_deadline(), std::nullopt);
}

TEST(lease_table, extend_can_reorder_deadlines) {
  lease_table t;
  auto m1 = make_message(1);
  auto m2 = make_message(2);
  t.grant(lease_of(m1), m1, t0 + 10s, t0);
  t.grant(lease_of(m2), m2, t0 + 20s, t0);
  ASSERT_TRUE(t.extend(lease_of(m1), 30s, t0 + 1s).ok());
  EXPECT_EQ(t.next_deadline(), t0 + 20s);
  EXPECT_EQ(ids(t.expire_due(t0 + 40s)), (std::vector<std::uint64_t>{2, 1}));
}

TEST(lease_table, extend_of_a_stale_lease_fails) {
  lease_table t;
  auto m = make_message(1, 2);
  t.grant(lease_of(m), m, t0 + 10s, t0);
  auto old = t.extend(lease_token{group_id{0}, m.id, 1, 99}, 20s, t0);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.err().code, errc::lease_expired);
  auto unknown = t.extend(lease_of(make_message(7)), 20s, t0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.err().code, errc::lease_not_found);
  EXPECT_EQ(t.next_deadline(), t0 + 10s);
}

TEST(lease_table, next_deadline_skips_released_leases) {
  lease_table t;
  auto m1 = make_message(1);
  auto m2 = make_message(2);
  t.grant(lease_of(m1), m1, t0 + 10s, t0);
  t.grant(lease_of(m2), m2, t0 + 20s, t0);
  ASSERT_TRUE(t.release(lease_of(m1)).ok());
  EXPECT_EQ(t.next_deadline(), t0 + 20s);
  t.check_invariants();
}

TEST(lease_table, a_regranted_message_expires_only_at_its_new_deadline) {
  lease_table t;
  auto m = make_message(1, 1);
  t.grant(lease_of(m), m, t0 + 10s, t0);
  ASSERT_TRUE(t.release(lease_of(m)).ok());
  auto again = make_message(1, 2);
  t.grant(lease_of(again), again, t0 + 30s, t0 + 1s);
  t.check_invariants();
  EXPECT_EQ(t.next_deadline(), t0 + 30s);
  EXPECT_TRUE(t.expire_due(t0 + 29s).empty());
  auto expired = t.expire_due(t0 + 30s);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].attempts, 2u);
}

TEST(lease_table, leased_finds_the_message_under_its_exact_token_only) {
  lease_table t;
  auto m = make_message(1, 2);
  auto other = make_message(2, 1);
  t.grant(lease_of(m, 5), m, t0 + 30s, t0);
  t.grant(lease_of(other, 6), other, t0 + 30s, t0);
  const auto* found = t.leased(lease_of(m, 5));
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(*found, m);
  EXPECT_EQ(t.leased(lease_of(m, 6)), nullptr) << "another nonce";
  EXPECT_EQ(t.leased(lease_token{group_id{0}, m.id, 1, 5}), nullptr) << "an earlier attempt";
  EXPECT_EQ(t.leased(lease_token{group_id{0}, m.id, 3, 5}), nullptr) << "a later attempt";
  EXPECT_EQ(t.leased(lease_token{group_id{1}, m.id, 2, 5}), nullptr) << "another group";
  EXPECT_EQ(t.leased(lease_of(make_message(3), 5)), nullptr) << "a message never leased";
  EXPECT_EQ(t.size(), 2u) << "a lookup changes nothing";
  ASSERT_TRUE(t.release(lease_of(m, 5)).ok());
  EXPECT_EQ(t.leased(lease_of(m, 5)), nullptr) << "released";
  ASSERT_EQ(t.expire_due(t0 + 30s).size(), 1u);
  EXPECT_EQ(t.leased(lease_of(other, 6)), nullptr) << "expired";
}

}  // namespace
}  // namespace laneq
