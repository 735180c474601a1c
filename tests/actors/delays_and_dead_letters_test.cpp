// Not-before times and dead letters of docs/design/ordering.md on the real actors with simulated
// time: nack retries and retry_after (O6), dead-lettering (O7), redrive (O9) and enqueue delays
// (O10).
#include <algorithm>

#include <gtest/gtest.h>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

class delays_and_dead_letters : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  queue_api by_account(std::uint32_t max_attempts = limits::max_attempts_default,
                       duration lease = limits::lease_default) {
    return make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .max_attempts(max_attempts)
                    .lease(lease));
  }
  std::vector<dead_letter> dead(const queue_api& q) {
    auto dl = h.dead_letters(q);
    EXPECT_TRUE(dl.ok());
    return dl.ok() ? dl.value() : std::vector<dead_letter>{};
  }

  harness h;
};

// -- O6: nack retries hold the group --------------------------------------------------------------

// O6: a nack that retries at once gives back the same message, attempt after attempt; the message
// behind it waits until the head succeeds.
TEST_F(delays_and_dead_letters, a_nack_retry_holds_the_group_until_the_message_succeeds) {
  auto q = by_account();
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  for (std::uint32_t attempt = 1; attempt <= 3; ++attempt) {
    auto ds = take(h, q, 10);
    ASSERT_EQ(bodies(ds), (strings{"A1"})) << "attempt " << attempt;
    EXPECT_EQ(ds[0].msg.attempts, attempt);
    EXPECT_EQ(ds[0].msg.id, ids.value()[0]);
    auto done = attempt < 3 ? h.nack(q, ds[0].lease) : h.ack(q, ds[0].lease);
    ASSERT_TRUE(done.ok());
  }
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
  auto s = stats_of(h, q);
  EXPECT_EQ(s.nacked, 2u);
  EXPECT_EQ(s.delivered, 4u);
}

// O6: a nack with retry_after holds the group for the delay: the message is not delivered before
// t + retry_after, and nothing behind it goes first; other groups are not held.
TEST_F(delays_and_dead_letters, a_nack_with_retry_after_holds_the_group_for_the_delay) {
  auto q = by_account();
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B"),
                            in_account("B2", "B")})
                  .ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"A1", "B1"}));
  advance_to(h, 1s);
  ASSERT_TRUE(h.nack(q, first[0].lease, 5s).ok());
  ASSERT_TRUE(h.ack(q, first[1].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"B2"})) << "group B is not held by A's retry";
  advance_to(h, 5999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "A1 is not before t = 6 s, and A2 is behind it";
  advance_to(h, 6s);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
  EXPECT_EQ(again[0].msg.not_before, at(6s));
  ASSERT_TRUE(h.ack(q, again[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

// O6, O1: on an unordered queue retry_after delays only the nacked message.
TEST_F(delays_and_dead_letters, retry_after_on_an_unordered_queue_delays_only_that_message) {
  auto q = make(queue_spec("plain"));
  ASSERT_TRUE(h.enqueue(q, {msg("m1"), msg("m2")}).ok());
  auto m1 = take_one(h, q);
  ASSERT_TRUE(h.nack(q, m1.lease, 3s).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"m2"}));
  advance_to(h, 2999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  advance_to(h, 3s);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"m1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
}

// -- O7: dead letters -----------------------------------------------------------------------------

// O7: after max_attempts failed attempts (lease expiries and nacks both count) the message is
// dead-lettered with reason max_attempts, and its group continues with the next message.
TEST_F(delays_and_dead_letters, a_message_is_dead_lettered_after_max_attempts_of_any_kind) {
  auto q = by_account(3, 1s);
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  auto a = take_one(h, q);  // attempt 1: its lease expires
  ASSERT_EQ(a.msg.body, "A1");
  advance_to(h, 1s);
  a = take_one(h, q);  // attempt 2: nacked
  ASSERT_EQ(a.msg.body, "A1");
  EXPECT_EQ(a.msg.attempts, 2u);
  ASSERT_TRUE(h.nack(q, a.lease).ok());
  a = take_one(h, q);  // attempt 3: nacked, the last one
  ASSERT_EQ(a.msg.body, "A1");
  EXPECT_EQ(a.msg.attempts, 3u);
  advance_to(h, 1500ms);
  ASSERT_TRUE(h.nack(q, a.lease).ok());

  auto next = take(h, q, 10);
  EXPECT_EQ(bodies(next), (strings{"A2"})) << "the group continues without A1";
  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].msg.id, ids.value()[0]);
  EXPECT_EQ(dl[0].msg.body, "A1");
  EXPECT_EQ(dl[0].msg.attempts, 3u);
  EXPECT_EQ(dl[0].reason, dead_letter_reason::max_attempts);
  EXPECT_EQ(dl[0].at, at(1500ms));
  auto late = h.ack(q, a.lease);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.err().code, errc::lease_not_found) << "a dead letter's lease is gone";
  auto s = stats_of(h, q);
  EXPECT_EQ(s.lease_expired, 1u);
  EXPECT_EQ(s.nacked, 2u);
  EXPECT_EQ(s.dead_lettered, 1u);
  EXPECT_EQ(s.dead_letters, 1u);
  EXPECT_EQ(s.backlog, 1u) << "A2 only";
}

