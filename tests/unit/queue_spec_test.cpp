// Unit tests for queue_spec: builder, validation, definitions and placement
// (docs/design/ordering.md O1, O2, O8; docs/design/throttling.md T1).
#include "laneq/queue_spec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;
using testing::StartsWith;

queue_spec account_events() {
  return queue_spec("account-events")
      .ordered_by({key::fairness_key(), key::header("account")})
      .when_ordering_key_missing(missing_ordering_key::unordered);
}

enqueue_hook some_hook() {
  return [](const message&) -> result<std::vector<attribute>> {
    return std::vector<attribute>{{"region", "eu"}};
  };
}

message msg(std::string fairness_key, std::vector<header_field> headers) {
  return test::make_message(1, {}, std::move(fairness_key), std::move(headers));
}

std::vector<std::string> messages_of(const std::vector<error>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) {
    EXPECT_EQ(e.code, errc::invalid_spec) << e.message;
    out.push_back(e.message);
  }
  return out;
}

// -- builder ---------------------------------------------------------------------------------

TEST(queue_spec, builder_reads_like_the_seed) {
  auto spec = account_events();
  EXPECT_EQ(spec.name(), "account-events");
  EXPECT_EQ(spec.ordering(), ordering_mode::key);
  EXPECT_TRUE(spec.ordered_by_key());
  EXPECT_EQ(spec.ordering_key(),
            (std::vector<key_component>{key::fairness_key(), key::header("account")}));
  EXPECT_EQ(spec.missing_key_policy(), missing_ordering_key::unordered);
  EXPECT_TRUE(spec.validate().empty());
  EXPECT_EQ(spec.describe(),
            "queue 'account-events' ordering=key key=[fairness_key, header:account] "
            "when_key_missing=unordered");
}

TEST(queue_spec, defaults_are_unordered_reject_and_the_limits_defaults) {
  queue_spec spec("jobs");
  EXPECT_EQ(spec.ordering(), ordering_mode::none);
  EXPECT_FALSE(spec.ordered_by_key());
  EXPECT_TRUE(spec.ordering_key().empty());
  EXPECT_EQ(spec.missing_key_policy(), missing_ordering_key::reject);
  EXPECT_EQ(spec.lease_duration(), limits::lease_default);
  EXPECT_EQ(spec.attempts_max(), limits::max_attempts_default);
  EXPECT_TRUE(spec.throttles().empty());
  EXPECT_FALSE(static_cast<bool>(spec.hook()));
  EXPECT_EQ(spec.delivery_mode(), delivery_durability::fast);
  EXPECT_TRUE(spec.syncs_writes());
  EXPECT_TRUE(spec.validate().empty());
  EXPECT_EQ(spec.describe(), "queue 'jobs' ordering=none");
}

TEST(queue_spec, builder_records_delivery_durability_and_sync_writes) {
  auto spec = queue_spec("q").delivery(delivery_durability::durable).sync_writes(false);
  EXPECT_EQ(spec.delivery_mode(), delivery_durability::durable);
  EXPECT_FALSE(spec.syncs_writes());
  EXPECT_TRUE(spec.validate().empty());
  spec.delivery(delivery_durability::fast).sync_writes(true);
  EXPECT_EQ(spec.delivery_mode(), delivery_durability::fast);
  EXPECT_TRUE(spec.syncs_writes());
}

TEST(queue_spec, describe_mentions_delivery_and_sync_only_when_not_default) {
  EXPECT_EQ(queue_spec("q").delivery(delivery_durability::fast).sync_writes(true).describe(),
            "queue 'q' ordering=none");
  EXPECT_EQ(queue_spec("q").delivery(delivery_durability::durable).describe(),
            "queue 'q' ordering=none delivery=durable");
  EXPECT_EQ(queue_spec("q").sync_writes(false).describe(), "queue 'q' ordering=none sync=false");
  EXPECT_EQ(account_events().delivery(delivery_durability::durable).sync_writes(false).describe(),
            "queue 'account-events' ordering=key key=[fairness_key, header:account] "
            "when_key_missing=unordered delivery=durable sync=false");
}

TEST(queue_spec, ordered_makes_the_whole_queue_one_group_and_drops_a_key) {
  auto spec = queue_spec("audit").ordered_by({key::header("account")}).ordered();
  EXPECT_EQ(spec.ordering(), ordering_mode::queue);
  EXPECT_TRUE(spec.ordering_key().empty());
  EXPECT_TRUE(spec.validate().empty());
  EXPECT_EQ(spec.describe(), "queue 'audit' ordering=queue");
}

