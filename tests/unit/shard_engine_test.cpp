// Unit tests for shard_engine (libqueue/include/laneq/shard_engine.hpp): the whole shard driven
// without actors, on a memory store (tests/support/engine_driver.hpp). Each test names the rule
// it checks (docs/design/ordering.md O-numbers, persistence.md P-numbers, recovery.md R-numbers).
#include "laneq/shard_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../support/engine_driver.hpp"
#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::bodies;
using test::deliveries;
using test::engine_driver;
using test::message_records;
using test::test_config;

shard_config by_account(std::string name = "orders") {
  return test_config(queue_spec(std::move(name)).ordered_by({key::header("account")}));
}

outgoing_message msg(std::string body, std::string account = {}) {
  outgoing_message m;
  m.body = std::move(body);
  if (!account.empty()) m.headers.push_back(header_field{"account", std::move(account)});
  return m;
}

TEST(shard_engine, an_enqueue_is_answered_once_its_write_is_durable_and_then_deliverable) {
  engine_driver d{test_config(queue_spec("jobs"))};
  d.hold_writes = true;
  auto e = d.enqueue({msg("a"), msg("b")});
  EXPECT_EQ(d.reply(e), nullptr) << "answered before the store committed";
  ASSERT_EQ(d.pending_writes.size(), 1u);
  EXPECT_TRUE(d.pending_writes.front().write.admits);
  EXPECT_TRUE(d.pending_writes.front().write.sync);
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty()) << "delivered before it was durable";
  d.commit_next();
  const auto* ids = d.reply_as<std::vector<message_id>>(e);
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->size(), 2u);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a", "b"}));
}

// docs/api.md "Change a queue's settings": a new lease applies to leases granted after the
// update; one in flight keeps its deadline. A new max_attempts counts when an attempt ends.
TEST(shard_engine, an_update_applies_the_new_lease_to_new_leases_and_max_attempts_at_the_next_end) {
  engine_driver d{test_config(queue_spec("jobs").lease(10s).max_attempts(5))};
  d.enqueue({msg("a"), msg("b")});
  auto first = deliveries(d, d.receive(1));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].deadline, d.now + 10s);
  auto spec = d.engine().config().spec.updated(queue_spec("jobs").lease(2s).max_attempts(1));
  ASSERT_TRUE(spec) << spec.err().message;
  d.engine().update(spec.value(), d.now);
  auto second = deliveries(d, d.receive(1));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].deadline, d.now + 2s);
  d.advance(2s);  // b's attempt ends: its first, and the new maximum is 1
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 1u);
  d.advance(8s);  // a's lease kept its 10 s
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 2u);
}

// throttling.md T5: a changed rate applies to the live bucket from the update on.
TEST(shard_engine, an_update_of_a_throttle_rate_applies_to_its_bucket) {
  engine_driver d{test_config(queue_spec("jobs").throttle({}, 1, 1))};
  d.enqueue({msg("a"), msg("b"), msg("c"), msg("d")});
  EXPECT_EQ(deliveries(d, d.receive(10)).size(), 1u);
  d.advance(100ms);
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty()) << "1/s: the next token is 1 s away";
  auto spec = d.engine().config().spec.updated(queue_spec("jobs").throttle({}, 10, 1));
  ASSERT_TRUE(spec) << spec.err().message;
  d.engine().update(spec.value(), d.now);
  d.advance(100ms);  // 10/s from the update on: one token every 100 ms
  EXPECT_EQ(deliveries(d, d.receive(10)).size(), 1u);
  d.advance(100ms);
  EXPECT_EQ(deliveries(d, d.receive(10)).size(), 1u);
}

