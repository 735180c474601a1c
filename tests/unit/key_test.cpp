// Unit tests for key components, resolution and encoding (docs/design/ordering.md O1-O3).
#include "laneq/key.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <random>
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

// -- key_view: the same keys as resolve, encode_key and delivered_key, without the copies -------

/// A value of one of the lengths that matter: empty, short, the SSO edge, the 128-byte bound
/// and just over it (hashed), with any byte (NUL included).
std::string random_value(std::mt19937_64& rng) {
  static constexpr std::size_t lengths[] = {0, 1, 5, 15, 16, 127, 128, 129, 300};
  std::string s(lengths[rng() % std::size(lengths)], '\0');
  for (auto& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() & 0xFF : 'a' + rng() % 3);
  return s;
}

/// A component of any kind, reading a name the message may or may not hold.
key_component random_component(std::mt19937_64& rng) {
  static const char* const names[] = {"a", "b", "c"};
  std::string name = names[rng() % 3];
  switch (rng() % 6) {
    case 0: return key::fairness_key();
    case 1: return key::header(name);
    case 2: return key::attribute(name);
    case 3: return key::json(name + (rng() % 2 ? ".x" : ""));
    case 4: {
      auto value = random_value(rng);
      return key::function("f", [value, missing = rng() % 4 == 0](const message&) -> opt {
        if (missing) return std::nullopt;
        return value;
      });
    }
    default: return key::function("throws", [](const message&) -> opt { throw 1; });
  }
}

message random_keyed_message(std::mt19937_64& rng) {
  message m;
  m.fairness_key = random_value(rng);
  static const char* const names[] = {"a", "B", "c"};
  for (auto n = rng() % 4; n > 0; --n) m.headers.push_back({names[rng() % 3], random_value(rng)});
  for (auto n = rng() % 3; n > 0; --n)
    m.attributes.push_back({names[rng() % 3], random_value(rng)});
  switch (rng() % 3) {
    case 0: m.body = "not json"; break;
    case 1: m.body = R"({"a": {"x": ")" + std::string(rng() % 200, 'j') + R"("}, "b": 7})"; break;
    default: m.body = R"({"c": ")" + std::string(rng() % 200, 'k') + R"("})";
  }
  return m;
}

TEST(key, key_view_gives_the_bytes_of_resolve_encode_key_and_delivered_key) {
  auto seed = test::seed_from_env(std::random_device{}());
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 3000; ++i) {
    std::vector<key_component> cs;
    // Up to one past key_components_max: the view then holds its values off the stack.
    for (auto n = 1 + rng() % (limits::key_components_max + 1); n > 0; --n)
      cs.push_back(random_component(rng));
    auto m = random_keyed_message(rng);
    const key_source src{m};
    auto resolved = resolve(cs, src);
    const key_view view{cs, src};
    ASSERT_EQ(view.size(), cs.size());
    for (std::size_t c = 0; c < cs.size(); ++c) {
      ASSERT_EQ(view[c].has_value(), resolved.values[c].has_value()) << "component " << c;
      if (view[c]) {
        ASSERT_EQ(*view[c], *resolved.values[c]) << "component " << c;
      }
      ASSERT_EQ(cs[c].value_in(src), resolved.values[c]) << "component " << c;
    }
    ASSERT_EQ(view.first_missing(), resolved.first_missing());
    ASSERT_EQ(view.encoded(), encode_key(resolved));
    ASSERT_EQ(view.delivered(), delivered_key(resolved));
  }
}

TEST(key, a_function_value_over_128_bytes_is_hashed_like_any_other) {
  std::string long_value(200, 'v');
  auto m = with_headers({{"h", long_value}});
  auto from_header = key::header("h").value_in(m);
  auto from_function =
      key::function("f", [&](const message&) -> opt { return long_value; }).value_in(m);
  ASSERT_TRUE(from_header.has_value());
  EXPECT_EQ(*from_header, bound_key(long_value));
  EXPECT_EQ(from_function, from_header);
}

}  // namespace
}  // namespace laneq
