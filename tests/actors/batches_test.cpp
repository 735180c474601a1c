// Ordered batches on the real actors with simulated time (docs/design/ordering.md O12), in the
// worked example's style: one consumer taking batches of three from a queue ordered by account,
// every step of the table below asserted; then restarts with fast and durable delivery, and a
// sharded queue whose gateway routes the new calls.
//
// Queue `ledger`, ordered by account (unordered without one), max_attempts 3, lease 10 s.
// Arrivals: a1 a2 a3 a4 (A), b1 b2 b3 (B), s1 (-), c1 c2 (C). W receives max 10, batch 3.
//
//   t   event                                  W holds                  waiting
//   0   receive                                a1-a3, b1-b3, s1, c1-c2  a4 behind a3
//   1   ack A count 2 (a1, a2)                 a3, b1-b3, s1, c1-c2     a4 behind a3
//   2   nack B from 1, retry after 5 s         a3, s1, c1-c2            b1 acked; b2 not before 7
//   3   ack s1, ack C whole                    a3                       B waits on b2
//   7   receive: b2 (attempt 2), b3 (1); ack   a3
//   10  A's lease expires: a3 failed once      -                        a3, a4 pending in order
//   10  receive: a3 (attempt 2), a4 (1)        a3, a4
//   11  nack A from 0: a3 retried             -
//   11  receive: a3 (attempt 3), a4 (1)        a3, a4
//   12  nack A from 0: a3 at max_attempts      -                        a3 dead-lettered
//   12  receive: a4 (attempt 1); ack           -
#include <gtest/gtest.h>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;
using test::with_grace;

queue_spec ledger_spec() {
  return queue_spec("ledger")
      .ordered_by({key::header("account")})
      .when_ordering_key_missing(missing_ordering_key::unordered)
      .max_attempts(3)
      .lease(10s);
}

/// "body@batch_index" per delivery.
strings shape(const std::vector<delivery>& ds) {
  strings out;
  for (const auto& d : ds) out.push_back(d.msg.body + "@" + std::to_string(d.batch_index));
  return out;
}

class batches : public ::testing::Test {
 protected:
  std::vector<delivery> receive(const queue_api& q, std::uint32_t max, std::uint32_t batch) {
    auto r = h.ask<std::vector<delivery>>(q, receive_atom_v, receive_request{max, 0, 0, batch});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : to_string(r.err()));
    return r.ok() ? r.value() : std::vector<delivery>{};
  }
  result<std::uint64_t> ack_count(const queue_api& q, const lease_token& l, std::uint32_t n) {
    return h.ask<std::uint64_t>(q, ack_atom_v, l, n);
  }
  status nack_from(const queue_api& q, const lease_token& l, std::uint32_t from,
                   duration retry_after = 0s, nack_kind kind = nack_kind::retry) {
    auto r = h.ask<caf::ok_atom>(q, nack_atom_v, l, nack_request{kind, retry_after.count(), from});
    if (!r) return r.err();
    return ok_t{};
  }
  /// The deliveries of group `key`, in order.
  static std::vector<delivery> of(const std::vector<delivery>& ds, const std::string& key) {
    std::vector<delivery> out;
    for (const auto& d : ds)
      if (d.ordering_key == key) out.push_back(d);
    return out;
  }
  void enqueue_ledger(const queue_api& q) {
    std::vector<outgoing_message> batch;
    for (auto name : {"a1", "a2", "a3", "a4"}) batch.push_back(in_account(name, "A"));
    for (auto name : {"b1", "b2", "b3"}) batch.push_back(in_account(name, "B"));
    batch.push_back(msg("s1"));
    for (auto name : {"c1", "c2"}) batch.push_back(in_account(name, "C"));
    ASSERT_TRUE(h.enqueue(q, std::move(batch)).ok());
  }

  harness h;
};

