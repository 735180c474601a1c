// Sharded queues on the real actors with simulated time (docs/design/sharding.md): a queue of
// several shards keeps every ordering rule per group (each group lives in one shard), spreads its
// groups and unordered messages over the shards, routes leases, redrives and dead letters by the
// shard in their message id, pages its groups shard by shard, restarts whole and leaves no
// record behind when deleted.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "actor_test_helpers.hpp"
#include "laneq/sharding.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

constexpr std::uint32_t shards = 4;

queue_spec by_account_sharded(std::string name = "acct") {
  return queue_spec(std::move(name))
      .ordered_by({key::header("account")})
      .sharded(shards, {key::header("account")});
}

class sharding : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  std::vector<outgoing_message> accounts(int n, const std::string& prefix) {
    std::vector<outgoing_message> batch;
    for (int a = 0; a < n; ++a)
      batch.push_back(in_account(prefix + std::to_string(a), "acct-" + std::to_string(a)));
    return batch;
  }
  harness h;
};

// The ids of one batch come back in batch order though its messages went to several shards, and
// the shards are all used: each id carries the shard that stored it.
TEST_F(sharding, an_enqueue_batch_is_split_over_the_shards_and_answered_in_batch_order) {
  auto q = make(by_account_sharded());
  auto ids = h.enqueue(q, accounts(40, "m"));
  ASSERT_TRUE(ids.ok()) << ids.err().message;
  ASSERT_EQ(ids.value().size(), 40u);
  std::set<std::uint32_t> used;
  for (auto id : ids.value()) used.insert(shard_of_id(id));
  EXPECT_EQ(used.size(), shards) << "40 accounts over 4 shards";
  auto got = take(h, q, 100);
  ASSERT_EQ(got.size(), 40u);
  std::map<std::string, message_id> by_body;
  for (const auto& d : got) by_body[d.msg.body] = d.msg.id;
  for (int a = 0; a < 40; ++a)
    EXPECT_EQ(by_body["m" + std::to_string(a)], ids.value()[static_cast<std::size_t>(a)]) << a;
}

// G3 and G4 across shards: per account, arrival order and one in flight, whichever shard holds
// it; acks, nacks and extends reach the shard in the lease.
TEST_F(sharding, each_group_keeps_its_order_and_one_in_flight_across_shards) {
  auto q = make(by_account_sharded());
  for (int round = 0; round < 3; ++round)
    ASSERT_TRUE(h.enqueue(q, accounts(12, "r" + std::to_string(round) + "-")).ok());
  std::map<std::string, std::vector<std::string>> seen;
  for (int step = 0; step < 100; ++step) {
    auto got = take(h, q, 100);
    if (got.empty()) break;
    std::set<std::string> keys;
    for (const auto& d : got) {
      EXPECT_TRUE(keys.insert(d.ordering_key).second) << "two of " << d.ordering_key << " at once";
      seen[d.ordering_key].push_back(d.msg.body);
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      const auto& d = got[i];
      if (i % 3 == 0) {
        ASSERT_TRUE(h.extend(q, d.lease, 10s).ok());
        ASSERT_TRUE(h.ack(q, d.lease).ok());
      } else if (i % 3 == 1 && d.lease.attempt == 1) {
        ASSERT_TRUE(h.nack(q, d.lease).ok());  // comes back first, attempt 2
        seen[d.ordering_key].pop_back();
      } else {
        ASSERT_TRUE(h.ack(q, d.lease).ok());
      }
    }
  }
  ASSERT_EQ(seen.size(), 12u);
  for (const auto& [key, bodies] : seen) {
    auto a = key.substr(5);
    EXPECT_EQ(bodies, (std::vector<std::string>{"r0-" + a, "r1-" + a, "r2-" + a})) << key;
  }
  EXPECT_EQ(stats_of(h, q).backlog, 0u);
}

// A receive takes what it can from every shard in turn: 40 accounts over 4 shards, a receive of
// 40 gets all of them in one answer.
TEST_F(sharding, a_receive_gathers_from_every_shard) {
  auto q = make(by_account_sharded());
  ASSERT_TRUE(h.enqueue(q, accounts(40, "m")).ok());
  EXPECT_EQ(take(h, q, 40).size(), 40u);
  EXPECT_EQ(stats_of(h, q).in_flight, 40u);
}

// A long poll on an empty sharded queue is answered by an enqueue into any of its shards, and
// one that waited its full time is answered empty.
TEST_F(sharding, a_long_poll_is_answered_by_an_enqueue_into_any_shard) {
  auto q = make(by_account_sharded());
  for (int a = 0; a < 8; ++a) {
    auto pending = h.long_poll(q, 5, 2s);
    EXPECT_FALSE(pending.has_value()) << "nothing to take yet";
    ASSERT_TRUE(
        h.enqueue(q, in_account("m" + std::to_string(a), "acct-" + std::to_string(a))).ok());
    auto answered = h.collect<std::vector<delivery>>();
    ASSERT_TRUE(answered.has_value()) << "account " << a;
    ASSERT_TRUE(answered->ok());
    ASSERT_EQ(answered->value().size(), 1u);
    ASSERT_TRUE(h.ack(q, answered->value()[0].lease).ok());
  }
  auto empty = h.long_poll(q, 5, 1s);
  EXPECT_FALSE(empty.has_value());
  h.advance(1s);
  auto timed_out = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(timed_out.has_value());
  ASSERT_TRUE(timed_out->ok());
  EXPECT_TRUE(timed_out->value().empty());
}

