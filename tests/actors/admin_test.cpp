// The admin and queue API on the real actors with simulated time (docs/api.md): spec validation,
// the queue registry, request limits and argument checks, the on_enqueue hook, exact stats, the
// group lifecycle and long-poll receives.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <tuple>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

class admin : public ::testing::Test {
 protected:
  queue_api make(queue_spec spec) { return test::make_queue(h, std::move(spec)); }
  admin_actor registry() { return h.brk().admin(); }
  result<queue_api> lookup(const std::string& name) { return h.lookup(name); }
  std::vector<std::string> list() {
    auto r = h.ask<std::vector<std::string>>(registry(), list_atom_v);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value() : std::vector<std::string>{};
  }
  result<queue_description> describe(const std::string& name) {
    return h.ask<queue_description>(registry(), describe_atom_v, name);
  }
  status drop(const std::string& name) {
    auto r = h.ask<caf::ok_atom>(registry(), drop_atom_v, name, true);  // force: whatever it holds
    if (!r) return r.err();
    return ok_t{};
  }
  /// Expects `r` to have failed with `code` and returns its message ("" otherwise).
  template <class T>
  std::string failure(const result<T>& r, errc code) {
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_EQ(r.err().code, code) << to_string(r.err());
    return r.err().message;
  }

  harness h;
};

// -- create_queue validation ----------------------------------------------------------------------

// create_queue validates the spec and reports every broken rule in one invalid_spec error, each
// naming the queue and the field, separated by "; "; nothing is created.
TEST_F(admin, create_queue_reports_every_broken_rule_naming_queue_and_field) {
  auto bad = h.create(queue_spec("bad/na/me").lease(0us).max_attempts(0));
  EXPECT_EQ(failure(bad, errc::invalid_spec),
            "queue 'bad/na/me': name: may hold at most one '/' (between tenant and queue); "
            "queue 'bad/na/me': lease_ms: must be between 1 and 43200000 ms; "
            "queue 'bad/na/me': max_attempts: must be between 1 and 1000");

  auto attr = h.create(queue_spec("geo").ordered_by({key::attribute("region")}));
  EXPECT_EQ(failure(attr, errc::invalid_spec),
            "queue 'geo': ordering.key[0]: attribute 'region' needs an on_enqueue hook to set it");

  auto policy =
      h.create(queue_spec("plain").when_ordering_key_missing(missing_ordering_key::unordered));
  EXPECT_EQ(failure(policy, errc::invalid_spec),
            "queue 'plain': ordering.when_key_missing: applies only to ordered_by(); this queue "
            "is ordering mode 'none'");

  auto throttle = h.create(queue_spec("slow").throttle({key::header("tenant")}, 0.0, 0));
  EXPECT_EQ(failure(throttle, errc::invalid_spec),
            "queue 'slow': throttles[0].rate_per_s: must be between 0.001 and 1000000; "
            "queue 'slow': throttles[0].burst: must be between 1 and 1000000");

  auto empty_key = h.create(queue_spec("empty").ordered_by({}));
  EXPECT_EQ(failure(empty_key, errc::invalid_spec),
            "queue 'empty': ordering.key: ordered_by() needs at least one component");

  EXPECT_TRUE(list().empty()) << "no broken spec created a queue";
}

// -- the registry ---------------------------------------------------------------------------------