// docs/api.md "Backpressure": depth counts waiting, delayed and in-flight messages (not dead
// letters) and their body bytes; a batch that would go past either bound is refused whole with
// queue_full and stores nothing; an ack or a dead-lettering makes room.
TEST(shard_engine, max_depth_refuses_a_whole_batch_past_it_and_an_ack_makes_room) {
  engine_driver d{test_config(queue_spec("jobs").max_depth(3, 10))};
  ASSERT_NE(d.reply_as<std::vector<message_id>>(d.enqueue({msg("aa"), msg("bb")})), nullptr);
  auto over = d.enqueue({msg("c"), msg("d")});  // 4 messages: past 3
  const auto* err = d.reply_as<error>(over);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, errc::queue_full);
  EXPECT_EQ(err->message,
            "queue 'jobs' is full: max_depth.messages is 3, it holds 2 and the batch adds 2; "
            "nothing was stored, retry later");
  auto bytes = d.enqueue({msg("1234567")});  // 4 + 7 bytes: past 10
  ASSERT_NE(d.reply_as<error>(bytes), nullptr);
  EXPECT_NE(d.reply_as<error>(bytes)->message.find("max_depth.bytes is 10"), std::string::npos);
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.backlog, 2u);
  EXPECT_EQ(s.backlog_bytes, 4u);
  EXPECT_EQ(s.refused_full, 2u);
  EXPECT_EQ(test::message_records(d), 2u) << "a refused batch stores nothing";
  auto got = deliveries(d, d.receive(1));  // in flight still counts
  ASSERT_EQ(got.size(), 1u);
  ASSERT_NE(d.reply_as<std::vector<message_id>>(d.enqueue({msg("c")})), nullptr);
  ASSERT_NE(d.reply_as<error>(d.enqueue({msg("d")})), nullptr);
  d.ack({got[0].lease});
  EXPECT_EQ(d.engine().stats(d.now).backlog_bytes, 3u);
  ASSERT_NE(d.reply_as<std::vector<message_id>>(d.enqueue({msg("d")})), nullptr);
  // A dead letter leaves the depth.
  auto next = deliveries(d, d.receive(1));
  ASSERT_EQ(next.size(), 1u);
  d.nack(next[0].lease, nack_kind::dead_letter);
  EXPECT_EQ(d.engine().stats(d.now).backlog, 2u);
  EXPECT_EQ(d.engine().stats(d.now).backlog_bytes, 2u);
}

TEST(shard_engine, a_restart_counts_the_depth_in_bytes_of_what_it_leaves_in_the_store) {
  auto cfg = by_account();
  cfg.window = 1;  // most of the group stays in the store
  engine_driver d{cfg};
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 20; ++i) batch.push_back(msg("body-" + std::to_string(i % 10), "A"));
  d.enqueue(std::move(batch));
  EXPECT_EQ(d.engine().stats(d.now).backlog_bytes, 20u * 6u);
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  EXPECT_EQ(d.engine().stats(d.now).backlog_bytes, 20u * 6u);
}

TEST(shard_engine, a_message_with_an_empty_body_is_refused_naming_it) {
  engine_driver d{test_config(queue_spec("jobs"))};
  const auto* err = d.reply_as<error>(d.enqueue({msg("a"), msg("")}));
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, errc::invalid_argument);
  EXPECT_EQ(err->message,
            "messages[1].body is empty: a message needs a body of 1 to 1048576 bytes");
  EXPECT_EQ(test::message_records(d), 0u);
}

TEST(shard_engine, one_message_per_group_is_in_flight_and_the_next_waits_for_the_acks_write) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("b1", "B")});
  auto first = deliveries(d, d.receive(10));
  EXPECT_EQ(bodies(first), (std::vector<std::string>{"a1", "b1"}));  // O4: a2 waits behind a1
  d.hold_writes = true;
  auto a = d.ack({first[0].lease});
  EXPECT_EQ(d.reply(a), nullptr);
  // P10: the next head is offered only once the ack's erase is durable.
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty());
  d.commit_next();
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(a);
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->empty());
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a2"}));
}

TEST(shard_engine, a_nack_with_retry_after_holds_its_group_and_not_the_others) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("b1", "B"), msg("b2", "B")});
  auto first = deliveries(d, d.receive(10));
  ASSERT_EQ(first.size(), 2u);
  d.nack(first[0].lease, nack_kind::retry, 5s);  // a1 comes back in 5 s; A waits (O6)
  d.ack({first[1].lease});
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"b2"}));
  d.advance(4s);
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty());
  d.advance(1s);
  auto again = deliveries(d, d.receive(10));
  ASSERT_EQ(bodies(again), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(again[0].lease.attempt, 2u);
}

