// Unit tests for ordered batches (docs/design/ordering.md O12) in the shard engine, driven without
// actors on a memory store (tests/support/engine_driver.hpp): what a batch takes, one batch in
// flight per group, acks of a prefix, nacks from a message of the batch, expiries, throttles and
// fairness, durable delivery and fast delivery's reclaim across a restart.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/engine_driver.hpp"
#include "laneq/shard_engine.hpp"
#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::bodies;
using test::deliveries;
using test::engine_driver;
using test::test_config;

shard_config by_account() {
  return test_config(queue_spec("orders")
                         .ordered_by({key::header("account")})
                         .when_ordering_key_missing(missing_ordering_key::unordered));
}

outgoing_message msg(std::string body, std::string account = {}, std::string fairness = {}) {
  outgoing_message m;
  m.body = std::move(body);
  if (!account.empty()) m.headers.push_back(header_field{"account", std::move(account)});
  m.fairness_key = std::move(fairness);
  return m;
}

/// "body@batch_index" for each delivery, to see a batch's shape at a glance.
std::vector<std::string> shape(const std::vector<delivery>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.msg.body + "@" + std::to_string(d.batch_index));
  return out;
}

template <class T>
T answer(engine_driver& d, request_id r) {
  const auto* v = d.reply_as<T>(r);
  EXPECT_NE(v, nullptr) << "request " << r << " was not answered with the expected type";
  return v ? *v : T{};
}

error error_of(engine_driver& d, request_id r) {
  const auto* e = d.reply_as<error>(r);
  EXPECT_NE(e, nullptr) << "request " << r << " did not fail";
  return e ? *e : error{};
}

std::size_t lease_records(const engine_driver& d) {
  auto [from, to] = codec::queue_range(codec::tag::lease, 42);
  std::size_t n = 0;
  for (auto it = d.store.lower_bound(from); it != d.store.end() && it->first < to; ++it) ++n;
  return n;
}

std::vector<std::string> dead_bodies(engine_driver& d) {
  std::vector<std::string> out;
  for (const auto& dl : answer<std::vector<dead_letter>>(d, d.dead_letters())) {
    out.push_back(dl.msg.body);
  }
  return out;
}

TEST(ordered_batch, a_batch_is_consecutive_messages_of_one_group_under_one_lease) {
  engine_driver d{by_account()};
  d.enqueue(
      {msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A"), msg("b1", "B"), msg("s1")});
  auto got = deliveries(d, d.receive_batch(10, 3));
  EXPECT_EQ(shape(got), (std::vector<std::string>{"a1@0", "a2@1", "a3@2", "b1@0", "s1@0"}));
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].lease, got[1].lease);
  EXPECT_EQ(got[0].lease, got[2].lease);
  EXPECT_EQ(got[0].lease.batch, 3u);
  EXPECT_EQ(got[0].lease.msg, got[0].msg.id) << "the token names the batch's first message";
  EXPECT_EQ(got[3].lease.batch, 1u) << "a batch of one is a plain lease";
  EXPECT_EQ(got[4].lease.batch, 1u) << "an unordered message is never batched";
  EXPECT_FALSE(got[4].lease.group);
  for (const auto& x : got) EXPECT_EQ(x.msg.attempts, 1u);
  EXPECT_EQ(d.engine().stats(d.now).delivered, 5u) << "delivered counts messages";
}

TEST(ordered_batch, max_bounds_the_messages_of_the_whole_answer) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("b1", "B"), msg("b2", "B")});
  auto got = deliveries(d, d.receive_batch(4, 3));
  EXPECT_EQ(shape(got), (std::vector<std::string>{"a1@0", "a2@1", "a3@2", "b1@0"}));
  EXPECT_EQ(got[3].lease.batch, 1u) << "the batch was cut to what max left";
}

TEST(ordered_batch, one_batch_per_group_is_in_flight_and_the_next_waits_for_all_of_it) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 2));
  ASSERT_EQ(bodies(batch), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 2)).empty()) << "O12: one batch in flight";
  EXPECT_EQ(answer<std::uint64_t>(d, d.ack(batch[0].lease, 1)), 1u);
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 2)).empty()) << "a2 is still in flight";
  d.hold_writes = true;
  auto done = d.ack(batch[0].lease, 2);
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 2)).empty()) << "P10: a3 waits for the write";
  d.commit_next();
  EXPECT_EQ(answer<std::uint64_t>(d, done), 1u);
  d.hold_writes = false;
  EXPECT_EQ(shape(deliveries(d, d.receive_batch(10, 2))),
            (std::vector<std::string>{"a3@0", "a4@1"}));
}