// Queues can be looked up, listed and described by name; a deleted queue is gone
// (queue_not_found) and its name can be used again.
TEST_F(admin, a_queue_can_be_looked_up_listed_described_and_deleted) {
  auto alpha = make(queue_spec("alpha"));
  auto beta = make(queue_spec("beta").ordered_by({key::header("account")}));
  auto found = lookup("alpha");
  ASSERT_TRUE(found.ok()) << to_string(found.err());
  EXPECT_EQ(found.value(), alpha);
  EXPECT_EQ(list(), (strings{"alpha", "beta"}));

  put(h, alpha, msg("m1"));
  auto d = describe("alpha");
  ASSERT_TRUE(d.ok()) << to_string(d.err());
  EXPECT_EQ(d.value().summary, "queue 'alpha' ordering=none");
  EXPECT_EQ(d.value().stats.name, "alpha");
  EXPECT_EQ(d.value().stats.enqueued, 1u);
  EXPECT_EQ(d.value().stats.backlog, 1u);
  auto db = describe("beta");
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db.value().summary,
            "queue 'beta' ordering=key key=[header:account] when_key_missing=reject");

  ASSERT_TRUE(drop("alpha").ok());
  EXPECT_EQ(failure(lookup("alpha"), errc::queue_not_found), "no queue named 'alpha'");
  EXPECT_EQ(list(), (strings{"beta"}));
  EXPECT_EQ(failure(describe("alpha"), errc::queue_not_found), "no queue named 'alpha'");
  auto again = drop("alpha");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.err().code, errc::queue_not_found);
  auto beta_found = lookup("beta");
  ASSERT_TRUE(beta_found.ok());
  EXPECT_EQ(beta_found.value(), beta);

  auto reborn = h.create_flagged(queue_spec("alpha").ordered());
  ASSERT_TRUE(reborn.ok()) << to_string(reborn.err());
  EXPECT_TRUE(reborn.value().second) << "a deleted name is free again, with any spec";
  EXPECT_NE(reborn.value().first, alpha);
  EXPECT_EQ(stats_of(h, reborn.value().first).enqueued, 0u);
}

