// Ordering rules of docs/design/ordering.md on the real actors with simulated time: no order by
// default (O1), the ordering key fixed at creation (O2), groups (O3), one message in flight per
// group (O4), lease expiry (O5), a missing ordering key (O8) and extend (O11).
#include <gtest/gtest.h>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

class ordering : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  queue_api by_account(std::string name = "accounts") {
    return make(queue_spec(std::move(name)).ordered_by({key::header("account")}));
  }

  harness h;
};

// -- O1: no order by default ----------------------------------------------------------------------

// O1: on an unordered queue the scheduler prefers the oldest message it can deliver, and nothing
// waits for anything else to be acknowledged.
TEST_F(ordering, an_unordered_queue_delivers_the_oldest_deliverable_message_first) {
  auto q = make(queue_spec("plain"));
  for (auto b : {"m1", "m2", "m3"}) put(h, q, msg(b));
  EXPECT_EQ(take_one(h, q).msg.body, "m1");
  EXPECT_EQ(take_one(h, q).msg.body, "m2");
  EXPECT_EQ(take_one(h, q).msg.body, "m3");
  auto s = stats_of(h, q);
  EXPECT_EQ(s.in_flight, 3u) << "unordered messages do not wait for each other's acks";
  EXPECT_EQ(s.live_groups, 0u) << "an unordered queue has no groups";
}

// O1: a delayed, a throttled and a retrying message are each passed by younger messages.
TEST_F(ordering, on_an_unordered_queue_delayed_throttled_and_retrying_messages_hold_nothing_back) {
  auto q = make(queue_spec("plain").throttle({key::header("tenant")}, 1.0, 1));
  auto tenant = [](const char* t) { return hdrs({{"tenant", t}}); };
  auto ids = h.enqueue(q, {msg("retrying", tenant("x")), msg("delayed", tenant("y"), {}, 10s),
                           msg("throttled-1", tenant("z")), msg("throttled-2", tenant("z")),
                           msg("free", tenant("w"))});
  ASSERT_TRUE(ids.ok()) << to_string(ids.err());
  auto first = take_one(h, q);
  ASSERT_EQ(first.msg.body, "retrying");
  ASSERT_TRUE(h.nack(q, first.lease, 10s).ok());
  // "delayed" waits for t=10s, "retrying" for t=10s, "throttled-2" for tenant z's next token:
  // the younger "free" goes out anyway.
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"throttled-1", "free"}));
  h.advance(1s);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"throttled-2"}));
  h.advance(9s);
  auto late = take(h, q, 10);
  EXPECT_EQ(bodies(late), (strings{"retrying", "delayed"})) << "oldest deliverable first";
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(late[0].msg.attempts, 2u);
  EXPECT_EQ(late[1].msg.attempts, 1u);
}

// O1, O5: on an unordered queue an expired lease is a failed attempt too; the message comes back
// with its next attempt and the old lease is refused.
TEST_F(ordering, an_expired_unordered_lease_redelivers_the_message_and_refuses_the_old_lease) {
  auto q = make(queue_spec("plain"));
  auto id = put(h, q, msg("m1"));
  auto first = take_one(h, q, 1s);
  h.advance(999ms);
  EXPECT_TRUE(take(h, q).empty()) << "not redelivered before the deadline";
  h.advance(1ms);
  auto second = take_one(h, q);
  EXPECT_EQ(second.msg.id, id);
  EXPECT_EQ(second.msg.attempts, 2u);
  EXPECT_EQ(second.lease.attempt, 2u);
  auto old = h.ack(q, first.lease);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.err().code, errc::lease_expired);
  EXPECT_TRUE(h.ack(q, second.lease).ok());
  auto gone = h.ack(q, first.lease);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.err().code, errc::lease_not_found);
  EXPECT_EQ(stats_of(h, q).lease_expired, 1u);
}

// -- O2: the ordering key is fixed at creation ----------------------------------------------------

