// Lanes on the real actors with simulated time (docs/design/lanes.md): JSON-path and function
// keys end to end, delivered ordering keys, missing-key counting, stored headers, redrive lane
// identity, dedupe across a restart, topics (one store write into several queues, atomic), key
// functions after a restart, and a forced lane collision that only merges.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actor_test_helpers.hpp"
#include "laneq/codec.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

outgoing_message event(std::string body, std::vector<header_field> headers = {}) {
  return msg(std::move(body), std::move(headers));
}

/// Every stored message record: seq -> lane (one queue per test).
std::map<std::uint64_t, codec::lane_id> stored_lanes(harness& h) {
  auto [from, to] = codec::tag_range(codec::tag::message);
  auto entries =
      h.ask<std::vector<store_entry>>(h.store(), scan_atom_v, from, to, limits::store_scan_max);
  EXPECT_TRUE(entries.ok());
  std::map<std::uint64_t, codec::lane_id> out;
  if (!entries.ok()) return out;
  for (const auto& e : entries.value()) {
    auto k = codec::parse_message_key(e.key);
    EXPECT_TRUE(k.ok());
    if (k.ok()) out[k.value().seq.value] = k.value().lane;
  }
  return out;
}

std::size_t stored_count(harness& h, codec::tag t) {
  auto [from, to] = codec::tag_range(t);
  auto entries =
      h.ask<std::vector<store_entry>>(h.store(), scan_atom_v, from, to, limits::store_scan_max);
  EXPECT_TRUE(entries.ok());
  return entries.ok() ? entries.value().size() : 0;
}

result<bool> create_topic(harness& h, topic_spec t) {
  return h.ask<bool>(h.brk().admin(), create_atom_v, std::move(t));
}

result<std::vector<topic_enqueued>> publish(harness& h, const std::string& topic,
                                            std::vector<outgoing_message> batch) {
  return h.ask<std::vector<topic_enqueued>>(h.brk().admin(), publish_atom_v, topic,
                                            std::move(batch));
}

queue_api lookup(harness& h, const std::string& name) {
  auto q = h.lookup(name);
  EXPECT_TRUE(q.ok()) << name;
  return q.ok() ? q.value() : queue_api{};
}

key_component customer_fn() {
  return key::function("customer_of", [](const message& m) -> std::optional<std::string> {
    auto at = m.body.find("customer=");
    if (at == std::string::npos) throw std::runtime_error("no customer");
    return m.body.substr(at + 9, 2);
  });
}