TEST_F(batches, every_row_of_the_table_holds) {
  auto q = make_queue(h, ledger_spec());
  enqueue_ledger(q);
  // t=0: one batch per group, each in order under one lease; s1 alone.
  auto first = receive(q, 10, 3);
  ASSERT_EQ(shape(first),
            (strings{"a1@0", "a2@1", "a3@2", "b1@0", "b2@1", "b3@2", "s1@0", "c1@0", "c2@1"}));
  auto a = of(first, "A"), b = of(first, "B"), c = of(first, "C"), s = of(first, "");
  EXPECT_EQ(a[0].lease, a[2].lease);
  EXPECT_NE(a[0].lease, b[0].lease);
  EXPECT_TRUE(receive(q, 10, 3).empty()) << "one batch per group in flight; a4 behind a3";
  // t=1: a1 and a2 acked; a3 stays leased, a4 behind it.
  advance_to(h, 1s);
  ASSERT_EQ(ack_count(q, a[0].lease, 2).value(), 2u);
  EXPECT_TRUE(receive(q, 10, 3).empty());
  // t=2: b1 is done, b2 fails and holds B for 5 s, b3 waits behind it.
  advance_to(h, 2s);
  ASSERT_TRUE(nack_from(q, b[0].lease, 1, 5s).ok());
  // t=3: s1 and the whole of C acked.
  advance_to(h, 3s);
  ASSERT_TRUE(h.ack(q, s[0].lease).ok());
  ASSERT_TRUE(h.ack(q, c[0].lease).ok());
  EXPECT_TRUE(receive(q, 10, 3).empty()) << "A in flight, B waits on b2";
  // t=7: B again, b2 on its second attempt, b3 on its first (going back was not an attempt).
  advance_to(h, 7s);
  auto b_again = receive(q, 10, 3);
  ASSERT_EQ(shape(b_again), (strings{"b2@0", "b3@1"}));
  EXPECT_EQ(b_again[0].msg.attempts, 2u);
  EXPECT_EQ(b_again[1].msg.attempts, 1u);
  ASSERT_TRUE(h.ack(q, b_again[0].lease).ok());
  // t=10: A's lease (granted at 0 for 10 s) runs out mid-batch: a3's attempt failed.
  advance_to(h, 10s);
  auto stale = h.ack(q, a[0].lease);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.err().code, errc::lease_expired);
  auto a_again = receive(q, 10, 3);
  ASSERT_EQ(shape(a_again), (strings{"a3@0", "a4@1"}));
  EXPECT_EQ(a_again[0].msg.attempts, 2u);
  EXPECT_EQ(a_again[1].msg.attempts, 1u);
  // t=11, 12: a3 fails twice more; its third failed attempt dead-letters it, and A goes on.
  advance_to(h, 11s);
  ASSERT_TRUE(nack_from(q, a_again[0].lease, 0).ok());
  auto third = receive(q, 10, 3);
  ASSERT_EQ(shape(third), (strings{"a3@0", "a4@1"}));
  EXPECT_EQ(third[0].msg.attempts, 3u);
  advance_to(h, 12s);
  ASSERT_TRUE(nack_from(q, third[0].lease, 0).ok());
  auto dead = h.dead_letters(q);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead.value().size(), 1u);
  EXPECT_EQ(dead.value()[0].msg.body, "a3");
  EXPECT_EQ(dead.value()[0].reason, dead_letter_reason::max_attempts);
  auto last = receive(q, 10, 3);
  ASSERT_EQ(shape(last), (strings{"a4@0"}));
  EXPECT_EQ(last[0].msg.attempts, 1u) << "a4 went back three times and was never attempted";
  ASSERT_TRUE(h.ack(q, last[0].lease).ok());

  auto st = stats_of(h, q);
  EXPECT_EQ(st.acked, 9u);
  EXPECT_EQ(st.dead_lettered, 1u);
  EXPECT_EQ(st.lease_expired, 1u);
  EXPECT_EQ(st.nacked, 3u);
  EXPECT_EQ(st.backlog, 0u);
  EXPECT_EQ(st.live_groups, 0u);
}

