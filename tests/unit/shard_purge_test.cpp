// Unit tests for purge, peek and deleting dead letters on the shard engine
// (libqueue/src/shard_purge.cpp, shard_dead_letters.cpp; docs/design/purge.md U-numbers).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/engine_driver.hpp"
#include "laneq/shard_engine.hpp"
#include "support.hpp"

namespace laneq {
namespace {

using test::bodies;
using test::deliveries;
using test::engine_driver;
using test::message_records;
using test::test_config;

shard_config by_account(std::size_t window = limits::group_window_default) {
  auto cfg = test_config(queue_spec("orders")
                             .ordered_by({key::header("account")})
                             .when_ordering_key_missing(missing_ordering_key::unordered));
  cfg.window = window;
  cfg.window_max = window;
  return cfg;
}

outgoing_message msg(std::string body, std::string account = {}) {
  outgoing_message m;
  m.body = std::move(body);
  if (!account.empty()) m.headers.push_back(header_field{"account", std::move(account)});
  return m;
}

std::uint64_t count_of(const engine_driver& d, request_id r) {
  const auto* n = d.reply_as<std::uint64_t>(r);
  EXPECT_NE(n, nullptr) << "request " << r << " was not answered with a count";
  return n ? *n : ~std::uint64_t{0};
}

std::vector<std::string> peeked_bodies(const engine_driver& d, request_id r) {
  std::vector<std::string> out;
  const auto* ms = d.reply_as<std::vector<peeked_message>>(r);
  EXPECT_NE(ms, nullptr) << "peek " << r << " was not answered with messages";
  if (ms)
    for (const auto& m : *ms) out.push_back(m.msg.body);
  return out;
}

// U1, U2: a purge removes every waiting message; the one in flight stays, its lease valid.
TEST(shard_purge, removes_waiting_messages_and_keeps_the_one_in_flight) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("b1", "B"), msg("u1")});
  auto first = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(first), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(count_of(d, d.purge()), 4u);
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty()) << "a purged message was delivered";
  EXPECT_EQ(message_records(d), 1u) << "only the message in flight keeps its record";
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(d.ack({first[0].lease}));
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->empty()) << "the in-flight message's lease still acks";
  EXPECT_EQ(message_records(d), 0u);
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.purged, 4u);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(d.engine().live_groups(), 0u);
}

// A group emptied a moment ago is kept for its key's next message (ordering.md, "Group
// lifecycle"): a purge, of all or of its key, passes it by, and it goes when its time is up.
TEST(shard_purge, passes_by_a_kept_group) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("b1", "B"), msg("b2", "B")});
  auto a = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(a), (std::vector<std::string>{"a1"}));
  d.ack({a[0].lease});
  ASSERT_EQ(d.engine().kept_groups(), 1u);
  d.hold_writes = true;
  auto all = d.purge();
  auto one = d.purge("A");
  d.hold_writes = false;
  while (!d.pending_writes.empty()) d.commit_next();  // settle() checks the invariants
  EXPECT_EQ(count_of(d, all), 2u);
  EXPECT_EQ(count_of(d, one), 0u);
  EXPECT_EQ(d.engine().kept_groups(), 2u) << "B, emptied by the purge, is kept too";
  d.advance(limits::kept_group_for);
  EXPECT_EQ(d.engine().kept_groups(), 0u) << "neither lingers";
  d.enqueue({msg("a2", "A")});
  EXPECT_EQ(bodies(deliveries(d, d.receive(1))), (std::vector<std::string>{"a2"}));
}

// U3: a purge of one group leaves the others, and their order, as they were; the group takes
// new messages afterwards.
TEST(shard_purge, of_one_group_leaves_the_other_groups_in_order) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("b1", "B"), msg("a2", "A"), msg("b2", "B"), msg("b3", "B")});
  EXPECT_EQ(count_of(d, d.purge("A")), 2u);
  std::vector<std::string> got;
  for (int i = 0; i < 4; ++i) {
    auto ds = deliveries(d, d.receive(10));
    if (ds.empty()) break;
    for (const auto& x : ds) got.push_back(x.msg.body);
    for (const auto& x : ds) d.ack({x.lease});
  }
  EXPECT_EQ(got, (std::vector<std::string>{"b1", "b2", "b3"}));
  d.enqueue({msg("a3", "A")});
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a3"}));
  EXPECT_EQ(count_of(d, d.purge("nobody")), 0u) << "a key no message has purges nothing";
}

