// Unit tests for group_state, the ordering group state machine (docs/design/ordering.md O3-O7).
#include "laneq/group_state.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

constexpr timestamp t0 = timestamp::from_ms(10'000);
constexpr duration lease_d = 30s;
constexpr group_id gid{7};

std::vector<message> messages(std::initializer_list<std::uint64_t> ns, timestamp at = t0) {
  std::vector<message> out;
  for (auto n : ns) out.push_back(test::make_message(n, at));
  return out;
}

/// The lease a fairness actor would issue for `offered`: its next attempt.
lease_token lease_for(const message& offered, std::uint64_t nonce = 1) {
  return lease_token{gid, offered.id, offered.attempts + 1, nonce};
}

/// Delivers the message `fx` offered at `now` and returns its lease.
lease_token deliver(group_state& g, const group_effects& fx, timestamp now,
                    std::uint64_t nonce = 1) {
  EXPECT_TRUE(fx.offer.has_value()) << "nothing was offered";
  if (!fx.offer) return {};
  auto lease = lease_for(*fx.offer, nonce);
  g.on_delivered(lease, now + lease_d, now);
  g.check_invariants();
  return lease;
}

std::uint64_t offered_id(const group_effects& fx) {
  return fx.offer ? fx.offer->id.value : 0;
}

TEST(group_state, enqueue_offers_only_the_head) {
  group_state g{gid, 5};
  EXPECT_EQ(g.current_phase(), group_state::phase::empty);
  auto fx = g.on_enqueue(messages({1, 2, 3}), t0);
  g.check_invariants();
  ASSERT_TRUE(fx.offer.has_value());
  EXPECT_EQ(*fx.offer, test::make_message(1, t0));
  EXPECT_TRUE(fx.dead_letters.empty());
  EXPECT_TRUE(fx.removed.empty());
  EXPECT_FALSE(fx.idle);
  EXPECT_EQ(g.current_phase(), group_state::phase::offered);
  EXPECT_EQ(g.backlog(), 3u);
  EXPECT_EQ(g.received_total(), 3u);
  ASSERT_NE(g.head(), nullptr);
  EXPECT_EQ(g.head()->id, message_id{1});
}

TEST(group_state, enqueue_behind_an_offered_head_offers_nothing) {
  group_state g{gid, 5};
  (void)g.on_enqueue(messages({1}), t0);
  auto fx = g.on_enqueue(messages({2, 3}), t0 + 1s);
  g.check_invariants();
  EXPECT_FALSE(fx.offer.has_value());
  EXPECT_EQ(g.backlog(), 3u);
  EXPECT_EQ(g.received_total(), 3u);
  EXPECT_EQ(g.head()->id, message_id{1});
}

TEST(group_state, enqueue_behind_an_in_flight_head_offers_nothing) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  auto fx = g.on_enqueue(messages({2}), t0 + 1s);
  EXPECT_FALSE(fx.offer.has_value());
  EXPECT_EQ(g.current_phase(), group_state::phase::in_flight);
  EXPECT_EQ(g.lease(), lease);
}

TEST(group_state, enqueue_of_nothing_keeps_an_empty_group_empty) {
  group_state g{gid, 5};
  auto fx = g.on_enqueue({}, t0);
  g.check_invariants();
  EXPECT_FALSE(fx.offer.has_value());
  EXPECT_EQ(g.current_phase(), group_state::phase::empty);
  EXPECT_EQ(g.head(), nullptr);
}

TEST(group_state, delivered_head_is_in_flight_under_its_lease) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0 + 1s);
  EXPECT_EQ(g.current_phase(), group_state::phase::in_flight);
  EXPECT_EQ(g.lease(), lease);
  EXPECT_EQ(lease.attempt, 1u);
  EXPECT_EQ(g.lease_deadline(), t0 + 1s + lease_d);
  EXPECT_EQ(g.head()->attempts, 1u);
  EXPECT_EQ(g.backlog(), 2u);
}