// O2: re-creating a queue with another ordering is a spec_conflict; the same spec is idempotent
// (same queue, created = false), and the queue keeps the ordering it was created with.
TEST_F(ordering, the_ordering_key_is_fixed_when_the_queue_is_created) {
  auto first = h.create_flagged(queue_spec("events").ordered_by({key::header("account")}));
  ASSERT_TRUE(first.ok()) << to_string(first.err());
  EXPECT_TRUE(first.value().second) << "newly created";
  auto q = first.value().first;

  for (auto other : {queue_spec("events").ordered_by({key::header("tenant")}),
                     queue_spec("events").ordered_by({key::fairness_key(), key::header("account")}),
                     queue_spec("events").ordered(), queue_spec("events")}) {
    auto again = h.create_flagged(other);
    ASSERT_FALSE(again.ok()) << other.describe();
    EXPECT_EQ(again.err().code, errc::spec_conflict) << other.describe();
    EXPECT_NE(again.err().message.find("queue 'events' exists with another spec"),
              std::string::npos)
        << again.err().message;
    EXPECT_NE(again.err().message.find("ordering key is fixed"), std::string::npos)
        << again.err().message;
  }

  auto same = h.create_flagged(queue_spec("events").ordered_by({key::header("account")}));
  ASSERT_TRUE(same.ok()) << to_string(same.err());
  EXPECT_FALSE(same.value().second) << "the same spec is idempotent";
  EXPECT_EQ(same.value().first, q) << "and returns the existing queue";
  // Header names compare case-insensitively, so this is the same key.
  auto same_key = h.create_flagged(queue_spec("events").ordered_by({key::header("ACCOUNT")}));
  ASSERT_TRUE(same_key.ok()) << to_string(same_key.err());
  EXPECT_FALSE(same_key.value().second);
  EXPECT_EQ(same_key.value().first, q);

  // The queue still orders by account: a message without one is rejected.
  auto keyless = h.enqueue(q, msg("no account", hdrs({{"tenant", "t1"}})));
  ASSERT_FALSE(keyless.ok());
  EXPECT_EQ(keyless.err().code, errc::ordering_key_missing);
}

// -- O3: groups -----------------------------------------------------------------------------------

// O3: messages with the same key value form one group, delivered in arrival order; other
// groups are independent.
TEST_F(ordering, messages_with_equal_key_values_are_delivered_in_arrival_order) {
  auto q = by_account();
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("B1", "B"), in_account("A2", "A"),
                           in_account("B2", "B"), in_account("A3", "A")});
  ASSERT_TRUE(ids.ok());
  std::vector<std::vector<std::string>> rounds;
  for (int round = 0; round < 4; ++round) {
    auto ds = take(h, q, 10);
    rounds.push_back(bodies(ds));
    for (const auto& d : ds) EXPECT_TRUE(h.ack(q, d.lease).ok());
  }
  EXPECT_EQ(rounds, (std::vector<strings>{{"A1", "B1"}, {"A2", "B2"}, {"A3"}, {}}));
}

// O3: a delivery names its group's printable key.
TEST_F(ordering, a_delivery_names_its_ordering_group) {
  auto q = by_account();
  put(h, q, in_account("A1", "A"));
  EXPECT_EQ(take_one(h, q).ordering_key, "A");
}

// O3: ordered() makes the whole queue one group in arrival order, whatever the headers and
// fairness keys.
TEST_F(ordering, an_ordered_queue_is_one_group_in_arrival_order) {
  auto q = make(queue_spec("audit").ordered());
  ASSERT_TRUE(h.enqueue(q, {msg("x1", hdrs({{"account", "A"}}), "t1"),
                            msg("x2", hdrs({{"account", "B"}}), "t2"), msg("x3", {}, "t3"),
                            msg("x4", {}, "t1"), msg("x5", hdrs({{"account", "B"}}), "t2")})
                  .ok());
  strings order;
  for (int i = 0; i < 6; ++i) {
    auto ds = take(h, q, 10);
    if (ds.empty()) break;
    ASSERT_EQ(ds.size(), 1u) << "one group: one message at a time";
    EXPECT_EQ(ds[0].ordering_key, "default/audit");
    order.push_back(ds[0].msg.body);
    auto acked = h.ack(q, ds[0].lease);
    EXPECT_TRUE(acked.ok()) << acked.err().message;
  }
  EXPECT_EQ(order, (strings{"x1", "x2", "x3", "x4", "x5"}));
}