TEST(shard_engine, an_expired_lease_is_a_failed_attempt_and_the_last_one_dead_letters) {
  engine_driver d{test_config(queue_spec("jobs").ordered().max_attempts(2))};
  d.enqueue({msg("x"), msg("y")});
  auto first = deliveries(d, d.receive(1, 1s));
  ASSERT_EQ(bodies(first), (std::vector<std::string>{"x"}));
  d.advance(1s);  // O5: expiry is a failed attempt; x is the head again
  auto second = deliveries(d, d.receive(1, 1s));
  ASSERT_EQ(bodies(second), (std::vector<std::string>{"x"}));
  auto stale = d.ack({first[0].lease});
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(stale);
  ASSERT_NE(failed, nullptr);
  ASSERT_EQ(failed->size(), 1u);
  EXPECT_EQ(failed->front().err.code, errc::lease_expired);
  d.advance(1s);  // the second attempt was the last: x is dead-lettered, y goes
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"y"}));
  const auto* dead = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  ASSERT_NE(dead, nullptr);
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ(dead->front().msg.body, "x");
  EXPECT_EQ(dead->front().reason, dead_letter_reason::max_attempts);
}

TEST(shard_engine, a_redriven_message_joins_the_end_of_its_group) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A")});
  auto first = deliveries(d, d.receive(1));
  d.nack(first[0].lease, nack_kind::dead_letter);
  d.enqueue({msg("a2", "A")});
  auto n = d.redrive();
  ASSERT_NE(d.reply_as<std::uint64_t>(n), nullptr);
  EXPECT_EQ(*d.reply_as<std::uint64_t>(n), 1u);
  auto next = deliveries(d, d.receive(1));
  EXPECT_EQ(bodies(next), (std::vector<std::string>{"a2"}));  // O9: after what came meanwhile
  d.ack({next[0].lease});
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"a1"}));
}

// Dead letters stay in the store (persistence.md): a listing reads them back, a redrive by id
// finds them through their index, and a dead letter stored before the index existed gets its
// index at the next recovery.
TEST(shard_engine, dead_letters_are_read_back_from_the_store_and_indexed_by_id) {
  auto cfg = by_account();
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("b1", "B")});
  for (const auto& x : deliveries(d, d.receive(10))) d.nack(x.lease, nack_kind::dead_letter);
  auto [from, to] = codec::queue_range(codec::tag::dead, 42);
  std::size_t in_store = 0;
  for (auto it = d.store.lower_bound(from); it != d.store.end() && it->first < to; ++it) ++in_store;
  EXPECT_EQ(in_store, 2u);
  // Without a1's index record (as a store written before the index): recovery writes it again.
  auto index = codec::queue_range(codec::tag::dead_index, 42);
  d.store.erase(d.store.lower_bound(index.first), d.store.lower_bound(index.second));
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  const auto* listed = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  ASSERT_NE(listed, nullptr);
  ASSERT_EQ(listed->size(), 2u);
  auto one = d.redrive({listed->front().msg.id});
  ASSERT_NE(d.reply_as<std::uint64_t>(one), nullptr) << "found through its index";
  EXPECT_EQ(*d.reply_as<std::uint64_t>(one), 1u);
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 1u);
  auto gone = d.redrive({listed->front().msg.id});
  const auto* err = d.reply_as<error>(gone);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, errc::dead_letter_not_found);
}

// O9: a redrive takes its place when it comes, though it reads its dead letters first: a message
// enqueued after the redrive was asked for is behind the redriven one in their group.
TEST(shard_engine, a_redrive_is_placed_before_what_is_enqueued_after_it) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A")});
  auto first = deliveries(d, d.receive(1));
  d.nack(first[0].lease, nack_kind::dead_letter);
  d.hold_writes = true;
  d.enqueue({msg("b1", "B")});  // a write in flight: the redrive's reads wait for it
  auto r = d.redrive();
  auto e = d.enqueue({msg("a2", "A")});
  d.hold_writes = false;
  while (!d.pending_writes.empty()) d.commit_next();
  ASSERT_NE(d.reply_as<std::uint64_t>(r), nullptr);
  ASSERT_NE(d.reply_as<std::vector<message_id>>(e), nullptr);
  auto got = deliveries(d, d.receive(10));
  std::vector<std::string> a;
  for (const auto& x : got)
    if (x.msg.body[0] == 'a') a.push_back(x.msg.body);
  EXPECT_EQ(a, (std::vector<std::string>{"a1"})) << "a1, redriven first, is A's head";
}

