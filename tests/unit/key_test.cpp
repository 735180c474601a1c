// Unit tests for key components, resolution and encoding (docs/design/ordering.md O1-O3).
#include "laneq/key.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

using opt = std::optional<std::string>;

message with_headers(std::vector<header_field> headers) {
  return test::make_message(1, {}, "tenant-1", std::move(headers));
}

key_values values(std::vector<opt> v) {
  return key_values{std::move(v)};
}

TEST(key, header_lookup_ignores_case) {
  auto m = with_headers({{"ACCOUNT", "A"}});
  EXPECT_EQ(key::header("Account").value_in(m), std::optional<std::string_view>{"A"});
  EXPECT_EQ(key::header("account").value_in(m), std::optional<std::string_view>{"A"});
  EXPECT_EQ(key::header("ACCOUNT").value_in(m), std::optional<std::string_view>{"A"});
}

TEST(key, header_lookup_takes_the_first_matching_header) {
  auto m = with_headers({{"x-other", "0"}, {"Account", "first"}, {"account", "second"}});
  EXPECT_EQ(key::header("ACCOUNT").value_in(m), std::optional<std::string_view>{"first"});
}

TEST(key, missing_header_has_no_value) {
  auto m = with_headers({{"accounts", "A"}, {"accoun", "B"}});
  EXPECT_EQ(key::header("account").value_in(m), std::nullopt);
}

TEST(key, present_but_empty_header_is_a_value) {
  auto m = with_headers({{"account", ""}});
  EXPECT_EQ(key::header("account").value_in(m), std::optional<std::string_view>{""});
}

TEST(key, attribute_lookup_is_exact) {
  auto m = with_headers({{"region", "from-header"}});
  m.attributes = {{"Region", "upper"}, {"region", "lower"}};
  EXPECT_EQ(key::attribute("region").value_in(m), std::optional<std::string_view>{"lower"});
  EXPECT_EQ(key::attribute("Region").value_in(m), std::optional<std::string_view>{"upper"});
  EXPECT_EQ(key::attribute("REGION").value_in(m), std::nullopt);
}

TEST(key, attribute_is_not_read_from_headers) {
  auto m = with_headers({{"region", "eu"}});
  EXPECT_EQ(key::attribute("region").value_in(m), std::nullopt);
}

TEST(key, fairness_key_component_reads_the_fairness_key) {
  auto m = with_headers({{"fairness_key", "from-header"}});
  EXPECT_EQ(key::fairness_key().value_in(m), std::optional<std::string_view>{"tenant-1"});
  m.fairness_key.clear();
  EXPECT_EQ(key::fairness_key().value_in(m), std::optional<std::string_view>{""})
      << "an empty fairness key is still a value";
}

TEST(key, components_describe_themselves) {
  EXPECT_EQ(key::fairness_key().describe(), "fairness_key");
  EXPECT_EQ(key::header("Account").describe(), "header:Account");
  EXPECT_EQ(key::attribute("region").describe(), "attribute:region");
  EXPECT_EQ(key::header("account").which(), key_component::kind::header);
  EXPECT_EQ(key::header("account").name(), "account");
  EXPECT_EQ(key::fairness_key().name(), "");
}

TEST(key, header_components_compare_names_ignoring_case_and_attributes_exactly) {
  EXPECT_EQ(key::header("Account"), key::header("ACCOUNT"));
  EXPECT_FALSE(key::header("account") == key::header("accounts"));
  EXPECT_FALSE(key::attribute("Region") == key::attribute("region"));
  EXPECT_EQ(key::attribute("region"), key::attribute("region"));
  EXPECT_FALSE(key::header("region") == key::attribute("region"));
  EXPECT_EQ(key::fairness_key(), key::fairness_key());
}

TEST(key, resolve_reports_the_first_missing_component) {
  auto m = with_headers({{"account", "A"}});
  std::vector<key_component> cs{key::fairness_key(), key::header("account"), key::header("region"),
                                key::attribute("shard")};
  auto v = resolve(cs, m);
  ASSERT_EQ(v.values.size(), 4u);
  EXPECT_EQ(v.values[0], opt{"tenant-1"});
  EXPECT_EQ(v.values[1], opt{"A"});
  EXPECT_EQ(v.values[2], std::nullopt);
  EXPECT_EQ(v.values[3], std::nullopt);
  EXPECT_EQ(v.first_missing(), std::optional<std::size_t>{2});
  EXPECT_EQ(resolve({key::header("account")}, m).first_missing(), std::nullopt);
}

TEST(key, encodes_each_value_with_a_big_endian_length_prefix) {
  using namespace std::string_literals;
  EXPECT_EQ(encode_key(values({"a"})), "\0\0\0\1a"s);
  EXPECT_EQ(encode_key(values({"ab", std::nullopt})), "\0\0\0\2ab\xFF\xFF\xFF\xFF"s);
  EXPECT_EQ(encode_key(values({""})), "\0\0\0\0"s);
  EXPECT_EQ(encode_key(values({std::string(300, 'x')})), "\0\0\x01\x2C"s + std::string(300, 'x'));
  EXPECT_EQ(encode_key(values({})), "");
}

TEST(key, encoding_does_not_confuse_where_one_value_ends) {
  EXPECT_NE(encode_key(values({"a", "bc"})), encode_key(values({"ab", "c"})));
  EXPECT_NE(encode_key(values({"", "a"})), encode_key(values({"a", ""})));
}

TEST(key, encoding_tells_an_absent_value_from_an_empty_one) {
  EXPECT_NE(encode_key(values({std::nullopt})), encode_key(values({""})));
  EXPECT_NE(encode_key(values({"a", std::nullopt})), encode_key(values({"a", ""})));
}

TEST(key, encoding_is_injective_over_tricky_tuples) {
  using namespace std::string_literals;
  // Values that look like length prefixes or the absent marker, and values that only differ in
  // where the boundary falls.
  const std::vector<opt> alphabet{
      std::nullopt,        ""s,     "a"s, "b"s, "ab"s, "\0\0\0\1"s, "\0\0\0\1a"s,
      "\xFF\xFF\xFF\xFF"s, "\xFF"s, "A"s,
  };
  std::set<std::string> seen;
  std::size_t tuples = 0;
  for (const auto& x : alphabet) {
    seen.insert(encode_key(values({x})));
    ++tuples;
    for (const auto& y : alphabet) {
      seen.insert(encode_key(values({x, y})));
      ++tuples;
      for (const auto& z : alphabet) {
        seen.insert(encode_key(values({x, y, z})));
        ++tuples;
      }
    }
  }
  EXPECT_EQ(seen.size(), tuples) << "two tuples share an encoding";
}

TEST(key, describe_key_names_components_and_shows_absent_values_as_a_dash) {
  std::vector<key_component> cs{key::fairness_key(), key::header("account"),
                                key::attribute("region")};
  EXPECT_EQ(describe_key(cs, values({"t1", "A", std::nullopt})),
            "fairness_key=t1 header:account=A attribute:region=-");
  EXPECT_EQ(describe_key({key::header("account")}, values({""})), "header:account=");
  EXPECT_EQ(describe_key({}, values({})), "");
}

}  // namespace
}  // namespace laneq