// O3: header names in the ordering key are case-insensitive: "Account" and "account" name the
// same header, so the messages below share one group.
TEST_F(ordering, header_names_in_the_ordering_key_are_case_insensitive) {
  auto q = make(queue_spec("accounts").ordered_by({key::header("Account")}));
  ASSERT_TRUE(
      h.enqueue(q, {msg("m1", hdrs({{"account", "A"}})), msg("m2", hdrs({{"ACCOUNT", "A"}})),
                    msg("m3", hdrs({{"Account", "B"}}))})
          .ok());
  auto first = take(h, q, 10);
  EXPECT_EQ(bodies(first), (strings{"m1", "m3"})) << "m2 is behind m1 in the same group";
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].ordering_key, "A");
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  auto second = take_one(h, q);
  EXPECT_EQ(second.msg.body, "m2");
  EXPECT_EQ(second.ordering_key, first[0].ordering_key);
}

// -- O4: at most one message per group in flight --------------------------------------------------

// O4: an ordered() queue delivers one message at a time however many consumers ask.
TEST_F(ordering, an_ordered_queue_has_one_message_in_flight_however_many_consumers) {
  auto q = make(queue_spec("audit").ordered());
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(msg("m" + std::to_string(i)));
  ASSERT_TRUE(h.enqueue(q, std::move(batch)).ok());
  std::vector<delivery> got;
  for (int consumer = 0; consumer < 4; ++consumer)
    for (auto& d : take(h, q, 10)) got.push_back(std::move(d));
  ASSERT_EQ(got.size(), 1u) << "4 consumers asking for 10 each still get one message";
  EXPECT_EQ(got[0].msg.body, "m0");
  EXPECT_EQ(stats_of(h, q).in_flight, 1u);
  ASSERT_TRUE(h.ack(q, got[0].lease).ok());
  std::size_t next = 0;
  for (int consumer = 0; consumer < 4; ++consumer) next += take(h, q, 10).size();
  EXPECT_EQ(next, 1u);
  EXPECT_EQ(stats_of(h, q).in_flight, 1u);
}

// O4: the next message of a group goes out only after the current one is acked or
// dead-lettered; time passing with the lease still held changes nothing.
TEST_F(ordering, the_next_message_of_a_group_waits_for_an_ack_or_a_dead_letter) {
  auto q = by_account();
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("A3", "A")}).ok());
  auto a1 = take_one(h, q);
  EXPECT_EQ(a1.msg.body, "A1");
  EXPECT_TRUE(take(h, q, 10).empty());
  h.advance(29s);
  EXPECT_TRUE(take(h, q, 10).empty()) << "A1's lease (30 s by default) still runs";
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  auto a2 = take(h, q, 10);
  ASSERT_EQ(bodies(a2), (strings{"A2"}));
  ASSERT_TRUE(h.nack(q, a2[0].lease, 0s, /*dead=*/true).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A3"}));
}

// -- O5: lease expiry -----------------------------------------------------------------------------

// O5: an expired lease is a failed attempt: the same message comes back (attempt + 1) before
// anything behind it, and the old lease gets lease_expired, later lease_not_found.
TEST_F(ordering, an_expired_lease_redelivers_the_same_message_before_anything_behind_it) {
  auto q = by_account();
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  auto first = take_one(h, q, 1s);
  EXPECT_EQ(first.deadline, at(1s));
  h.advance(999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "no redelivery before the deadline";
  h.advance(1ms);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A1"})) << "A1 again, not A2";
  EXPECT_EQ(again[0].msg.id, ids.value()[0]);
  EXPECT_EQ(again[0].msg.attempts, 2u);
  EXPECT_EQ(again[0].lease.attempt, 2u);

  auto late = h.ack(q, first.lease);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.err().code, errc::lease_expired);
  EXPECT_TRUE(take(h, q, 10).empty()) << "the refused ack did not release the group";
  ASSERT_TRUE(h.ack(q, again[0].lease).ok());
  auto gone = h.ack(q, first.lease);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.err().code, errc::lease_not_found);

  auto a2 = take_one(h, q);
  EXPECT_EQ(a2.msg.body, "A2");
  EXPECT_EQ(a2.msg.attempts, 1u);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.lease_expired, 1u);
  EXPECT_EQ(s.delivered, 3u);
  EXPECT_EQ(s.acked, 1u);
}