TEST(shard_engine, a_long_poll_is_answered_by_the_next_enqueue_or_empty_at_its_end) {
  engine_driver d{test_config(queue_spec("jobs"))};
  auto poll = d.receive(5, 0s, 2s);
  EXPECT_EQ(d.reply(poll), nullptr);
  EXPECT_EQ(d.wake, d.now + 2s);
  d.enqueue({msg("m")});
  EXPECT_EQ(bodies(deliveries(d, poll)), (std::vector<std::string>{"m"}));
  auto empty = d.receive(5, 0s, 2s);
  d.advance(2s);
  EXPECT_TRUE(deliveries(d, empty).empty());
}

TEST(shard_engine, durable_delivery_answers_a_receive_once_its_leases_are_committed) {
  engine_driver d{test_config(queue_spec("jobs").delivery(delivery_durability::durable))};
  d.enqueue({msg("m")});
  d.hold_writes = true;
  auto r = d.receive(1);
  EXPECT_EQ(d.reply(r), nullptr);
  ASSERT_EQ(d.pending_writes.size(), 1u);
  d.commit_next();
  EXPECT_EQ(deliveries(d, r).size(), 1u);
}

TEST(shard_engine, a_failed_enqueue_write_is_answered_storage_failed_and_nothing_is_delivered) {
  engine_driver d{test_config(queue_spec("jobs"))};
  d.hold_writes = true;
  auto e = d.enqueue({msg("m")});
  d.fail_next("disk full");
  const auto* err = d.reply_as<error>(e);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, errc::storage_failed);
  EXPECT_NE(err->message.find("queue 'jobs'"), std::string::npos) << err->message;
  EXPECT_TRUE(deliveries(d, d.receive(1)).empty());
}

TEST(shard_engine, a_failed_ack_is_sent_again_and_the_next_head_waits_until_it_is_durable) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A")});
  auto first = deliveries(d, d.receive(1));
  d.hold_writes = true;
  auto a = d.ack({first[0].lease});
  d.fail_next();
  const auto* err = d.reply_as<error>(a);
  ASSERT_NE(err, nullptr) << "a failed ack's write is reported";
  EXPECT_EQ(err->code, errc::storage_failed);
  EXPECT_TRUE(deliveries(d, d.receive(1)).empty()) << "P11: a2 waits for a1's erase";
  d.advance(limits::store_reopen_interval);  // the retry
  ASSERT_EQ(d.pending_writes.size(), 1u) << "the ack's erase goes again";
  d.commit_next();
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"a2"}));
  EXPECT_EQ(message_records(d), 1u) << "a1's record is gone, a2's is there";
}

// Found by the engine simulation (seed 7, episode 9): a failed enqueue between two other writes,
// dropped at the retry from the middle of the write log, left a gap in its ids, and the log
// looked writes up by their offset from the front: the write after the gap was never sent again
// and never settled, so its ack was never answered and its group never offered its next head.
TEST(shard_engine, a_failed_enqueue_dropped_between_two_acks_leaves_the_later_ack_to_settle) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("b1", "B"), msg("b2", "B")});
  auto first = deliveries(d, d.receive(10));
  ASSERT_EQ(bodies(first), (std::vector<std::string>{"a1", "b1"}));
  d.hold_writes = true;
  d.ack({first[0].lease});               // write 1: a1's erase
  auto e = d.enqueue({msg("c1", "C")});  // write 2: admits
  auto b = d.ack({first[1].lease});      // write 3: b1's erase
  ASSERT_EQ(d.pending_writes.size(), 3u);
  d.fail_next();    // a1's erase fails: the log parks and sends it again after store_retry
  d.fail_next();    // the enqueue fails: dropped at the retry
  d.commit_next();  // b1's erase commits, and is sent again after the retry, in order
  ASSERT_NE(d.reply_as<error>(e), nullptr);
  d.hold_writes = false;
  d.advance(limits::store_reopen_interval);  // the retry: a1's erase and b1's go again
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(b);
  ASSERT_NE(failed, nullptr) << "b1's ack is answered once its write settles";
  EXPECT_TRUE(failed->empty());
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a2", "b2"}));
  EXPECT_EQ(message_records(d), 2u) << "a1 and b1 are erased";
}

