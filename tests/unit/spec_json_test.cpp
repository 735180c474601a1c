// Unit tests for the JSON form of queue specs (libqueue/include/laneq/spec_json.hpp).
#include "laneq/spec_json.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace laneq {
namespace {

using namespace std::chrono_literals;

parsed_spec parse(std::string_view name, std::string_view text) {
  return queue_spec_from_json(name, boost::json::parse(text));
}

std::vector<std::string> messages(const parsed_spec& p) {
  std::vector<std::string> out;
  for (const auto& e : p.errors) {
    EXPECT_EQ(e.code, errc::invalid_spec) << e.message;
    out.push_back(e.message);
  }
  return out;
}

TEST(spec_json, an_empty_object_is_the_default_unordered_queue) {
  auto p = parse("jobs", "{}");
  ASSERT_TRUE(p.ok()) << messages(p).front();
  EXPECT_TRUE(p.spec.same_definition(queue_spec("jobs")));
}

TEST(spec_json, reads_every_field_of_the_contract) {
  auto p = parse("acme/orders", R"({
    "ordering": {"mode": "key", "key": [{"fairness_key": true}, {"header": "account"}],
                 "when_key_missing": "keyless_lane"},
    "lease_ms": 5000, "max_attempts": 3,
    "throttles": [{"key": [{"header": "account"}], "rate_per_s": 5, "burst": 10}],
    "delivery_durability": "durable", "sync_writes": false})");
  ASSERT_TRUE(p.ok()) << messages(p).front();
  auto want = queue_spec("acme/orders")
                  .ordered_by({key::fairness_key(), key::header("account")})
                  .when_ordering_key_missing(missing_ordering_key::keyless_lane)
                  .lease(5s)
                  .max_attempts(3)
                  .throttle({key::header("account")}, 5, 10)
                  .delivery(delivery_durability::durable)
                  .sync_writes(false);
  EXPECT_TRUE(p.spec.same_definition(want)) << p.spec.describe();
  EXPECT_EQ(p.spec.tenant(), "acme");
}

TEST(spec_json, whole_queue_ordering) {
  auto p = parse("audit", R"({"ordering": {"mode": "queue"}})");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.spec.same_definition(queue_spec("audit").ordered()));
}

TEST(spec_json, to_json_reads_back_to_the_same_definition) {
  auto spec = queue_spec("t/q")
                  .ordered_by({key::header("x-entity"), key::fairness_key()})
                  .when_ordering_key_missing(missing_ordering_key::unordered)
                  .lease(1500ms)
                  .throttle({}, 2.5, 3)
                  .delivery(delivery_durability::durable);
  auto back = queue_spec_from_json("t/q", queue_spec_to_json(spec));
  ASSERT_TRUE(back.ok()) << messages(back).front();
  EXPECT_TRUE(back.spec.same_definition(spec));
  EXPECT_EQ(boost::json::serialize(queue_spec_to_json(back.spec)),
            boost::json::serialize(queue_spec_to_json(spec)));
}

// Every broken rule is reported at once, each naming the queue and the field.
TEST(spec_json, reports_every_error_naming_queue_and_field) {
  auto p = parse("q", R"({
    "ordering": {"mode": "sorted", "key": 7},
    "lease_ms": "long", "max_attempts": 0, "retries": 3,
    "throttles": [{"rate_per_s": "fast", "burst": 1.5}, 4],
    "delivery_durability": "forever", "sync_writes": 1})");
  EXPECT_THAT(messages(p),
              testing::UnorderedElementsAre(
                  "queue 'q': ordering.mode: 'sorted' is not one of none, queue, key",
                  "queue 'q': lease_ms: must be an integer",
                  "queue 'q': max_attempts: must be between 1 and 1000",
                  "queue 'q': retries: unknown field (known: ordering, lease_ms, max_attempts, "
                  "throttles, delivery_durability, sync_writes, store_headers, dedupe, shards, "
                  "shard_key, max_depth, retention_ms, on_expiry, dead_letter_retention_ms)",
                  "queue 'q': throttles[0].rate_per_s: must be a number",
                  "queue 'q': throttles[0].burst: must be an integer",
                  "queue 'q': throttles[1]: must be an object",
                  "queue 'q': delivery_durability: 'forever' is not one of fast, durable",
                  "queue 'q': sync_writes: must be true or false"));
}