// -- O8: a missing ordering key -------------------------------------------------------------------

// O8: by default a message without a value for the ordering key is rejected, naming the missing
// component; nothing of the batch is enqueued.
TEST_F(ordering, a_missing_ordering_key_is_rejected_by_default_and_nothing_is_enqueued) {
  auto q = by_account();
  auto r = h.enqueue(q, {in_account("A1", "A"), msg("keyless", hdrs({{"tenant", "t1"}}))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::ordering_key_missing);
  EXPECT_EQ(r.err().message,
            "messages[1]: queue 'accounts': the message has no header:account (ordering key "
            "component 0); the queue rejects messages without an ordering key");
  EXPECT_TRUE(take(h, q, 10).empty()) << "not even the keyed message of the batch";
  auto s = stats_of(h, q);
  EXPECT_EQ(s.enqueued, 0u);
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(s.key_missing, 1u);
}

// O8: with policy unordered a keyless message belongs to no group and is delivered
// independently, even while every group is busy.
TEST_F(ordering, with_policy_unordered_keyless_messages_are_delivered_independently) {
  auto q = make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .when_ordering_key_missing(missing_ordering_key::unordered));
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), msg("s1"), msg("s2")}).ok());
  auto ds = take(h, q, 10);
  EXPECT_EQ(bodies(ds), (strings{"A1", "s1", "s2"})) << "s1 and s2 wait for no one";
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[1].ordering_key, "");
  EXPECT_EQ(ds[1].lease.group, group_id{}) << "no group";
  EXPECT_EQ(stats_of(h, q).live_groups, 1u);
}

// O8: with policy keyless_lane all keyless messages share one group: ordered among themselves,
// independent of the keyed groups.
TEST_F(ordering, with_policy_keyless_lane_keyless_messages_share_one_group) {
  auto q = make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .when_ordering_key_missing(missing_ordering_key::keyless_lane));
  ASSERT_TRUE(h.enqueue(q, {msg("k1"), in_account("A1", "A"), msg("k2"), msg("k3")}).ok());
  auto first = take(h, q, 10);
  EXPECT_EQ(bodies(first), (strings{"k1", "A1"})) << "k2 and k3 are behind k1";
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].ordering_key, "default/accounts");
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"k2"}));
  EXPECT_EQ(stats_of(h, q).live_groups, 2u) << "group A and the keyless lane";
}

// O8: key_missing counts every message that lacked a key component, whatever the policy.
TEST_F(ordering, key_missing_counts_every_missing_key_whatever_the_policy) {
  auto reject = by_account("reject");
  auto unordered = make(queue_spec("unordered")
                            .ordered_by({key::header("account")})
                            .when_ordering_key_missing(missing_ordering_key::unordered));
  auto lane = make(queue_spec("lane")
                       .ordered_by({key::header("account")})
                       .when_ordering_key_missing(missing_ordering_key::keyless_lane));
  EXPECT_FALSE(h.enqueue(reject, msg("r1")).ok());
  EXPECT_FALSE(h.enqueue(reject, msg("r2")).ok());
  EXPECT_TRUE(h.enqueue(reject, in_account("ok", "A")).ok());
  EXPECT_TRUE(h.enqueue(unordered, {msg("u1"), in_account("ok", "A"), msg("u2"), msg("u3")}).ok());
  EXPECT_TRUE(h.enqueue(lane, {msg("l1"), in_account("ok", "A")}).ok());
  EXPECT_EQ(stats_of(h, reject).key_missing, 2u);
  EXPECT_EQ(stats_of(h, unordered).key_missing, 3u);
  EXPECT_EQ(stats_of(h, lane).key_missing, 1u);
  EXPECT_EQ(stats_of(h, reject).enqueued, 1u);
  EXPECT_EQ(stats_of(h, unordered).enqueued, 4u);
}