TEST_F(batches, count_and_from_count_from_the_batch_start_and_refuse_what_is_out_of_it) {
  auto q = make_queue(h, ledger_spec());
  enqueue_ledger(q);
  auto a = of(receive(q, 3, 3), "A");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(ack_count(q, a[0].lease, 1).value(), 1u);
  auto again = ack_count(q, a[0].lease, 1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.err().code, errc::invalid_argument);
  auto before = nack_from(q, a[0].lease, 0);
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.err().code, errc::invalid_argument);
  auto past = nack_from(q, a[0].lease, 3);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.err().code, errc::invalid_argument);
  auto too_big = h.ask<std::vector<delivery>>(q, receive_atom_v, receive_request{10, 0, 0, 101});
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.err().code, errc::invalid_argument);
  EXPECT_NE(too_big.err().message.find("batch"), std::string::npos) << too_big.err().message;
  EXPECT_EQ(ack_count(q, a[0].lease, 3).value(), 2u);
}

TEST_F(batches, a_durable_batch_is_honoured_across_a_restart_after_a_partial_ack) {
  auto q = make_queue(h, ledger_spec().delivery(delivery_durability::durable));
  enqueue_ledger(q);
  auto a = of(receive(q, 3, 3), "A");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(ack_count(q, a[0].lease, 1).value(), 1u);
  ASSERT_TRUE(h.restart().ok());
  auto q2 = h.lookup("ledger");
  ASSERT_TRUE(q2.ok());
  EXPECT_TRUE(of(receive(q2.value(), 10, 3), "A").empty()) << "R7: a2 and a3 stay leased";
  EXPECT_EQ(ack_count(q2.value(), a[0].lease, 3).value(), 2u);
  EXPECT_EQ(shape(of(receive(q2.value(), 10, 3), "A")), (strings{"a4@0"}));
}

TEST_F(batches, a_fast_batch_is_taken_back_by_its_holder_within_the_reclaim_grace) {
  harness fast{1, with_grace(10s)};
  auto q = make_queue(fast, ledger_spec());
  std::vector<outgoing_message> batch;
  for (auto name : {"a1", "a2", "a3", "a4"}) batch.push_back(in_account(name, "A"));
  ASSERT_TRUE(fast.enqueue(q, std::move(batch)).ok());
  auto a = fast.ask<std::vector<delivery>>(q, receive_atom_v, receive_request{3, 0, 0, 3}).value();
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(fast.ask<std::uint64_t>(q, ack_atom_v, a[0].lease, std::uint32_t{1}).value(), 1u);
  ASSERT_TRUE(fast.restart(with_grace(10s)).ok());
  auto q2 = fast.lookup("ledger").value();
  auto held = fast.ask<std::vector<delivery>>(q2, receive_atom_v, receive_request{3, 0, 0, 3});
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held.value().empty()) << "R6: the rest of the batch waits for its holder";
  ASSERT_TRUE(fast.ack(q2, a[0].lease).ok()) << "the holder takes it back and acks it whole";
  auto next = fast.ask<std::vector<delivery>>(q2, receive_atom_v, receive_request{3, 0, 0, 3});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(shape(next.value()), (strings{"a4@0"}));
}

TEST_F(batches, a_sharded_queues_gateway_routes_batches_counts_and_froms) {
  auto q = make_queue(h, ledger_spec().sharded(4, {key::header("account")}));
  enqueue_ledger(q);
  auto got = receive(q, 10, 3);
  EXPECT_EQ(got.size(), 9u) << "every shard's batches";
  auto a = of(got, "A"), b = of(got, "B");
  ASSERT_EQ(shape(a), (strings{"a1@0", "a2@1", "a3@2"}));
  ASSERT_EQ(shape(b), (strings{"b1@0", "b2@1", "b3@2"}));
  ASSERT_EQ(ack_count(q, a[0].lease, 2).value(), 2u);
  ASSERT_TRUE(nack_from(q, b[0].lease, 2, 0s, nack_kind::dead_letter).ok());
  ASSERT_TRUE(h.ack(q, a[0].lease).ok());
  auto rest = receive(q, 10, 3);
  EXPECT_EQ(shape(of(rest, "A")), (strings{"a4@0"}));
  EXPECT_TRUE(of(rest, "B").empty()) << "b3 was dead-lettered, B is empty";
  auto st = stats_of(h, q);
  EXPECT_EQ(st.dead_lettered, 1u);
}

}  // namespace
}  // namespace laneq