// A conflicting create names each setting that differs, with both values, and no other.
TEST_F(admin, spec_conflict_names_each_setting_that_differs) {
  make(queue_spec("jobs").lease(30s).max_attempts(5));
  auto settings = h.create(queue_spec("jobs").lease(60s).max_attempts(3));
  auto m = failure(settings, errc::spec_conflict);
  EXPECT_NE(m.find("queue 'jobs' exists with another spec"), std::string::npos) << m;
  EXPECT_NE(m.find("lease_ms (existing 30000, requested 60000)"), std::string::npos) << m;
  EXPECT_NE(m.find("max_attempts (existing 5, requested 3)"), std::string::npos) << m;
  for (const char* same : {"ordering", "throttles", "delivery_durability", "sync_writes",
                           "store_headers", "dedupe", "on_enqueue"})
    EXPECT_EQ(m.find(same), std::string::npos) << same << " is the same: " << m;
  auto ordering = h.create(queue_spec("jobs")
                               .ordered_by({key::header("account")})
                               .lease(30s)
                               .max_attempts(5)
                               .delivery(delivery_durability::durable));
  m = failure(ordering, errc::spec_conflict);
  EXPECT_NE(m.find("ordering.mode (existing none, requested key)"), std::string::npos) << m;
  EXPECT_NE(m.find("delivery_durability (existing fast, requested durable)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("the ordering key is fixed when a queue is created"), std::string::npos) << m;
  EXPECT_EQ(m.find("lease_ms"), std::string::npos) << m;
}

// docs/api.md "Change a queue's settings", in process: the requested spec's changeable settings
// apply to every shard before the answer; a fixed field is refused naming it.
TEST_F(admin, update_queue_changes_settings_on_every_shard_and_refuses_fixed_fields) {
  auto spec = [] { return queue_spec("jobs").ordered_by({key::header("account")}).sharded(2); };
  auto q = make(spec().lease(30s));
  auto up = h.ask<queue_spec>(registry(), update_atom_v, spec().lease(5s).max_attempts(7));
  ASSERT_TRUE(up.ok()) << to_string(up.err());
  EXPECT_EQ(up.value().attempts_max(), 7u);
  for (const char* account : {"A", "B", "C", "D"}) put(h, q, in_account("m", account));
  std::vector<delivery> ds;  // a receive takes from one shard at a time (rotation)
  for (int round = 0; round < 8 && ds.size() < 4; ++round)
    for (auto& d : take(h, q, 10)) ds.push_back(std::move(d));
  ASSERT_EQ(ds.size(), 4u);
  for (const auto& d : ds) EXPECT_EQ(d.deadline, h.now() + 5s) << "on both shards";
  auto d = describe("jobs");
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d.value().spec_json.find("\"lease_ms\":5000"), std::string::npos)
      << d.value().spec_json;
  auto fixed = h.ask<queue_spec>(registry(), update_atom_v, queue_spec("jobs").ordered().lease(5s));
  auto m = failure(fixed, errc::invalid_spec);
  EXPECT_NE(m.find("queue 'jobs': ordering.mode: is fixed once the queue exists"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("queue 'jobs': shards: is fixed"), std::string::npos) << m;
  auto missing =
      h.ask<queue_spec>(registry(), update_atom_v, std::string{"nope"}, std::string{"{}"});
  failure(missing, errc::queue_not_found);
  auto bad = h.ask<queue_spec>(registry(), update_atom_v, std::string{"jobs"}, std::string{"{"});
  EXPECT_NE(failure(bad, errc::invalid_spec).find("not valid JSON"), std::string::npos);
}

/// Every key in the store, whatever its kind.
std::vector<std::string> every_key(harness& h) {
  auto entries = h.ask<std::vector<store_entry>>(h.store(), scan_atom_v, std::string{},
                                                 std::string(4, '\xFF'), limits::store_scan_max);
  EXPECT_TRUE(entries.ok());
  std::vector<std::string> out;
  if (entries.ok())
    for (auto& e : entries.value()) out.push_back(std::move(e.key));
  return out;
}

// A deleted queue leaves no record behind: its spec, counters, messages (ordered and unordered),
// dead letters, leases and dedupe entries all go in the delete's one write (codec::queue_ranges).
TEST_F(admin, a_deleted_queue_leaves_no_key_in_the_store) {
  auto q = make(queue_spec("doomed")
                    .ordered_by({key::header("account")})
                    .when_ordering_key_missing(missing_ordering_key::unordered)
                    .dedupe({key::header("idempotency-key")}, 60s)
                    .delivery(delivery_durability::durable));
  put(h, q, msg("A1", hdrs({{"account", "A"}, {"idempotency-key", "k1"}})));
  put(h, q, msg("B1", hdrs({{"account", "B"}, {"idempotency-key", "k2"}})));
  put(h, q, msg("none", hdrs({{"idempotency-key", "k3"}})));
  auto leased = take(h, q, 10);
  ASSERT_EQ(leased.size(), 3u);
  ASSERT_TRUE(h.nack(q, leased.at(1).lease, 0us, true).ok());
  std::set<char> kinds;
  for (const auto& k : every_key(h)) kinds.insert(k.at(0));
  EXPECT_EQ(kinds, (std::set<char>{'A', 'C', 'D', 'E', 'I', 'M', 'Q', 'U'}))
      << "every kind of queue record is there before the delete";
  ASSERT_TRUE(drop("doomed").ok());
  for (const auto& k : every_key(h))
    EXPECT_EQ(k.at(0), 'A') << "a key of the deleted queue is left: tag '" << k.at(0) << "'";
}

// Deleting a queue answers the long polls waiting on it with queue_deleted.
TEST_F(admin, deleting_a_queue_answers_its_waiting_long_polls_with_queue_deleted) {
  auto q = make(queue_spec("plain"));
  h.post(q, receive_atom_v, receive_request{1, 0, 5'000'000});
  h.run();
  EXPECT_EQ(stats_of(h, q).waiting_receives, 1u);
  h.post(registry(), drop_atom_v, std::string{"plain"});
  h.run();
  auto polled = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(polled.has_value()) << "the long poll is answered";
  EXPECT_EQ(failure(*polled, errc::queue_deleted), "queue 'plain' was deleted");
  auto dropped = h.collect<caf::ok_atom>();
  ASSERT_TRUE(dropped.has_value());
  EXPECT_TRUE(dropped->ok());
}

// A broker that shuts down answers the long polls waiting on its queues with unavailable: the
// queue still exists, and a client must not take the shutdown for a deletion.
TEST_F(admin, a_broker_shutdown_answers_waiting_long_polls_with_unavailable) {
  auto q = make(queue_spec("plain"));
  h.post(q, receive_atom_v, receive_request{1, 0, 5'000'000});
  h.run();
  EXPECT_EQ(stats_of(h, q).waiting_receives, 1u);
  caf::anon_send_exit(registry(), caf::exit_reason::user_shutdown);  // what ~broker sends
  h.run();
  auto polled = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(polled.has_value()) << "the long poll is answered";
  EXPECT_EQ(failure(*polled, errc::unavailable),
            "queue 'plain' stopped before answering: the broker is shutting down");
}

// -- request limits and arguments -----------------------------------------------------------------

// enqueue enforces the limits, naming the offending message and field; a failed batch enqueues
// nothing, and values exactly at a limit are accepted.
TEST_F(admin, enqueue_enforces_the_limits_naming_the_message_and_field) {
  auto q = make(queue_spec("plain"));
  auto big = h.enqueue(q, {msg("ok"), msg(std::string(limits::body_bytes_max + 1, 'x'))});
  EXPECT_EQ(failure(big, errc::limit_exceeded),
            "messages[1].body is 1048577 bytes, at most 1048576 allowed");

  auto empty = h.enqueue(q, std::vector<outgoing_message>{});
  EXPECT_EQ(failure(empty, errc::invalid_argument),
            "enqueue: a batch holds 1 to 1000 messages, got 0");

  std::vector<outgoing_message> too_many(limits::enqueue_batch_max + 1, msg("m"));
  EXPECT_EQ(failure(h.enqueue(q, std::move(too_many)), errc::invalid_argument),
            "enqueue: a batch holds 1 to 1000 messages, got 1001");

  auto late = h.enqueue(q, msg("late", {}, {}, limits::delay_max + 1us));
  EXPECT_EQ(failure(late, errc::invalid_argument),
            "messages[0].delay_ms must be between 0 and 1296000000");
  auto early = h.enqueue(q, msg("early", {}, {}, -1us));
  EXPECT_EQ(failure(early, errc::invalid_argument),
            "messages[0].delay_ms must be between 0 and 1296000000");

  auto nameless = h.enqueue(q, msg("h", hdrs({{"", "v"}})));
  EXPECT_EQ(failure(nameless, errc::invalid_argument),
            "messages[0].headers has an empty header name");

  auto s = stats_of(h, q);
  EXPECT_EQ(s.enqueued, 0u);
  EXPECT_EQ(s.rejected, 2u + 1001u + 1u + 1u + 1u);
  EXPECT_TRUE(take(h, q, 10).empty());

  auto at_limits = h.enqueue(
      q, {msg(std::string(limits::body_bytes_max, 'x')), msg("far", {}, {}, limits::delay_max)});
  ASSERT_TRUE(at_limits.ok()) << to_string(at_limits.err());
  EXPECT_EQ(at_limits.value(), (std::vector<message_id>{message_id{1}, message_id{2}}))
      << "failed batches used no ids";
}

// receive, ack, nack and extend check their arguments (invalid_argument naming the field).
TEST_F(admin, receive_ack_nack_and_extend_reject_bad_arguments) {
  auto q = make(queue_spec("plain"));
  put(h, q, msg("m1"));
  auto recv = [&](receive_request r) { return h.ask<std::vector<delivery>>(q, receive_atom_v, r); };
  EXPECT_EQ(failure(recv({0, 0, 0}), errc::invalid_argument),
            "receive: max must be between 1 and 1000");
  EXPECT_EQ(failure(recv({1001, 0, 0}), errc::invalid_argument),
            "receive: max must be between 1 and 1000");
  EXPECT_EQ(failure(recv({1, 500, 0}), errc::invalid_argument),
            "receive: lease_ms must be between 1 and 43200000");
  EXPECT_EQ(failure(recv({1, 0, 20'000'001}), errc::invalid_argument),
            "receive: wait_ms must be between 0 and 20000");
  EXPECT_EQ(failure(recv({1, 0, -1}), errc::invalid_argument),
            "receive: wait_ms must be between 0 and 20000");
  EXPECT_EQ(stats_of(h, q).delivered, 0u) << "a bad receive takes nothing";

  auto m1 = take_one(h, q);
  auto ack_none = h.ask<std::vector<lease_outcome>>(q, ack_atom_v, std::vector<lease_token>{});
  EXPECT_EQ(failure(ack_none, errc::invalid_argument),
            "ack: a batch holds 1 to 1000 leases, got 0");
  auto nack_late = h.nack(q, m1.lease, limits::retry_after_max + 1us);
  EXPECT_EQ(failure(nack_late, errc::invalid_argument),
            "nack: retry_after_ms must be between 0 and 43200000");
  auto extend_zero = h.extend(q, m1.lease, 0us);
  EXPECT_EQ(failure(extend_zero, errc::invalid_argument),
            "extend: lease_ms must be between 1 and 43200000");
  EXPECT_TRUE(h.ack(q, m1.lease).ok()) << "the failed calls left the lease alone";
}

// A batch ack answers only the leases that failed, each with its reason; the others are acked.
TEST_F(admin, a_batch_ack_reports_only_the_failed_leases) {
  auto q = make(queue_spec("accounts")
                    .ordered_by({key::header("account")})
                    .when_ordering_key_missing(missing_ordering_key::unordered));
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), msg("s1")}).ok());
  auto ds = take(h, q, 10);
  ASSERT_EQ(ds.size(), 2u);
  lease_token bogus{group_id{}, message_id{77}, 1, 5};
  auto r = h.ask<std::vector<lease_outcome>>(
      q, ack_atom_v, std::vector<lease_token>{ds[0].lease, bogus, ds[1].lease});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().size(), 1u);
  EXPECT_EQ(r.value()[0].lease, bogus);
  EXPECT_EQ(r.value()[0].err.code, errc::lease_not_found);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.acked, 2u);
  EXPECT_EQ(s.backlog, 0u);
}