// Found by the engine simulation (seed 13, episode 3): an enqueue committed once, behind an
// earlier write that failed, is sent again with it; when the second send failed, the log dropped
// the enqueue as if nothing were stored and answered storage_failed, yet its first commit stood:
// the messages came back at the next restart, though their producer was told they were not kept.
TEST(shard_engine, an_enqueue_committed_once_is_not_dropped_when_its_second_send_fails) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A")});
  auto first = deliveries(d, d.receive(1));
  d.hold_writes = true;
  d.ack({first[0].lease});               // write 1: a1's erase
  auto e = d.enqueue({msg("c1", "C")});  // write 2: admits
  d.fail_next();                         // a1's erase fails: the log parks
  d.commit_next();                       // the enqueue commits, and waits behind the erase
  d.advance(limits::store_reopen_interval);
  // One write, committed whole or not at all: a crash during it cannot leave a later write's old
  // effect beside an earlier write's new one.
  ASSERT_EQ(d.pending_writes.size(), 1u) << "both go again, in order, as one write (a replay)";
  EXPECT_FALSE(d.pending_writes.front().write.admits) << "a replay puts back what was decided";
  d.fail_next();  // the replay fails: the enqueue's first commit stands
  EXPECT_EQ(d.reply(e), nullptr) << "c1 is stored: its enqueue is not answered storage_failed";
  d.hold_writes = false;
  d.advance(limits::store_reopen_interval);
  ASSERT_NE(d.reply_as<std::vector<message_id>>(e), nullptr);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"c1"}));
}

/// The keys of `w`'s operations, in commit order.
std::vector<std::string> op_keys(const store_write& w) {
  std::vector<std::string> keys;
  each_op(w, [&keys](const store_op& op) {
    keys.push_back(op.key);
    return true;
  });
  return keys;
}

// The log keeps a write's operations to send them again; a store write carries them by reference
// (persistence.md, "write log"): a replay is every write's operations in order, the same ones the
// first sends carried (not copies), with the counters record computed afresh at its end.
TEST(shard_engine, a_replay_sends_the_operations_the_log_kept_in_order_with_fresh_counters) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("b1", "B")});
  auto first = deliveries(d, d.receive(10));
  d.hold_writes = true;
  d.ack({first[0].lease});  // write 1: a1's erase
  d.ack({first[1].lease});  // write 2: b1's erase
  ASSERT_EQ(d.pending_writes.size(), 2u);
  auto a = d.pending_writes[0].write;
  auto b = d.pending_writes[1].write;
  ASSERT_EQ(a.shared.size(), 1u);
  ASSERT_EQ(b.shared.size(), 1u);
  d.fail_next();  // a1's erase fails: the log parks
  d.fail_next();  // so does b1's
  d.advance(limits::store_reopen_interval);
  ASSERT_EQ(d.pending_writes.size(), 1u) << "both go again as one write";
  const auto& replay = d.pending_writes.front().write;
  ASSERT_EQ(replay.shared.size(), 2u);
  EXPECT_EQ(replay.shared[0].get(), a.shared[0].get()) << "the log's operations, not a copy";
  EXPECT_EQ(replay.shared[1].get(), b.shared[0].get());
  auto keys = op_keys(a);
  auto more = op_keys(b);
  keys.insert(keys.end(), more.begin(), more.end());
  if (!a.ops.empty() || !b.ops.empty()) {  // a counters record goes last, computed for the replay
    ASSERT_EQ(replay.ops.size(), 1u);
    keys.erase(std::remove(keys.begin(), keys.end(), replay.ops.front().key), keys.end());
    keys.push_back(replay.ops.front().key);
  }
  EXPECT_EQ(op_keys(replay), keys);
  EXPECT_EQ(op_count(replay), keys.size());
  d.commit_next();
  EXPECT_EQ(message_records(d), 0u) << "a1 and b1 are erased";
}

