// Unit tests for retention (docs/design/retention.md, libqueue/src/shard_retention.cpp): the
// shard engine on a memory store (tests/support/engine_driver.hpp), time moved by hand. Each
// test names the rule it checks (RT-numbers).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/engine_driver.hpp"
#include "laneq/codec.hpp"
#include "laneq/group_state.hpp"
#include "laneq/shard_engine.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::bodies;
using test::deliveries;
using test::engine_driver;
using test::message_records;
using test::test_config;

outgoing_message msg(std::string body, std::string account = {}, duration delay = {}) {
  outgoing_message m;
  m.body = std::move(body);
  if (!account.empty()) m.headers.push_back(header_field{"account", std::move(account)});
  m.delay = delay;
  return m;
}

queue_spec by_account(expiry_action on_expiry = expiry_action::dead_letter) {
  return queue_spec("orders").ordered_by({key::header("account")}).retention(10s, on_expiry);
}

std::vector<dead_letter> listed(engine_driver& d) {
  const auto* out = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  EXPECT_NE(out, nullptr);
  return out ? *out : std::vector<dead_letter>{};
}

// RT1, RT3: an expired head leaves its group as a dead letter (reason expired) and the message
// behind it becomes the head; the sweep comes without a receive, at the expiry.
TEST(retention, an_expired_head_is_dead_lettered_and_the_next_message_of_its_group_goes) {
  engine_driver d{test_config(by_account())};
  d.enqueue({msg("a1", "A")});
  d.advance(6s);
  d.enqueue({msg("a2", "A")});
  ASSERT_TRUE(d.wake.has_value());
  EXPECT_LE(*d.wake, d.now + 4s) << "the engine asks to be woken at a1's expiry";
  d.advance(4s);  // a1 is 10 s old, a2 4 s
  auto dead = listed(d);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].msg.body, "a1");
  EXPECT_EQ(dead[0].reason, dead_letter_reason::expired);
  EXPECT_EQ(to_string(dead[0].reason), "expired");
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.expired_dead_lettered, 1u);
  EXPECT_EQ(s.dead_lettered, 1u);
  EXPECT_EQ(s.backlog, 1u);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a2"}));
}

// RT2: with on_expiry drop the record is erased and counted, not dead-lettered, not acked.
TEST(retention, on_expiry_drop_erases_the_message_and_counts_it) {
  engine_driver d{test_config(by_account(expiry_action::drop))};
  d.enqueue({msg("a1", "A"), msg("b1", "B")});
  d.advance(10s);
  EXPECT_EQ(message_records(d), 0u);
  EXPECT_TRUE(listed(d).empty());
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.expired_dropped, 2u);
  EXPECT_EQ(s.acked, 0u);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(s.backlog_bytes, 0u);
  EXPECT_EQ(d.engine().live_groups(), 0u);
}

// RT4: a message in flight does not expire; if its attempt fails after its retention it expires
// instead of going out again. The messages behind it wait for the attempt, then expire too.
TEST(retention, a_message_in_flight_expires_only_when_its_attempt_fails) {
  engine_driver d{test_config(by_account())};
  d.enqueue({msg("a1", "A"), msg("a2", "A")});
  auto first = deliveries(d, d.receive(1, 60s));
  ASSERT_EQ(bodies(first), (std::vector<std::string>{"a1"}));
  d.advance(20s);
  EXPECT_TRUE(listed(d).empty()) << "nothing of a group expires while its lease is in flight";
  d.nack(first[0].lease, nack_kind::retry);
  d.advance(1s);
  auto dead = listed(d);
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].msg.body, "a1");
  EXPECT_EQ(dead[1].msg.body, "a2");
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty());
}

// RT5: an acked message in flight past its retention is simply acked.
TEST(retention, an_ack_after_the_retention_acks) {
  engine_driver d{test_config(by_account())};
  d.enqueue({msg("a1", "A")});
  auto first = deliveries(d, d.receive(1, 60s));
  d.advance(30s);
  auto r = d.ack({first[0].lease});
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(r);
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->empty());
  EXPECT_EQ(d.engine().stats(d.now).acked, 1u);
  EXPECT_TRUE(listed(d).empty());
}

// RT6: a receive never gets an expired message, even before the sweep (here: a receive at the
// same instant the retention ends); the next head waits for the expired one's write (P10).
TEST(retention, a_receive_never_gets_an_expired_message) {
  engine_driver d{test_config(by_account())};
  d.enqueue({msg("a1", "A")});
  d.advance(5s);
  d.enqueue({msg("a2", "A")});
  d.now = d.now + 5s;  // no tick: the sweep has not run
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty());
  ASSERT_EQ(listed(d).size(), 1u);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a2"}));
}

// RT6: an ordered batch stops before a message that has expired (entered times go back only
// with the clock, across a restart).
TEST(retention, an_ordered_batch_stops_before_an_expired_message) {
  group_state g{group_id{1}, 5, 8};
  std::vector<message> msgs(3);
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    msgs[i].id = message_id{i + 1};
    msgs[i].seq = message_seq{i + 1};
    msgs[i].body = "m";
  }
  auto t0 = timestamp::from_ms(100'000);
  msgs[0].enqueued_at = t0;
  msgs[1].enqueued_at = t0;
  msgs[2].enqueued_at = t0 - 60s;
  g.on_enqueue(std::move(msgs), t0);
  EXPECT_EQ(g.batchable(10, t0), 3u);
  EXPECT_EQ(g.batchable(10, t0, t0 - 30s), 2u) << "the third entered before the cutoff";
}