TEST(group_state, ack_removes_the_head_and_offers_the_next) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0);
  auto fx = g.on_ack(lease, t0 + 2s);
  ASSERT_TRUE(fx.ok());
  g.check_invariants();
  EXPECT_EQ(fx.value().removed, std::vector<message_id>{message_id{1}});
  EXPECT_EQ(offered_id(fx.value()), 2u);
  EXPECT_EQ(fx.value().offer->attempts, 0u);
  EXPECT_TRUE(fx.value().dead_letters.empty());
  EXPECT_FALSE(fx.value().idle);
  EXPECT_EQ(g.current_phase(), group_state::phase::offered);
  EXPECT_EQ(g.lease(), std::nullopt);
  EXPECT_EQ(g.backlog(), 1u);
}

TEST(group_state, ack_of_the_last_message_leaves_the_group_idle) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  auto fx = g.on_ack(lease, t0 + 1s);
  ASSERT_TRUE(fx.ok());
  g.check_invariants();
  EXPECT_TRUE(fx.value().idle);
  EXPECT_FALSE(fx.value().offer.has_value());
  EXPECT_EQ(g.current_phase(), group_state::phase::empty);
  EXPECT_EQ(g.backlog(), 0u);
  EXPECT_EQ(g.head(), nullptr);
  EXPECT_EQ(g.describe(t0 + 1s).state, group_status::idle);
}

TEST(group_state, group_that_went_idle_offers_a_new_arrival_at_once) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  ASSERT_TRUE(g.on_ack(lease, t0 + 1s).ok());
  auto fx = g.on_enqueue(messages({2}, t0 + 2s), t0 + 2s);
  EXPECT_EQ(offered_id(fx), 2u);
  EXPECT_EQ(g.received_total(), 2u);
}

TEST(group_state, nack_retry_reoffers_the_same_head_after_retry_after) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0);
  auto fx = g.on_nack(lease, nack_kind::retry, 5s, t0 + 1s);
  ASSERT_TRUE(fx.ok());
  g.check_invariants();
  ASSERT_TRUE(fx.value().offer.has_value());
  EXPECT_EQ(fx.value().offer->id, message_id{1}) << "the same head, not the one behind it";
  EXPECT_EQ(fx.value().offer->not_before, t0 + 6s);
  EXPECT_EQ(fx.value().offer->attempts, 1u);
  EXPECT_TRUE(fx.value().removed.empty());
  EXPECT_TRUE(fx.value().dead_letters.empty());
  EXPECT_EQ(g.current_phase(), group_state::phase::offered);
  EXPECT_EQ(g.lease(), std::nullopt);
  EXPECT_EQ(g.backlog(), 2u);
  // The redelivery is the second attempt.
  auto second = deliver(g, fx.value(), t0 + 6s, 2);
  EXPECT_EQ(second.attempt, 2u);
  EXPECT_EQ(g.head()->attempts, 2u);
}

TEST(group_state, nack_retry_without_delay_is_deliverable_at_once) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  auto fx = g.on_nack(lease, nack_kind::retry, 0s, t0 + 1s);
  ASSERT_TRUE(fx.ok());
  ASSERT_TRUE(fx.value().offer.has_value());
  EXPECT_EQ(fx.value().offer->not_before, t0 + 1s);
  EXPECT_EQ(g.describe(t0 + 1s).state, group_status::ready);
}

TEST(group_state, lease_timer_before_the_deadline_asks_to_rearm) {
  group_state g{gid, 5};
  (void)deliver(g, g.on_enqueue(messages({1}), t0), t0);
  std::optional<timestamp> rearm;
  auto fx = g.on_lease_timer(t0 + lease_d - 1us, &rearm);
  EXPECT_FALSE(fx.offer.has_value());
  EXPECT_EQ(rearm, t0 + lease_d);
  EXPECT_EQ(g.current_phase(), group_state::phase::in_flight);
}