// U4: purged messages are erased from the store: they do not come back after a restart.
TEST(shard_purge, purged_messages_stay_gone_after_a_restart) {
  auto cfg = by_account(2);
  engine_driver d{cfg};
  std::vector<outgoing_message> batch;
  for (int i = 1; i <= 6; ++i) batch.push_back(msg("a" + std::to_string(i), "A"));
  for (int i = 1; i <= 6; ++i) batch.push_back(msg("u" + std::to_string(i)));
  d.enqueue(batch);
  auto first = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(first), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(count_of(d, d.purge()), 11u) << "the window's and the store's messages alike";
  cfg.epoch = 4;
  d.restart(cfg);
  ASSERT_NE(d.reply_as<ok_t>(d.recover()), nullptr);
  // Fast delivery, no grace: the message that was in flight is all that is left.
  EXPECT_EQ(bodies(deliveries(d, d.receive(20))), (std::vector<std::string>{"a1"}));
  EXPECT_EQ(d.engine().stats(d.now).recovered, 1u);
}

// U5: a purge removes what arrived before it, not what is enqueued after it, however their
// writes interleave.
TEST(shard_purge, takes_what_came_before_it_and_spares_what_comes_after) {
  engine_driver d{by_account()};
  d.hold_writes = true;
  auto before = d.enqueue({msg("a1", "A"), msg("x1")});
  auto p = d.purge();
  auto after = d.enqueue({msg("a2", "A"), msg("x2")});
  d.hold_writes = false;
  while (!d.pending_writes.empty()) d.commit_next();
  ASSERT_NE(d.reply_as<std::vector<message_id>>(before), nullptr);
  ASSERT_NE(d.reply_as<std::vector<message_id>>(after), nullptr);
  EXPECT_EQ(count_of(d, p), 2u);
  auto got = bodies(deliveries(d, d.receive(10)));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"a2", "x2"}));
  EXPECT_EQ(message_records(d), 2u);
}

// U6: a read-back under way when the purge comes is dropped: what it returns is not delivered.
TEST(shard_purge, drops_a_read_back_under_way) {
  engine_driver d{by_account(2)};
  std::vector<outgoing_message> batch;
  for (int i = 1; i <= 8; ++i) batch.push_back(msg("a" + std::to_string(i), "A"));
  d.enqueue(batch);
  auto first = deliveries(d, d.receive(1));
  d.hold_reads = true;
  d.ack({first[0].lease});  // the window runs low: its next messages are read back
  ASSERT_FALSE(d.pending_reads.empty()) << "the group reads its next messages back";
  EXPECT_EQ(count_of(d, d.purge()), 7u);
  d.answer_reads();
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty());
  d.enqueue({msg("a9", "A")});
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a9"}));
}

// U7: a retried head waiting for its retry_after, and a delayed message, are waiting messages.
TEST(shard_purge, removes_retried_and_delayed_messages) {
  engine_driver d{by_account()};
  auto delayed = msg("later", "B");
  delayed.delay = std::chrono::seconds{60};
  d.enqueue({msg("a1", "A"), delayed, msg("u1")});
  auto ds = deliveries(d, d.receive(10));
  ASSERT_EQ(ds.size(), 2u);
  for (const auto& x : ds) d.nack(x.lease, nack_kind::retry, std::chrono::seconds{30});
  EXPECT_EQ(count_of(d, d.purge()), 3u);
  d.advance(std::chrono::seconds{120});
  EXPECT_TRUE(deliveries(d, d.receive(10)).empty());
  EXPECT_EQ(message_records(d), 0u);
}

