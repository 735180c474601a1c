// Queue operations on the real actors (docs/design/purge.md): purge, peek, deleting dead letters,
// redrive into another queue and deleting a queue that is not empty, through the queue handle
// (a shard actor, or a sharded queue's gateway) and the admin actor.
#include <algorithm>

#include <gtest/gtest.h>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

queue_spec by_account(std::string name = "accounts") {
  return queue_spec(std::move(name)).ordered_by({key::header("account")});
}

queue_spec by_account_sharded(std::string name = "acct") {
  return queue_spec(std::move(name))
      .ordered_by({key::header("account")})
      .sharded(4, {key::header("account")});
}

class queue_operations : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  std::uint64_t count(result<std::uint64_t> r) {
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : to_string(r.err()));
    return r.ok() ? r.value() : ~std::uint64_t{0};
  }
  std::uint64_t purge(const queue_api& q, group_filter which = {}) {
    return count(h.ask<std::uint64_t>(q, purge_atom_v, which));
  }
  std::vector<peeked_message> peek(const queue_api& q, std::uint32_t limit,
                                   group_filter which = {}) {
    auto r = h.ask<std::vector<peeked_message>>(q, peek_atom_v, peek_request{limit, which});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : to_string(r.err()));
    return r.ok() ? r.value() : std::vector<peeked_message>{};
  }
  result<caf::ok_atom> drop(const std::string& name, bool force) {
    return h.ask<caf::ok_atom>(h.brk().admin(), drop_atom_v, name, force);
  }
  std::vector<dead_letter> dead(const queue_api& q) {
    auto dl = h.dead_letters(q);
    EXPECT_TRUE(dl.ok());
    return dl.ok() ? dl.value() : std::vector<dead_letter>{};
  }

  harness h;
};

// U1-U4 through a sharded queue's gateway: every shard purges; the message in flight stays and
// acks; nothing purged comes back after a restart.
TEST_F(queue_operations, a_purge_of_a_sharded_queue_empties_every_shard_and_survives_a_restart) {
  auto q = make(by_account_sharded());
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 12; ++i)
    batch.push_back(in_account("m" + std::to_string(i), "acct-" + std::to_string(i % 6)));
  ASSERT_TRUE(h.enqueue(q, batch).ok());
  auto held = take_one(h, q);
  EXPECT_EQ(purge(q), 11u);
  EXPECT_TRUE(take(h, q, 20).empty());
  auto s = stats_of(h, q);
  EXPECT_EQ(s.purged, 11u);
  EXPECT_EQ(s.backlog, 1u) << "the message in flight";
  auto restarted = h.restart(test::with_grace(0s));
  ASSERT_TRUE(restarted.ok());
  auto again = h.lookup("acct");
  ASSERT_TRUE(again.ok());
  h.advance(1ms);
  EXPECT_EQ(bodies(take(h, again.value(), 20)), (strings{held.msg.body}))
      << "only the message that was in flight is left";
}

// U3: a purge of one group, through the gateway, leaves every other group and its order.
TEST_F(queue_operations, a_purge_of_one_group_leaves_the_others_in_order) {
  auto q = make(by_account_sharded());
  ASSERT_TRUE(h.enqueue(q, {in_account("a1", "A"), in_account("b1", "B"), in_account("a2", "A"),
                            in_account("b2", "B")})
                  .ok());
  EXPECT_EQ(purge(q, group_filter{true, "A"}), 2u);
  auto b1 = take(h, q, 10);
  ASSERT_EQ(bodies(b1), (strings{"b1"}));
  ASSERT_TRUE(h.ack(q, b1[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"b2"}));
}

