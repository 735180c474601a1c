// Unit tests for the storage codec (libqueue/include/laneq/codec.hpp): keys sort in arrival
// order, records round-trip, and any damage to a record is detected on read.
#include "laneq/codec.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

namespace laneq {
namespace {

message sample(std::mt19937_64& rng) {
  auto text = [&rng](std::size_t max) {
    std::string s(rng() % (max + 1), '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);  // any byte, NUL included
    return s;
  };
  message m;
  m.id = message_id{rng()};
  m.seq = message_seq{rng()};
  m.enqueued_at = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.delay_until = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.not_before = timestamp{-static_cast<std::int64_t>(rng() >> 2)};
  m.attempts = static_cast<std::uint32_t>(rng());
  m.fairness_key = text(40);
  m.body = text(300);
  for (std::size_t i = rng() % 4; i > 0; --i) m.headers.push_back({text(10), text(20)});
  for (std::size_t i = rng() % 3; i > 0; --i) m.attributes.push_back({text(10), text(20)});
  return m;
}

std::uint64_t seed_from_env() {
  if (const char* s = std::getenv("LANEQ_UNIT_SEED")) return std::strtoull(s, nullptr, 10);
  return 20261130;
}

TEST(codec, crc32c_matches_the_standard_check_value) {
  EXPECT_EQ(codec::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(codec::crc32c(""), 0u);
}

TEST(codec, message_keys_sort_by_queue_then_arrival_seq) {
  auto a = codec::message_key(1, message_seq{255});
  auto b = codec::message_key(1, message_seq{256});
  auto c = codec::message_key(2, message_seq{1});
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_EQ(a.size(), 16u);
  auto parsed = codec::parse_message_key(b);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value().first, 1u);
  EXPECT_EQ(parsed.value().second, message_seq{256});
  EXPECT_EQ(codec::parse_message_key("short").err().code, errc::corrupt_record);
}

TEST(codec, records_round_trip) {
  auto seed = seed_from_env();
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 2000; ++i) {
    auto m = sample(rng);
    auto back = codec::decode_message(codec::encode_message(m));
    ASSERT_TRUE(back.ok()) << to_string(back.err()) << " (rerun: LANEQ_UNIT_SEED=" << seed << ")";
    ASSERT_EQ(back.value(), m) << "rerun: LANEQ_UNIT_SEED=" << seed;
  }
}

TEST(codec, every_flipped_bit_and_every_truncation_is_detected) {
  std::mt19937_64 rng{7};
  auto m = sample(rng);
  m.body = "payload";
  auto record = codec::encode_message(m);
  for (std::size_t byte = 0; byte < record.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      auto damaged = record;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      auto r = codec::decode_message(damaged);
      ASSERT_FALSE(r.ok()) << "flip of bit " << bit << " in byte " << byte << " went unnoticed";
      EXPECT_EQ(r.err().code, errc::corrupt_record);
    }
  for (std::size_t n = 0; n < record.size(); ++n)
    ASSERT_FALSE(codec::decode_message(record.substr(0, n)).ok()) << "truncated to " << n;
  ASSERT_FALSE(codec::decode_message(record + "x").ok()) << "a trailing byte went unnoticed";
}

TEST(codec, an_unknown_format_version_is_refused_by_name) {
  std::mt19937_64 rng{1};
  auto record = codec::encode_message(sample(rng));
  record[0] = static_cast<char>(codec::message_format_version + 1);
  auto r = codec::decode_message(record);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.err().message.find("format version 2 is not known"), std::string::npos)
      << r.err().message;
}

}  // namespace
}  // namespace laneq