// L1, L5: a JSON-path key orders per value; the consumer gets the key itself.
TEST(lanes, a_json_path_key_orders_per_customer_and_delivers_the_key) {
  harness h;
  auto q = make_queue(h, queue_spec("acme/orders").ordered_by({key::json("data.customer")}));
  ASSERT_TRUE(h.enqueue(q, {event(R"({"data": {"customer": "c1"}, "n": 1})"),
                            event(R"({"data": {"customer": "c1"}, "n": 2})"),
                            event(R"({"data": {"customer": "c2"}, "n": 3})")})
                  .ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(first.size(), 2u) << "the second c1 message waits for the first";
  EXPECT_EQ(first[0].ordering_key, "c1");
  EXPECT_EQ(first[1].ordering_key, "c2");
  ASSERT_TRUE(h.ack(q, first[0].lease).ok());
  auto second = take_one(h, q);
  EXPECT_EQ(second.ordering_key, "c1");
  EXPECT_NE(second.msg.body.find("\"n\": 2"), std::string::npos);
}

// L3, L5: a missing key under every policy is counted; the keyless lane delivers tenant/queue.
TEST(lanes, every_missing_key_is_counted_and_the_keyless_lane_delivers_tenant_slash_queue) {
  harness h;
  auto by = [&](std::string name, missing_ordering_key p) {
    return make_queue(h, queue_spec(std::move(name))
                             .ordered_by({key::json("customer")})
                             .when_ordering_key_missing(p));
  };
  auto keyless = by("acme/keyless", missing_ordering_key::keyless_lane);
  auto unordered = by("acme/unordered", missing_ordering_key::unordered);
  auto reject = by("acme/reject", missing_ordering_key::reject);
  for (const auto* q : {&keyless, &unordered})
    ASSERT_TRUE(h.enqueue(*q, {event("not json"), event(R"({"customer": 5})"),
                               event(R"({"customer": "c"})")})
                    .ok());
  auto rejected = h.enqueue(reject, {event(R"({"customer": "c"})"), event(R"({"other": "x"})")});
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.err().code, errc::ordering_key_missing);
  EXPECT_NE(rejected.err().message.find("json:customer"), std::string::npos);
  EXPECT_EQ(stats_of(h, keyless).key_missing, 2u);
  EXPECT_EQ(stats_of(h, unordered).key_missing, 2u);
  EXPECT_EQ(stats_of(h, reject).key_missing, 1u);
  EXPECT_EQ(stats_of(h, reject).enqueued, 0u);
  auto k = take(h, keyless, 10);
  ASSERT_EQ(k.size(), 2u) << "the two keyless messages share one lane";
  EXPECT_EQ(k[0].ordering_key, "acme/keyless");
  EXPECT_EQ(k[1].ordering_key, "c");
  auto u = take(h, unordered, 10);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].ordering_key, "");
}