TEST(spec_json, key_component_errors_name_their_index) {
  auto p = parse("q", R"({"ordering": {"mode": "key", "key": [
      {"header": 3}, {"fairness_key": false}, {"header": "a", "attribute": "b"}, {"color": "x"},
      "account"]}})");
  EXPECT_THAT(
      messages(p),
      testing::UnorderedElementsAre(
          "queue 'q': ordering.key[0].header: must be a string",
          "queue 'q': ordering.key[1].fairness_key: must be true (omit the component instead)",
          "queue 'q': ordering.key[2]: must have exactly one of fairness_key, header, "
          "attribute, json",
          "queue 'q': ordering.key[3].color: unknown key component (known: fairness_key, "
          "header, attribute, json)",
          "queue 'q': ordering.key[4]: must be an object",
          "queue 'q': ordering.key: ordered_by() needs at least one component"));
}

// The JSON form goes through queue_spec::validate too: its rules are not duplicated here.
TEST(spec_json, validation_rules_of_the_spec_apply) {
  auto p = parse("bad name", R"({"ordering": {"mode": "key", "key": [{"attribute": "region"}]},
                                 "throttles": [{"rate_per_s": 0}]})");
  EXPECT_THAT(
      messages(p),
      testing::UnorderedElementsAre(
          testing::HasSubstr("queue 'bad name': name: may hold only"),
          "queue 'bad name': ordering.key[0]: attribute 'region' needs an on_enqueue "
          "hook to set it",
          testing::HasSubstr("queue 'bad name': throttles[0].rate_per_s: must be between")));
}

TEST(spec_json, misplaced_ordering_fields_are_errors) {
  EXPECT_THAT(messages(parse("q", R"({"ordering": {"mode": "queue", "key": []}})")),
              testing::ElementsAre("queue 'q': ordering.key: applies only to ordering mode 'key'"));
  EXPECT_THAT(messages(parse("q", R"({"ordering": {"when_key_missing": "unordered"}})")),
              testing::ElementsAre(testing::HasSubstr("ordering.when_key_missing: applies only")));
  EXPECT_THAT(messages(parse("q", R"([1, 2])")),
              testing::ElementsAre("queue 'q': spec: must be an object"));
  EXPECT_THAT(messages(parse("q", R"({"throttles": [{"burst": 2}]})")),
              testing::ElementsAre("queue 'q': throttles[0].rate_per_s: is required"));
}

// docs/api.md "Change a queue's settings": a JSON merge patch of the settings.
TEST(spec_json, a_patch_changes_the_settings_it_names_and_keeps_the_rest) {
  auto have = queue_spec("acme/orders")
                  .ordered_by({key::header("account")})
                  .lease(5s)
                  .max_attempts(3)
                  .throttle({key::header("account")}, 5, 10)
                  .dedupe({key::header("idem")}, 60s);
  auto p = queue_spec_patched(have, boost::json::parse(R"({
    "lease_ms": 60000, "throttles": [{"key": [{"header": "account"}], "rate_per_s": 50,
    "burst": 20}], "dedupe": {"window_ms": 1000}, "delivery_durability": "durable"})"));
  ASSERT_TRUE(p.ok()) << messages(p).front();
  EXPECT_EQ(p.spec.lease_duration(), duration{60s});
  EXPECT_EQ(p.spec.attempts_max(), 3u);
  EXPECT_EQ(p.spec.throttles().at(0).rate_per_s, 50.0);
  EXPECT_EQ(p.spec.throttles().at(0).burst, 20u);
  EXPECT_EQ(p.spec.dedupe_rule()->window, duration{1s});
  EXPECT_EQ(p.spec.delivery_mode(), delivery_durability::durable);
  EXPECT_TRUE(p.spec.same_ordering(have));
  // null puts a setting back to its default.
  auto q = queue_spec_patched(p.spec, boost::json::parse(R"({"lease_ms": null})"));
  ASSERT_TRUE(q.ok()) << messages(q).front();
  EXPECT_EQ(q.spec.lease_duration(), limits::lease_default);
}

TEST(spec_json, max_depth_reads_back_and_a_patch_may_set_or_clear_it) {
  auto p = parse("q", R"({"max_depth": {"messages": 100}})");
  ASSERT_TRUE(p.ok()) << messages(p).front();
  EXPECT_EQ(p.spec.depth_max().messages, 100u);
  EXPECT_FALSE(p.spec.depth_max().bytes);
  auto back = queue_spec_from_json("q", queue_spec_to_json(p.spec));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back.spec.same_definition(p.spec));
  auto bytes = queue_spec_patched(p.spec, boost::json::parse(R"({"max_depth": {"bytes": 4096}})"));
  ASSERT_TRUE(bytes.ok()) << messages(bytes).front();
  EXPECT_EQ(bytes.spec.depth_max().messages, 100u) << "merged field by field";
  EXPECT_EQ(bytes.spec.depth_max().bytes, 4096u);
  auto none = queue_spec_patched(bytes.spec, boost::json::parse(R"({"max_depth": null})"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.spec.depth_max().any());
  EXPECT_THAT(messages(parse("q", R"({"max_depth": {"messages": 0, "rows": 1}})")),
              testing::UnorderedElementsAre(
                  "queue 'q': max_depth.rows: unknown field (known: messages, bytes)",
                  "queue 'q': max_depth.messages: must be between 1 and 1000000000"));
}

