// Recovery after a crash on the real actors with simulated time: what a restart keeps (queues,
// specs, messages, dead letters, numbering, attempts, not-before times), group windows read back
// from the store, fast delivery's reclaim grace, durable delivery's committed leases, the
// on_enqueue hook, deleted queues and restarts in a row (actors/src/shard_actor.cpp recover_atom,
// libqueue/src/shard_recovery.cpp, tests/support/harness.hpp restart).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;
using test::with_grace;

/// Broker options whose groups keep `window` messages in memory and never grow past it (no
/// window budget; reclaim grace 0).
broker_options windowed(std::size_t window) {
  auto o = with_grace(0s);
  o.group_window = window;
  o.window_budget_bytes = 0;
  return o;
}

/// Broker options whose groups keep 4 messages in memory and up to 200 while all of them hold
/// less than `budget` bytes (reclaim grace 0).
broker_options growing(std::size_t budget) {
  auto o = windowed(4);
  o.group_window_max = 200;
  o.window_budget_bytes = budget;
  return o;
}

/// The bodies of the deliveries in the ordering group printed as `key`, in delivery order.
strings bodies_in(const std::vector<delivery>& ds, const std::string& key) {
  strings out;
  for (const auto& d : ds)
    if (d.ordering_key == key) out.push_back(d.msg.body);
  return out;
}

/// True if `e` is one of the refusals a lease of an earlier broker run gets.
bool is_stale_lease(const error& e) {
  return e.code == errc::lease_not_found || e.code == errc::lease_expired;
}

class recovery : public ::testing::Test {
 protected:
  /// Starts a broker with `opts`; `restart` keeps them.
  harness& boot(broker_options opts = {}) {
    opts_ = opts;
    h_.reset();
    h_.emplace(1, opts_);
    return *h_;
  }

  /// Crashes the broker and recovers a new one from the store; returns how many queues came
  /// back (a failed recovery is a test failure).
  std::uint64_t restart() {
    auto n = h_->restart(opts_);
    EXPECT_TRUE(n.ok()) << (n.ok() ? "" : to_string(n.err()));
    return n.ok() ? n.value() : 0;
  }

  queue_api make(queue_spec spec) { return test::make_queue(*h_, std::move(spec)); }

  /// The queue named `name` (handles die with the broker: look queues up after a restart).
  queue_api lookup(const std::string& name) {
    auto q = h_->lookup(name);
    EXPECT_TRUE(q.ok()) << name << ": " << (q.ok() ? "" : to_string(q.err()));
    return q.ok() ? q.value() : queue_api{};
  }

  std::string summary(const std::string& name) {
    auto d = h_->ask<queue_description>(h_->brk().admin(), describe_atom_v, name);
    EXPECT_TRUE(d.ok()) << name;
    return d.ok() ? d.value().summary : std::string{};
  }

  strings names() {
    auto r = h_->ask<std::vector<std::string>>(h_->brk().admin(), list_atom_v);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return {};
    auto out = r.value();
    std::sort(out.begin(), out.end());
    return out;
  }

  status drop(const std::string& name) {
    auto r = h_->ask<caf::ok_atom>(h_->brk().admin(), drop_atom_v, name, true);  // force
    if (!r) return r.err();
    return ok_t{};
  }

  std::vector<dead_letter> dead(const queue_api& q) {
    auto dl = h_->dead_letters(q);
    EXPECT_TRUE(dl.ok());
    return dl.ok() ? dl.value() : std::vector<dead_letter>{};
  }

  /// The backlog of each group, by printable key.
  std::map<std::string, std::uint64_t> backlogs(const queue_api& q) {
    auto gs = h_->groups(q);
    EXPECT_TRUE(gs.ok());
    std::map<std::string, std::uint64_t> out;
    if (gs.ok())
      for (const auto& g : gs.value()) out[g.key] = g.backlog;
    return out;
  }

  /// Takes and acks everything `q` delivers now, batch by batch, until a receive is empty.
  std::vector<delivery> drain(const queue_api& q) {
    std::vector<delivery> out;
    for (int round = 0; round < 10'000; ++round) {
      auto ds = take(*h_, q, 100);
      if (ds.empty()) break;
      for (auto& d : ds) {
        auto acked = h_->ack(q, d.lease);
        EXPECT_TRUE(acked.ok()) << d.msg.body << ": " << acked.err().message;
        out.push_back(std::move(d));
      }
    }
    return out;
  }

  broker_options opts_;
  std::optional<harness> h_;
};

queue_spec by_account(std::string name = "accounts") {
  return queue_spec(std::move(name)).ordered_by({key::header("account")});
}

// -- R1-R3: queues, specs and messages survive ------------------------------------------------