// -- the on_enqueue hook --------------------------------------------------------------------------

// An attribute returned by the on_enqueue hook can be an ordering key component: messages of
// different cities in one region share a group.
TEST_F(admin, an_on_enqueue_attribute_can_be_an_ordering_key_component) {
  auto region_of = [](const message& m) -> result<std::vector<attribute>> {
    const auto* city = header_value(m.headers, "city");
    if (!city) return std::vector<attribute>{};
    return std::vector<attribute>{{"region", *city == "boston" ? "us" : "eu"}};
  };
  auto q = make(queue_spec("geo").ordered_by({key::attribute("region")}).on_enqueue(region_of));
  ASSERT_TRUE(h.enqueue(q, {msg("berlin", hdrs({{"city", "berlin"}})),
                            msg("boston", hdrs({{"city", "boston"}})),
                            msg("munich", hdrs({{"city", "munich"}}))})
                  .ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"berlin", "boston"})) << "munich is behind berlin (eu)";
  EXPECT_EQ(first[0].ordering_key, "eu");
  EXPECT_EQ(first[1].ordering_key, "us");
  EXPECT_EQ(first[0].msg.attributes, (std::vector<attribute>{{"region", "eu"}}));
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"munich"}));
  // A message for which the hook sets no region lacks the key: rejected by default.
  auto keyless = h.enqueue(q, msg("nowhere"));
  EXPECT_EQ(failure(keyless, errc::ordering_key_missing),
            "messages[0]: queue 'geo': the message has no attribute:region (ordering key "
            "component 0); the queue rejects messages without an ordering key");
}

