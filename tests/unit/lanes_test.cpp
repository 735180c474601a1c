// Unit tests for lanes (docs/design/lanes.md L1-L11): key components from JSON paths and
// functions, one JSON parse per enqueue, long-key hashing, delivered keys, lane ids, stored
// headers, dedupe keys, topic specs, and their JSON and stored forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "laneq/codec.hpp"
#include "laneq/key.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/spec_json.hpp"
#include "laneq/topic_spec.hpp"
#include "support.hpp"

namespace laneq {
namespace {

using opt = std::optional<std::string>;

message with_body(std::string body, std::vector<header_field> headers = {}) {
  auto m = test::make_message(1, {}, "t1", std::move(headers));
  m.body = std::move(body);
  return m;
}

std::vector<std::string> messages(const std::vector<error>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.message);
  return out;
}

// -- L1: key components ----------------------------------------------------------------------

TEST(lanes, header_component_ignores_the_name_case_and_takes_the_first_value) {
  auto m = with_body("", {{"X-Customer", "c1"}, {"x-customer", "c2"}});
  EXPECT_EQ(key::header("x-CUSTOMER").value_in(m), opt{"c1"});
}

TEST(lanes, json_path_reads_a_nested_string) {
  auto m = with_body(R"({"data": {"object": {"customer": "cus_42", "n": 7}}})");
  EXPECT_EQ(key::json("data.object.customer").value_in(m), opt{"cus_42"});
  EXPECT_EQ(key::json("data.object.customer").describe(), "json:data.object.customer");
}

TEST(lanes, json_key_is_missing_when_the_body_is_not_json) {
  for (std::string body : {"", "not json", "{\"data\": ", "cus_42", "{\"a\": 1} trailing"})
    EXPECT_EQ(key::json("a").value_in(with_body(body)), std::nullopt) << body;
}

TEST(lanes, json_key_is_missing_when_the_body_is_over_one_mib) {
  // Valid JSON either way: padding inside the object, so only the size differs.
  std::string head = R"({"a": "x", "pad": ")";
  std::string tail = R"("})";
  auto body_of = [&](std::size_t total) {
    return head + std::string(total - head.size() - tail.size(), 'p') + tail;
  };
  auto at_limit = with_body(body_of(limits::body_bytes_max));
  auto over = with_body(body_of(limits::body_bytes_max + 1));
  ASSERT_EQ(at_limit.body.size(), 1024u * 1024u);
  ASSERT_EQ(over.body.size(), 1024u * 1024u + 1u);
  EXPECT_EQ(key::json("a").value_in(at_limit), opt{"x"});
  key_source src{over};
  EXPECT_EQ(key::json("a").value_in(src), std::nullopt);
  EXPECT_EQ(src.parses(), 0u) << "a body over 1 MiB is not parsed at all";
}

TEST(lanes, json_key_is_missing_when_the_value_is_not_a_string) {
  auto m = with_body(R"({"n": 42, "f": 1.5, "b": true, "z": null, "o": {"k": "v"}, "a": ["v"]})");
  for (const char* path : {"n", "f", "b", "z", "o", "a"})
    EXPECT_EQ(key::json(path).value_in(m), std::nullopt) << path;
}

TEST(lanes, json_key_is_missing_when_the_path_does_not_exist) {
  auto m = with_body(R"({"data": {"object": "flat", "list": [{"c": "x"}]}})");
  for (const char* path : {"missing", "data.missing", "data.object.customer", "data.list.c",
                           "data.list.0.c", "Data.object"})
    EXPECT_EQ(key::json(path).value_in(m), std::nullopt) << path;
}

TEST(lanes, an_empty_json_path_or_segment_finds_nothing_and_is_refused_at_create) {
  auto m = with_body(R"({"": {"": "v"}, "a": {"": "w"}})");
  for (const char* path : {"", ".", "a.", ".a", "a..b"}) {
    EXPECT_FALSE(valid_json_path(path)) << path;
    EXPECT_EQ(key::json(path).value_in(m), std::nullopt) << path;
  }
  auto spec = queue_spec("orders").ordered_by({key::json(""), key::json("a..b")});
  EXPECT_THAT(messages(spec.validate()),
              testing::ElementsAre("queue 'orders': ordering.key[0]: JSON path is empty",
                                   "queue 'orders': ordering.key[1]: JSON path 'a..b' has an "
                                   "empty segment"));
}