// RT7: unordered messages expire too, delayed ones included, by a sweep of the scheduler; those
// still ahead of their expiry stay.
TEST(retention, unordered_messages_expire_delayed_ones_included) {
  engine_driver d{test_config(queue_spec("jobs").retention(10s))};
  d.enqueue({msg("u1"), msg("late", {}, 60s)});
  d.advance(5s);
  d.enqueue({msg("u2")});
  d.advance(5s);
  auto dead = listed(d);
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].reason, dead_letter_reason::expired);
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.expired_dead_lettered, 2u);
  EXPECT_EQ(s.delayed, 0u) << "the delayed one left its class's count";
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"u2"}));
}

// RT8: a redrive restarts the retention clock: the redriven message is delivered, not expired
// again at once; its enqueued_at stays.
TEST(retention, a_redrive_restarts_the_retention_clock) {
  engine_driver d{test_config(by_account())};
  d.enqueue({msg("a1", "A")});
  auto enqueued = d.now;
  d.advance(10s);
  ASSERT_EQ(listed(d).size(), 1u);
  d.advance(5s);
  auto n = d.redrive();
  ASSERT_NE(d.reply_as<std::uint64_t>(n), nullptr);
  EXPECT_EQ(*d.reply_as<std::uint64_t>(n), 1u);
  d.advance(8s);
  auto got = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(got), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(got[0].msg.enqueued_at, enqueued);
  EXPECT_EQ(got[0].msg.redriven_after_s, 15u);
  d.nack(got[0].lease, nack_kind::retry);
  d.advance(2s);  // 10 s after the redrive
  EXPECT_EQ(listed(d).size(), 1u);
}

// RT8: the redrive offset survives the store (the message record carries it).
TEST(retention, a_redriven_message_keeps_its_clock_across_a_restart) {
  auto cfg = test_config(by_account());
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A")});
  d.advance(10s);
  d.advance(5s);
  d.redrive();
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  d.advance(9s);
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"a1"}));
}

// RT9: dead letters are deleted once they are older than dead_letter_retention_ms, oldest first,
// and counted; younger ones stay.
TEST(retention, dead_letters_are_deleted_after_their_retention) {
  auto spec = queue_spec("orders")
                  .ordered_by({key::header("account")})
                  .retention(std::nullopt, expiry_action::dead_letter, 30s);
  engine_driver d{test_config(spec)};
  d.enqueue({msg("a1", "A"), msg("b1", "B")});
  for (const auto& x : deliveries(d, d.receive(1))) d.nack(x.lease, nack_kind::dead_letter);
  d.advance(20s);
  for (const auto& x : deliveries(d, d.receive(1))) d.nack(x.lease, nack_kind::dead_letter);
  ASSERT_TRUE(d.wake.has_value());
  EXPECT_LE(*d.wake, d.now + 10s);
  d.advance(10s);
  auto left = listed(d);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].msg.body, "b1");
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.dead_letters_expired, 1u);
  EXPECT_EQ(s.dead_letters_deleted, 0u);
  EXPECT_EQ(s.dead_letters, 1u);
  d.advance(20s);
  EXPECT_TRUE(listed(d).empty());
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 0u);
  EXPECT_EQ(d.engine().stats(d.now).dead_letters_expired, 2u);
}

// RT10: an update sets a retention on a live queue; it applies to the messages already there.
TEST(retention, an_update_applies_the_retention_to_messages_already_there) {
  engine_driver d{test_config(queue_spec("orders").ordered_by({key::header("account")}))};
  d.enqueue({msg("a1", "A"), msg("u", "B")});
  d.advance(60s);
  EXPECT_TRUE(listed(d).empty());
  d.engine().update(
      queue_spec("orders").ordered_by({key::header("account")}).retention(30s, expiry_action::drop),
      d.now);
  d.advance(1s);
  EXPECT_EQ(d.engine().stats(d.now).expired_dropped, 2u);
  EXPECT_EQ(message_records(d), 0u);
}

// RT7: messages of a class left in the store (beyond the window) expire once read back.
TEST(retention, unordered_messages_in_the_store_expire_when_read_back) {
  auto cfg = test_config(queue_spec("jobs").retention(10s, expiry_action::drop));
  cfg.window = 2;
  cfg.window_max = 2;
  engine_driver d{cfg};
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(msg("m" + std::to_string(i)));
  d.enqueue(std::move(batch));
  d.advance(5s);
  d.enqueue({msg("young")});
  d.advance(5s);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"young"}));
  EXPECT_EQ(d.engine().stats(d.now).expired_dropped, 8u);
}

TEST(retention, the_redrive_offset_round_trips_in_a_message_record_and_is_absent_otherwise) {
  message m;
  m.id = message_id{7};
  m.seq = message_seq{9};
  m.body = "x";
  m.enqueued_at = timestamp::from_ms(5'000);
  auto plain = codec::encode_message(m);
  m.redriven_after_s = 86'400;
  auto redriven = codec::encode_message(m);
  EXPECT_EQ(redriven.size(), plain.size() + 4) << "a record without a redrive stays as it was";
  auto back = codec::decode_message(redriven);
  ASSERT_TRUE(back) << back.err().message;
  EXPECT_EQ(back.value().redriven_after_s, 86'400u);
  EXPECT_EQ(back.value().entered_at(), m.enqueued_at + 86'400s);
  EXPECT_EQ(seconds_after(m.enqueued_at, m.enqueued_at + 1999ms), 1u);
  EXPECT_EQ(seconds_after(m.enqueued_at, m.enqueued_at - 5s), 0u);
}

}  // namespace
}  // namespace laneq