// A hook rejection fails the enqueue with enqueue_rejected, naming the message and the hook's
// reason; nothing of the batch is enqueued.
TEST_F(admin, an_on_enqueue_rejection_enqueues_nothing) {
  auto screen = [](const message& m) -> result<std::vector<attribute>> {
    if (m.body == "bad") return error{errc::invalid_argument, "body 'bad' is not allowed"};
    return std::vector<attribute>{};
  };
  auto q = make(queue_spec("screened").on_enqueue(screen));
  auto r = h.enqueue(q, {msg("ok1"), msg("bad")});
  EXPECT_EQ(failure(r, errc::enqueue_rejected),
            "queue 'screened': messages[1] rejected by on_enqueue: body 'bad' is not allowed");
  EXPECT_TRUE(take(h, q, 10).empty());
  auto s = stats_of(h, q);
  EXPECT_EQ(s.enqueued, 0u);
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.backlog, 0u);
  auto ok = h.enqueue(q, msg("ok2"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value(), message_id{1}) << "the rejected batch used no id";
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"ok2"}));
}

// The hook sees the message with its id, seq and enqueued_at already set (queue_spec.hpp): the
// id and seq it will get if the batch is accepted.
TEST_F(admin, the_on_enqueue_hook_sees_the_id_seq_and_enqueued_at_the_message_gets) {
  using seen_t = std::vector<std::tuple<std::uint64_t, std::uint64_t, timestamp>>;
  auto seen = std::make_shared<seen_t>();
  auto hook = [seen](const message& m) -> result<std::vector<attribute>> {
    seen->emplace_back(m.id.value, m.seq.value, m.enqueued_at);
    if (m.body == "bad") return error{errc::invalid_argument, "no"};
    return std::vector<attribute>{};
  };
  auto q = make(queue_spec("seen").on_enqueue(hook));
  auto first = h.enqueue(q, {msg("x"), msg("y")});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value(), (std::vector<message_id>{message_id{1}, message_id{2}}));
  advance_to(h, 1s);
  EXPECT_FALSE(h.enqueue(q, {msg("z"), msg("bad")}).ok());
  auto w = h.enqueue(q, msg("w"));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.value(), message_id{3});
  EXPECT_EQ(
      *seen,
      (seen_t{{1, 1, at(0s)}, {2, 2, at(0s)}, {3, 3, at(1s)}, {4, 4, at(1s)}, {3, 3, at(1s)}}));
  auto ds = take(h, q, 10);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[2].msg.id, message_id{3});
  EXPECT_EQ(ds[2].msg.seq, message_seq{3});
}