TEST(shard_engine, a_restart_recovers_groups_in_order_with_attempts_and_dead_letters) {
  auto cfg = by_account();
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("b1", "B")});
  auto first = deliveries(d, d.receive(10));
  d.nack(first[1].lease, nack_kind::dead_letter);  // b1
  d.nack(first[0].lease, nack_kind::retry);        // a1, attempt 1 spent
  cfg.epoch = 4;
  d.restart(cfg);
  auto r = d.recover();
  ASSERT_NE(d.reply_as<ok_t>(r), nullptr);
  auto again = deliveries(d, d.receive(10));
  ASSERT_EQ(bodies(again), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(again[0].lease.attempt, 2u);
  const auto* dead = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  ASSERT_NE(dead, nullptr);
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ(dead->front().msg.body, "b1");
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.recovered, 2u);
  EXPECT_EQ(s.dead_letters, 1u);
}

TEST(shard_engine, fast_delivery_holds_a_recovered_head_for_its_old_lease_holder) {
  auto cfg = by_account();
  cfg.reclaim_grace = 10s;
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("a2", "A")});
  auto first = deliveries(d, d.receive(1));
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  EXPECT_TRUE(deliveries(d, d.receive(1)).empty()) << "R6: held for the reclaim grace";
  auto a = d.ack({first[0].lease});  // the old holder is back with its token
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(a);
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->empty());
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"a2"}));
}

TEST(shard_engine, after_the_reclaim_grace_a_recovered_head_goes_to_anyone) {
  auto cfg = by_account();
  cfg.reclaim_grace = 10s;
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A")});
  (void)deliveries(d, d.receive(1));
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  d.advance(10s);
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"a1"}));
}

TEST(shard_engine, durable_leases_are_honoured_after_a_restart) {
  auto cfg = by_account();
  cfg.spec.delivery(delivery_durability::durable);
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A")});
  auto first = deliveries(d, d.receive(1, 30s));
  cfg.epoch = 4;
  d.restart(cfg);
  d.recover();
  EXPECT_TRUE(deliveries(d, d.receive(1)).empty()) << "R7: the lease runs on";
  auto a = d.ack({first[0].lease});
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(a);
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->empty());
  EXPECT_EQ(d.engine().stats(d.now).backlog, 0u);
}

TEST(shard_engine, a_duplicate_within_the_window_gets_the_original_id) {
  auto cfg = test_config(queue_spec("jobs").dedupe({key::header("id")}, 60s));
  engine_driver d{cfg};
  auto m = msg("x");
  m.headers.push_back(header_field{"id", "k1"});
  auto e1 = d.enqueue({m});
  auto e2 = d.enqueue({m});
  ASSERT_NE(d.reply_as<std::vector<message_id>>(e1), nullptr);
  ASSERT_NE(d.reply_as<std::vector<message_id>>(e2), nullptr);
  EXPECT_EQ(*d.reply_as<std::vector<message_id>>(e1), *d.reply_as<std::vector<message_id>>(e2));
  EXPECT_EQ(deliveries(d, d.receive(10)).size(), 1u);
  d.advance(60s);
  auto e3 = d.enqueue({m});
  EXPECT_NE(*d.reply_as<std::vector<message_id>>(e3), *d.reply_as<std::vector<message_id>>(e1));
}

// L8: a batch that repeats a message whose write is still in flight is answered only once that
// write is durable; if it failed, the batch is answered storage_failed, never with an id the
// store does not hold.
TEST(shard_engine, a_batch_repeating_a_message_whose_write_fails_is_answered_storage_failed) {
  auto cfg = test_config(queue_spec("jobs").dedupe({key::header("id")}, 60s));
  engine_driver d{cfg};
  d.hold_writes = true;
  auto original = msg("x");
  original.headers.push_back(header_field{"id", "k1"});
  auto e1 = d.enqueue({original});
  auto e2 = d.enqueue({original, msg("new")});
  ASSERT_EQ(d.pending_writes.size(), 2u);
  d.fail_next("disk error");
  d.commit_next();
  const auto* first = d.reply_as<error>(e1);
  ASSERT_NE(first, nullptr);
  const auto* second = d.reply_as<error>(e2);
  ASSERT_NE(second, nullptr) << "the batch named an id that was never stored";
  EXPECT_EQ(second->code, errc::storage_failed);
  EXPECT_NE(second->message.find("repeats failed"), std::string::npos) << second->message;
}