// L7: a denied header never reaches the store or the consumer; the key was read before.
TEST(lanes, stored_headers_keep_secrets_out_of_the_store_and_the_delivery) {
  harness h;
  auto spec =
      queue_spec("payments")
          .ordered_by({key::function("auth_of",
                                     [](const message& m) -> std::optional<std::string> {
                                       if (auto* v = header_value(m.headers, "authorization"))
                                         return *v;
                                       return std::nullopt;
                                     })})
          .when_ordering_key_missing(missing_ordering_key::keyless_lane)
          .store_headers_deny({"Authorization"});
  auto q = make_queue(h, spec);
  put(h, q, event("p1", hdrs({{"authorization", "Bearer s3cret"}, {"account", "A"}})));
  auto d = take_one(h, q);
  EXPECT_EQ(d.ordering_key, "Bearer s3cret") << "the lane is fixed from the complete headers";
  EXPECT_EQ(d.msg.headers, (hdrs({{"account", "A"}})));
  EXPECT_EQ(stats_of(h, q).key_missing, 0u);
  // A header key component whose header is not stored is refused at create.
  auto bad = h.create(queue_spec("bad")
                          .ordered_by({key::header("authorization")})
                          .store_headers_deny({"authorization"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::invalid_spec);
  EXPECT_NE(bad.err().message.find("queue 'bad'"), std::string::npos);
  EXPECT_NE(bad.err().message.find("header 'authorization'"), std::string::npos);
}

// L6, L7: redrive resolves the lane again from the stored envelope: the same lane id.
TEST(lanes, redrive_resolves_the_same_lane_from_the_stored_envelope) {
  harness h;
  auto q = make_queue(
      h, queue_spec("orders")
             .ordered_by({key::json("data.customer"), customer_fn(), key::header("account")})
             .store_headers_allow({"account"})
             .max_attempts(1));
  auto id = put(h, q,
                event(R"({"data": {"customer": "c7"}, "x": "customer=c7"})",
                      hdrs({{"account", "A"}, {"x-drop", "y"}})));
  auto before = stored_lanes(h);
  ASSERT_EQ(before.size(), 1u);
  auto lane = before.begin()->second;
  EXPECT_EQ(lane, codec::make_lane_id("orders", encode_key(key_values{{"c7", "c7", "A"}})));
  auto d = take_one(h, q);
  ASSERT_TRUE(h.nack(q, d.lease, 0s, true).ok());
  EXPECT_TRUE(stored_lanes(h).empty()) << "the dead letter left its lane";
  ASSERT_EQ(h.redrive(q, {id}).value(), 1u);
  auto after = stored_lanes(h);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_GT(after.begin()->first, before.begin()->first) << "a new seq";
  EXPECT_EQ(after.begin()->second, lane) << "the same lane";
  auto again = take_one(h, q);
  EXPECT_EQ(again.msg.id, id);
  EXPECT_EQ(again.ordering_key, d.ordering_key);
}

/// A key function whose answer the test changes: "k" and the current version.
key_component versioned_fn(std::shared_ptr<int> version) {
  return key::function("versioned", [version](const message&) -> std::optional<std::string> {
    return "k" + std::to_string(*version);
  });
}

/// A key function reading a header the queue does not store (lanes.md L7: read at enqueue).
key_component tenant_header_fn() {
  return key::function("tenant_of", [](const message& m) -> std::optional<std::string> {
    if (auto* v = header_value(m.headers, "x-tenant")) return *v;
    return std::nullopt;
  });
}

queue_spec tenant_spec() {
  return queue_spec("orders")
      .ordered_by({tenant_header_fn()})
      .when_ordering_key_missing(missing_ordering_key::keyless_lane)
      .store_headers_deny({"x-tenant"});
}

// L7: a dead letter keeps the lane it was stored under; a redrive returns it there, whatever the
// key function answers now.
TEST(lanes, a_redrive_returns_to_its_stored_lane_even_if_the_key_function_changed) {
  harness h;
  auto version = std::make_shared<int>(1);
  auto q = make_queue(h, queue_spec("orders").ordered_by({versioned_fn(version)}).max_attempts(1));
  auto id = put(h, q, event("m1"));
  auto before = stored_lanes(h);
  ASSERT_EQ(before.size(), 1u);
  auto lane = before.begin()->second;
  EXPECT_EQ(lane, codec::make_lane_id("orders", encode_key(key_values{{"k1"}})));
  auto d = take_one(h, q);
  *version = 2;
  ASSERT_TRUE(h.nack(q, d.lease, 0s, true).ok());
  EXPECT_TRUE(stored_lanes(h).empty()) << "the dead-letter move erased the stored record";
  ASSERT_EQ(h.redrive(q, {id}).value(), 1u);
  auto after = stored_lanes(h);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after.begin()->second, lane) << "back under the lane it was stored under";
  auto again = take_one(h, q);
  EXPECT_EQ(again.msg.id, id);
  ASSERT_TRUE(h.ack(q, again.lease).ok());
  EXPECT_TRUE(stored_lanes(h).empty()) << "the ack erased it from its stored lane";
}

// L7: a dead-lettered message whose key function no longer places it (the header it read is not
// stored) leaves its live lane: it does not come back after a restart.
TEST(lanes, a_dead_lettered_message_does_not_come_back_after_a_restart) {
  harness h;
  auto q = make_queue(h, tenant_spec());
  auto id = put(h, q, event("m1", hdrs({{"x-tenant", "t1"}})));
  auto d = take_one(h, q);
  EXPECT_EQ(d.ordering_key, "t1");
  ASSERT_TRUE(h.nack(q, d.lease, 0s, true).ok());
  EXPECT_TRUE(stored_lanes(h).empty()) << "the dead-letter move erased the stored record";
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  ASSERT_TRUE(h.create_flagged(tenant_spec()).ok());
  EXPECT_TRUE(take(h, q, 10).empty()) << "the dead letter is not live again";
  auto dls = h.dead_letters(q);
  ASSERT_TRUE(dls.ok());
  ASSERT_EQ(dls.value().size(), 1u);
  EXPECT_EQ(dls.value()[0].msg.id, id);
  ASSERT_EQ(h.redrive(q, {id}).value(), 1u);
  auto lanes = stored_lanes(h);
  ASSERT_EQ(lanes.size(), 1u);
  EXPECT_EQ(lanes.begin()->second, codec::make_lane_id("orders", encode_key(key_values{{"t1"}})))
      << "a dead letter read back after a restart keeps its lane";
}

// L7: recovery files a lane's messages under the lane they were stored under, so an ack after a
// restart erases the stored record even when the key function no longer places it.
TEST(lanes, a_recovered_message_is_acked_under_its_stored_lane) {
  harness h;
  auto q = make_queue(h, tenant_spec());
  put(h, q, event("m1", hdrs({{"x-tenant", "t1"}})));
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  ASSERT_TRUE(h.create_flagged(tenant_spec()).ok());
  auto d = take_one(h, q);
  ASSERT_TRUE(h.ack(q, d.lease).ok());
  EXPECT_TRUE(stored_lanes(h).empty()) << "the ack erased the record under its stored lane";
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  ASSERT_TRUE(h.create_flagged(tenant_spec()).ok());
  EXPECT_TRUE(take(h, q, 10).empty()) << "an acked message does not come back";
}

// L8: a duplicate within the window is answered with the original id and stored nowhere.
TEST(lanes, a_duplicate_within_the_window_gets_the_original_id_and_is_stored_nowhere) {
  harness h;
  auto q = make_queue(h, queue_spec("orders").dedupe({key::header("idempotency-key")}, 60s));
  auto first = put(h, q, event("a", hdrs({{"Idempotency-Key", "k1"}})));
  auto ids = h.enqueue(q, {event("b", hdrs({{"idempotency-key", "k1"}})),
                           event("c", hdrs({{"idempotency-key", "k2"}})),
                           event("d", hdrs({{"idempotency-key", "k2"}})), event("no key")});
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids.value().size(), 4u);
  EXPECT_EQ(ids.value()[0], first);
  EXPECT_NE(ids.value()[1], first);
  EXPECT_EQ(ids.value()[2], ids.value()[1]) << "a duplicate within one batch";
  EXPECT_NE(ids.value()[3], ids.value()[1]);
  auto s = stats_of(h, q);
  EXPECT_EQ(s.enqueued, 3u);
  EXPECT_EQ(s.deduplicated, 2u);
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"a", "c", "no key"}));
  EXPECT_EQ(stored_count(h, codec::tag::message), 3u);
  advance_to(h, 60s);
  auto later = put(h, q, event("e", hdrs({{"idempotency-key", "k1"}})));
  EXPECT_NE(later, first) << "the window is over";
}