// -- stats ----------------------------------------------------------------------------------------

// Every counter and gauge is exact after a scripted sequence of enqueues, deliveries, acks,
// nacks, a lease expiry, dead letters and a redrive.
TEST_F(admin, stats_counters_and_gauges_are_exact_after_a_scripted_sequence) {
  auto q = make(queue_spec("mixed")
                    .ordered_by({key::header("account")})
                    .when_ordering_key_missing(missing_ordering_key::unordered)
                    .max_attempts(2)
                    .lease(1s));
  EXPECT_FALSE(h.enqueue(q, msg("broken", hdrs({{"", "v"}}))).ok());
  auto ids = h.enqueue(
      q, {in_account("A1", "A"), in_account("A2", "A"), in_account("B1", "B"), msg("S1")});
  ASSERT_TRUE(ids.ok());
  auto b1_id = ids.value()[2];

  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"A1", "B1", "S1"}));
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  ASSERT_TRUE(h.nack(q, first[1].lease).ok());
  {
    auto s = stats_of(h, q);
    EXPECT_EQ(s.name, "mixed");
    EXPECT_EQ(s.enqueued, 4u);
    EXPECT_EQ(s.delivered, 3u);
    EXPECT_EQ(s.acked, 1u);
    EXPECT_EQ(s.nacked, 1u);
    EXPECT_EQ(s.lease_expired, 0u);
    EXPECT_EQ(s.dead_lettered, 0u);
    EXPECT_EQ(s.redriven, 0u);
    EXPECT_EQ(s.key_missing, 1u);
    EXPECT_EQ(s.rejected, 1u);
    EXPECT_EQ(s.backlog, 3u);
    EXPECT_EQ(s.in_flight, 1u);
    EXPECT_EQ(s.live_groups, 2u);
    EXPECT_EQ(s.dead_letters, 0u);
    EXPECT_EQ(s.waiting_receives, 0u);
  }

  advance_to(h, 1s);  // S1's lease expires
  auto second = take(h, q, 10);
  ASSERT_EQ(bodies(second), (strings{"A2", "B1", "S1"}));
  EXPECT_EQ(second[1].msg.attempts, 2u);
  EXPECT_EQ(second[2].msg.attempts, 2u);
  ASSERT_TRUE(h.nack(q, second[2].lease, 0s, /*dead=*/true).ok());  // S1: requested
  ASSERT_TRUE(h.nack(q, second[1].lease).ok());  // B1: its last attempt, max_attempts
  ASSERT_TRUE(h.ack(q, second[0].lease).ok());   // A2: group A goes idle
  auto n = h.redrive(q, {b1_id});
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n.value(), 1u);
  {
    auto s = stats_of(h, q);
    EXPECT_EQ(s.enqueued, 4u);
    EXPECT_EQ(s.delivered, 6u);
    EXPECT_EQ(s.acked, 2u);
    EXPECT_EQ(s.nacked, 3u);
    EXPECT_EQ(s.lease_expired, 1u);
    EXPECT_EQ(s.dead_lettered, 2u);
    EXPECT_EQ(s.redriven, 1u);
    EXPECT_EQ(s.key_missing, 1u);
    EXPECT_EQ(s.rejected, 1u);
    EXPECT_EQ(s.backlog, 1u) << "B1, redriven";
    EXPECT_EQ(s.in_flight, 0u);
    EXPECT_EQ(s.live_groups, 1u) << "a fresh group B for the redriven B1";
    EXPECT_EQ(s.dead_letters, 1u) << "S1";
  }

  auto b1 = take_one(h, q);
  EXPECT_EQ(b1.msg.id, b1_id);
  ASSERT_TRUE(h.ack(q, b1.lease).ok());
  auto s = stats_of(h, q);
  EXPECT_EQ(s.delivered, 7u);
  EXPECT_EQ(s.acked, 3u);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.live_groups, 0u);
}