// O7: a lease expiry on the last attempt dead-letters as well.
TEST_F(delays_and_dead_letters, a_lease_expiry_on_the_last_attempt_dead_letters_the_message) {
  auto q = by_account(1, 1s);
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  EXPECT_EQ(take_one(h, q).msg.body, "A1");
  advance_to(h, 1s);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].msg.body, "A1");
  EXPECT_EQ(dl[0].reason, dead_letter_reason::max_attempts);
  EXPECT_EQ(dl[0].at, at(1s));
}

// O7: a nack with dead_letter moves the message out at once (reason requested), whatever its
// attempts, and the group continues.
TEST_F(delays_and_dead_letters,
       a_dead_letter_request_moves_the_message_out_and_the_group_continues) {
  auto q = by_account();
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  auto a1 = take_one(h, q);
  advance_to(h, 2s);
  ASSERT_TRUE(h.nack(q, a1.lease, 0s, /*dead=*/true).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].msg.id, ids.value()[0]);
  EXPECT_EQ(dl[0].msg.body, "A1");
  EXPECT_EQ(dl[0].msg.attempts, 1u);
  EXPECT_EQ(dl[0].reason, dead_letter_reason::requested);
  EXPECT_EQ(dl[0].at, at(2s));
}

// O7: unordered messages are dead-lettered the same way, by request and at max_attempts.
TEST_F(delays_and_dead_letters,
       unordered_messages_are_dead_lettered_on_request_and_at_max_attempts) {
  auto q = make(queue_spec("plain").max_attempts(2).lease(1s));
  ASSERT_TRUE(h.enqueue(q, {msg("m1"), msg("m2")}).ok());
  auto ds = take(h, q, 10);
  ASSERT_EQ(bodies(ds), (strings{"m1", "m2"}));
  ASSERT_TRUE(h.nack(q, ds[0].lease, 0s, /*dead=*/true).ok());
  ASSERT_TRUE(h.nack(q, ds[1].lease).ok());
  auto m2 = take_one(h, q);
  EXPECT_EQ(m2.msg.body, "m2");
  EXPECT_EQ(m2.msg.attempts, 2u);
  advance_to(h, 1s);  // the second attempt's lease expires
  EXPECT_TRUE(take(h, q, 10).empty());
  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 2u);
  EXPECT_EQ(dl[0].msg.body, "m1");
  EXPECT_EQ(dl[0].reason, dead_letter_reason::requested);
  EXPECT_EQ(dl[1].msg.body, "m2");
  EXPECT_EQ(dl[1].reason, dead_letter_reason::max_attempts);
  EXPECT_EQ(dl[1].at, at(1s));
  EXPECT_EQ(stats_of(h, q).dead_lettered, 2u);
}

// -- O9: redrive ----------------------------------------------------------------------------------