TEST(queue_spec, builder_records_lease_attempts_throttles_and_hook) {
  auto spec = queue_spec("q")
                  .lease(5s)
                  .max_attempts(3)
                  .throttle({key::header("tenant")}, 2.5, 4)
                  .throttle({}, 100.0, 10)
                  .on_enqueue(some_hook());
  EXPECT_EQ(spec.lease_duration(), 5s);
  EXPECT_EQ(spec.attempts_max(), 3u);
  EXPECT_EQ(spec.throttles(),
            (std::vector<throttle_spec>{{{key::header("tenant")}, 2.5, 4}, {{}, 100.0, 10}}));
  ASSERT_TRUE(static_cast<bool>(spec.hook()));
  auto attrs = spec.hook()(test::make_message(1));
  ASSERT_TRUE(attrs.ok());
  EXPECT_EQ(attrs.value(), (std::vector<attribute>{{"region", "eu"}}));
  EXPECT_TRUE(spec.validate().empty());
}

// -- validate(): one error per broken rule -----------------------------------------------------

TEST(queue_spec, empty_name_is_one_error) {
  EXPECT_THAT(messages_of(queue_spec("").validate()),
              testing::ElementsAre("queue '': name: is empty"));
  EXPECT_THAT(messages_of(queue_spec().validate()),
              testing::ElementsAre("queue '': name: is empty"));
}

TEST(queue_spec, name_with_a_bad_character_is_one_error) {
  EXPECT_THAT(messages_of(queue_spec("a b/c").validate()),
              testing::ElementsAre("queue 'a b/c': name: may hold only letters, digits, '-', '_', "
                                   "'.' and one '/' after the tenant"));
  EXPECT_TRUE(queue_spec("Az09-_.").validate().empty());
}

// Queue names live in a tenant namespace: `tenant/queue`, or a bare name in tenant `default`.
TEST(queue_spec, tenant_is_the_part_before_the_slash_or_default) {
  EXPECT_EQ(queue_spec("acme/orders").tenant(), "acme");
  EXPECT_EQ(queue_spec("orders").tenant(), "default");
  EXPECT_EQ(tenant_of("globex/orders"), "globex");
  EXPECT_TRUE(queue_spec("acme/orders").validate().empty());
  EXPECT_THAT(messages_of(queue_spec("/orders").validate()),
              testing::ElementsAre("queue '/orders': name: 'tenant/queue' needs a non-empty "
                                   "tenant and queue"));
  EXPECT_THAT(messages_of(queue_spec("acme/").validate()),
              testing::ElementsAre("queue 'acme/': name: 'tenant/queue' needs a non-empty "
                                   "tenant and queue"));
  EXPECT_THAT(
      messages_of(queue_spec("a/b/c").validate()),
      testing::ElementsAre("queue 'a/b/c': name: may hold at most one '/' (between tenant and "
                           "queue)"));
}

TEST(queue_spec, name_longer_than_the_limit_is_one_error) {
  EXPECT_TRUE(queue_spec(std::string(limits::queue_name_bytes_max, 'q')).validate().empty());
  auto long_name = std::string(limits::queue_name_bytes_max + 1, 'q');
  EXPECT_THAT(messages_of(queue_spec(long_name).validate()),
              testing::ElementsAre("queue '" + long_name + "': name: is longer than 128 bytes"));
}

TEST(queue_spec, ordered_by_without_components_is_one_error) {
  EXPECT_THAT(
      messages_of(queue_spec("q").ordered_by({}).validate()),
      testing::ElementsAre("queue 'q': ordering.key: ordered_by() needs at least one component"));
}

TEST(queue_spec, duplicate_component_is_one_error_naming_its_index) {
  auto spec = queue_spec("q").ordered_by(
      {key::header("account"), key::fairness_key(), key::header("Account")});
  EXPECT_THAT(
      messages_of(spec.validate()),
      testing::ElementsAre("queue 'q': ordering.key[2]: header:Account repeats component 0"));
}

TEST(queue_spec, attribute_component_without_an_on_enqueue_hook_is_one_error) {
  auto spec = queue_spec("q").ordered_by({key::attribute("region")});
  EXPECT_THAT(
      messages_of(spec.validate()),
      testing::ElementsAre(
          "queue 'q': ordering.key[0]: attribute 'region' needs an on_enqueue hook to set it"));
  EXPECT_TRUE(spec.on_enqueue(some_hook()).validate().empty());
}