TEST(group_state, redelivers_head_after_lease_expiry) {
  group_state g{gid, 5};
  auto first = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0);
  std::optional<timestamp> rearm;
  auto fx = g.on_lease_timer(t0 + lease_d, &rearm);
  g.check_invariants();
  EXPECT_EQ(rearm, std::nullopt);
  ASSERT_TRUE(fx.offer.has_value());
  EXPECT_EQ(fx.offer->id, message_id{1});
  EXPECT_EQ(fx.offer->attempts, 1u) << "the expired delivery counts as an attempt";
  EXPECT_EQ(fx.offer->not_before, t0 + lease_d);
  EXPECT_TRUE(fx.dead_letters.empty());
  EXPECT_EQ(g.lease(), std::nullopt);
  EXPECT_EQ(g.backlog(), 2u);

  auto second = deliver(g, fx, t0 + lease_d, 2);
  EXPECT_EQ(second.attempt, 2u);
  auto fx2 = g.on_lease_timer(t0 + 2 * lease_d);
  ASSERT_TRUE(fx2.offer.has_value());
  EXPECT_EQ(fx2.offer->id, message_id{1});
  EXPECT_EQ(fx2.offer->attempts, 2u);
  EXPECT_NE(first, second);
}

TEST(group_state, lease_timer_without_a_delivery_does_nothing) {
  group_state g{gid, 5};
  std::optional<timestamp> rearm;
  auto idle_fx = g.on_lease_timer(t0, &rearm);
  EXPECT_FALSE(idle_fx.offer.has_value());
  EXPECT_FALSE(idle_fx.idle);
  EXPECT_EQ(rearm, std::nullopt);
  (void)g.on_enqueue(messages({1}), t0);
  auto offered_fx = g.on_lease_timer(t0 + 1h, &rearm);
  EXPECT_FALSE(offered_fx.offer.has_value());
  EXPECT_TRUE(offered_fx.dead_letters.empty());
  EXPECT_EQ(rearm, std::nullopt);
  EXPECT_EQ(g.current_phase(), group_state::phase::offered);
}

TEST(group_state, dead_letters_after_max_attempts_and_continues_with_the_next) {
  group_state g{gid, 2};
  auto fx = g.on_enqueue(messages({1, 2}), t0);
  (void)deliver(g, fx, t0, 1);
  fx = g.on_lease_timer(t0 + lease_d);
  ASSERT_EQ(offered_id(fx), 1u);
  (void)deliver(g, fx, t0 + lease_d, 2);
  auto at = t0 + 2 * lease_d;
  fx = g.on_lease_timer(at);
  g.check_invariants();
  ASSERT_EQ(fx.dead_letters.size(), 1u);
  EXPECT_EQ(fx.dead_letters[0].msg.id, message_id{1});
  EXPECT_EQ(fx.dead_letters[0].msg.attempts, 2u);
  EXPECT_EQ(fx.dead_letters[0].reason, dead_letter_reason::max_attempts);
  EXPECT_EQ(fx.dead_letters[0].at, at);
  EXPECT_TRUE(fx.removed.empty()) << "a dead letter is not an ack";
  EXPECT_EQ(offered_id(fx), 2u);
  EXPECT_EQ(fx.offer->attempts, 0u);
  EXPECT_EQ(g.backlog(), 1u);
  EXPECT_EQ(g.current_phase(), group_state::phase::offered);
}

TEST(group_state, nack_retry_on_the_last_attempt_dead_letters_instead) {
  group_state g{gid, 1};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  auto fx = g.on_nack(lease, nack_kind::retry, 5s, t0 + 1s);
  ASSERT_TRUE(fx.ok());
  g.check_invariants();
  ASSERT_EQ(fx.value().dead_letters.size(), 1u);
  EXPECT_EQ(fx.value().dead_letters[0].reason, dead_letter_reason::max_attempts);
  EXPECT_EQ(fx.value().dead_letters[0].at, t0 + 1s);
  EXPECT_TRUE(fx.value().idle);
  EXPECT_FALSE(fx.value().offer.has_value());
  EXPECT_EQ(g.current_phase(), group_state::phase::empty);
}