// L8 with L7: a dedupe key is read at enqueue only and its value is kept with the window, so it
// may read a header the queue does not store (docs/api.md, store_headers), across a restart too.
TEST(lanes, a_dedupe_key_may_read_a_header_the_queue_does_not_store) {
  harness h;
  auto q = make_queue(h, queue_spec("orders")
                             .dedupe({key::header("idempotency-key")}, 60s)
                             .store_headers_deny({"Idempotency-Key"}));
  auto first = put(h, q, event("a", hdrs({{"idempotency-key", "k1"}, {"account", "A"}})));
  EXPECT_EQ(take_one(h, q).msg.headers, (hdrs({{"account", "A"}}))) << "the header is not stored";
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  EXPECT_EQ(put(h, q, event("b", hdrs({{"Idempotency-Key", "k1"}}))), first);
  EXPECT_EQ(stats_of(h, q).deduplicated, 1u);
  EXPECT_NE(put(h, q, event("c", hdrs({{"idempotency-key", "k2"}}))), first);
}

// L8: the window survives a restart; expired entries are forgotten and erased.
TEST(lanes, the_dedupe_window_survives_a_restart) {
  harness h;
  auto spec = queue_spec("orders").dedupe({key::json("id")}, 30s);
  auto q = make_queue(h, spec);
  auto first = put(h, q, event(R"({"id": "evt_1"})"));
  advance_to(h, 10s);
  auto second = put(h, q, event(R"({"id": "evt_2"})"));
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  EXPECT_EQ(put(h, q, event(R"({"id": "evt_1", "retry": true})")), first);
  EXPECT_EQ(stats_of(h, q).deduplicated, 1u);
  EXPECT_EQ(stats_of(h, q).backlog, 2u);
  advance_to(h, 35s);  // evt_1's window is over, evt_2's is not
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  EXPECT_EQ(stored_count(h, codec::tag::dedupe), 1u) << "the expired record was erased";
  EXPECT_EQ(put(h, q, event(R"({"id": "evt_2"})")), second);
  auto fresh = put(h, q, event(R"({"id": "evt_1"})"));
  EXPECT_NE(fresh, first);
  EXPECT_GT(fresh.value, second.value);
}