TEST(ordered_batch, an_ack_of_a_prefix_keeps_the_lease_on_the_rest) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A")});
  auto batch = deliveries(d, d.receive_batch(4, 4));
  auto lease = batch[0].lease;
  EXPECT_EQ(answer<std::uint64_t>(d, d.ack(lease, 2)), 2u);
  // count counts from the batch's first message as delivered: 2 is already done, 5 is past it.
  auto again = error_of(d, d.ack(lease, 2));
  EXPECT_EQ(again.code, errc::invalid_argument);
  EXPECT_NE(again.message.find("messages 0 to 1 of its batch of 4 are acked already"),
            std::string::npos)
      << again.message;
  EXPECT_NE(again.message.find("so it must be 3 to 4"), std::string::npos) << again.message;
  EXPECT_EQ(error_of(d, d.ack(lease, 5)).code, errc::invalid_argument);
  EXPECT_EQ(error_of(d, d.nack(lease, nack_request{nack_kind::retry, 0, 1})).code,
            errc::invalid_argument)
      << "from 1 names a message acked already";
  auto deadline = answer<timestamp>(d, d.extend(lease, 60s));
  EXPECT_EQ(deadline, d.now + 60s) << "extend moves the whole batch's lease";
  auto rest = answer<std::vector<lease_outcome>>(d, d.ack({lease}));
  EXPECT_TRUE(rest.empty()) << "a whole ack takes what is left";
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.acked, 4u);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(answer<std::vector<lease_outcome>>(d, d.ack({lease})).front().err.code,
            errc::lease_not_found);
}

TEST(ordered_batch, a_nack_from_i_acks_those_before_and_returns_i_onward_in_order) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A")});
  auto batch = deliveries(d, d.receive_batch(4, 4));
  ASSERT_NE(d.reply_as<ok_t>(d.nack(batch[0].lease, nack_request{nack_kind::retry, 5'000'000, 2})),
            nullptr);
  EXPECT_EQ(d.engine().stats(d.now).acked, 2u) << "a1 and a2 are done";
  d.advance(4s);
  EXPECT_TRUE(deliveries(d, d.receive_batch(4, 4)).empty()) << "O6: a3 holds the group 5 s";
  d.advance(1s);
  auto again = deliveries(d, d.receive_batch(4, 4));
  ASSERT_EQ(shape(again), (std::vector<std::string>{"a3@0", "a4@1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u) << "a3's attempt counted";
  EXPECT_EQ(again[1].msg.attempts, 1u) << "a4 went back behind it: not an attempt";
  EXPECT_EQ(again[0].lease.attempt, 2u);
  auto stale = answer<std::vector<lease_outcome>>(d, d.ack({batch[0].lease}));
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale.front().err.code, errc::lease_expired) << "the old batch went back";
}

TEST(ordered_batch, a_dead_letter_nack_from_i_moves_i_and_the_group_goes_on) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A")});
  auto batch = deliveries(d, d.receive_batch(3, 3));
  d.nack(batch[0].lease, nack_request{nack_kind::dead_letter, 0, 1});
  EXPECT_EQ(dead_bodies(d), (std::vector<std::string>{"a2"}));
  auto next = deliveries(d, d.receive_batch(3, 3));
  ASSERT_EQ(shape(next), (std::vector<std::string>{"a3@0"}));
  EXPECT_EQ(next[0].msg.attempts, 1u);
}