// -- group lifecycle ------------------------------------------------------------------------------

// A group is gone once it is empty and idle (live_groups back to 0, not listed): a lightweight
// group inside its shard costs nothing once idle. A later message for the same key makes a fresh
// group (a new group id), and a lease of an earlier message is unknown to it.
TEST_F(admin, a_group_is_removed_when_idle_and_a_later_message_makes_a_fresh_group) {
  auto q = make(queue_spec("accounts").ordered_by({key::header("account")}));
  put(h, q, in_account("A1", "A"));
  EXPECT_EQ(stats_of(h, q).live_groups, 1u);
  auto a1 = take_one(h, q);
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  EXPECT_EQ(stats_of(h, q).live_groups, 0u);
  auto listed = h.groups(q, false);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed.value().empty());
  // The emptied group is kept for a moment for its key's next message (ordering.md, "Group
  // lifecycle"); then it goes.
  advance_to(h, limits::kept_group_for);

  put(h, q, in_account("A2", "A"));
  EXPECT_EQ(stats_of(h, q).live_groups, 1u);
  auto a2 = take_one(h, q);
  EXPECT_EQ(a2.msg.body, "A2");
  EXPECT_EQ(a2.ordering_key, a1.ordering_key);
  EXPECT_NE(a2.lease.group, a1.lease.group) << "a fresh group";
  auto stale = h.ack(q, a1.lease);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.err().code, errc::lease_not_found);
  ASSERT_TRUE(h.ack(q, a2.lease).ok());
  EXPECT_EQ(stats_of(h, q).live_groups, 0u);
  EXPECT_EQ(stats_of(h, q).acked, 2u);
}

// The number of CAF actors does not depend on the number of groups (docs/decisions/0009): a queue
// is one shard actor whether it has 10 live groups or many thousands, and deleting it ends that
// one actor. (The test coordinator's registry counts every running actor.)
TEST_F(admin, the_actor_count_stays_flat_as_groups_grow) {
  auto& registry_of = h.system().registry();
  const auto before = registry_of.running();
  auto q = make(queue_spec("accounts").ordered_by({key::header("account")}));
  h.run();
  EXPECT_EQ(registry_of.running(), before + 1) << "one shard actor";
#ifdef NDEBUG
  constexpr std::size_t groups = 1'000'000;
#else
  constexpr std::size_t groups = 10'000;  // sanitizers: slower, same point
#endif
  std::size_t made = 0;
  for (std::size_t want : {std::size_t{10}, groups}) {
    std::vector<outgoing_message> batch;
    for (; made < want; ++made) {
      batch.push_back(in_account("m", "acct-" + std::to_string(made)));
      if (batch.size() == limits::enqueue_batch_max || made + 1 == want) {
        ASSERT_TRUE(h.enqueue(q, std::move(batch)).ok());
        batch.clear();
      }
    }
    EXPECT_EQ(stats_of(h, q).live_groups, want);
    EXPECT_EQ(registry_of.running(), before + 1) << "still one actor with " << want << " groups";
  }
  ASSERT_TRUE(drop("accounts").ok());
  h.run();
  EXPECT_EQ(registry_of.running(), before) << "deleting the queue ended its one actor";
}