TEST(queue_spec, attribute_in_a_throttle_key_also_needs_the_hook) {
  auto spec = queue_spec("q").throttle({key::attribute("region")}, 1.0, 1);
  EXPECT_THAT(messages_of(spec.validate()),
              testing::ElementsAre("queue 'q': throttles[0].key[0]: attribute 'region' needs an "
                                   "on_enqueue hook to set it"));
}

TEST(queue_spec, header_component_with_an_invalid_name_is_one_error) {
  EXPECT_THAT(messages_of(queue_spec("q").ordered_by({key::header("")}).validate()),
              testing::ElementsAre("queue 'q': ordering.key[0]: header name is empty"));
  EXPECT_THAT(
      messages_of(queue_spec("q").ordered_by({key::header("bad name")}).validate()),
      testing::ElementsAre(
          "queue 'q': ordering.key[0]: header name 'bad name' has a character not allowed in a "
          "header"));
}

TEST(queue_spec, lease_out_of_range_is_one_error) {
  const std::string expected = "queue 'q': lease_ms: must be between 1 and 43200000 ms";
  EXPECT_THAT(messages_of(queue_spec("q").lease(0us).validate()), testing::ElementsAre(expected));
  EXPECT_THAT(messages_of(queue_spec("q").lease(limits::lease_min - 1us).validate()),
              testing::ElementsAre(expected));
  EXPECT_THAT(messages_of(queue_spec("q").lease(limits::lease_max + 1us).validate()),
              testing::ElementsAre(expected));
  EXPECT_TRUE(queue_spec("q").lease(limits::lease_min).validate().empty());
  EXPECT_TRUE(queue_spec("q").lease(limits::lease_max).validate().empty());
}

TEST(queue_spec, max_attempts_out_of_range_is_one_error) {
  const std::string expected = "queue 'q': max_attempts: must be between 1 and 1000";
  EXPECT_THAT(messages_of(queue_spec("q").max_attempts(0).validate()),
              testing::ElementsAre(expected));
  EXPECT_THAT(messages_of(queue_spec("q").max_attempts(limits::max_attempts_max + 1).validate()),
              testing::ElementsAre(expected));
  EXPECT_TRUE(queue_spec("q").max_attempts(1).validate().empty());
  EXPECT_TRUE(queue_spec("q").max_attempts(limits::max_attempts_max).validate().empty());
}

TEST(queue_spec, throttle_rate_out_of_range_is_one_error) {
  const std::string expected =
      "queue 'q': throttles[0].rate_per_s: must be between 0.001 and 1000000";
  for (double rate : {0.0, -1.0, limits::throttle_rate_per_s_min / 2,
                      limits::throttle_rate_per_s_max * 2, std::nan("")}) {
    EXPECT_THAT(messages_of(queue_spec("q").throttle({}, rate, 1).validate()),
                testing::ElementsAre(expected))
        << rate;
  }
  EXPECT_TRUE(queue_spec("q").throttle({}, limits::throttle_rate_per_s_min, 1).validate().empty());
  EXPECT_TRUE(queue_spec("q").throttle({}, limits::throttle_rate_per_s_max, 1).validate().empty());
}

TEST(queue_spec, throttle_burst_out_of_range_is_one_error) {
  const std::string expected = "queue 'q': throttles[1].burst: must be between 1 and 1000000";
  auto zero = queue_spec("q").throttle({}, 1.0, 1).throttle({key::header("tenant")}, 1.0, 0);
  EXPECT_THAT(messages_of(zero.validate()), testing::ElementsAre(expected));
  auto huge =
      queue_spec("q").throttle({}, 1.0, 1).throttle({}, 1.0, limits::throttle_burst_max + 1);
  EXPECT_THAT(messages_of(huge.validate()), testing::ElementsAre(expected));
}

TEST(queue_spec, too_many_throttles_is_one_error) {
  auto spec = queue_spec("q");
  for (std::size_t i = 0; i <= limits::throttles_max; ++i) spec.throttle({}, 1.0, 1);
  EXPECT_THAT(messages_of(spec.validate()),
              testing::ElementsAre("queue 'q': throttles: at most 4 allowed"));
}

