// Unit tests for sharded queue specs and the shard of a message (docs/design/sharding.md,
// libqueue/include/laneq/sharding.hpp): the rules a sharded spec must keep, its JSON and stored
// forms, and that a key's shard is fixed, spread and keeps every group in one shard.
#include "laneq/sharding.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "laneq/codec.hpp"
#include "laneq/spec_json.hpp"

namespace laneq {
namespace {

std::string errors_of(const queue_spec& s) {
  std::string out;
  for (const auto& e : s.validate()) out += e.message + "\n";
  return out;
}

message with(std::initializer_list<std::pair<const char*, std::string>> headers) {
  message m;
  for (const auto& [k, v] : headers) m.headers.push_back(header_field{k, v});
  return m;
}

TEST(sharding, a_shard_key_must_be_part_of_the_ordering_key) {
  auto ok = queue_spec("acct")
                .ordered_by({key::header("account"), key::header("order")})
                .sharded(4, {key::header("Account")});
  EXPECT_EQ(errors_of(ok), "") << "a header component matches whatever its case";
  auto bad =
      queue_spec("acct").ordered_by({key::header("account")}).sharded(4, {key::header("region")});
  auto e = errors_of(bad);
  EXPECT_NE(e.find("queue 'acct'"), std::string::npos) << e;
  EXPECT_NE(e.find("shard_key[0]: header:region is not a component of the ordering key"),
            std::string::npos)
      << e;
}

TEST(sharding, specs_that_cannot_shard_are_refused_naming_the_field) {
  auto attr = queue_spec("a").ordered_by({key::attribute("x")}).sharded(2, {key::attribute("x")});
  EXPECT_NE(errors_of(attr).find("shard_key[0]: attribute:x: an attribute is set by on_enqueue"),
            std::string::npos)
      << errors_of(attr);
  auto whole_attr = queue_spec("a").ordered_by({key::attribute("x")}).sharded(2);
  EXPECT_NE(errors_of(whole_attr).find("shard_key: the ordering key's attribute:x"),
            std::string::npos)
      << errors_of(whole_attr);
  EXPECT_NE(errors_of(queue_spec("a").ordered().sharded(2)).find("shards: an ordered() queue"),
            std::string::npos);
  EXPECT_NE(errors_of(queue_spec("a").sharded(2, {key::header("h")})).find("shard_key: applies"),
            std::string::npos);
  EXPECT_NE(errors_of(queue_spec("a").sharded(0)).find("shards: must be between 1 and 256"),
            std::string::npos);
  EXPECT_NE(errors_of(queue_spec("a").sharded(257)).find("shards: must be between 1 and 256"),
            std::string::npos);
  EXPECT_EQ(errors_of(queue_spec("a").sharded(8)), "") << "an unordered queue spreads";
}

TEST(sharding, a_sharded_spec_round_trips_through_json_and_its_record) {
  auto spec = queue_spec("acct")
                  .ordered_by({key::fairness_key(), key::header("account")})
                  .sharded(4, {key::header("account")});
  auto json = queue_spec_to_json(spec);
  EXPECT_EQ(json.at("shards").to_number<std::int64_t>(), 4);
  auto back = queue_spec_from_json("acct", json);
  ASSERT_TRUE(back.errors.empty()) << back.errors.front().message;
  EXPECT_TRUE(back.spec.same_definition(spec));
  codec::queue_record rec{7, spec, false, {8, 9, 10}};
  auto decoded = codec::decode_queue(codec::encode_queue(rec));
  ASSERT_TRUE(decoded.ok()) << decoded.err().message;
  EXPECT_TRUE(decoded.value().spec.same_definition(spec));
  EXPECT_EQ(decoded.value().shard_uids, (std::vector<std::uint64_t>{8, 9, 10}));
  EXPECT_EQ(decoded.value().spec.shard_count(), 4u);
  auto other = spec;
  other.sharded(8, {key::header("account")});
  auto diff = spec.differences(other);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0], "shards (existing 4, requested 8)");
}

TEST(sharding, a_queue_of_one_shard_keeps_the_record_it_had_before_shards) {
  auto spec = queue_spec("q").ordered_by({key::header("account")});
  codec::queue_record rec{3, spec, false, {}};
  auto plain = codec::encode_queue(rec);
  rec.spec.sharded(1);
  EXPECT_EQ(codec::encode_queue(rec), plain);
}

TEST(sharding, a_key_has_one_shard_and_keys_spread_over_all) {
  auto spec = queue_spec("acct")
                  .ordered_by({key::header("account"), key::header("order")})
                  .sharded(4, {key::header("account")});
  std::map<std::uint32_t, int> per_shard;
  for (int a = 0; a < 400; ++a) {
    std::set<std::uint32_t> shards_of_account;
    for (int o = 0; o < 3; ++o) {
      auto m = with({{"account", std::to_string(a)}, {"order", std::to_string(o)}});
      key_source src{m};
      auto where = place(spec, src);
      ASSERT_TRUE(where.ok());
      auto s = shard_of(spec, where.value(), src);
      ASSERT_TRUE(s.has_value());
      ASSERT_LT(*s, 4u);
      shards_of_account.insert(*s);
      EXPECT_EQ(shard_of(spec, where.value(), src), s) << "the same key, the same shard";
    }
    EXPECT_EQ(shards_of_account.size(), 1u) << "an account's groups share its shard";
    ++per_shard[*shards_of_account.begin()];
  }
  ASSERT_EQ(per_shard.size(), 4u);
  for (const auto& [s, n] : per_shard) EXPECT_GT(n, 60) << "shard " << s << " got " << n << "/400";
}

TEST(sharding, unordered_messages_go_by_their_dedupe_key_or_are_spread) {
  auto spec = queue_spec("u").sharded(4).dedupe({key::header("id")}, std::chrono::seconds{60});
  auto m = with({{"id", "k1"}});
  key_source src{m};
  auto where = place(spec, src);
  ASSERT_TRUE(where.ok());
  auto s = shard_of(spec, where.value(), src);
  ASSERT_TRUE(s.has_value());
  auto again = with({{"id", "k1"}});
  key_source src2{again};
  EXPECT_EQ(shard_of(spec, where.value(), src2), s) << "a duplicate meets its original";
  auto none = with({});
  key_source src3{none};
  EXPECT_FALSE(shard_of(spec, where.value(), src3).has_value()) << "spread by the caller";
}

TEST(sharding, a_message_id_names_its_shard) {
  EXPECT_EQ(shard_of_id(message_id{first_id_of_shard(0)}), 0u);
  EXPECT_EQ(shard_of_id(message_id{first_id_of_shard(7) + 12345}), 7u);
}

}  // namespace
}  // namespace laneq