// -- long polls -----------------------------------------------------------------------------------

// A receive with wait_us waits for the first message: it is answered when one is enqueued.
TEST_F(admin, a_long_poll_returns_a_message_enqueued_while_it_waits) {
  auto q = make(queue_spec("plain"));
  h.post(q, receive_atom_v, receive_request{1, 0, 5'000'000});
  h.run();
  EXPECT_FALSE(h.collect<std::vector<delivery>>().has_value()) << "still waiting";
  EXPECT_EQ(stats_of(h, q).waiting_receives, 1u);
  advance_to(h, 1s);
  EXPECT_FALSE(h.collect<std::vector<delivery>>().has_value()) << "still waiting at t = 1 s";
  auto id = put(h, q, msg("m1"));
  auto got = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << to_string(got->err());
  ASSERT_EQ(bodies(got->value()), (strings{"m1"}));
  EXPECT_EQ(got->value()[0].msg.id, id);
  EXPECT_EQ(got->value()[0].deadline, at(1s) + limits::lease_default);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.waiting_receives, 0u);
  EXPECT_EQ(s.in_flight, 1u);
}

// A long poll on an ordered queue is answered when the group's next message becomes deliverable.
TEST_F(admin, a_long_poll_is_answered_when_a_group_releases_its_next_message) {
  auto q = make(queue_spec("accounts").ordered_by({key::header("account")}));
  ASSERT_TRUE(h.enqueue(q, {in_account("A1", "A"), in_account("A2", "A")}).ok());
  auto a1 = take_one(h, q);
  h.post(q, receive_atom_v, receive_request{10, 0, 5'000'000});
  h.run();
  EXPECT_FALSE(h.collect<std::vector<delivery>>().has_value()) << "A2 is behind A1";
  ASSERT_TRUE(h.ack(q, a1.lease).ok());
  auto got = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  EXPECT_EQ(bodies(got->value()), (strings{"A2"}));
}

// A long poll that times out returns an empty batch at its deadline, not before.
TEST_F(admin, a_long_poll_that_times_out_returns_an_empty_batch) {
  auto q = make(queue_spec("plain"));
  h.post(q, receive_atom_v, receive_request{1, 0, 2'000'000});
  h.run();
  advance_to(h, 1999ms);
  EXPECT_FALSE(h.collect<std::vector<delivery>>().has_value());
  advance_to(h, 2s);
  auto got = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(got.has_value()) << "answered at the deadline";
  ASSERT_TRUE(got->ok());
  EXPECT_TRUE(got->value().empty());
  EXPECT_EQ(stats_of(h, q).waiting_receives, 0u);
  put(h, q, msg("m1"));
  EXPECT_FALSE(h.collect<std::vector<delivery>>().has_value()) << "answered only once";
  EXPECT_EQ(bodies(take(h, q)), (strings{"m1"})) << "the message was not taken by the old poll";
}

}  // namespace
}  // namespace laneq

namespace laneq {
namespace {

// An attribute the store could not read back is refused at enqueue (limits.hpp bounds).
TEST(admin_limits, an_on_enqueue_attribute_longer_than_a_header_value_is_refused) {
  test::harness h;
  auto q = h.create(queue_spec("regions")
                        .ordered_by({key::attribute("region")})
                        .on_enqueue([](const message&) -> result<std::vector<attribute>> {
                          return std::vector<attribute>{
                              {"region", std::string(limits::header_value_bytes_max + 1, 'x')}};
                        }));
  ASSERT_TRUE(q.ok()) << to_string(q.err());
  auto id = h.enqueue(q.value(), test::msg("m"));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.err().code, errc::limit_exceeded);
  EXPECT_NE(id.err().message.find("attribute 'region'"), std::string::npos) << id.err().message;
  EXPECT_EQ(h.stats(q.value()).value().enqueued, 0u);
}

}  // namespace
}  // namespace laneq