// U8: a peek shows messages without a lease: no attempt counted, nothing changed; per group in
// arrival order, with what is in flight marked.
TEST(shard_purge, peek_shows_messages_without_a_lease) {
  engine_driver d{by_account(2)};
  d.enqueue({msg("a1", "A"), msg("a2", "A"), msg("a3", "A"), msg("a4", "A"), msg("b1", "B")});
  auto first = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(first), (std::vector<std::string>{"a1"}));
  auto p = d.peek(10, "A");
  EXPECT_EQ(peeked_bodies(d, p), (std::vector<std::string>{"a1", "a2", "a3", "a4"}))
      << "messages the window does not hold are read from the store";
  const auto& ms = *d.reply_as<std::vector<peeked_message>>(p);
  EXPECT_TRUE(ms[0].in_flight);
  EXPECT_EQ(ms[0].lease_deadline, first[0].deadline);
  EXPECT_FALSE(ms[1].in_flight);
  EXPECT_EQ(ms[1].msg.attempts, 0u);
  EXPECT_EQ(ms[0].ordering_key, "A");
  EXPECT_EQ(peeked_bodies(d, d.peek(2)).size(), 2u) << "the limit bounds the answer";
  EXPECT_EQ(peeked_bodies(d, d.peek(100)).size(), 5u);
  auto s = d.engine().stats(d.now);
  EXPECT_EQ(s.delivered, 1u) << "a peek delivers nothing";
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"b1"}))
      << "a peek takes no lease: b1 is still there, a2 still behind a1";
  const auto* bad = d.reply_as<error>(d.peek(0));
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->code, errc::invalid_argument);
  EXPECT_NE(bad->message.find("orders"), std::string::npos) << bad->message;
}

// U9: dead letters are deleted one by one, by a list of ids, or all; the deletes are durable.
TEST(shard_purge, deletes_dead_letters_by_id_or_all_durably) {
  auto cfg = by_account();
  engine_driver d{cfg};
  d.enqueue({msg("a1", "A"), msg("b1", "B"), msg("c1", "C"), msg("d1", "D")});
  for (const auto& x : deliveries(d, d.receive(10))) d.nack(x.lease, nack_kind::dead_letter);
  const auto* listed = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  ASSERT_NE(listed, nullptr);
  ASSERT_EQ(listed->size(), 4u);
  auto ids = std::vector<message_id>{(*listed)[2].msg.id, (*listed)[0].msg.id};
  const auto* by_id = d.reply_as<std::vector<dead_letter>>(d.dead_letters_by_id(ids));
  ASSERT_NE(by_id, nullptr);
  ASSERT_EQ(by_id->size(), 2u);
  EXPECT_EQ((*by_id)[0].msg.id, ids[0]) << "in the order the ids were given";
  EXPECT_EQ(count_of(d, d.delete_dead_letters(ids)), 2u);
  // One id that is not a dead letter: nothing is deleted.
  auto missing = d.delete_dead_letters({(*listed)[1].msg.id, ids[0]});
  const auto* err = d.reply_as<error>(missing);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, errc::dead_letter_not_found);
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 2u);
  EXPECT_EQ(count_of(d, d.delete_dead_letters()), 2u) << "every one";
  EXPECT_EQ(count_of(d, d.delete_dead_letters()), 0u);
  EXPECT_EQ(d.engine().stats(d.now).dead_letters_deleted, 4u);
  cfg.epoch = 4;
  d.restart(cfg);
  ASSERT_NE(d.reply_as<ok_t>(d.recover()), nullptr);
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 0u);
  const auto* after = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  ASSERT_NE(after, nullptr);
  EXPECT_TRUE(after->empty());
}

// U10: deleting every dead letter leaves those moved after the request (their writes come later).
TEST(shard_purge, deleting_every_dead_letter_spares_one_moved_after_the_request) {
  engine_driver d{by_account()};
  d.enqueue({msg("a1", "A"), msg("b1", "B")});
  auto ds = deliveries(d, d.receive(10));
  d.nack(ds[0].lease, nack_kind::dead_letter);
  d.hold_writes = true;
  auto del = d.delete_dead_letters();
  d.nack(ds[1].lease, nack_kind::dead_letter);
  d.hold_writes = false;
  while (!d.pending_writes.empty()) d.commit_next();
  EXPECT_EQ(count_of(d, del), 1u);
  EXPECT_EQ(d.engine().stats(d.now).dead_letters, 1u);
  const auto* left = d.reply_as<std::vector<dead_letter>>(d.dead_letters());
  ASSERT_NE(left, nullptr);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(left->front().msg.body, ds[1].msg.body);
}

}  // namespace
}  // namespace laneq