// O9: a redriven message keeps its id and joins the end of its group, after the messages that
// arrived while it was dead-lettered.
TEST_F(delays_and_dead_letters, a_redriven_message_goes_after_messages_that_arrived_meanwhile) {
  auto q = by_account();
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  auto a1 = take_one(h, q);
  ASSERT_TRUE(h.nack(q, a1.lease, 0s, /*dead=*/true).ok());
  auto a2 = take_one(h, q);
  ASSERT_EQ(a2.msg.body, "A2");
  auto a3_id = put(h, q, in_account("A3", "A"));

  auto n = h.redrive(q, {ids.value()[0]});
  ASSERT_TRUE(n.ok()) << to_string(n.err());
  EXPECT_EQ(n.value(), 1u);
  EXPECT_TRUE(dead(q).empty());
  EXPECT_TRUE(take(h, q, 10).empty()) << "A2 is still in flight";
  ASSERT_TRUE(h.ack(q, a2.lease).ok());
  auto a3 = take_one(h, q);
  EXPECT_EQ(a3.msg.body, "A3") << "A3 arrived while A1 was dead-lettered";
  EXPECT_EQ(a3.msg.id, a3_id);
  ASSERT_TRUE(h.ack(q, a3.lease).ok());
  auto again = take_one(h, q);
  EXPECT_EQ(again.msg.body, "A1");
  EXPECT_EQ(again.msg.id, ids.value()[0]) << "a redrive keeps the id";
  EXPECT_GT(again.msg.seq, a3.msg.seq) << "and gives a new arrival position";
  EXPECT_EQ(again.msg.attempts, 1u) << "attempts start over";
  EXPECT_EQ(stats_of(h, q).redriven, 1u);
}

// O9: on an unordered queue a redriven message is a new arrival: younger than everything that
// arrived meanwhile.
TEST_F(delays_and_dead_letters, a_redriven_unordered_message_is_a_new_arrival) {
  auto q = make(queue_spec("plain"));
  auto m1_id = put(h, q, msg("m1"));
  auto m1 = take_one(h, q);
  ASSERT_TRUE(h.nack(q, m1.lease, 0s, /*dead=*/true).ok());
  put(h, q, msg("m2"));
  auto n = h.redrive(q);  // all dead letters
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value(), 1u);
  auto ds = take(h, q, 10);
  EXPECT_EQ(bodies(ds), (strings{"m2", "m1"}));
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[1].msg.id, m1_id);
}

// O9: the enqueue delay counts from enqueued_at, also after a redrive: a redrive does not start
// the delay again. (A message cannot be dead-lettered before its delay has elapsed, because it
// must be delivered first; so the "redriven before the delay elapsed" case is not reachable.)
TEST_F(delays_and_dead_letters, an_enqueue_delay_counts_from_enqueued_at_after_a_redrive) {
  auto q = by_account();
  auto id = put(h, q, in_account("A1", "A", 5s));
  advance_to(h, 5s);
  auto a1 = take_one(h, q);
  ASSERT_EQ(a1.msg.id, id);
  ASSERT_TRUE(h.nack(q, a1.lease, 0s, /*dead=*/true).ok());
  advance_to(h, 6s);
  ASSERT_TRUE(h.redrive(q, {id}).ok());
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A1"})) << "not held another 5 s after the redrive";
  EXPECT_EQ(again[0].msg.enqueued_at, at(0s));
  EXPECT_EQ(again[0].msg.delay_until, at(5s));
  EXPECT_EQ(again[0].msg.not_before, at(5s));
}