TEST(spec_json, retention_reads_back_and_a_patch_may_change_or_clear_it) {
  auto p = parse("q", R"({"retention_ms": 60000, "on_expiry": "drop",
                          "dead_letter_retention_ms": 86400000})");
  ASSERT_TRUE(p.ok()) << messages(p).front();
  const auto& keep = p.spec.retention_rule();
  EXPECT_EQ(keep.max_age, std::optional<duration>{60s});
  EXPECT_EQ(keep.on_expiry, expiry_action::drop);
  EXPECT_EQ(keep.dead_letter_max_age, std::optional<duration>{24h});
  auto json = queue_spec_to_json(p.spec);
  EXPECT_EQ(json.at("retention_ms"), 60000);
  EXPECT_EQ(json.at("on_expiry"), "drop");
  EXPECT_EQ(json.at("dead_letter_retention_ms"), 86400000);
  auto back = queue_spec_from_json("q", json);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back.spec.same_definition(p.spec));
  // Unset: not written; retention_ms alone writes on_expiry (its default) with it.
  auto plain = queue_spec_to_json(queue_spec("q"));
  EXPECT_FALSE(plain.contains("retention_ms"));
  EXPECT_FALSE(plain.contains("on_expiry"));
  EXPECT_FALSE(plain.contains("dead_letter_retention_ms"));
  auto alone = parse("q", R"({"retention_ms": 5})");
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone.spec.retention_rule().on_expiry, expiry_action::dead_letter);
  EXPECT_EQ(queue_spec_to_json(alone.spec).at("on_expiry"), "dead_letter");
  // PATCH: a period changes in place; null clears it.
  auto longer = queue_spec_patched(p.spec, boost::json::parse(R"({"retention_ms": 120000})"));
  ASSERT_TRUE(longer.ok()) << messages(longer).front();
  EXPECT_EQ(longer.spec.retention_rule().max_age, std::optional<duration>{120s});
  EXPECT_EQ(longer.spec.retention_rule().on_expiry, expiry_action::drop) << "kept";
  auto cleared = queue_spec_patched(
      longer.spec,
      boost::json::parse(R"({"retention_ms": null, "dead_letter_retention_ms": null})"));
  ASSERT_TRUE(cleared.ok()) << messages(cleared).front();
  EXPECT_FALSE(cleared.spec.retention_rule().any());
  auto kind = queue_spec_patched(p.spec, boost::json::parse(R"({"on_expiry": "dead_letter"})"));
  ASSERT_TRUE(kind.ok()) << messages(kind).front();
  EXPECT_EQ(kind.spec.retention_rule().on_expiry, expiry_action::dead_letter);
}

TEST(spec_json, retention_errors_name_the_field) {
  EXPECT_THAT(messages(parse("q", R"({"retention_ms": 0, "on_expiry": "delete",
                                      "dead_letter_retention_ms": 31622400001})")),
              testing::UnorderedElementsAre(
                  "queue 'q': retention_ms: must be between 1 and 31622400000",
                  "queue 'q': on_expiry: 'delete' is not one of dead_letter, drop",
                  "queue 'q': dead_letter_retention_ms: must be between 1 and 31622400000"));
  EXPECT_THAT(
      messages(parse("q", R"({"retention_ms": "1h", "dead_letter_retention_ms": 1.5})")),
      testing::UnorderedElementsAre("queue 'q': retention_ms: must be an integer",
                                    "queue 'q': dead_letter_retention_ms: must be an integer"));
  auto bad_patch =
      queue_spec_patched(queue_spec("q"), boost::json::parse(R"({"retention_ms": -1})"));
  EXPECT_THAT(messages(bad_patch),
              testing::ElementsAre("queue 'q': retention_ms: must be between 1 and 31622400000"));
  // on_expiry without retention_ms is accepted (it means nothing until retention_ms is set).
  auto drop = parse("q", R"({"on_expiry": "drop"})");
  ASSERT_TRUE(drop.ok()) << messages(drop).front();
  EXPECT_EQ(queue_spec_to_json(drop.spec).at("on_expiry"), "drop") << "not lost on a round trip";
}