TEST(queue_spec, missing_key_policy_on_a_queue_without_a_key_is_one_error) {
  EXPECT_THAT(
      messages_of(
          queue_spec("q").when_ordering_key_missing(missing_ordering_key::reject).validate()),
      testing::ElementsAre("queue 'q': ordering.when_key_missing: applies only to ordered_by(); "
                           "this queue is ordering mode 'none'"));
  EXPECT_THAT(messages_of(queue_spec("q")
                              .ordered()
                              .when_ordering_key_missing(missing_ordering_key::unordered)
                              .validate()),
              testing::ElementsAre("queue 'q': ordering.when_key_missing: applies only to "
                                   "ordered_by(); this queue is ordering mode 'queue'"));
}

TEST(queue_spec, several_broken_rules_give_exactly_one_error_each) {
  auto spec =
      queue_spec("bad name")
          .ordered_by({key::header("account"), key::header("ACCOUNT"), key::attribute("region")})
          .lease(0us)
          .max_attempts(0)
          .throttle({key::fairness_key()}, 0.0, 0);
  auto errors = messages_of(spec.validate());
  ASSERT_EQ(errors.size(), 7u) << testing::PrintToString(errors);
  for (const auto& e : errors) EXPECT_THAT(e, StartsWith("queue 'bad name': "));
  EXPECT_THAT(errors[0], StartsWith("queue 'bad name': name: "));
  EXPECT_THAT(errors[1], StartsWith("queue 'bad name': ordering.key[1]: header:ACCOUNT repeats"));
  EXPECT_THAT(errors[2], StartsWith("queue 'bad name': ordering.key[2]: attribute 'region'"));
  EXPECT_THAT(errors[3], StartsWith("queue 'bad name': lease_ms: "));
  EXPECT_THAT(errors[4], StartsWith("queue 'bad name': max_attempts: "));
  EXPECT_THAT(errors[5], StartsWith("queue 'bad name': throttles[0].rate_per_s: "));
  EXPECT_THAT(errors[6], StartsWith("queue 'bad name': throttles[0].burst: "));
}

TEST(queue_spec, empty_name_and_missing_policy_without_key_are_two_errors) {
  auto spec = queue_spec("").when_ordering_key_missing(missing_ordering_key::unordered);
  auto errors = messages_of(spec.validate());
  ASSERT_EQ(errors.size(), 2u) << testing::PrintToString(errors);
  EXPECT_EQ(errors[0], "queue '': name: is empty");
  EXPECT_THAT(errors[1], StartsWith("queue '': ordering.when_key_missing: "));
}

// -- same_definition / same_ordering -------------------------------------------------------------

TEST(queue_spec, identical_builders_define_the_same_queue) {
  EXPECT_TRUE(account_events().same_definition(account_events()));
  EXPECT_TRUE(account_events().same_ordering(account_events()));
}

TEST(queue_spec, any_field_but_the_hook_identity_changes_the_definition) {
  auto base = account_events();
  EXPECT_FALSE(base.same_definition(account_events().lease(5s)));
  EXPECT_FALSE(base.same_definition(account_events().max_attempts(3)));
  EXPECT_FALSE(base.same_definition(account_events().throttle({}, 1.0, 1)));
  EXPECT_FALSE(base.same_definition(account_events().delivery(delivery_durability::durable)));
  EXPECT_FALSE(base.same_definition(account_events().sync_writes(false)));
  EXPECT_FALSE(account_events()
                   .delivery(delivery_durability::durable)
                   .same_definition(account_events().sync_writes(false)))
      << "delivery and sync are separate fields";
  EXPECT_TRUE(
      base.same_definition(account_events().delivery(delivery_durability::fast).sync_writes(true)))
      << "setting the defaults explicitly changes nothing";
  EXPECT_TRUE(account_events()
                  .delivery(delivery_durability::durable)
                  .sync_writes(false)
                  .same_definition(
                      account_events().sync_writes(false).delivery(delivery_durability::durable)));
  EXPECT_FALSE(base.same_definition(account_events().on_enqueue(some_hook())))
      << "whether a hook is present counts";
  EXPECT_FALSE(
      base.same_definition(queue_spec("other-events")
                               .ordered_by({key::fairness_key(), key::header("account")})
                               .when_ordering_key_missing(missing_ordering_key::unordered)));
  EXPECT_TRUE(account_events()
                  .on_enqueue(some_hook())
                  .same_definition(account_events().on_enqueue(some_hook())))
      << "two different hook objects still define the same queue";
}