TEST(group_state, nack_dead_letter_moves_the_head_out_at_once) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0);
  auto fx = g.on_nack(lease, nack_kind::dead_letter, 5s, t0 + 1s);
  ASSERT_TRUE(fx.ok());
  g.check_invariants();
  ASSERT_EQ(fx.value().dead_letters.size(), 1u);
  EXPECT_EQ(fx.value().dead_letters[0].msg.id, message_id{1});
  EXPECT_EQ(fx.value().dead_letters[0].msg.attempts, 1u);
  EXPECT_EQ(fx.value().dead_letters[0].reason, dead_letter_reason::requested);
  EXPECT_EQ(fx.value().dead_letters[0].at, t0 + 1s);
  EXPECT_EQ(offered_id(fx.value()), 2u);
  EXPECT_EQ(fx.value().offer->not_before, t0) << "retry_after does not apply to the next message";
  EXPECT_FALSE(fx.value().idle);
}

TEST(group_state, stale_lease_is_lease_not_found) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0, 1);
  auto forged = lease;
  forged.nonce = 2;
  auto r = g.on_ack(forged, t0 + 1s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_not_found);
  EXPECT_NE(r.err().message.find(to_string(forged)), std::string::npos) << r.err().message;
  EXPECT_EQ(g.current_phase(), group_state::phase::in_flight) << "a refused ack changes nothing";
  EXPECT_EQ(g.lease(), lease);

  ASSERT_TRUE(g.on_ack(lease, t0 + 1s).ok());
  auto twice = g.on_ack(lease, t0 + 2s);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.err().code, errc::lease_not_found) << "the message was already acked";
  auto nack = g.on_nack(lease, nack_kind::retry, 0s, t0 + 2s);
  ASSERT_FALSE(nack.ok());
  EXPECT_EQ(nack.err().code, errc::lease_not_found);
  g.check_invariants();
}

TEST(group_state, lease_of_a_dead_lettered_message_is_lease_not_found) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0);
  ASSERT_TRUE(g.on_nack(lease, nack_kind::dead_letter, 0s, t0 + 1s).ok());
  auto r = g.on_ack(lease, t0 + 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_not_found);
}

TEST(group_state, previous_attempts_lease_after_expiry_is_lease_expired) {
  group_state g{gid, 5};
  auto first = deliver(g, g.on_enqueue(messages({1, 2}), t0), t0, 1);
  auto fx = g.on_lease_timer(t0 + lease_d);
  // While the head waits to be redelivered.
  auto while_offered = g.on_ack(first, t0 + lease_d + 1s);
  ASSERT_FALSE(while_offered.ok());
  EXPECT_EQ(while_offered.err().code, errc::lease_expired);
  EXPECT_EQ(g.current_phase(), group_state::phase::offered);
  // And while its next attempt is in flight: that attempt stays untouched.
  auto second = deliver(g, fx, t0 + lease_d + 2s, 2);
  auto while_redelivered = g.on_ack(first, t0 + lease_d + 3s);
  ASSERT_FALSE(while_redelivered.ok());
  EXPECT_EQ(while_redelivered.err().code, errc::lease_expired);
  auto extend = g.on_extend(first, 10s, t0 + lease_d + 3s);
  ASSERT_FALSE(extend.ok());
  EXPECT_EQ(extend.err().code, errc::lease_expired);
  EXPECT_EQ(g.lease(), second);
  auto acked = g.on_ack(second, t0 + lease_d + 4s);
  ASSERT_TRUE(acked.ok());
  EXPECT_EQ(acked.value().removed, std::vector<message_id>{message_id{1}});
  g.check_invariants();
}