// -- O11: extend ----------------------------------------------------------------------------------

// O11: extend moves a group head's lease deadline: no redelivery before the new deadline.
TEST_F(ordering, extend_moves_the_lease_deadline_of_a_group_head) {
  auto q = by_account();
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q, 10s);
  EXPECT_EQ(a1.deadline, at(10s));
  h.advance(5s);
  auto moved = h.extend(q, a1.lease, 10s);
  ASSERT_TRUE(moved.ok()) << to_string(moved.err());
  EXPECT_EQ(moved.value(), at(15s));
  h.advance(5s);  // t = 10 s, the old deadline
  EXPECT_TRUE(take(h, q, 10).empty());
  EXPECT_EQ(stats_of(h, q).lease_expired, 0u);
  h.advance(4999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  h.advance(1ms);  // t = 15 s, the new deadline
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
  EXPECT_EQ(stats_of(h, q).lease_expired, 1u);
}

// A group's lease deadlines: each delivery expires at its own deadline, whatever the deadlines of
// the group's earlier (acked) deliveries were. The shard engine keeps one deadline per group in
// flight (`group_leases_`): an ack erases it and the next delivery sets it again, so an earlier
// delivery's deadline must neither end the lease in flight nor hold it past its own.
TEST_F(ordering, each_delivery_of_a_group_head_expires_at_its_own_deadline) {
  auto q = by_account();
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("A3", "A")}).ok());
  auto a1 = take_one(h, q, 10s);  // deadline 10 s
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  auto a2 = take_one(h, q, 1s);  // deadline 1 s: due before a1's
  EXPECT_EQ(a2.msg.body, "A2");
  h.advance(1s);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A2"})) << "A2 expired at its own deadline";
  EXPECT_EQ(stats_of(h, q).lease_expired, 1u);
  ASSERT_TRUE(h.ack(q, again[0].lease).ok());
  auto a3 = take_one(h, q, 20s);  // t = 1 s: deadline 21 s
  EXPECT_EQ(a3.msg.body, "A3");
  h.advance(9s);  // t = 10 s: a1's old deadline
  EXPECT_TRUE(take(h, q, 10).empty());
  EXPECT_EQ(stats_of(h, q).lease_expired, 1u) << "a1's old watch did not end a3's lease";
  h.advance(10999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  h.advance(1ms);  // t = 21 s
  auto a3_again = take(h, q, 10);
  ASSERT_EQ(bodies(a3_again), (strings{"A3"}));
  EXPECT_EQ(a3_again[0].msg.attempts, 2u);
  EXPECT_EQ(stats_of(h, q).lease_expired, 2u);
}

// O11: extend moves an unordered message's lease deadline too, and the lease stays valid.
TEST_F(ordering, extend_moves_the_lease_deadline_of_an_unordered_message) {
  auto q = make(queue_spec("plain"));
  put(h, q, msg("m1"));
  auto m1 = take_one(h, q, 2s);
  h.advance(1s);
  auto moved = h.extend(q, m1.lease, 5s);
  ASSERT_TRUE(moved.ok()) << to_string(moved.err());
  EXPECT_EQ(moved.value(), at(6s));
  h.advance(4999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "the old deadline (t = 2 s) has passed";
  EXPECT_EQ(stats_of(h, q).lease_expired, 0u);
  EXPECT_TRUE(h.ack(q, m1.lease).ok()) << "the extended lease is still the message's lease";
  EXPECT_EQ(stats_of(h, q).acked, 1u);
}

// O11, O5: an expired lease cannot be extended.
TEST_F(ordering, an_expired_lease_cannot_be_extended) {
  auto q = by_account();
  put(h, q, in_account("A1", "A"));
  auto a1 = take_one(h, q, 1s);
  h.advance(1s);
  auto r = h.extend(q, a1.lease, 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_expired);
}

}  // namespace
}  // namespace laneq