TEST(ordered_batch, from_and_count_out_of_the_batch_are_invalid_and_change_nothing) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("s1")});
  auto got = deliveries(d, d.receive_batch(3, 2));
  ASSERT_EQ(shape(got), (std::vector<std::string>{"a1@0", "a2@1", "s1@0"}));
  auto past = error_of(d, d.nack(got[0].lease, nack_request{nack_kind::retry, 0, 2}));
  EXPECT_EQ(past.code, errc::invalid_argument);
  EXPECT_NE(past.message.find("nack: from 2"), std::string::npos) << past.message;
  EXPECT_EQ(error_of(d, d.ack(got[2].lease, 2)).code, errc::invalid_argument);
  EXPECT_EQ(error_of(d, d.nack(got[2].lease, nack_request{nack_kind::retry, 0, 1})).code,
            errc::invalid_argument);
  EXPECT_EQ(answer<std::uint64_t>(d, d.ack(got[2].lease, 1)), 1u) << "count 1 of a single message";
  EXPECT_EQ(answer<std::vector<lease_outcome>>(d, d.ack({got[0].lease})).size(), 0u);
  EXPECT_EQ(d.engine().stats(d.now).backlog, 0u);
}

TEST(ordered_batch, an_expiry_fails_the_first_unacked_message_and_returns_the_rest) {
  engine_driver d{test_config(queue_spec("audit").ordered().max_attempts(2))};
  d.enqueue({msg("x1"), msg("x2"), msg("x3")});
  auto first = deliveries(d, d.receive_batch(3, 3, 1s));
  d.ack(first[0].lease, 1);
  d.advance(1s);  // O5: a failed attempt of x2 (attempts 1); x3 goes back as it was
  auto second = deliveries(d, d.receive_batch(3, 3, 1s));
  ASSERT_EQ(shape(second), (std::vector<std::string>{"x2@0", "x3@1"}));
  EXPECT_EQ(second[0].msg.attempts, 2u);
  EXPECT_EQ(second[1].msg.attempts, 1u);
  EXPECT_EQ(d.engine().stats(d.now).lease_expired, 1u);
  d.advance(1s);  // x2's last attempt failed: dead-lettered; x3 is the head now
  EXPECT_EQ(dead_bodies(d), (std::vector<std::string>{"x2"}));
  auto third = deliveries(d, d.receive_batch(3, 3));
  ASSERT_EQ(shape(third), (std::vector<std::string>{"x3@0"}));
  EXPECT_EQ(third[0].msg.attempts, 1u) << "x3 never failed: its attempts are its own";
}

TEST(ordered_batch, a_batch_stops_before_a_message_whose_delay_is_ahead) {
  engine_driver d{by_account()};
  auto late = msg("a3", "A");
  late.delay = 10s;
  d.enqueue({msg("a1", "A"), msg("a2", "A"), late, msg("a4", "A")});
  auto first = deliveries(d, d.receive_batch(10, 10));
  EXPECT_EQ(shape(first), (std::vector<std::string>{"a1@0", "a2@1"})) << "O10";
  d.ack({first[0].lease});
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 10)).empty());
  d.advance(10s);
  EXPECT_EQ(shape(deliveries(d, d.receive_batch(10, 10))),
            (std::vector<std::string>{"a3@0", "a4@1"}));
}

TEST(ordered_batch, a_batch_never_exceeds_the_groups_window) {
  auto cfg = by_account();
  cfg.window = 3;
  cfg.window_max = 3;
  engine_driver d{cfg};
  std::vector<outgoing_message> batch;
  for (int i = 1; i <= 6; ++i) batch.push_back(msg("a" + std::to_string(i), "A"));
  d.enqueue(batch);
  auto got = deliveries(d, d.receive_batch(10, 10));
  EXPECT_EQ(bodies(got), (std::vector<std::string>{"a1", "a2", "a3"}));
  d.ack({got[0].lease});
  EXPECT_EQ(bodies(deliveries(d, d.receive_batch(10, 10))),
            (std::vector<std::string>{"a4", "a5", "a6"}))
      << "the rest read back from the store, in order";
}

TEST(ordered_batch, throttles_charge_a_token_per_message_and_cut_the_batch) {
  auto spec = queue_spec("orders").ordered_by({key::header("account")});
  spec.throttle({key::header("account")}, 1.0, 3);
  engine_driver d{test_config(spec)};
  std::vector<outgoing_message> batch;
  for (int i = 1; i <= 5; ++i) batch.push_back(msg("a" + std::to_string(i), "A"));
  d.enqueue(batch);
  auto first = deliveries(d, d.receive_batch(10, 5));
  EXPECT_EQ(bodies(first), (std::vector<std::string>{"a1", "a2", "a3"})) << "3 tokens, 3 messages";
  d.ack({first[0].lease});
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 5)).empty()) << "no token left";
  d.advance(1s);
  EXPECT_EQ(bodies(deliveries(d, d.receive_batch(10, 5))), (std::vector<std::string>{"a4"}))
      << "a batch goes with the tokens there are, at least its head";
}