TEST(queue_spec, same_ordering_ignores_everything_but_mode_key_and_policy) {
  auto base = account_events();
  EXPECT_TRUE(base.same_ordering(account_events().lease(5s).max_attempts(2)));
  EXPECT_TRUE(base.same_ordering(
      account_events().delivery(delivery_durability::durable).sync_writes(false)));
  EXPECT_FALSE(base.same_ordering(queue_spec("account-events")
                                      .ordered_by({key::header("account"), key::fairness_key()})
                                      .when_ordering_key_missing(missing_ordering_key::unordered)))
      << "component order matters";
  EXPECT_FALSE(base.same_ordering(
      queue_spec("account-events").ordered_by({key::fairness_key(), key::header("account")})))
      << "the missing-key policy matters";
  EXPECT_FALSE(base.same_ordering(queue_spec("account-events").ordered()));
  EXPECT_FALSE(queue_spec("q").same_ordering(queue_spec("q").ordered()));
  EXPECT_TRUE(base.same_ordering(queue_spec("account-events")
                                     .ordered_by({key::fairness_key(), key::header("ACCOUNT")})
                                     .when_ordering_key_missing(missing_ordering_key::unordered)))
      << "header names compare ignoring case";
}

// -- place() -----------------------------------------------------------------------------------

TEST(queue_spec, unordered_queue_places_every_message_in_no_group) {
  bool missing = true;
  auto p = place(queue_spec("jobs"), msg("t1", {}), &missing);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p.value().ordered);
  EXPECT_FALSE(missing);
}

TEST(queue_spec, ordered_queue_places_every_message_in_the_whole_queue_group) {
  bool missing = true;
  auto p = place(queue_spec("audit").ordered(), msg("t1", {}), &missing);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value().ordered);
  EXPECT_EQ(p.value().group_key, whole_queue_group_key);
  EXPECT_EQ(p.value().ordering_key, "default/audit");  // tenant/queue (lanes.md L5)
  EXPECT_FALSE(missing);
}

TEST(queue_spec, keyed_queue_places_by_the_encoded_key_values) {
  bool missing = true;
  auto p = place(account_events(), msg("t1", {{"Account", "A"}}), &missing);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value().ordered);
  EXPECT_EQ(p.value().group_key,
            encode_key(key_values{std::vector<std::optional<std::string>>{"t1", "A"}}));
  EXPECT_EQ(p.value().ordering_key, "2:t11:A");  // several components: length-prefixed
  EXPECT_FALSE(missing);
}

TEST(queue_spec, same_key_values_share_a_group_and_different_ones_do_not) {
  auto spec = account_events();
  auto a1 = place(spec, msg("t1", {{"account", "A"}}));
  auto a2 = place(spec, msg("t1", {{"ACCOUNT", "A"}, {"other", "x"}}));
  auto b = place(spec, msg("t1", {{"account", "B"}}));
  auto a_other_tenant = place(spec, msg("t2", {{"account", "A"}}));
  ASSERT_TRUE(a1.ok() && a2.ok() && b.ok() && a_other_tenant.ok());
  EXPECT_EQ(a1.value().group_key, a2.value().group_key);
  EXPECT_NE(a1.value().group_key, b.value().group_key);
  EXPECT_NE(a1.value().group_key, a_other_tenant.value().group_key);
}

TEST(queue_spec, reject_policy_fails_naming_the_missing_component) {
  auto spec =
      queue_spec("account-events").ordered_by({key::fairness_key(), key::header("account")});
  bool missing = false;
  auto p = place(spec, msg("t1", {{"accounts", "A"}}), &missing);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, errc::ordering_key_missing);
  EXPECT_THAT(p.err().message, HasSubstr("queue 'account-events'"));
  EXPECT_THAT(p.err().message, HasSubstr("header:account"));
  EXPECT_THAT(p.err().message, HasSubstr("component 1"));
  EXPECT_TRUE(missing);
}

TEST(queue_spec, unordered_policy_places_a_keyless_message_in_no_group) {
  bool missing = false;
  auto p = place(account_events(), msg("t1", {}), &missing);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p.value().ordered);
  EXPECT_TRUE(p.value().group_key.empty());
  EXPECT_TRUE(missing);
}