// R1-R3: a restart brings back every queue with its spec (the summary, and the full definition:
// creating it again with the same spec returns it), and every enqueued message with its id,
// headers and body; each group comes back in arrival order, unordered messages come back too.
TEST_F(recovery, a_restart_keeps_every_queue_with_its_spec_and_every_message_in_group_order) {
  auto& h = boot();
  std::vector<queue_spec> specs{
      by_account().lease(7s).max_attempts(4), queue_spec("plain").throttle({}, 100.0, 100),
      queue_spec("audit").ordered().delivery(delivery_durability::durable).sync_writes(false),
      queue_spec("lanes")
          .ordered_by({key::fairness_key()})
          .when_ordering_key_missing(missing_ordering_key::keyless_lane)};
  std::map<std::string, std::string> summaries;
  for (const auto& s : specs) {
    make(s);
    summaries[s.name()] = summary(s.name());
  }
  auto accounts = lookup("accounts");
  auto ids =
      h.enqueue(accounts, {in_account("A1", "A"), in_account("B1", "B"), in_account("A2", "A"),
                           in_account("B2", "B"), in_account("A3", "A")});
  ASSERT_TRUE(ids.ok());
  auto plain_ids =
      h.enqueue(lookup("plain"), {msg("m1", hdrs({{"x", "1"}})), msg("m2"), msg("m3")});
  ASSERT_TRUE(plain_ids.ok());
  ASSERT_TRUE(h.enqueue(lookup("audit"), {msg("x1"), msg("x2")}).ok());

  EXPECT_EQ(restart(), 4u);
  EXPECT_EQ(names(), (strings{"accounts", "audit", "lanes", "plain"}));
  for (const auto& s : specs) {
    EXPECT_EQ(summary(s.name()), summaries[s.name()]);
    auto again = h.create_flagged(s);
    ASSERT_TRUE(again.ok()) << s.name() << ": " << to_string(again.err());
    EXPECT_FALSE(again.value().second) << s.name() << " came back with the same definition";
    EXPECT_EQ(again.value().first, lookup(s.name()));
  }

  accounts = lookup("accounts");
  auto plain = lookup("plain");
  auto unordered = drain(plain);
  EXPECT_EQ(bodies(unordered), (strings{"m1", "m2", "m3"})) << "not held by the reclaim grace";
  ASSERT_EQ(unordered.size(), 3u);
  EXPECT_EQ(unordered[0].msg.id, plain_ids.value()[0]);
  EXPECT_EQ(unordered[0].msg.headers, hdrs({{"x", "1"}}));
  EXPECT_EQ(bodies(drain(lookup("audit"))), (strings{"x1", "x2"}));

  h.advance(limits::reclaim_grace_default);  // fast delivery holds recovered group heads
  auto heads = take(h, accounts, 10);
  ASSERT_EQ(bodies(heads), (strings{"A1", "B1"}));
  EXPECT_EQ(heads[0].msg.id, ids.value()[0]);
  EXPECT_EQ(heads[0].msg.attempts, 1u);
  EXPECT_EQ(heads[0].deadline, h.now() + 7s) << "the queue's default lease survived";
  for (const auto& d : heads) ASSERT_TRUE(h.ack(accounts, d.lease).ok());
  auto rest = drain(accounts);
  EXPECT_EQ(bodies_in(rest, "A"), (strings{"A2", "A3"}));
  EXPECT_EQ(bodies_in(rest, "B"), (strings{"B2"}));
  EXPECT_EQ(rest.size(), 3u);
}

// docs/api.md "Change a queue's settings": an update is stored before it is answered, so a
// restart finds the new settings; a create must then name them (the old ones are a conflict).
TEST_F(recovery, updated_settings_are_stored_and_survive_a_restart) {
  auto& h = boot();
  make(by_account().lease(7s));
  auto up = h.ask<queue_spec>(h.brk().admin(), update_atom_v, std::string{"accounts"},
                              std::string{R"({"lease_ms": 2000, "max_attempts": 2})"});
  ASSERT_TRUE(up.ok()) << to_string(up.err());
  EXPECT_EQ(up.value().lease_duration(), duration{2s});
  EXPECT_EQ(restart(), 1u);
  auto accounts = lookup("accounts");
  ASSERT_TRUE(h.enqueue(accounts, {in_account("A1", "A")}).ok());
  auto d = take(h, accounts, 1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].deadline, h.now() + 2s) << "the updated lease came back";
  auto old = h.create_flagged(by_account().lease(7s));
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.err().code, errc::spec_conflict);
  auto same = h.create_flagged(by_account().lease(2s).max_attempts(2));
  ASSERT_TRUE(same.ok()) << to_string(same.err());
  EXPECT_FALSE(same.value().second);
}

// Retention (docs/api.md "Retention") set in place is stored with the queue and comes back.
TEST_F(recovery, updated_retention_is_stored_and_survives_a_restart) {
  auto& h = boot();
  make(by_account());
  auto up = h.ask<queue_spec>(h.brk().admin(), update_atom_v, std::string{"accounts"},
                              std::string{R"({"retention_ms": 60000, "on_expiry": "drop",
                      "dead_letter_retention_ms": 3600000})"});
  ASSERT_TRUE(up.ok()) << to_string(up.err());
  EXPECT_EQ(up.value().retention_rule().max_age, std::optional<duration>{60s});
  EXPECT_EQ(restart(), 1u);
  auto old = h.create_flagged(by_account());
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.err().code, errc::spec_conflict);
  EXPECT_NE(old.err().message.find("retention_ms (existing 60000, requested none)"),
            std::string::npos)
      << old.err().message;
  auto same = h.create_flagged(by_account().retention(60s, expiry_action::drop, 1h));
  ASSERT_TRUE(same.ok()) << to_string(same.err());
  EXPECT_FALSE(same.value().second) << "the stored spec has the updated retention";
}

// -- R3, R5, R8: acks, dead letters, numbering ------------------------------------------------