TEST(lanes, one_json_parse_serves_every_key_and_dedupe_rule_of_every_queue) {
  auto by_customer = queue_spec("by-customer")
                         .ordered_by({key::json("data.customer")})
                         .dedupe({key::json("id")}, std::chrono::minutes{1});
  auto by_account =
      queue_spec("by-account").ordered_by({key::json("data.account"), key::json("data.customer")});
  auto m = with_body(R"({"id": "evt_1", "data": {"customer": "c", "account": "a"}})");
  key_source src{m};
  ASSERT_TRUE(place(by_customer, src).ok());
  ASSERT_TRUE(place(by_account, src).ok());
  EXPECT_EQ(dedupe_key(by_customer, src), encode_key(key_values{{opt{"evt_1"}}}));
  EXPECT_EQ(src.parses(), 1u);
  // A topic parses once and hands the parsed body to each queue's source.
  auto parsed = parse_body_json(m.body);
  key_source a{m, parsed};
  key_source b{m, parsed};
  EXPECT_EQ(place(by_account, a).value().ordering_key, "1:a1:c");
  EXPECT_EQ(place(by_customer, b).value().ordering_key, "c");
  EXPECT_EQ(a.parses() + b.parses(), 0u);
}

TEST(lanes, function_component_returns_bytes_or_is_missing) {
  int calls = 0;
  auto f = key::function("customer_of", [&calls](const message& m) -> std::optional<std::string> {
    ++calls;
    if (m.body == "throw") throw std::runtime_error("boom");
    if (m.body == "none") return std::nullopt;
    return "cust-" + m.body;
  });
  EXPECT_EQ(f.value_in(with_body("7")), opt{"cust-7"});
  EXPECT_EQ(f.value_in(with_body("none")), std::nullopt);
  EXPECT_EQ(f.value_in(with_body("throw")), std::nullopt) << "a throw is a missing key";
  EXPECT_EQ(calls, 3);
  auto spec = queue_spec("q").ordered_by({f});
  auto r = place(spec, with_body("throw"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::ordering_key_missing);
  EXPECT_THAT(r.err().message, testing::HasSubstr("function:customer_of"));
}

TEST(lanes, a_function_component_without_its_callable_is_missing_and_can_be_restored) {
  key_component bare{key_component::kind::function, "customer_of"};
  EXPECT_TRUE(bare.function_missing());
  EXPECT_EQ(bare.value_in(with_body("x")), std::nullopt);
  auto stored = queue_spec("q").ordered_by({bare});
  EXPECT_TRUE(stored.functions_missing());
  auto given = queue_spec("q").ordered_by({key::function(
      "customer_of", [](const message&) { return std::optional<std::string>{"c"}; })});
  auto other = queue_spec("q").ordered_by(
      {key::function("other", [](const message&) { return std::optional<std::string>{"c"}; })});
  auto copy = stored;
  EXPECT_FALSE(copy.restore_functions(other)) << "matched by label";
  EXPECT_TRUE(stored.restore_functions(given));
  EXPECT_FALSE(stored.functions_missing());
  EXPECT_EQ(place(stored, with_body("x")).value().ordering_key, "c");
  EXPECT_TRUE(stored.same_definition(given));
}

// -- L4-L6: encoding, hashing, delivered keys, lane ids ---------------------------------------

TEST(lanes, a_key_of_128_bytes_is_kept_and_one_of_129_bytes_becomes_its_sha256) {
  auto spec = queue_spec("q").ordered_by({key::header("k")});
  auto p128 = place(spec, with_body("", {{"k", std::string(128, 'a')}}));
  auto p129 = place(spec, with_body("", {{"k", std::string(129, 'a')}}));
  EXPECT_EQ(p128.value().ordering_key, std::string(128, 'a'));
  EXPECT_EQ(p129.value().ordering_key,
            "sha256:c12cb024a2e5551cca0e08fce8f1c5e314555cc3fef6329ee994a3db752166ae");
  EXPECT_EQ(bound_key(std::string(129, 'a')).size(), 7u + 64u);
  // The group identity uses the hashed value too: bounded, and equal values stay equal.
  EXPECT_EQ(p129.value().group_key,
            place(spec, with_body("", {{"k", std::string(129, 'a')}})).value().group_key);
  EXPECT_NE(p129.value().group_key,
            place(spec, with_body("", {{"k", std::string(129, 'b')}})).value().group_key);
}

TEST(lanes, forged_delimiters_do_not_merge_multi_component_keys) {
  auto spec = queue_spec("q").ordered_by({key::header("a"), key::header("b")});
  auto key_of = [&](std::string a, std::string b) {
    return place(spec, with_body("", {{"a", std::move(a)}, {"b", std::move(b)}})).value();
  };
  auto x = key_of("ab", "c");
  auto y = key_of("a", "bc");
  EXPECT_NE(x.group_key, y.group_key);
  EXPECT_NE(x.ordering_key, y.ordering_key);
  EXPECT_EQ(x.ordering_key, "2:ab1:c");
  // A value that spells out another tuple's delivered key or encoding.
  auto z = key_of("1:a2:bc", "");
  EXPECT_NE(z.ordering_key, y.ordering_key);
  EXPECT_NE(key_of(std::string("\0\0\0\1a", 5), "").group_key, key_of("a", "").group_key);
  // A long multi-component key is bounded as a whole.
  auto long_key = key_of(std::string(100, 'x'), std::string(100, 'y'));
  EXPECT_EQ(long_key.ordering_key.rfind("sha256:", 0), 0u);
}

TEST(lanes, keyless_lane_and_ordered_queue_deliver_tenant_slash_queue) {
  auto keyless = queue_spec("acme/orders")
                     .ordered_by({key::header("account")})
                     .when_ordering_key_missing(missing_ordering_key::keyless_lane);
  EXPECT_EQ(place(keyless, with_body("")).value().ordering_key, "acme/orders");
  EXPECT_EQ(place(queue_spec("orders").ordered(), with_body("")).value().ordering_key,
            "default/orders");
  EXPECT_EQ(place(queue_spec("orders"), with_body("")).value().ordering_key, "");
}

TEST(lanes, the_keyless_lane_has_its_own_lane_id) {
  auto keyless = codec::make_lane_id("acme/orders", keyless_group_key);
  auto whole = codec::make_lane_id("acme/orders", whole_queue_group_key);
  auto keyed = codec::make_lane_id("acme/orders", encode_key(key_values{{opt{""}}}));
  EXPECT_FALSE(keyless.unordered());
  EXPECT_NE(keyless, whole);
  EXPECT_NE(keyless, keyed) << "an empty key value is a key, not the keyless lane";
  EXPECT_NE(keyless, codec::make_lane_id("globex/orders", keyless_group_key))
      << "the tenant is part of the lane";
  EXPECT_EQ(keyless, codec::make_lane_id("acme/orders", keyless_group_key));
}

// -- L7: stored headers -----------------------------------------------------------------------

TEST(lanes, stored_headers_follow_the_allow_or_deny_list_ignoring_case) {
  std::vector<header_field> hs{{"Authorization", "secret"}, {"account", "A"}, {"X-Trace", "t"}};
  EXPECT_EQ(queue_spec("q").stored_headers(hs).size(), 3u);
  auto deny = queue_spec("q").store_headers_deny({"authorization"});
  EXPECT_EQ(deny.stored_headers(hs),
            (std::vector<header_field>{{"account", "A"}, {"X-Trace", "t"}}));
  auto allow = queue_spec("q").store_headers_allow({"ACCOUNT"});
  EXPECT_EQ(allow.stored_headers(hs), (std::vector<header_field>{{"account", "A"}}));
  EXPECT_TRUE(allow.validate().empty());
}

TEST(lanes, a_header_key_whose_header_is_not_stored_is_refused_naming_queue_and_header) {
  auto spec = queue_spec("payments")
                  .ordered_by({key::header("Authorization")})
                  .throttle({key::header("x-tenant")}, 5, 5)
                  .store_headers_deny({"authorization", "X-Tenant"});
  EXPECT_THAT(messages(spec.validate()),
              testing::UnorderedElementsAre(
                  testing::StartsWith("queue 'payments': ordering.key[0]: header 'Authorization' "
                                      "is a key component but the queue does not store it"),
                  testing::StartsWith("queue 'payments': throttles[0].key[0]: header 'x-tenant' "
                                      "is a key component but the queue does not store it")));
  auto allow = queue_spec("payments").ordered_by({key::header("account")}).store_headers_allow({});
  EXPECT_THAT(messages(allow.validate()),
              testing::ElementsAre(testing::HasSubstr("header 'account' is a key component")));
  EXPECT_TRUE(queue_spec("payments")
                  .ordered_by({key::header("account")})
                  .store_headers_allow({"Account"})
                  .validate()
                  .empty());
}

TEST(lanes, throttle_keys_may_not_read_the_body_or_call_a_function) {
  auto spec =
      queue_spec("q")
          .throttle({key::json("a")}, 1, 1)
          .throttle(
              {key::function("f", [](const message&) { return std::optional<std::string>{}; })}, 1,
              1);
  EXPECT_THAT(messages(spec.validate()),
              testing::ElementsAre(testing::HasSubstr("throttles[0].key[0]: json:a: a throttle"),
                                   testing::HasSubstr("throttles[1].key[0]: function:f: a")));
}

// -- L8: dedupe -------------------------------------------------------------------------------

TEST(lanes, dedupe_key_is_absent_without_a_rule_or_with_a_missing_component) {
  auto m = with_body(R"({"id": "evt_1"})", {{"idempotency-key", "k1"}});
  EXPECT_EQ(dedupe_key(queue_spec("q"), key_source{m}), std::nullopt);
  auto spec = queue_spec("q").dedupe({key::header("Idempotency-Key"), key::json("id")},
                                     std::chrono::seconds{10});
  EXPECT_EQ(dedupe_key(spec, key_source{m}), encode_key(key_values{{opt{"k1"}, opt{"evt_1"}}}));
  EXPECT_EQ(dedupe_key(spec, key_source{with_body("{}")}), std::nullopt);
}

TEST(lanes, dedupe_rules_are_validated) {
  auto spec = queue_spec("q").dedupe({}, std::chrono::hours{24 * 8});
  EXPECT_THAT(messages(spec.validate()),
              testing::ElementsAre("queue 'q': dedupe.key: needs at least one component",
                                   testing::HasSubstr("queue 'q': dedupe.window_ms: must be")));
  EXPECT_TRUE(
      queue_spec("q").dedupe({key::json("id")}, std::chrono::minutes{5}).validate().empty());
  EXPECT_FALSE(
      queue_spec("q")
          .dedupe({key::json("id")}, std::chrono::minutes{5})
          .same_definition(queue_spec("q").dedupe({key::json("id")}, std::chrono::minutes{6})));
}

// -- L9: topic specs --------------------------------------------------------------------------

TEST(lanes, topic_specs_are_validated_naming_the_topic) {
  EXPECT_TRUE(
      topic_spec("acme/orders").fan_out({"acme/by-customer", "acme/audit"}).validate().empty());
  EXPECT_THAT(messages(topic_spec("orders").validate()),
              testing::ElementsAre("topic 'orders': queues: a topic fans out into 1 to 16 "
                                   "queues, got 0"));
  EXPECT_THAT(
      messages(topic_spec("acme/orders").fan_out({"acme/a", "acme/a", "globex/b", "c"}).validate()),
      testing::ElementsAre(
          "topic 'acme/orders': queues[1]: 'acme/a' repeats queues[0]",
          "topic 'acme/orders': queues[2]: queue 'globex/b' is not in the topic's tenant "
          "'acme'",
          "topic 'acme/orders': queues[3]: queue 'c' is not in the topic's tenant 'acme'"));
  EXPECT_THAT(messages(topic_spec("bad name").fan_out({"a"}).validate()),
              testing::ElementsAre(testing::StartsWith("topic 'bad name': name: may hold only")));
}

// -- JSON and stored forms ----------------------------------------------------------------------

TEST(lanes, spec_json_reads_json_components_stored_headers_and_dedupe) {
  auto p = queue_spec_from_json("orders", boost::json::parse(R"({
      "ordering": {"mode": "key", "key": [{"json": "data.object.customer"}],
                   "when_key_missing": "keyless_lane"},
      "store_headers": {"deny": ["authorization"]},
      "dedupe": {"key": [{"header": "idempotency-key"}], "window_ms": 60000}})"));
  ASSERT_TRUE(p.ok()) << messages(p.errors).front();
  auto want = queue_spec("orders")
                  .ordered_by({key::json("data.object.customer")})
                  .when_ordering_key_missing(missing_ordering_key::keyless_lane)
                  .store_headers_deny({"authorization"})
                  .dedupe({key::header("idempotency-key")}, std::chrono::minutes{1});
  EXPECT_TRUE(p.spec.same_definition(want));
  auto back = queue_spec_from_json("orders", queue_spec_to_json(p.spec));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back.spec.same_definition(want)) << boost::json::serialize(queue_spec_to_json(want));
}