TEST(group_state, extend_moves_the_deadline_and_the_old_timer_rearms) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  auto extended = g.on_extend(lease, 60s, t0 + 20s);
  ASSERT_TRUE(extended.ok());
  EXPECT_EQ(extended.value(), t0 + 80s);
  EXPECT_EQ(g.lease_deadline(), t0 + 80s);
  std::optional<timestamp> rearm;
  auto at_old_deadline = g.on_lease_timer(t0 + lease_d, &rearm);
  EXPECT_FALSE(at_old_deadline.offer.has_value());
  EXPECT_EQ(rearm, t0 + 80s);
  EXPECT_EQ(g.current_phase(), group_state::phase::in_flight);
  EXPECT_TRUE(g.on_lease_timer(t0 + 80s - 1us).dead_letters.empty());
  EXPECT_EQ(g.current_phase(), group_state::phase::in_flight);
  rearm.reset();
  auto at_new_deadline = g.on_lease_timer(t0 + 80s, &rearm);
  EXPECT_EQ(rearm, std::nullopt);
  EXPECT_EQ(offered_id(at_new_deadline), 1u);
  g.check_invariants();
}

TEST(group_state, extend_of_an_unknown_lease_is_lease_not_found) {
  group_state g{gid, 5};
  auto lease = deliver(g, g.on_enqueue(messages({1}), t0), t0);
  auto other = lease;
  other.msg = message_id{99};
  auto r = g.on_extend(other, 60s, t0 + 1s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_not_found);
  EXPECT_EQ(g.lease_deadline(), t0 + lease_d);
}

TEST(group_state, describe_reports_each_state_with_its_times) {
  group_state g{gid, 5};
  auto idle = g.describe(t0);
  EXPECT_EQ(idle.state, group_status::idle);
  EXPECT_EQ(idle.backlog, 0u);

  // ready: offered and deliverable.
  auto fx = g.on_enqueue(messages({1, 2}), t0 + 1s);
  auto ready = g.describe(t0 + 2s);
  EXPECT_EQ(ready.state, group_status::ready);
  EXPECT_EQ(ready.since, t0 + 1s);
  EXPECT_EQ(ready.until, timestamp{});
  EXPECT_EQ(ready.head, message_id{1});
  EXPECT_EQ(ready.backlog, 2u);

  // in_flight: until the lease deadline.
  auto lease = deliver(g, fx, t0 + 3s);
  auto in_flight = g.describe(t0 + 4s);
  EXPECT_EQ(in_flight.state, group_status::in_flight);
  EXPECT_EQ(in_flight.since, t0 + 3s);
  EXPECT_EQ(in_flight.until, t0 + 3s + lease_d);
  EXPECT_EQ(in_flight.head, message_id{1});

  // retry_wait: since the nack, until its not-before time; then ready again.
  ASSERT_TRUE(g.on_nack(lease, nack_kind::retry, 10s, t0 + 5s).ok());
  auto retry = g.describe(t0 + 6s);
  EXPECT_EQ(retry.state, group_status::retry_wait);
  EXPECT_EQ(retry.since, t0 + 5s);
  EXPECT_EQ(retry.until, t0 + 15s);
  EXPECT_EQ(g.describe(t0 + 15s).state, group_status::ready);
  EXPECT_EQ(to_string(retry.state), "retry_wait");
}

TEST(group_state, describe_reports_a_delayed_head_since_it_was_enqueued) {
  group_state g{gid, 5};
  auto m = test::make_message(1, t0);
  m.not_before = t0 + 10s;  // enqueue delay
  (void)g.on_enqueue({m}, t0 + 1s);
  auto delayed = g.describe(t0 + 2s);
  EXPECT_EQ(delayed.state, group_status::delayed);
  EXPECT_EQ(delayed.since, t0);
  EXPECT_EQ(delayed.until, t0 + 10s);
  EXPECT_EQ(delayed.head, message_id{1});
  EXPECT_EQ(g.describe(t0 + 10s).state, group_status::ready);
}