// R3, R5, R8: acked messages do not come back; dead letters do (with reason and time) and can be
// redriven; message ids continue after the restart (never reused); `recovered` counts the live
// messages found in the store and the backlog is right.
TEST_F(recovery, acked_messages_stay_gone_dead_letters_come_back_and_ids_continue) {
  auto& h = boot(with_grace(0s));
  auto q = make(by_account());
  auto plain = make(queue_spec("plain"));
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B"),
                           in_account("A3", "A")});
  ASSERT_TRUE(ids.ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"A1", "B1"}));
  advance_to(h, 1s);
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  ASSERT_TRUE(h.nack(q, first[1].lease, 0s, /*dead=*/true).ok());
  auto m1_id = put(h, plain, msg("m1"));
  auto m2_id = put(h, plain, msg("m2"));
  ASSERT_TRUE(h.ack(plain, take_one(h, plain).lease).ok());
  advance_to(h, 2s);

  EXPECT_EQ(restart(), 2u);
  q = lookup("accounts");
  plain = lookup("plain");
  auto s = stats_of(h, q);
  EXPECT_EQ(s.recovered, 2u) << "A2 and A3; A1 was acked, B1 is a dead letter";
  EXPECT_EQ(s.backlog, 2u);
  EXPECT_EQ(s.dead_letters, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(stats_of(h, plain).recovered, 1u);
  EXPECT_EQ(stats_of(h, plain).backlog, 1u);

  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].msg.id, ids.value()[2]);
  EXPECT_EQ(dl[0].msg.body, "B1");
  EXPECT_EQ(dl[0].msg.attempts, 1u);
  EXPECT_EQ(dl[0].reason, dead_letter_reason::requested);
  EXPECT_EQ(dl[0].at, at(1s));

  auto a4 = put(h, q, in_account("A4", "A"));
  auto m3 = put(h, plain, msg("m3"));
  std::set<message_id> before{ids.value().begin(), ids.value().end()};
  EXPECT_GT(a4, *before.rbegin()) << "ids continue after the restart";
  EXPECT_EQ(before.count(a4), 0u);
  EXPECT_GT(m3, m2_id);
  EXPECT_NE(m3, m1_id);
  EXPECT_EQ(stats_of(h, q).backlog, 3u);

  auto got = drain(q);
  EXPECT_EQ(bodies(got), (strings{"A2", "A3", "A4"})) << "A1 was acked before the crash";
  EXPECT_EQ(stats_of(h, q).backlog, 0u);
  EXPECT_EQ(bodies(drain(plain)), (strings{"m2", "m3"}));

  auto n = h.redrive(q, {ids.value()[2]});
  ASSERT_TRUE(n.ok()) << to_string(n.err());
  EXPECT_EQ(n.value(), 1u);
  EXPECT_EQ(stats_of(h, q).backlog, 1u);
  auto b1 = take_one(h, q);
  EXPECT_EQ(b1.msg.body, "B1");
  EXPECT_EQ(b1.msg.id, ids.value()[2]);
  EXPECT_GT(b1.msg.seq, got.back().msg.seq) << "a redrive after a restart is a new arrival";
  ASSERT_TRUE(h.ack(q, b1.lease).ok());
  EXPECT_TRUE(dead(q).empty());
  EXPECT_EQ(stats_of(h, q).backlog, 0u);
}

// -- R3: attempts and not-before times --------------------------------------------------------