TEST(ordered_batch, a_batch_is_one_turn_of_its_fairness_key) {
  engine_driver d{test_config(queue_spec("orders").ordered_by({key::header("account")}))};
  d.enqueue({msg("a1", "A", "t1"), msg("a2", "A", "t1"), msg("c1", "C", "t1"), msg("b1", "B", "t2"),
             msg("b2", "B", "t2")});
  // t1 goes first (oldest), with its batch a1 a2; then t2's turn, then t1 again (F1).
  EXPECT_EQ(shape(deliveries(d, d.receive_batch(10, 2))),
            (std::vector<std::string>{"a1@0", "a2@1", "b1@0", "b2@1", "c1@0"}));
}

TEST(ordered_batch, durable_delivery_commits_one_record_per_batch_and_a_restart_honours_it) {
  auto cfg = by_account();
  cfg.spec.delivery(delivery_durability::durable);
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 3, 30s));
  ASSERT_EQ(bodies(batch), (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(lease_records(d), 1u) << "one record covers the batch";
  d.ack(batch[0].lease, 1);
  EXPECT_EQ(lease_records(d), 1u) << "rewritten for the rest";
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 3)).empty()) << "R7: a2, a3 stay leased";
  EXPECT_EQ(answer<std::uint64_t>(d, d.ack(batch[0].lease, 2)), 1u) << "count as delivered";
  EXPECT_EQ(answer<std::vector<lease_outcome>>(d, d.ack({batch[0].lease})).size(), 0u);
  EXPECT_EQ(lease_records(d), 0u);
  EXPECT_EQ(shape(deliveries(d, d.receive_batch(10, 3))), (std::vector<std::string>{"a4@0"}));
}

TEST(ordered_batch, a_durable_batch_restored_past_its_deadline_fails_its_first_unacked_message) {
  auto cfg = by_account();
  cfg.spec.delivery(delivery_durability::durable);
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 3, 5s));
  d.ack(batch[0].lease, 1);
  cfg.epoch = 4;
  d.restart(cfg);
  d.now = d.now + 6s;
  d.recover();
  auto again = deliveries(d, d.receive_batch(10, 3));
  ASSERT_EQ(shape(again), (std::vector<std::string>{"a2@0", "a3@1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
  EXPECT_EQ(again[1].msg.attempts, 1u);
}

TEST(ordered_batch, fast_delivery_reclaims_a_whole_batch_after_a_restart) {
  auto cfg = by_account();
  cfg.reclaim_grace = 10s;
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 2));
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 2)).empty()) << "R6: held for its holder";
  EXPECT_EQ(answer<std::uint64_t>(d, d.ack(batch[0].lease, 1)), 1u) << "the token takes it back";
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 2)).empty()) << "a2 is still its holder's";
  EXPECT_EQ(answer<std::vector<lease_outcome>>(d, d.ack({batch[0].lease})).size(), 0u);
  EXPECT_EQ(shape(deliveries(d, d.receive_batch(10, 2))), (std::vector<std::string>{"a3@0"}));
}