TEST(shard_engine, the_dedupe_window_keeps_at_most_its_entry_bound) {
  auto cfg = test_config(queue_spec("jobs").dedupe({key::header("id")}, 60s));
  cfg.dedupe_entries_max = 2;
  engine_driver d{cfg};
  for (auto k : {"k1", "k2", "k3"}) {
    auto m = msg("x");
    m.headers.push_back(header_field{"id", k});
    d.enqueue({m});
  }
  // k1 was evicted (oldest first): a repeat is a new message; k3 is still known.
  auto again = msg("x");
  again.headers.push_back(header_field{"id", "k1"});
  auto r = d.enqueue({again});
  EXPECT_EQ(d.reply_as<std::vector<message_id>>(r)->front().value, 4u);
  std::size_t records = 0;
  auto [from, to] = codec::queue_range(codec::tag::dedupe, 42);
  for (auto it = d.store.lower_bound(from); it != d.store.end() && it->first < to; ++it) ++records;
  EXPECT_EQ(records, 2u) << "an evicted entry's record is erased";
  EXPECT_EQ(d.engine().stats(d.now).dedupe_evictions, 2u) << "k1, then k2 when k1 came back";
}

// Found by the engine simulation (seed 68, episode 16): an enqueue whose write failed forgets its
// dedupe key; sent again at the same instant, the key was added with the same expiry, and the
// shard's check_invariants aborted ("each entry is in the expiry order once") though the window
// was sound.
TEST(shard_engine, a_dedupe_key_sent_again_at_the_same_instant_after_a_failed_write_is_kept_once) {
  auto cfg = test_config(queue_spec("jobs").dedupe({key::header("id")}, 60s));
  engine_driver d{cfg};
  auto m = msg("x");
  m.headers.push_back(header_field{"id", "k1"});
  d.hold_writes = true;
  auto first = d.enqueue({m});
  d.fail_next();  // the key is forgotten: a retry is a new message
  ASSERT_NE(d.reply_as<error>(first), nullptr);
  d.hold_writes = false;
  auto again = d.enqueue({m});  // same instant, same expiry; settle() checks the invariants
  ASSERT_NE(d.reply_as<std::vector<message_id>>(again), nullptr);
  EXPECT_EQ(*d.reply_as<std::vector<message_id>>(again),
            *d.reply_as<std::vector<message_id>>(d.enqueue({m})));
}

// An emptied group is kept for reuse (shard_engine.hpp, `kept_groups_`): the next message of its
// key finds it; it is not live, not listed and not counted; the shard keeps a bounded number of
// them, for a bounded time.
TEST(shard_engine, an_emptied_group_is_kept_for_its_next_message_and_not_counted_as_live) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A")});
  auto first = deliveries(d, d.receive(1));
  ASSERT_EQ(first.size(), 1u);
  d.ack({first[0].lease});
  EXPECT_EQ(d.engine().live_groups(), 0u);
  EXPECT_EQ(d.engine().kept_groups(), 1u);
  EXPECT_EQ(d.engine().stats(d.now).live_groups, 0u);
  auto page = d.engine().groups(groups_query{}, d.now);
  ASSERT_TRUE(page);
  EXPECT_TRUE(page.value().groups.empty()) << "a kept group is not listed";
  ASSERT_TRUE(d.wake.has_value()) << "the engine wakes to let it go";
  EXPECT_EQ(*d.wake, d.now + limits::kept_group_for);
  d.enqueue({msg("a2", "A")});
  EXPECT_EQ(d.engine().live_groups(), 1u);
  EXPECT_EQ(d.engine().kept_groups(), 0u);
  auto second = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(second), (std::vector<std::string>{"a2"}));
  EXPECT_EQ(second[0].lease.group, first[0].lease.group) << "the same group, not a new one";
  const auto* spent = d.reply_as<std::vector<lease_outcome>>(d.ack({first[0].lease}));
  ASSERT_TRUE(spent != nullptr && spent->size() == 1u);
  EXPECT_EQ(spent->front().err.code, errc::lease_not_found) << "the first lease stays spent";
  d.ack({second[0].lease});
  d.advance(limits::kept_group_for);
  EXPECT_EQ(d.engine().kept_groups(), 0u) << "let go once kept long enough";
  EXPECT_FALSE(d.wake.has_value());
}