// R3, O6: a nack's retry_after survives a restart: the head is not delivered before its
// not-before time, its next delivery is attempt 2, and the group stays held until then; with
// fast and with durable delivery.
TEST_F(recovery, a_retry_after_and_the_attempt_count_survive_a_restart) {
  for (auto mode : {delivery_durability::fast, delivery_durability::durable}) {
    SCOPED_TRACE(to_string(mode));
    auto& h = boot(with_grace(1s));  // the grace ends (t = 3 s) long before the retry
    auto q = make(by_account().delivery(mode));
    ASSERT_TRUE(
        h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B")}).ok());
    auto first = take(h, q, 10);
    ASSERT_EQ(bodies(first), (strings{"A1", "B1"}));
    ASSERT_TRUE(h.ack(q, first[1].lease).ok());
    ASSERT_TRUE(h.nack(q, first[0].lease, 10s).ok());
    advance_to(h, 2s);
    EXPECT_EQ(restart(), 1u);
    q = lookup("accounts");
    advance_to(h, 9999ms);
    EXPECT_TRUE(take(h, q, 10).empty()) << "A1 not before t = 10 s, A2 behind it";
    advance_to(h, 10s);
    auto again = take(h, q, 10);
    ASSERT_EQ(bodies(again), (strings{"A1"}));
    EXPECT_EQ(again[0].msg.attempts, 2u);
    EXPECT_EQ(again[0].lease.attempt, 2u);
    EXPECT_EQ(again[0].msg.not_before, at(10s));
    ASSERT_TRUE(h.ack(q, again[0].lease).ok());
    EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
  }
}

// R3, O7: max_attempts counts the attempts of both broker runs: a message with two failed
// attempts before the crash is dead-lettered at its third (max_attempts 3), ordered and
// unordered alike.
TEST_F(recovery, max_attempts_counts_attempts_from_before_the_restart) {
  auto& h = boot(with_grace(0s));
  auto q = make(by_account().max_attempts(3).lease(1s));
  auto plain = make(queue_spec("plain").max_attempts(2).lease(1s));
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")});
  ASSERT_TRUE(ids.ok());
  auto m1_id = put(h, plain, msg("m1"));
  auto a = take_one(h, q);  // attempt 1: nacked
  ASSERT_EQ(a.msg.body, "A1");
  ASSERT_TRUE(h.nack(q, a.lease).ok());
  a = take_one(h, q);  // attempt 2: its lease expires
  EXPECT_EQ(a.msg.attempts, 2u);
  auto m = take_one(h, plain);  // attempt 1: nacked
  ASSERT_TRUE(h.nack(plain, m.lease).ok());
  advance_to(h, 1s);
  ASSERT_EQ(stats_of(h, q).lease_expired, 1u);

  EXPECT_EQ(restart(), 2u);
  q = lookup("accounts");
  plain = lookup("plain");
  a = take_one(h, q);
  ASSERT_EQ(a.msg.body, "A1");
  EXPECT_EQ(a.msg.attempts, 3u) << "the attempts from before the restart count";
  ASSERT_TRUE(h.nack(q, a.lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"})) << "A1 used its last attempt";
  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].msg.id, ids.value()[0]);
  EXPECT_EQ(dl[0].msg.attempts, 3u);
  EXPECT_EQ(dl[0].reason, dead_letter_reason::max_attempts);

  m = take_one(h, plain);
  EXPECT_EQ(m.msg.id, m1_id);
  EXPECT_EQ(m.msg.attempts, 2u);
  ASSERT_TRUE(h.nack(plain, m.lease).ok());
  EXPECT_TRUE(take(h, plain, 10).empty());
  auto pdl = dead(plain);
  ASSERT_EQ(pdl.size(), 1u);
  EXPECT_EQ(pdl[0].msg.id, m1_id);
  EXPECT_EQ(pdl[0].reason, dead_letter_reason::max_attempts);
}

// -- R3: enqueue delays -----------------------------------------------------------------------

// R3, O10: an enqueue delay counts from enqueued_at, not from the restart: a message enqueued at
// t = 0 with a 10 s delay, restarted at t = 3 s, is delivered at t = 10 s (not before, and not
// at 13 s), ordered and unordered.
TEST_F(recovery, an_enqueue_delay_counts_from_enqueued_at_across_a_restart) {
  auto& h = boot(with_grace(1s));  // the grace ends at t = 4 s, before the delay
  auto q = make(by_account());
  auto plain = make(queue_spec("plain"));
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A", 10s), in_account("A2", "A"), in_account("B1", "B")})
          .ok());
  ASSERT_TRUE(h.enqueue(plain, {msg("m1", {}, {}, 10s), msg("m2")}).ok());
  ASSERT_TRUE(h.ack(q, take_one(h, q).lease).ok());          // B1
  ASSERT_TRUE(h.ack(plain, take_one(h, plain).lease).ok());  // m2
  advance_to(h, 3s);
  EXPECT_EQ(restart(), 2u);
  q = lookup("accounts");
  plain = lookup("plain");
  advance_to(h, 9999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  EXPECT_TRUE(take(h, plain, 10).empty());
  advance_to(h, 10s);
  auto a1 = take(h, q, 10);
  ASSERT_EQ(bodies(a1), (strings{"A1"}));
  EXPECT_EQ(a1[0].msg.enqueued_at, at(0s));
  EXPECT_EQ(a1[0].msg.delay_until, at(10s));
  EXPECT_EQ(bodies(take(h, plain, 10)), (strings{"m1"}));
}

// -- R4: memory follows groups (persistence.md P8, P9) ----------------------------------------

/// 100 messages for account A with 4 each for B, C and D among them; the expected order per key.
std::map<std::string, strings> fill_windowed(harness& h, const queue_api& q) {
  std::map<std::string, strings> expected;
  std::vector<outgoing_message> batch;
  for (int i = 0; i < 100; ++i) {
    auto a = "A" + std::to_string(i);
    batch.push_back(in_account(a, "A"));
    expected["A"].push_back(a);
    if (i % 25 == 0)
      for (std::string k : {"B", "C", "D"}) {
        auto body = k + std::to_string(i / 25);
        batch.push_back(in_account(body, k));
        expected["" + k].push_back(body);
      }
  }
  EXPECT_TRUE(h.enqueue(q, std::move(batch)).ok());
  return expected;
}

// P8, P9: a group keeps only its window in memory, and reads the rest back from the store in order:
// every message is delivered once, in arrival order per key; groups() reports the full backlog.
// The queue counts the reads: A's 96 messages beyond its window, in reads of at most a window.
TEST_F(recovery, a_group_larger_than_its_window_is_delivered_in_order_and_reports_its_backlog) {
  auto& h = boot(windowed(4));
  auto q = make(by_account());
  auto expected = fill_windowed(h, q);
  auto sizes = backlogs(q);
  EXPECT_EQ(sizes["A"], 100u) << "the full backlog, not the window of 4";
  EXPECT_EQ(sizes["B"], 4u);
  EXPECT_EQ(stats_of(h, q).window_reads, 0u) << "nothing is read back before a window drains";
  auto got = drain(q);
  for (const auto& [key, order] : expected) EXPECT_EQ(bodies_in(got, key), order) << key;
  EXPECT_EQ(got.size(), 112u);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(s.window_read_messages, 96u) << "A's messages beyond its window, each read once";
  EXPECT_GE(s.window_reads, 24u) << "a read returns at most the window (4)";
  EXPECT_LE(s.window_reads, 96u);
}

// R4: the same across a restart in the middle: the recovered group reads its window from the
// store, counts the rest, and carries on in order without losing or repeating a message.
TEST_F(recovery, a_group_larger_than_its_window_carries_on_in_order_after_a_restart) {
  auto& h = boot(windowed(4));
  auto q = make(by_account());
  auto expected = fill_windowed(h, q);
  std::vector<delivery> got;
  while (bodies_in(got, "A").size() < 40) {
    auto ds = take(h, q, 10);
    ASSERT_FALSE(ds.empty());
    for (auto& d : ds) {
      ASSERT_TRUE(h.ack(q, d.lease).ok());
      got.push_back(std::move(d));
    }
  }
  ASSERT_EQ(bodies_in(got, "B").size(), 4u) << "the small groups are done";

  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  EXPECT_EQ(stats_of(h, q).recovered, 60u);
  auto sizes = backlogs(q);
  EXPECT_EQ(sizes["A"], 60u) << "the full backlog, not the window of 4";
  EXPECT_EQ(sizes.count("B"), 0u);
  for (auto& d : drain(q)) got.push_back(std::move(d));
  for (const auto& [key, order] : expected) EXPECT_EQ(bodies_in(got, key), order) << key;
  EXPECT_EQ(got.size(), 112u);
  EXPECT_EQ(stats_of(h, q).backlog, 0u);
}

// P8 with the window budget: while all windows together hold less than the budget, a group takes
// its arrivals in up to group_window_max and reads nothing back; what groups hold is charged to
// the budget and given back as they drain.
TEST_F(recovery, a_group_grows_past_its_window_while_the_budget_has_room) {
  auto& h = boot(growing(1 << 20));
  auto q = make(by_account());
  auto expected = fill_windowed(h, q);
  EXPECT_GE(stats_of(h, q).window_bytes, 112 * sizeof(held_message)) << "all 112 messages are held";
  auto got = drain(q);
  for (const auto& [key, order] : expected) EXPECT_EQ(bodies_in(got, key), order) << key;
  EXPECT_EQ(got.size(), 112u);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.window_read_messages, 0u) << "A's 100 messages fit its grown window";
  EXPECT_EQ(s.window_bytes, 0u) << "every group gave its memory back";
}