struct topic_fixture : ::testing::Test {
  void make_queues(harness& h) {
    by_customer = make_queue(h, queue_spec("acme/by-customer")
                                    .ordered_by({key::json("data.customer")})
                                    .when_ordering_key_missing(missing_ordering_key::reject));
    by_account = make_queue(h, queue_spec("acme/by-account").ordered_by({key::header("account")}));
    audit = make_queue(h, queue_spec("acme/audit"));
    auto t = create_topic(
        h,
        topic_spec("acme/orders").fan_out({"acme/by-customer", "acme/by-account", "acme/audit"}));
    ASSERT_TRUE(t.ok()) << to_string(t.err());
    EXPECT_TRUE(t.value());
  }
  static outgoing_message order(std::string customer, std::string account) {
    return event(R"({"data": {"customer": ")" + customer + R"("}})", hdrs({{"account", account}}));
  }
  queue_api by_customer, by_account, audit;
};

// L9, L10: one enqueue to a topic commits one message into each queue, each in its own lane.
TEST_F(topic_fixture, a_topic_commits_one_message_into_each_queue_each_with_its_own_lane) {
  harness h;
  make_queues(h);
  auto writes = [&h] { return h.ask<store_stats>(h.store(), stats_atom_v).value().writes; };
  auto before = writes();
  auto r = publish(h, "acme/orders", {order("c1", "A"), order("c1", "B"), order("c2", "A")});
  ASSERT_TRUE(r.ok()) << to_string(r.err());
  EXPECT_EQ(writes(), before + 1) << "one store write";
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_EQ(r.value()[0].queue, "acme/by-customer");
  EXPECT_EQ(r.value()[2].queue, "acme/audit");
  for (const auto& e : r.value()) EXPECT_EQ(e.ids.size(), 3u);
  std::vector<std::string> keys;
  for (const auto& d : take(h, by_customer, 10)) keys.push_back(d.ordering_key);
  EXPECT_EQ(keys, (strings{"c1", "c2"}));
  keys.clear();
  for (const auto& d : take(h, by_account, 10)) keys.push_back(d.ordering_key);
  EXPECT_EQ(keys, (strings{"A", "B"}));
  EXPECT_EQ(take(h, audit, 10).size(), 3u) << "unordered";
  // Direct enqueues go on after the topic's (its held writes were released).
  EXPECT_TRUE(h.enqueue(audit, event("direct")).ok());
  EXPECT_EQ(stats_of(h, audit).enqueued, 4u);
}