TEST(shard_engine, a_shard_keeps_at_most_kept_groups_max_emptied_groups) {
  engine_driver d{by_account()};
  const auto n = limits::kept_groups_max + 100;
  for (std::size_t i = 0; i < n; ++i) d.enqueue({msg("m", "acct" + std::to_string(i))});
  for (std::size_t acked = 0; acked < n;) {
    auto got = deliveries(d, d.receive(static_cast<std::uint32_t>(limits::receive_batch_max)));
    ASSERT_FALSE(got.empty());
    std::vector<lease_token> leases;
    for (const auto& x : got) leases.push_back(x.lease);
    d.ack(leases);
    acked += got.size();
  }
  EXPECT_EQ(d.engine().live_groups(), 0u);
  EXPECT_EQ(d.engine().kept_groups(), limits::kept_groups_max);
}

TEST(shard_engine, groups_pages_list_each_group_once_in_lane_order) {
  engine_driver d{by_account()};
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 25; ++i) batch.push_back(msg("m", "acct" + std::to_string(i)));
  d.enqueue(batch);
  std::set<std::string> seen;
  groups_query q;
  q.limit = 10;
  int pages = 0;
  for (;; ++pages) {
    auto page = d.engine().groups(q, d.now);
    ASSERT_TRUE(page);
    for (const auto& g : page.value().groups) EXPECT_TRUE(seen.insert(g.key).second) << g.key;
    if (page.value().next.empty()) break;
    q.after = page.value().next;
  }
  EXPECT_EQ(seen.size(), 25u);
  EXPECT_EQ(pages, 2);
}

// persistence.md, "Memory follows live groups": once the window budget is used up, a group holds
// its share of it (the budget over the live groups, at least a head and one behind it), not its
// whole window, so memory is bounded by the budget and the live groups, not by the backlog; the
// rest is read back in order as the groups drain.
TEST(shard_engine, once_the_window_budget_is_used_up_groups_hold_their_share_of_it) {
  auto cfg = by_account();
  cfg.window = 8;
  cfg.window_max = 16;
  cfg.window_budget_bytes = 3'000;
  engine_driver d{cfg};
  constexpr int groups = 50;
  constexpr int per_group = 10;
  for (int round = 0; round < per_group; ++round) {
    std::vector<outgoing_message> batch;
    for (int g = 0; g < groups; ++g)
      batch.push_back(msg(std::to_string(round), "acct" + std::to_string(g)));
    d.enqueue(batch);
  }
  auto footprint = [](const char* account) {
    message m;
    m.body = "0";
    m.headers.push_back(header_field{"account", account});
    return held_message{m}.footprint();  // as a group's window holds it
  };
  auto held = d.engine().stats(d.now).window_bytes;
  // Within the budget, the groups' heads and one behind each, and one group's growth past the
  // budget; with every group holding its window (8 of 10) it would be 400 messages.
  EXPECT_LE(held, cfg.window_budget_bytes + (2 * groups + cfg.window_max) * footprint("acct00"));
  EXPECT_GE(held, 2 * groups * footprint("acct0")) << "every group keeps a head and one behind it";

  // Everything is still delivered, each group in order.
  std::map<std::string, int> next;
  int delivered = 0;
  for (int turn = 0; turn < 10 * per_group && delivered < groups * per_group; ++turn) {
    auto got = deliveries(d, d.receive(groups));
    std::vector<lease_token> leases;
    for (const auto& x : got) {
      EXPECT_EQ(x.msg.body, std::to_string(next[x.ordering_key]++)) << x.ordering_key;
      leases.push_back(x.lease);
    }
    delivered += static_cast<int>(got.size());
    if (!leases.empty()) d.ack(leases);
  }
  EXPECT_EQ(delivered, groups * per_group);
  EXPECT_GT(d.engine().stats(d.now).window_reads, 0u);
}

}  // namespace
}  // namespace laneq