TEST(group_state, enum_names_are_stable) {
  EXPECT_EQ(to_string(group_status::ready), "ready");
  EXPECT_EQ(to_string(group_status::in_flight), "in_flight");
  EXPECT_EQ(to_string(group_status::retry_wait), "retry_wait");
  EXPECT_EQ(to_string(group_status::delayed), "delayed");
  EXPECT_EQ(to_string(group_status::throttled), "throttled");
  EXPECT_EQ(to_string(group_status::idle), "idle");
  EXPECT_EQ(to_string(dead_letter_reason::max_attempts), "max_attempts");
  EXPECT_EQ(to_string(dead_letter_reason::requested), "requested");
}

TEST(group_state, delivers_in_arrival_order_one_at_a_time) {
  group_state g{gid, 3};
  auto fx = g.on_enqueue(messages({1, 2, 3, 4}), t0);
  std::vector<std::uint64_t> acked;
  auto now = t0;
  while (fx.offer) {
    auto lease = deliver(g, fx, now);
    EXPECT_EQ(lease.msg, g.head()->id) << "only the head is ever delivered";
    auto acked_fx = g.on_ack(lease, now + 1s);
    ASSERT_TRUE(acked_fx.ok());
    g.check_invariants();
    acked.push_back(acked_fx.value().removed.at(0).value);
    fx = acked_fx.value();
    now = now + 2s;
  }
  EXPECT_EQ(acked, (std::vector<std::uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(g.current_phase(), group_state::phase::empty);
}

TEST(group_state, broken_preconditions_stop_the_process) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  auto deliver_a_wrong_attempt = [] {
    group_state g{gid, 5};
    auto fx = g.on_enqueue(messages({1}), t0);
    auto lease = lease_for(*fx.offer);
    lease.attempt = 2;  // not the head's next attempt
    g.on_delivered(lease, t0 + lease_d, t0);
  };
  auto deliver_a_message_behind_the_head = [] {
    group_state g{gid, 5};
    (void)g.on_enqueue(messages({1, 2}), t0);
    g.on_delivered(lease_token{gid, message_id{2}, 1, 1}, t0 + lease_d, t0);
  };
  auto enqueue_out_of_order = [] {
    group_state g{gid, 5};
    (void)g.on_enqueue(messages({2}), t0);
    (void)g.on_enqueue(messages({1}), t0);
  };
  auto deliver_twice = [] {
    group_state g{gid, 5};
    auto fx = g.on_enqueue(messages({1}), t0);
    auto lease = lease_for(*fx.offer);
    g.on_delivered(lease, t0 + lease_d, t0);
    g.on_delivered(lease, t0 + lease_d, t0);
  };
  EXPECT_DEATH(deliver_a_wrong_attempt(),
               "INVARIANT VIOLATED: a delivery is the head's next attempt");
  EXPECT_DEATH(deliver_a_message_behind_the_head(),
               "INVARIANT VIOLATED: the delivered message is the group's head");
  EXPECT_DEATH(enqueue_out_of_order(),
               "INVARIANT VIOLATED: messages enter a group in arrival order");
  EXPECT_DEATH(deliver_twice(), "INVARIANT VIOLATED: only an offered head is delivered");
}

}  // namespace
}  // namespace laneq

namespace laneq {
namespace {

TEST(compact_fifo, keeps_order_across_pops_and_reclaims_popped_slots) {
  compact_fifo<int> q;
  EXPECT_TRUE(q.empty());
  int next_in = 0;
  int next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < round % 7 + 1; ++i) q.push_back(next_in++);
    for (int i = 0; i < round % 5 + 1 && !q.empty(); ++i) {
      ASSERT_EQ(q.front(), next_out++);
      q.pop_front();
    }
    ASSERT_EQ(q.size(), static_cast<std::size_t>(next_in - next_out));
    if (!q.empty()) {
      ASSERT_EQ(q.back(), next_in - 1);
      ASSERT_EQ(q[0], next_out);
    }
  }
}

}  // namespace
}  // namespace laneq