TEST(queue_spec, keyless_lane_policy_places_a_keyless_message_in_the_keyless_group) {
  auto spec = queue_spec("account-events")
                  .ordered_by({key::header("account")})
                  .when_ordering_key_missing(missing_ordering_key::keyless_lane);
  bool missing = false;
  auto p = place(spec, msg("t1", {}), &missing);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value().ordered);
  EXPECT_EQ(p.value().group_key, keyless_group_key);
  EXPECT_EQ(p.value().ordering_key, "default/account-events");
  EXPECT_TRUE(missing);
  auto keyed = place(spec, msg("t1", {{"account", ""}}));
  ASSERT_TRUE(keyed.ok());
  EXPECT_NE(keyed.value().group_key, keyless_group_key)
      << "an empty value is a key, not a missing one";
  EXPECT_NE(keyed.value().group_key, whole_queue_group_key);
}

TEST(queue_spec, place_works_without_a_missing_flag) {
  auto p = place(account_events(), msg("t1", {}));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p.value().ordered);
}

TEST(queue_spec, enum_names_are_stable) {
  EXPECT_EQ(to_string(ordering_mode::none), "none");
  EXPECT_EQ(to_string(ordering_mode::queue), "queue");
  EXPECT_EQ(to_string(ordering_mode::key), "key");
  EXPECT_EQ(to_string(missing_ordering_key::reject), "reject");
  EXPECT_EQ(to_string(missing_ordering_key::unordered), "unordered");
  EXPECT_EQ(to_string(missing_ordering_key::keyless_lane), "keyless_lane");
  EXPECT_EQ(to_string(delivery_durability::fast), "fast");
  EXPECT_EQ(to_string(delivery_durability::durable), "durable");
}

// admin create's spec_conflict names each setting that differs, with both values.
TEST(queue_spec, differences_name_each_setting_with_both_values) {
  auto a = queue_spec("q")
               .throttle({key::header("t")}, 5, 10)
               .store_headers_deny({"authorization"})
               .dedupe({key::header("id")}, std::chrono::seconds{60})
               .max_depth(100);
  auto b = queue_spec("q")
               .throttle({key::header("t")}, 2.5, 10)
               .dedupe({key::header("id")}, std::chrono::seconds{1})
               .max_depth(std::nullopt, 4096);
  EXPECT_THAT(a.differences(b),
              testing::ElementsAre(
                  "throttles (existing [[header:t] 5/s burst 10], requested [[header:t] 2.5/s "
                  "burst 10])",
                  "store_headers (existing deny [authorization], requested all)",
                  "dedupe (existing [header:id] window_ms 60000, requested [header:id] window_ms "
                  "1000)",
                  "max_depth.messages (existing 100, requested none)",
                  "max_depth.bytes (existing none, requested 4096)"));
}

TEST(queue_spec, retention_differences_validation_update_and_description) {
  auto a = queue_spec("q").retention(60s, expiry_action::drop, std::nullopt);
  auto b = queue_spec("q").retention(std::nullopt, expiry_action::dead_letter, 2h);
  EXPECT_THAT(a.differences(b),
              testing::ElementsAre("retention_ms (existing 60000, requested none)",
                                   "on_expiry (existing drop, requested dead_letter)",
                                   "dead_letter_retention_ms (existing none, requested 7200000)"));
  EXPECT_TRUE(a.validate().empty());
  EXPECT_TRUE(queue_spec("q").retention(std::nullopt, expiry_action::drop).validate().empty())
      << "on_expiry alone is accepted";
  EXPECT_TRUE(
      queue_spec("q")
          .retention(limits::retention_min, expiry_action::dead_letter, limits::retention_max)
          .validate()
          .empty());
  auto bad = queue_spec("q").retention(999us, expiry_action::drop, limits::retention_max + 1ms);
  std::vector<std::string> why;
  for (const auto& e : bad.validate()) why.push_back(e.message);
  EXPECT_THAT(why,
              testing::ElementsAre(
                  "queue 'q': retention_ms: must be between 1 and 31622400000 ms",
                  "queue 'q': dead_letter_retention_ms: must be between 1 and 31622400000 ms"));
  // All three change in place.
  auto up = a.updated(b);
  ASSERT_TRUE(up.ok()) << up.err().message;
  EXPECT_EQ(up.value().retention_rule(), b.retention_rule());
  EXPECT_FALSE(a.updated(bad).ok());
  EXPECT_EQ(a.describe(), "queue 'q' ordering=none retention_ms=60000 on_expiry=drop");
  EXPECT_EQ(b.describe(), "queue 'q' ordering=none dead_letter_retention_ms=7200000");
}

}  // namespace
}  // namespace laneq