// R4 with the window budget after a restart: the recovered deep group holds the first
// group_window messages and reads the rest back up to group_window_max at a time while the budget
// has room: one or two reads, not one per half window.
TEST_F(recovery, a_recovered_deep_group_reads_back_in_few_reads_while_the_budget_has_room) {
  auto& h = boot(growing(1 << 20));
  auto q = make(by_account());
  auto expected = fill_windowed(h, q);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  auto got = drain(q);
  for (const auto& [key, order] : expected) EXPECT_EQ(bodies_in(got, key), order) << key;
  EXPECT_EQ(got.size(), 112u);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.window_read_messages, 96u) << "A's messages beyond its recovered window of 4";
  EXPECT_GE(s.window_reads, 1u);
  EXPECT_LE(s.window_reads, 2u) << "read back up to 200 at a time, not 4";
}

// R4: the budget is the broker's, split evenly over its shards (one per queue): a queue alone
// may hold the whole of it; once three more queues exist, each holds a quarter, and a deep group
// grows only while its shard's share has room, reading the rest back in order.
TEST_F(recovery, the_window_budget_is_split_evenly_over_the_queues) {
  auto& h = boot(growing(32 << 10));  // more than A's 100 messages hold, less than 4 times it
  auto q = make(by_account());
  auto expected = fill_windowed(h, q);
  auto got = drain(q);
  for (const auto& [key, order] : expected) EXPECT_EQ(bodies_in(got, key), order) << key;
  EXPECT_EQ(stats_of(h, q).window_read_messages, 0u) << "alone, the queue had the whole budget";
  for (const char* other : {"b", "c", "d"}) make(queue_spec(other));
  h.run();
  expected = fill_windowed(h, q);
  got = drain(q);
  for (const auto& [key, order] : expected) EXPECT_EQ(bodies_in(got, key), order) << key;
  EXPECT_GT(stats_of(h, q).window_read_messages, 0u) << "a quarter of it: A read back";
  EXPECT_EQ(stats_of(h, q).window_bytes, 0u) << "every group gave its memory back";
}

// -- R6: fast delivery and the reclaim grace --------------------------------------------------

// R6 (a): fast delivery keeps leases in memory only; within the reclaim grace the old holder's
// token still works (extend, ack, nack), and the group moves on from there.
TEST_F(recovery, within_the_reclaim_grace_the_old_lease_holder_can_extend_and_ack) {
  auto& h = boot(with_grace(5s));
  auto q = make(by_account());
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B"),
                            in_account("B2", "B")})
                  .ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"A1", "B1"}));
  advance_to(h, 1s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  EXPECT_TRUE(take(h, q, 10).empty()) << "both heads wait for their holders";

  auto moved = h.extend(q, first[0].lease, 10s);
  ASSERT_TRUE(moved.ok()) << to_string(moved.err());
  EXPECT_EQ(moved.value(), at(11s));
  auto acked = h.ack(q, first[0].lease);
  ASSERT_TRUE(acked.ok()) << acked.err().message;
  auto a2 = take(h, q, 10);
  EXPECT_EQ(bodies(a2), (strings{"A2"})) << "group A moves on; B1 still waits for its holder";

  ASSERT_TRUE(h.nack(q, first[1].lease).ok()) << "B1's holder gives it back";
  auto b1 = take(h, q, 10);
  ASSERT_EQ(bodies(b1), (strings{"B1"}));
  EXPECT_EQ(b1[0].msg.attempts, 2u) << "the reclaimed attempt counts";
  EXPECT_EQ(b1[0].lease.attempt, 2u);

  advance_to(h, 6s);  // the grace is over: nothing reclaimed comes back
  EXPECT_TRUE(take(h, q, 10).empty());
  auto late = h.ack(q, first[0].lease);
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(is_stale_lease(late.err())) << to_string(late.err());
}

// R6: while a recovered head waits out the reclaim grace, the groups listing says so (state
// reclaim_grace, until the grace's end), also among the blocked groups, instead of `ready`; once
// the grace is over the group is ready and no longer blocked.
TEST_F(recovery, a_group_waiting_out_the_reclaim_grace_reports_it_and_its_end) {
  auto& h = boot(with_grace(5s));
  auto q = make(by_account());
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("B1", "B")}).ok());
  ASSERT_EQ(take(h, q, 1).size(), 1u);  // the other head was never delivered: held all the same
  advance_to(h, 1s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  auto blocked = h.groups(q, true);
  ASSERT_TRUE(blocked.ok());
  ASSERT_EQ(blocked.value().size(), 2u);
  for (const auto& g : blocked.value()) {
    EXPECT_EQ(g.state, group_status::reclaim_grace) << g.key;
    EXPECT_EQ(g.until, at(6s)) << g.key;
  }
  advance_to(h, 7s);
  auto after = h.groups(q, false);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after.value().size(), 2u);
  for (const auto& g : after.value()) EXPECT_EQ(g.state, group_status::ready) << g.key;
  EXPECT_TRUE(h.groups(q, true).value().empty());
}