// Unordered messages spread over the shards, and dead letters and redrive reach every shard.
TEST_F(sharding, unordered_messages_spread_and_dead_letters_come_from_every_shard) {
  auto q = make(queue_spec("u").sharded(shards));
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 20; ++i) batch.push_back(msg("u" + std::to_string(i)));
  auto ids = h.enqueue(q, batch);
  ASSERT_TRUE(ids.ok());
  std::set<std::uint32_t> used;
  for (auto id : ids.value()) used.insert(shard_of_id(id));
  EXPECT_EQ(used.size(), shards);
  for (const auto& d : take(h, q, 20)) ASSERT_TRUE(h.nack(q, d.lease, 0us, true).ok());
  auto dls = h.dead_letters(q);
  ASSERT_TRUE(dls.ok());
  EXPECT_EQ(dls.value().size(), 20u);
  auto one = h.redrive(q, {ids.value()[3]});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.value(), 1u);
  auto rest = h.redrive(q);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest.value(), 19u);
  EXPECT_EQ(take(h, q, 20).size(), 20u);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.dead_letters, 0u);
  EXPECT_EQ(s.redriven, 20u);
  EXPECT_EQ(s.enqueued, 20u);
}

// Pages of groups walk the shards in turn, each group once.
TEST_F(sharding, groups_pages_walk_every_shard_each_group_once) {
  auto q = make(by_account_sharded());
  ASSERT_TRUE(h.enqueue(q, accounts(50, "m")).ok());
  groups_query query;
  query.limit = 7;
  std::set<std::string> seen;
  for (int pages = 0; pages < 50; ++pages) {
    auto page = h.page_of_groups(q, query);
    ASSERT_TRUE(page.ok()) << page.err().message;
    for (const auto& g : page.value().groups) EXPECT_TRUE(seen.insert(g.key).second) << g.key;
    if (page.value().next.empty()) break;
    query.after = page.value().next;
  }
  EXPECT_EQ(seen.size(), 50u);
}

// A sharded queue restarts whole: every shard recovers its groups, and the queue keeps its
// shards; deleting it removes every shard's records, and its actors (the gateway and 4 shards).
TEST_F(sharding, a_sharded_queue_restarts_whole_and_its_delete_leaves_nothing) {
  auto& registry_of = h.system().registry();
  const auto before = registry_of.running();
  auto q = make(by_account_sharded());
  h.run();
  EXPECT_EQ(registry_of.running(), before + 1 + shards) << "a gateway and its shards";
  ASSERT_TRUE(h.enqueue(q, accounts(20, "m")).ok());
  auto restarted = h.restart();
  ASSERT_TRUE(restarted.ok()) << restarted.err().message;
  auto again = h.lookup("acct");
  ASSERT_TRUE(again.ok());
  auto s = stats_of(h, again.value());
  EXPECT_EQ(s.recovered, 20u);
  EXPECT_EQ(s.live_groups, 20u);
  h.advance(limits::reclaim_grace_default);  // R6: recovered heads wait out the grace
  auto all = take(h, again.value(), 100);
  EXPECT_EQ(all.size(), 20u);
  auto dropped = h.ask<caf::ok_atom>(h.brk().admin(), drop_atom_v, std::string{"acct"}, true);
  ASSERT_TRUE(dropped.ok());
  auto entries = h.ask<std::vector<store_entry>>(h.store(), scan_atom_v, std::string{},
                                                 std::string(4, '\xFF'), limits::store_scan_max);
  ASSERT_TRUE(entries.ok());
  for (const auto& e : entries.value())
    EXPECT_EQ(e.key.at(0), 'A') << "a record of the deleted queue is left: tag " << e.key.at(0);
}

// A batch with a message that lacks its ordering key (policy reject) is refused whole, as on one
// shard, naming that message by its index in the batch: no shard stores any part of it, and the
// refusal is counted once.
TEST_F(sharding, a_batch_with_a_keyless_message_is_refused_whole) {
  auto q = make(by_account_sharded());
  auto batch = accounts(12, "m");
  batch.insert(batch.begin() + 7, msg("keyless"));
  auto r = h.enqueue(q, batch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::ordering_key_missing);
  EXPECT_NE(r.err().message.find("messages[7]"), std::string::npos) << r.err().message;
  auto s = stats_of(h, q);
  EXPECT_EQ(s.backlog, 0u) << "no shard stored a part of it";
  EXPECT_EQ(s.rejected, 13u);
  EXPECT_EQ(s.key_missing, 1u);
}

// A spec whose shard key is not part of its ordering key is refused at create, naming the queue
// and the component.
TEST_F(sharding, a_shard_key_outside_the_ordering_key_is_refused_at_create) {
  auto bad = h.create(
      queue_spec("acct").ordered_by({key::header("account")}).sharded(4, {key::header("region")}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::invalid_spec);
  EXPECT_NE(bad.err().message.find("queue 'acct': shard_key[0]: header:region"), std::string::npos)
      << bad.err().message;
}

}  // namespace
}  // namespace laneq