// U8: a peek through the gateway: no lease, no attempt; a group's messages in arrival order.
TEST_F(queue_operations, a_peek_takes_no_lease_and_shows_a_group_in_order) {
  auto q = make(by_account_sharded());
  ASSERT_TRUE(h.enqueue(q, {in_account("a1", "A"), in_account("a2", "A"), in_account("a3", "A"),
                            in_account("b1", "B")})
                  .ok());
  auto a = peek(q, 10, group_filter{true, "A"});
  std::vector<std::string> got;
  for (const auto& m : a) got.push_back(m.msg.body);
  EXPECT_EQ(got, (strings{"a1", "a2", "a3"}));
  EXPECT_EQ(peek(q, 2).size(), 2u);
  EXPECT_EQ(peek(q, 100).size(), 4u);
  EXPECT_EQ(stats_of(h, q).delivered, 0u);
  auto first = take(h, q, 10);
  EXPECT_EQ(first.size(), 2u) << "a1 and b1: the peek leased nothing";
  for (const auto& d : first) EXPECT_EQ(d.lease.attempt, 1u) << "a peek is not an attempt";
  auto bad = h.ask<std::vector<peeked_message>>(q, peek_atom_v, peek_request{0, {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::invalid_argument);
}

// Dead letters deleted one by one and all at once, through a sharded queue's gateway.
TEST_F(queue_operations, dead_letters_are_deleted_by_id_and_all_at_once) {
  auto q = make(by_account_sharded());
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 6; ++i)
    batch.push_back(in_account("d" + std::to_string(i), "k" + std::to_string(i)));
  ASSERT_TRUE(h.enqueue(q, batch).ok());
  for (const auto& d : take(h, q, 10)) ASSERT_TRUE(h.nack(q, d.lease, 0s, /*dead=*/true).ok());
  auto listed = dead(q);
  ASSERT_EQ(listed.size(), 6u);
  auto one =
      h.ask<std::uint64_t>(q, dlq_atom_v, drop_atom_v, std::vector<message_id>{listed[0].msg.id});
  EXPECT_EQ(count(one), 1u);
  auto again =
      h.ask<std::uint64_t>(q, dlq_atom_v, drop_atom_v, std::vector<message_id>{listed[0].msg.id});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.err().code, errc::dead_letter_not_found);
  EXPECT_NE(again.err().message.find("queue 'acct'"), std::string::npos) << again.err().message;
  auto all = h.ask<std::uint64_t>(q, dlq_atom_v, drop_atom_v, std::vector<message_id>{});
  EXPECT_EQ(count(all), 5u);
  EXPECT_TRUE(dead(q).empty());
  EXPECT_EQ(stats_of(h, q).dead_letters_deleted, 6u);
}

// Redrive into another queue: the chosen dead letters become new messages there, after what the
// target held already (ordering.md O9), and leave the source's dead letters.
TEST_F(queue_operations, a_redrive_into_another_queue_moves_the_chosen_dead_letters) {
  auto src = make(by_account("src"));
  auto dst = make(by_account("dst"));
  auto ids = h.enqueue(src, {in_account("x1", "A"), in_account("x2", "B"), in_account("x3", "C")});
  ASSERT_TRUE(ids.ok());
  for (const auto& d : take(h, src, 10)) ASSERT_TRUE(h.nack(src, d.lease, 0s, true).ok());
  put(h, dst, in_account("already", "A"));
  auto admin = h.brk().admin();
  auto n = h.ask<std::uint64_t>(admin, redrive_atom_v, std::string{"src"},
                                std::vector<message_id>{ids.value()[2], ids.value()[0]},
                                std::string{"dst"});
  EXPECT_EQ(count(n), 2u);
  auto left = dead(src);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].msg.body, "x2");
  auto first = take(h, dst, 10);
  auto got = bodies(first);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (strings{"already", "x3"})) << "x1 waits behind 'already' in group A";
  for (const auto& d : first) ASSERT_TRUE(h.ack(dst, d.lease).ok());
  EXPECT_EQ(bodies(take(h, dst, 10)), (strings{"x1"}));
  auto missing = h.ask<std::uint64_t>(admin, redrive_atom_v, std::string{"src"},
                                      std::vector<message_id>{}, std::string{"nowhere"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.err().code, errc::queue_not_found);
  EXPECT_NE(missing.err().message.find("'nowhere'"), std::string::npos) << missing.err().message;
  EXPECT_NE(missing.err().message.find("'src'"), std::string::npos) << missing.err().message;
  EXPECT_EQ(dead(src).size(), 1u) << "a failed redrive moves nothing";
}

// A queue that holds a message (waiting, delayed or in flight) or a dead letter is deleted only
// with force.
TEST_F(queue_operations, a_queue_that_is_not_empty_is_deleted_only_with_force) {
  auto q = make(by_account());
  auto delayed = in_account("later", "A", 60s);
  put(h, q, delayed);
  auto refused = drop("accounts", false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, errc::queue_not_empty);
  EXPECT_NE(refused.err().message.find("queue 'accounts' is not empty"), std::string::npos)
      << refused.err().message;
  EXPECT_TRUE(h.lookup("accounts").ok()) << "a refused delete changes nothing";
  EXPECT_EQ(purge(q), 1u);
  put(h, q, in_account("dies", "B"));
  ASSERT_TRUE(h.nack(q, take_one(h, q).lease, 0s, true).ok());
  EXPECT_EQ(drop("accounts", false).err().code, errc::queue_not_empty) << "a dead letter counts";
  ASSERT_TRUE(drop("accounts", true).ok());
  EXPECT_FALSE(h.lookup("accounts").ok());
  make(queue_spec("empty"));
  EXPECT_TRUE(drop("empty", false).ok()) << "an empty queue needs no force";
}

}  // namespace
}  // namespace laneq