// The enqueue-to-first-delivery histogram counts each message's first delivery once, in the
// bucket of its waiting time (an enqueue delay included); retries are not first deliveries.
TEST_F(delays_and_dead_letters, the_first_delivery_histogram_counts_waiting_time_once_per_message) {
  auto q = by_account();
  put(h, q, in_account("A1", "A"));
  put(h, q, in_account("B1", "B", 2s));  // waits 2 s: the (1 s, 2.5 s] bucket
  auto a1 = take_one(h, q);              // waits 0 s: the first bucket
  ASSERT_TRUE(h.nack(q, a1.lease).ok());
  ASSERT_EQ(bodies(take(h, q, 10)), (strings{"A1"}));  // a retry: not counted again
  advance_to(h, 2s);
  ASSERT_EQ(bodies(take(h, q, 10)), (strings{"B1"}));
  auto s = stats_of(h, q);
  ASSERT_EQ(s.first_delivery.size(), latency_bounds_s.size() + 1);
  std::vector<std::uint64_t> expected(latency_bounds_s.size() + 1, 0);
  expected[0] = 1;
  auto b = static_cast<std::size_t>(
      std::find(latency_bounds_s.begin(), latency_bounds_s.end(), 2.5) - latency_bounds_s.begin());
  expected[b] = 1;
  EXPECT_EQ(s.first_delivery, expected);
  EXPECT_EQ(s.first_delivery_sum_us, 2'000'000u);
}

// O9: redriving an id that is not a dead letter fails and redrives nothing.
TEST_F(delays_and_dead_letters, redriving_an_unknown_id_fails_and_redrives_nothing) {
  auto q = by_account();
  auto id = put(h, q, in_account("A1", "A"));
  auto a1 = take_one(h, q);
  ASSERT_TRUE(h.nack(q, a1.lease, 0s, /*dead=*/true).ok());
  auto r = h.redrive(q, {id, message_id{999}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::dead_letter_not_found);
  EXPECT_NE(r.err().message.find("999"), std::string::npos) << r.err().message;
  EXPECT_EQ(dead(q).size(), 1u);
  EXPECT_TRUE(take(h, q, 10).empty());
  EXPECT_EQ(stats_of(h, q).redriven, 0u);
}

// -- O10: enqueue delays --------------------------------------------------------------------------

// O10: an enqueue delay holds its group: nothing behind the delayed message goes first; other
// groups go on.
TEST_F(delays_and_dead_letters, an_enqueue_delay_holds_its_group) {
  auto q = by_account();
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A", 5s), in_account("A2", "A"), in_account("B1", "B")}).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"B1"}));
  advance_to(h, 4999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "A2 is behind the delayed A1";
  advance_to(h, 5s);
  auto a1 = take(h, q, 10);
  ASSERT_EQ(bodies(a1), (strings{"A1"}));
  ASSERT_TRUE(h.ack(q, a1[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

// O10: on an ordered() queue a delayed message holds the whole queue.
TEST_F(delays_and_dead_letters, on_an_ordered_queue_a_delayed_message_holds_the_whole_queue) {
  auto q = make(queue_spec("audit").ordered());
  ASSERT_TRUE(
      h.enqueue(q, {msg("m1", {}, "t1", 3s), msg("m2", {}, "t2"), msg("m3", {}, "t3")}).ok());
  EXPECT_TRUE(take(h, q, 10).empty());
  advance_to(h, 2999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  advance_to(h, 3s);
  auto m1 = take(h, q, 10);
  ASSERT_EQ(bodies(m1), (strings{"m1"}));
  ASSERT_TRUE(h.ack(q, m1[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"m2"}));
}

// O10, O1: on an unordered queue a delayed message holds nothing else.
TEST_F(delays_and_dead_letters, on_an_unordered_queue_a_delay_holds_nothing_else) {
  auto q = make(queue_spec("plain"));
  ASSERT_TRUE(h.enqueue(q, {msg("m1", {}, {}, 3s), msg("m2"), msg("m3")}).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"m2", "m3"}));
  advance_to(h, 3s);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"m1"}));
}

// O10: a delay that arrives behind a busy head counts from enqueued_at, not from the moment the
// message becomes the head.
TEST_F(delays_and_dead_letters, a_delay_behind_a_busy_head_counts_from_enqueued_at) {
  auto q = by_account();
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A", 2s)}).ok());
  auto a1 = take_one(h, q);
  advance_to(h, 3s);
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"})) << "its delay ended at t = 2 s";
}

}  // namespace
}  // namespace laneq