TEST(ordered_batch, fast_delivery_reclaims_the_rest_of_a_batch_acked_in_part) {
  auto cfg = by_account();
  cfg.reclaim_grace = 10s;
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 3));
  d.ack(batch[0].lease, 1);
  EXPECT_EQ(lease_records(d), 1u) << "the token no longer names the head: a record says so";
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  EXPECT_TRUE(deliveries(d, d.receive_batch(10, 3)).empty());
  d.nack(batch[0].lease, nack_request{nack_kind::retry, 0, 2});  // a2 done, a3 failed
  EXPECT_EQ(lease_records(d), 0u);
  auto again = deliveries(d, d.receive_batch(10, 3));
  ASSERT_EQ(shape(again), (std::vector<std::string>{"a3@0", "a4@1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
}

TEST(ordered_batch, a_batch_whose_message_failed_since_is_not_reclaimed_after_a_restart) {
  // The store can hold a batch's second message with a failed attempt and its head not acked: the
  // head's ack failed while the expiry's write for the rest committed (persistence.md P11). The
  // old token no longer describes the group; taking it back would count a2's next attempt as its
  // first and give it one more than max_attempts.
  auto cfg = by_account();
  cfg.spec.max_attempts(2);
  cfg.reclaim_grace = 10s;
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 2, 1s));
  ASSERT_EQ(shape(batch), (std::vector<std::string>{"a1@0", "a2@1"}));
  d.hold_writes = true;
  d.ack(batch[0].lease, 1);  // a1's erase and the record of the rest, held
  d.advance(1s);             // a2's failed attempt, held behind it
  ASSERT_EQ(d.pending_writes.size(), 2u);
  d.fail_next();    // a1's ack is lost...
  d.commit_next();  // ...a2's attempt is stored
  cfg.epoch = 4;
  d.restart(cfg);  // a crash before the replay
  d.hold_writes = false;
  d.recover();
  EXPECT_EQ(answer<std::vector<lease_outcome>>(d, d.ack({batch[0].lease})).front().err.code,
            errc::lease_not_found)
      << "a stale token takes nothing back";
  d.advance(10s);
  auto again = deliveries(d, d.receive_batch(10, 2, 1s));
  ASSERT_EQ(shape(again), (std::vector<std::string>{"a1@0"})) << "a2 failed: it waits to be a head";
  d.ack({again[0].lease});
  auto last = deliveries(d, d.receive_batch(10, 2, 1s));
  ASSERT_EQ(shape(last), (std::vector<std::string>{"a2@0"}));
  EXPECT_EQ(last[0].msg.attempts, 2u) << "its failed attempt still counts";
  d.advance(1s);
  EXPECT_EQ(dead_bodies(d), (std::vector<std::string>{"a2"})) << "max_attempts 2 holds";
}

TEST(ordered_batch, after_the_grace_the_rest_of_a_batch_goes_to_anyone_and_its_record_goes) {
  auto cfg = by_account();
  cfg.reclaim_grace = 10s;
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A")});
  auto batch = deliveries(d, d.receive_batch(10, 3));
  d.ack(batch[0].lease, 1);
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  d.advance(10s);
  EXPECT_EQ(lease_records(d), 0u);
  EXPECT_EQ(bodies(deliveries(d, d.receive_batch(10, 3))), (std::vector<std::string>{"a2", "a3"}));
  EXPECT_EQ(answer<std::vector<lease_outcome>>(d, d.ack({batch[0].lease})).front().err.code,
            errc::lease_not_found);
}

TEST(ordered_batch, a_batch_lease_round_trips_its_text_and_its_record) {
  lease_token t{group_id{7}, message_id{9}, 2, 0xabcdef, 5};
  EXPECT_EQ(to_string(t), "7.9.2.abcdef.5");
  EXPECT_EQ(parse_lease_token(to_string(t)), t);
  lease_token one{group_id{7}, message_id{9}, 2, 0xabcdef};
  EXPECT_EQ(to_string(one), "7.9.2.abcdef") << "a single message's form is as before";
  EXPECT_EQ(parse_lease_token("7.9.2.abcdef.1"), std::nullopt) << "one form per token";
  EXPECT_EQ(parse_lease_token("7.9.2.abcdef.65"), std::nullopt) << "past the batch limit (100)";
  codec::lease_record rec{t, timestamp{123}, message_seq{44}, 3, 2, 9};
  EXPECT_EQ(codec::decode_lease(codec::encode_lease(rec)).value(), rec);
  codec::lease_record old{one, timestamp{5}, message_seq{6}};
  auto bytes = codec::encode_lease(old);
  EXPECT_EQ(bytes.size(), 5u + 8 + 8 + 4 + 8 + 8 + 8) << "a single lease keeps its record layout";
  EXPECT_EQ(codec::decode_lease(bytes).value(), old);
  rec.count = 2;  // 2 + 2 acked is not the batch of 5
  EXPECT_FALSE(codec::decode_lease(codec::encode_lease(rec)));
}

}  // namespace
}  // namespace laneq