// L10: a failing store write commits the topic enqueue to no queue.
TEST_F(topic_fixture, a_failing_store_write_commits_a_topic_enqueue_to_no_queue) {
  auto faults = std::make_shared<test::store_faults>();
  harness h{1, faults};
  make_queues(h);
  faults->fail_appends = true;
  auto r = publish(h, "acme/orders", {order("c1", "A")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::storage_failed);
  faults->fail_appends = false;
  for (const auto* q : {&by_customer, &by_account, &audit}) {
    EXPECT_TRUE(take(h, *q, 10).empty());
    EXPECT_EQ(stats_of(h, *q).enqueued, 0u);
  }
  EXPECT_EQ(stored_count(h, codec::tag::message), 0u);
  ASSERT_TRUE(publish(h, "acme/orders", {order("c2", "B")}).ok());
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  for (auto name : {"acme/by-customer", "acme/by-account", "acme/audit"}) {
    auto got = take(h, lookup(h, name), 10);
    ASSERT_EQ(got.size(), 1u) << name;
    EXPECT_NE(got[0].msg.body.find("c2"), std::string::npos);
  }
}

// L10: a queue that refuses the message (missing key, policy reject) refuses it for all.
TEST_F(topic_fixture, a_rejection_in_one_queue_commits_the_topic_enqueue_to_no_queue) {
  harness h;
  make_queues(h);
  auto r = publish(h, "acme/orders", {order("c1", "A"), event("{}", hdrs({{"account", "B"}}))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::ordering_key_missing);
  EXPECT_NE(r.err().message.find("queue 'acme/by-customer'"), std::string::npos) << r.err().message;
  for (const auto* q : {&by_customer, &by_account, &audit}) EXPECT_TRUE(take(h, *q, 10).empty());
  EXPECT_EQ(stored_count(h, codec::tag::message), 0u);
  EXPECT_EQ(stats_of(h, by_customer).key_missing, 1u);
}

// L9, L11: topics are validated at create and survive a restart.
TEST_F(topic_fixture, topics_are_validated_and_survive_a_restart) {
  harness h;
  make_queues(h);
  EXPECT_FALSE(create_topic(h, topic_spec("acme/orders")
                                   .fan_out({"acme/by-customer", "acme/by-account", "acme/audit"}))
                   .value())
      << "the same spec again";
  auto other = create_topic(h, topic_spec("acme/orders").fan_out({"acme/audit"}));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err().code, errc::spec_conflict);
  auto bad = create_topic(h, topic_spec("acme/refunds").fan_out({"acme/nope", "acme/audit"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::invalid_spec);
  EXPECT_NE(bad.err().message.find("topic 'acme/refunds': queues: no queue named 'acme/nope'"),
            std::string::npos)
      << bad.err().message;
  EXPECT_NE(bad.err().message.find("queue 'acme/audit' is already a subscription of topic "
                                   "'acme/orders'"),
            std::string::npos)
      << bad.err().message;
  auto drop = h.ask<caf::ok_atom>(h.brk().admin(), drop_atom_v, std::string{"acme/audit"});
  ASSERT_FALSE(drop.ok());
  EXPECT_NE(drop.err().message.find("drop the topic first"), std::string::npos);
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  auto t =
      h.ask<topic_spec>(h.brk().admin(), topic_atom_v, lookup_atom_v, std::string{"acme/orders"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().queues().size(), 3u);
  ASSERT_TRUE(publish(h, "acme/orders", {order("c1", "A")}).ok());
  EXPECT_EQ(take(h, lookup(h, "acme/audit"), 10).size(), 1u);
  ASSERT_TRUE(
      h.ask<caf::ok_atom>(h.brk().admin(), topic_atom_v, drop_atom_v, std::string{"acme/orders"})
          .ok());
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  EXPECT_TRUE(
      h.ask<std::vector<topic_spec>>(h.brk().admin(), topic_atom_v, list_atom_v).value().empty());
}

// An unknown topic is topic_not_found (not queue_not_found) for a lookup, a publish and a drop,
// naming the topic; a conflicting create names the queues of both definitions.
TEST_F(topic_fixture, an_unknown_topic_is_topic_not_found_and_a_conflict_names_both_definitions) {
  harness h;
  make_queues(h);
  auto admin = h.brk().admin();
  std::string nope{"acme/nope"};
  auto found = h.ask<topic_spec>(admin, topic_atom_v, lookup_atom_v, nope);
  auto published = publish(h, nope, {order("c1", "A")});
  auto dropped = h.ask<caf::ok_atom>(admin, topic_atom_v, drop_atom_v, nope);
  for (const auto* e :
       {found.ok() ? nullptr : &found.err(), published.ok() ? nullptr : &published.err(),
        dropped.ok() ? nullptr : &dropped.err()}) {
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(to_string(e->code), "topic_not_found") << to_string(*e);
    EXPECT_EQ(e->message, "no topic named 'acme/nope'");
  }
  auto other = create_topic(h, topic_spec("acme/orders").fan_out({"acme/audit"}));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err().code, errc::spec_conflict);
  EXPECT_NE(other.err().message.find("queues differ (existing [acme/by-customer, acme/by-account, "
                                     "acme/audit], requested [acme/audit])"),
            std::string::npos)
      << other.err().message;
}

// L3: the key function is not stored: after a restart the queue waits for it, then goes on in
// order.
TEST(lanes, a_queue_with_a_key_function_waits_for_it_after_a_restart) {
  harness h;
  auto spec = queue_spec("orders").ordered_by({customer_fn()});
  auto q = make_queue(h, spec);
  ASSERT_TRUE(h.enqueue(q, {event("1 customer=c1"), event("2 customer=c1")}).ok());
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  auto refused = h.enqueue(q, event("3 customer=c1"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, errc::enqueue_rejected);
  EXPECT_NE(refused.err().message.find("key functions"), std::string::npos);
  EXPECT_TRUE(take(h, q, 10).empty()) << "nothing is served before the lanes are known";
  auto again = h.create_flagged(spec);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value().second);
  ASSERT_TRUE(h.enqueue(q, event("3 customer=c1")).ok());
  auto first = take(h, q, 10);
  ASSERT_EQ(bodies(first), (strings{"1 customer=c1"})) << "one lane, in order";
  EXPECT_EQ(first[0].ordering_key, "c1");
  EXPECT_EQ(stats_of(h, q).recovered, 2u);
}

// L6: two keys forced into one lane (a collision, written straight into the store) only merge:
// after a restart they are one group, delivered one at a time in arrival order.
TEST(lanes, two_keys_forced_into_one_lane_only_merge) {
  harness h;
  auto q = make_queue(h, queue_spec("orders").ordered_by({key::header("account")}));
  put(h, q, event("A1", hdrs({{"account", "A"}})));
  auto lanes = stored_lanes(h);
  ASSERT_EQ(lanes.size(), 1u);
  auto lane_a = lanes.begin()->second;
  auto [qfrom, qto] = codec::tag_range(codec::tag::queue);
  auto rec = h.ask<std::vector<store_entry>>(h.store(), scan_atom_v, qfrom, qto, 10u);
  ASSERT_TRUE(rec.ok());
  auto uid = codec::decode_queue(rec.value().at(0).value).value().uid;
  // B's message under A's lane, as a SHA-256 prefix collision would put it.
  message b;
  b.id = message_id{2};
  b.seq = message_seq{2};
  b.body = "B1";
  b.headers = hdrs({{"account", "B"}});
  std::vector<store_op> ops{
      {store_op::kind::put, codec::message_key(uid, lane_a, b.seq), codec::encode_message(b)},
      {store_op::kind::put, codec::counters_key(uid), codec::encode_counters({3, 3, 1})}};
  ASSERT_TRUE(h.ask<caf::ok_atom>(h.store(), write_atom_v, store_write{ops, true}).ok());
  ASSERT_TRUE(h.restart(test::with_grace(0s)).ok());
  q = lookup(h, "orders");
  auto first = take(h, q, 10);
  EXPECT_EQ(bodies(first), (strings{"A1"})) << "B1 waits: the lanes merged, nothing was split";
  ASSERT_TRUE(h.ack(q, first.at(0).lease).ok());
  EXPECT_EQ(bodies(take(h, q, 10)), (strings{"B1"}));
}

}  // namespace
}  // namespace laneq