// R6 (b, d): if nobody reclaims, every recovered head of an ordered group is held until the
// grace ends (the one in flight at the crash and one that was never delivered alike), while
// unordered messages are delivered at once (their fast leases are not kept). After the grace the
// head goes out again as attempt 1: the attempt lost with the crash was never stored. The old
// token is then refused and releases nothing.
TEST_F(recovery, when_nobody_reclaims_the_recovered_heads_wait_out_the_grace) {
  auto& h = boot(with_grace(5s));
  auto q = make(by_account());
  auto plain = make(queue_spec("plain"));
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q);
  ASSERT_EQ(a1.msg.body, "A1");
  put(h, q, in_account("B1", "B"));  // never delivered before the crash
  ASSERT_TRUE(h.enqueue(plain, {msg("m1"), msg("m2")}).ok());
  auto m1 = take_one(h, plain);
  advance_to(h, 1s);
  EXPECT_EQ(restart(), 2u);
  q = lookup("accounts");
  plain = lookup("plain");

  EXPECT_TRUE(take(h, q, 10).empty()) << "A1 and B1 are held";
  auto unordered = take(h, plain, 10);
  EXPECT_EQ(bodies(unordered), (strings{"m1", "m2"})) << "unordered messages are not held";
  ASSERT_EQ(unordered.size(), 2u);
  EXPECT_EQ(unordered[0].msg.attempts, 1u);
  auto old_m1 = h.ack(plain, m1.lease);
  ASSERT_FALSE(old_m1.ok());
  EXPECT_EQ(old_m1.err().code, errc::lease_not_found) << "unordered fast leases are not kept";

  advance_to(h, 5999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "the grace runs until t = 6 s";
  advance_to(h, 6s);
  auto heads = take(h, q, 10);
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].msg.id, a1.msg.id);
  EXPECT_EQ(heads[0].ordering_key, "A");
  EXPECT_EQ(heads[1].ordering_key, "B");
  EXPECT_EQ(heads[0].msg.attempts, 1u);
  EXPECT_EQ(heads[0].lease.attempt, 1u);
  EXPECT_NE(heads[0].lease, a1.lease);
  // The released head is the stored message, payload and all.
  EXPECT_EQ(bodies(heads), (strings{"A1", "B1"}));
  EXPECT_EQ(heads[0].msg.headers, hdrs({{"account", "A"}}));

  auto old = h.ack(q, a1.lease);
  ASSERT_FALSE(old.ok());
  EXPECT_TRUE(is_stale_lease(old.err())) << to_string(old.err());
  EXPECT_TRUE(take(h, q, 10).empty()) << "the refused token released nothing";
  EXPECT_EQ(stats_of(h, q).in_flight, 2u);
  ASSERT_TRUE(h.ack(q, heads[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

// R6 (c): during the grace a token this broker did not issue (wrong nonce, wrong attempt) is
// refused and does not release the held head; the genuine token still works afterwards.
TEST_F(recovery, a_forged_token_cannot_reclaim_a_held_head) {
  auto& h = boot(with_grace(5s));
  auto q = make(by_account());
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q);
  advance_to(h, 1s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");

  auto wrong_nonce = a1.lease;
  wrong_nonce.nonce ^= 1;
  auto r = h.ack(q, wrong_nonce);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::lease_not_found);
  auto wrong_attempt = a1.lease;
  wrong_attempt.attempt = 2;
  auto n = h.nack(q, wrong_attempt);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.err().code, errc::lease_not_found);
  EXPECT_TRUE(take(h, q, 10).empty()) << "still held for the genuine holder";
  EXPECT_EQ(stats_of(h, q).acked, 0u);

  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

// R6 (e): with reclaim_grace 0 the recovered heads are delivered at once, and the old token is
// refused.
TEST_F(recovery, with_no_reclaim_grace_recovered_heads_are_delivered_at_once) {
  auto& h = boot(with_grace(0s));
  auto q = make(by_account());
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q);
  advance_to(h, 1s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A1"}));
  EXPECT_EQ(again[0].msg.attempts, 1u);
  auto old = h.ack(q, a1.lease);
  ASSERT_FALSE(old.ok());
  EXPECT_TRUE(is_stale_lease(old.err())) << to_string(old.err());
  ASSERT_TRUE(h.ack(q, again[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

// -- R7: durable delivery ---------------------------------------------------------------------

// R7: a durable lease is committed before delivery and honoured after a restart until its
// deadline: the head is not redelivered earlier, other groups are not held, and if nobody acks
// the head comes back as attempt 2 at the deadline; the old token is then expired.
TEST_F(recovery, a_durable_lease_is_honoured_after_a_restart_until_its_deadline) {
  auto& h = boot();
  auto q = make(by_account().delivery(delivery_durability::durable));
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B")}).ok());
  auto a1 = take_one(h, q, 30s);
  ASSERT_EQ(a1.msg.body, "A1");
  advance_to(h, 5s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  auto b1 = take(h, q, 10);
  ASSERT_EQ(bodies(b1), (strings{"B1"})) << "durable delivery holds no group for a grace";
  ASSERT_TRUE(h.ack(q, b1[0].lease).ok());
  EXPECT_EQ(stats_of(h, q).in_flight, 1u) << "A1's lease was restored";
  advance_to(h, 29999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "A1's lease runs until t = 30 s";
  advance_to(h, 30s);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A1"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
  EXPECT_EQ(again[0].lease.attempt, 2u);
  auto old = h.ack(q, a1.lease);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.err().code, errc::lease_expired);
  ASSERT_TRUE(h.ack(q, again[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

// R7, O11: after a restart the old durable token still extends (and the new deadline is
// committed: it survives a second restart) and acks; the acked head never comes back.
TEST_F(recovery, an_old_durable_token_extends_and_acks_after_a_restart) {
  auto& h = boot();
  auto q = make(by_account().delivery(delivery_durability::durable));
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q, 30s);
  advance_to(h, 5s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  auto moved = h.extend(q, a1.lease, 60s);
  ASSERT_TRUE(moved.ok()) << to_string(moved.err());
  EXPECT_EQ(moved.value(), at(65s));
  advance_to(h, 10s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  advance_to(h, 64999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "the extended deadline (t = 65 s) was committed";
  auto acked = h.ack(q, a1.lease);
  ASSERT_TRUE(acked.ok()) << acked.err().message;
  auto a2 = take(h, q, 10);
  ASSERT_EQ(bodies(a2), (strings{"A2"}));
  EXPECT_EQ(a2[0].msg.attempts, 1u);
  advance_to(h, 70s);
  EXPECT_TRUE(take(h, q, 10).empty()) << "A1 never comes back";
  EXPECT_EQ(stats_of(h, q).backlog, 1u);
}

// R7: unordered durable leases survive a restart likewise: no redelivery before the deadline,
// the old token acks, and an unacked message comes back as attempt 2 at its deadline.
TEST_F(recovery, unordered_durable_leases_are_honoured_after_a_restart) {
  auto& h = boot();
  auto q = make(queue_spec("plain").delivery(delivery_durability::durable));
  ASSERT_TRUE(h.enqueue(q, {msg("m1"), msg("m2"), msg("m3")}).ok());
  auto m1 = take_one(h, q, 30s);
  auto m2 = take_one(h, q, 30s);
  advance_to(h, 5s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("plain");
  auto m3 = take(h, q, 10);
  ASSERT_EQ(bodies(m3), (strings{"m3"})) << "m1 and m2 are still leased";
  ASSERT_TRUE(h.ack(q, m3[0].lease).ok());
  auto acked = h.ack(q, m2.lease);
  EXPECT_TRUE(acked.ok()) << acked.err().message;
  advance_to(h, 29999ms);
  EXPECT_TRUE(take(h, q, 10).empty());
  advance_to(h, 30s);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"m1"})) << "m2 was acked with its old token";
  EXPECT_EQ(again[0].msg.attempts, 2u);
  auto old = h.ack(q, m1.lease);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.err().code, errc::lease_expired);
}

// -- R2: the on_enqueue hook ------------------------------------------------------------------

// R2: a hook is code, not data: a queue created with one recovers without it and rejects
// enqueues (enqueue_rejected, naming the hook) until it is created again with the same spec and
// a hook; its stored messages stay deliverable meanwhile. Another spec is a spec_conflict.
TEST_F(recovery, a_queue_with_a_hook_recovers_without_it_until_it_is_created_again) {
  auto& h = boot(with_grace(0s));
  auto region_of = [](const message& m) -> result<std::vector<attribute>> {
    const auto* city = header_value(m.headers, "city");
    if (!city) return std::vector<attribute>{};
    return std::vector<attribute>{{"region", *city == "boston" ? "us" : "eu"}};
  };
  auto spec = queue_spec("geo").ordered_by({key::attribute("region")}).on_enqueue(region_of);
  auto q = make(spec);
  ASSERT_TRUE(h.enqueue(q, {msg("berlin", hdrs({{"city", "berlin"}})),
                            msg("boston", hdrs({{"city", "boston"}}))})
                  .ok());
  EXPECT_EQ(restart(), 1u);
  q = lookup("geo");

  auto r = h.enqueue(q, msg("munich", hdrs({{"city", "munich"}})));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::enqueue_rejected);
  EXPECT_NE(r.err().message.find("on_enqueue hook"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("'geo'"), std::string::npos) << r.err().message;
  EXPECT_EQ(stats_of(h, q).rejected, 1u);
  auto berlin = take(h, q, 10);
  ASSERT_EQ(bodies(berlin), (strings{"berlin", "boston"})) << "stored attributes still place them";
  EXPECT_EQ(berlin[0].ordering_key, "eu");
  ASSERT_TRUE(h.ack(q, berlin[0].lease).ok());

  auto other = h.create_flagged(
      queue_spec("geo").ordered_by({key::attribute("region")}).on_enqueue(region_of).lease(5s));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err().code, errc::spec_conflict);
  auto again = h.create_flagged(spec);
  ASSERT_TRUE(again.ok()) << to_string(again.err());
  EXPECT_FALSE(again.value().second) << "the existing queue, not a new one";
  EXPECT_EQ(again.value().first, q);
  ASSERT_TRUE(h.enqueue(q, msg("munich", hdrs({{"city", "munich"}}))).ok());
  auto munich = take(h, q, 10);
  ASSERT_EQ(bodies(munich), (strings{"munich"}));
  EXPECT_EQ(munich[0].msg.attributes, (std::vector<attribute>{{"region", "eu"}}));
}

// R2, O2: whether a queue has a hook is part of its definition, before and after a restart:
// creating a hooked queue again without a hook is a spec_conflict, not a silent success that
// leaves every enqueue rejected.
TEST_F(recovery, creating_a_hooked_queue_without_its_hook_is_a_conflict_after_a_restart_too) {
  auto& h = boot(with_grace(0s));
  auto screen = [](const message&) -> result<std::vector<attribute>> {
    return std::vector<attribute>{};
  };
  make(queue_spec("screened").on_enqueue(screen));
  auto before = h.create_flagged(queue_spec("screened"));
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.err().code, errc::spec_conflict);
  EXPECT_EQ(restart(), 1u);
  auto after = h.create_flagged(queue_spec("screened"));
  if (after.ok()) {
    auto r = h.enqueue(after.value().first, msg("x"));
    ADD_FAILURE() << "create without the hook returned the queue (created = "
                  << after.value().second
                  << "), and enqueue then gives: " << (r.ok() ? "ok" : to_string(r.err()));
    return;
  }
  EXPECT_EQ(after.err().code, errc::spec_conflict);
}

// -- Deleted queues ---------------------------------------------------------------------------

// Deleting a queue removes all its records: after a restart it is gone, and a queue created
// under the same name starts empty (no messages, dead letters or leases of its predecessor).
TEST_F(recovery, a_deleted_queue_stays_deleted_and_its_name_starts_empty) {
  auto& h = boot(with_grace(0s));
  auto q = make(by_account().delivery(delivery_durability::durable));
  ASSERT_TRUE(
      h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B")}).ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"A1", "B1"}));
  ASSERT_TRUE(h.nack(q, first[0].lease, 0s, /*dead=*/true).ok());  // a dead letter; B1 leased
  make(queue_spec("plain"));
  ASSERT_TRUE(drop("accounts").ok());

  EXPECT_EQ(restart(), 1u);
  EXPECT_EQ(names(), (strings{"plain"}));
  auto gone = h.lookup("accounts");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.err().code, errc::queue_not_found);

  auto fresh = h.create_flagged(queue_spec("accounts"));
  ASSERT_TRUE(fresh.ok()) << to_string(fresh.err());
  EXPECT_TRUE(fresh.value().second);
  q = fresh.value().first;
  auto s = stats_of(h, q);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(s.recovered, 0u);
  EXPECT_EQ(s.dead_letters, 0u);
  EXPECT_TRUE(take(h, q, 10).empty());
  put(h, q, msg("x1"));

  EXPECT_EQ(restart(), 2u);
  q = lookup("accounts");
  EXPECT_EQ(stats_of(h, q).recovered, 1u);
  EXPECT_TRUE(dead(q).empty());
  h.advance(60s);  // past any lease of the deleted incarnation
  EXPECT_EQ(bodies(drain(q)), (strings{"x1"}));
}

// -- Restarts in a row ------------------------------------------------------------------------

// A crash right after a recovery (before anything else happened) loses nothing: messages,
// dead letters, numbering, not-before times, attempts and durable leases all survive two
// restarts in a row.
TEST_F(recovery, two_restarts_in_a_row_keep_everything) {
  auto& h = boot();
  auto q = make(by_account());
  auto jobs = make(queue_spec("jobs").ordered().delivery(delivery_durability::durable));
  auto plain = make(queue_spec("plain"));
  auto ids = h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A"), in_account("A3", "A"),
                           in_account("B1", "B")});
  ASSERT_TRUE(ids.ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"A1", "B1"}));
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  ASSERT_TRUE(h.nack(q, first[1].lease, 0s, /*dead=*/true).ok());
  auto a2 = take_one(h, q);
  ASSERT_EQ(a2.msg.body, "A2");
  ASSERT_TRUE(h.nack(q, a2.lease, 20s).ok());
  ASSERT_TRUE(h.enqueue(jobs, {msg("j1"), msg("j2")}).ok());
  auto j1 = take_one(h, jobs, 60s);
  ASSERT_TRUE(h.enqueue(plain, {msg("m1"), msg("m2")}).ok());
  advance_to(h, 1s);

  EXPECT_EQ(restart(), 3u);
  EXPECT_EQ(restart(), 3u);
  q = lookup("accounts");
  jobs = lookup("jobs");
  plain = lookup("plain");
  EXPECT_EQ(stats_of(h, q).recovered, 2u);
  EXPECT_EQ(stats_of(h, jobs).recovered, 2u);
  EXPECT_EQ(stats_of(h, plain).recovered, 2u);
  auto dl = dead(q);
  ASSERT_EQ(dl.size(), 1u);
  EXPECT_EQ(dl[0].msg.body, "B1");
  auto a4 = put(h, q, in_account("A4", "A"));
  EXPECT_GT(a4, ids.value().back());

  EXPECT_EQ(bodies(drain(plain)), (strings{"m1", "m2"}));
  EXPECT_TRUE(take(h, jobs, 10).empty()) << "j1's durable lease runs until t = 60 s";
  auto acked = h.ack(jobs, j1.lease);
  ASSERT_TRUE(acked.ok()) << acked.err().message;
  EXPECT_EQ(bodies(drain(jobs)), (strings{"j2"}));

  advance_to(h, 19999ms);
  EXPECT_TRUE(take(h, q, 10).empty()) << "A2 retries at t = 20 s";
  advance_to(h, 20s);
  auto again = take(h, q, 10);
  ASSERT_EQ(bodies(again), (strings{"A2"}));
  EXPECT_EQ(again[0].msg.attempts, 2u);
  ASSERT_TRUE(h.ack(q, again[0].lease).ok());
  EXPECT_EQ(bodies(drain(q)), (strings{"A3", "A4"}));
  ASSERT_TRUE(h.redrive(q).ok());
  EXPECT_EQ(bodies(drain(q)), (strings{"B1"}));
}

// R6: a crash during the reclaim grace of an earlier crash does not take the old holder's
// claim away: its token, issued before the first crash, still reclaims the head within the grace
// of the second restart (docs/guarantees.md: a head runs twice only if its worker cannot reach
// the broker within the grace).
TEST_F(recovery, a_second_crash_during_the_grace_keeps_the_old_holder_s_claim) {
  auto& h = boot(with_grace(5s));
  auto q = make(by_account());
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q);
  advance_to(h, 1s);
  EXPECT_EQ(restart(), 1u);
  advance_to(h, 2s);
  EXPECT_EQ(restart(), 1u);
  q = lookup("accounts");
  EXPECT_TRUE(take(h, q, 10).empty()) << "A1 is held again";
  auto acked = h.ack(q, a1.lease);
  ASSERT_TRUE(acked.ok()) << acked.err().message;
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"A2"}));
}

}  // namespace
}  // namespace laneq