TEST(spec_json, a_patch_that_changes_a_fixed_field_is_refused_naming_each) {
  auto have = queue_spec("q").ordered_by({key::header("account")}).sharded(2);
  auto p = queue_spec_patched(
      have, boost::json::parse(R"({"ordering": {"key": [{"header": "tenant"}]}, "shards": 4,
                                   "sync_writes": false, "lease_ms": 1000})"));
  ASSERT_FALSE(p.ok());
  const std::string fixed =
      ": is fixed once the queue exists (it decides where messages are "
      "stored or how they are keyed); create another queue to change it ";
  EXPECT_THAT(messages(p),
              testing::ElementsAre(
                  "queue 'q': ordering.key" + fixed +
                      R"((existing [{"header":"account"}], requested [{"header":"tenant"}]))",
                  "queue 'q': shards" + fixed + "(existing 2, requested 4)",
                  "queue 'q': sync_writes" + fixed + "(existing true, requested false)"));
  // A mode of another ordering is named as the change it is (not as the rules it breaks).
  auto mode = queue_spec_patched(have, boost::json::parse(R"({"ordering": {"mode": "queue"}})"));
  EXPECT_THAT(messages(mode), testing::ElementsAre("queue 'q': ordering.mode" + fixed +
                                                   R"((existing "key", requested "queue"))"));
  // The same value again is no change.
  auto same = queue_spec_patched(
      have, boost::json::parse(R"({"ordering": {"mode": "key"}, "shards": 2, "lease_ms": 1000})"));
  ASSERT_TRUE(same.ok()) << messages(same).front();
  EXPECT_EQ(same.spec.lease_duration(), duration{1s});
}

TEST(spec_json, a_patch_keeps_throttle_keys_and_the_dedupe_rule_fixed) {
  auto have = queue_spec("q").throttle({key::header("a")}, 1, 1);
  auto more = queue_spec_patched(have, boost::json::parse(R"({"throttles": []})"));
  ASSERT_FALSE(more.ok());
  EXPECT_THAT(messages(more)[0], testing::HasSubstr("queue 'q': throttles: has 1 throttles"));
  auto key = queue_spec_patched(
      have, boost::json::parse(R"({"throttles": [{"key": [{"header": "b"}], "rate_per_s": 1}]})"));
  ASSERT_FALSE(key.ok());
  EXPECT_THAT(messages(key)[0], testing::HasSubstr("queue 'q': throttles[0].key: is fixed"));
  auto dedupe = queue_spec_patched(
      have, boost::json::parse(R"({"dedupe": {"key": [{"header": "id"}], "window_ms": 10}})"));
  ASSERT_FALSE(dedupe.ok());
  EXPECT_THAT(messages(dedupe)[0], testing::HasSubstr("queue 'q': dedupe: the queue has no"));
}

TEST(spec_json, a_patch_of_stored_headers_keeps_the_stored_headers_check) {
  auto have = queue_spec("q").ordered_by({key::header("account")});
  auto p =
      queue_spec_patched(have, boost::json::parse(R"({"store_headers": {"deny": ["account"]}})"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(messages(p)[0],
              testing::HasSubstr("ordering.key[0]: header 'account' is a key component but the "
                                 "queue does not store it"));
  auto bad = queue_spec_patched(have, boost::json::parse(R"({"lease_ms": 0, "colour": 1})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(messages(bad),
              testing::Contains(testing::HasSubstr("queue 'q': colour: unknown field")));
  EXPECT_THAT(messages(bad), testing::Contains(testing::HasSubstr("queue 'q': lease_ms: must be")));
}

TEST(spec_json, a_queue_with_a_key_function_is_patched_in_process_only) {
  key_function tenant = [](const message&) -> std::optional<std::string> { return "t"; };
  auto have = queue_spec("q").ordered_by({key::function("tenant", tenant)});
  auto p = queue_spec_patched(have, boost::json::parse(R"({"lease_ms": 1000})"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(messages(p)[0], testing::HasSubstr("in-process API"));
  // In process the spec itself is the request: its function stays.
  auto in_process =
      have.updated(queue_spec("q").ordered_by({key::function("tenant", tenant)}).lease(1s));
  ASSERT_TRUE(in_process) << in_process.err().message;
  EXPECT_EQ(in_process.value().lease_duration(), duration{1s});
  EXPECT_FALSE(in_process.value().functions_missing());
}

}  // namespace
}  // namespace laneq