TEST(lanes, spec_json_refuses_function_keys_and_broken_lane_fields_naming_each) {
  auto p = queue_spec_from_json("orders", boost::json::parse(R"({
      "ordering": {"mode": "key", "key": [{"function": "customer_of"}, {"json": ""}]},
      "store_headers": {"allow": ["a"], "deny": ["b"]},
      "dedupe": {"key": [{"json": 5}]}})"));
  EXPECT_THAT(messages(p.errors),
              testing::UnorderedElementsAre(
                  "queue 'orders': ordering.key[0].function: a function key component is "
                  "available only in the in-process C++ API (key::function); the JSON form (HTTP "
                  "API, daemon config) cannot carry one",
                  "queue 'orders': store_headers: must have exactly one of allow, deny",
                  "queue 'orders': dedupe.key[0].json: must be a string",
                  "queue 'orders': dedupe.window_ms: is required",
                  "queue 'orders': ordering.key[0]: JSON path is empty"));
}

TEST(lanes, topic_json_round_trips_and_names_broken_fields) {
  auto p = topic_spec_from_json("orders", boost::json::parse(R"({"queues": ["a", "b"]})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.spec, topic_spec("orders").fan_out({"a", "b"}));
  auto back = topic_spec_from_json("orders", topic_spec_to_json(p.spec));
  EXPECT_EQ(back.spec, p.spec);
  EXPECT_THAT(
      messages(
          topic_spec_from_json("orders", boost::json::parse(R"({"queues": [1], "x": 2})")).errors),
      testing::UnorderedElementsAre("topic 'orders': x: unknown field (known: queues)",
                                    "topic 'orders': queues[0]: must be a string"));
}

TEST(lanes, stored_records_of_lanes_round_trip) {
  auto spec =
      queue_spec("orders")
          .ordered_by(
              {key::json("data.customer"),
               key::function("f", [](const message&) { return std::optional<std::string>{"x"}; })})
          .store_headers_allow({"account"})
          .dedupe({key::json("id")}, std::chrono::seconds{30});
  auto back = codec::decode_queue(codec::encode_queue({7, spec, false}));
  ASSERT_TRUE(back.ok()) << back.err().message;
  EXPECT_TRUE(back.value().spec.same_definition(spec));
  EXPECT_TRUE(back.value().spec.functions_missing()) << "a callable is never stored";
  codec::dedupe_record d{message_id{9}, timestamp{123}};
  EXPECT_EQ(codec::decode_dedupe(codec::encode_dedupe(d)).value(), d);
  EXPECT_EQ(codec::parse_dedupe_key(codec::dedupe_key(7, "k\0y")).value(), "k");
  EXPECT_EQ(codec::parse_dedupe_key(codec::dedupe_key(7, std::string("k\0y", 3))).value(),
            std::string("k\0y", 3));
  auto t = topic_spec("orders").fan_out({"a", "b"});
  EXPECT_EQ(codec::decode_topic(codec::encode_topic(t)).value(), t);
  auto damaged = codec::encode_topic(t);
  damaged.back() = 'X';
  EXPECT_EQ(codec::decode_topic(damaged).err().code, errc::corrupt_record);
}

}  // namespace
}  // namespace laneq
