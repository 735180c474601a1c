// Unit tests for held_message (libqueue/include/laneq/held_message.hpp), the packed form of a
// message in a group's window: packing keeps every field, the fairness key reads without
// unpacking, and a small message takes the memory ADR 0009 counts on.
#include "laneq/held_message.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

/// A string of `n` bytes, any byte value (NUL and bytes above 0x7f included).
std::string bytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

/// Lengths around the varint's byte boundaries (127, 128, 16,383, 16,384) and SSO's (15, 16).
std::size_t length(std::mt19937_64& rng) {
  static constexpr std::size_t edges[] = {0, 1, 15, 16, 127, 128, 129, 16383, 16384, 70000};
  return rng() % 2 ? edges[rng() % std::size(edges)] : rng() % 300;
}

message sample(std::mt19937_64& rng) {
  message m;
  m.id = message_id{rng()};
  m.seq = message_seq{rng()};
  m.body = bytes(rng, length(rng));
  m.fairness_key = bytes(rng, length(rng));
  for (auto n = rng() % 4; n > 0; --n)
    m.headers.push_back({bytes(rng, length(rng)), bytes(rng, length(rng))});
  for (auto n = rng() % 3; n > 0; --n)
    m.attributes.push_back({bytes(rng, length(rng)), bytes(rng, length(rng))});
  m.enqueued_at = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.delay_until = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.not_before = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.attempts = static_cast<std::uint32_t>(rng());
  return m;
}

TEST(held_message, packing_keeps_every_field) {
  auto seed = test::seed_from_env(std::random_device{}());
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 300; ++i) {
    auto m = sample(rng);
    const held_message held{m};
    EXPECT_EQ(held.id, m.id);
    EXPECT_EQ(held.seq, m.seq);
    EXPECT_EQ(held.body, m.body);
    EXPECT_EQ(held.fairness_key(), m.fairness_key);
    EXPECT_EQ(held.not_before, m.not_before);
    EXPECT_EQ(held.attempts, m.attempts);
    ASSERT_EQ(held.unpack(), m);
    ASSERT_EQ(held_message{held}.take(), m);
  }
}

TEST(held_message, unpacking_shows_the_fields_as_the_group_changed_them) {
  auto m = test::make_message(7, timestamp{} + 1s, "tenant-a", {{"g", "k"}, {"X-Id", "42"}});
  held_message held{m};
  held.attempts = 3;
  held.not_before = timestamp{} + 9s;
  auto out = held.unpack();
  EXPECT_EQ(out.attempts, 3u);
  EXPECT_EQ(out.not_before, timestamp{} + 9s);
  EXPECT_EQ(out.headers, m.headers);
  EXPECT_EQ(out.fairness_key, "tenant-a");
  EXPECT_EQ(held.body, m.body) << "unpack copies; the group keeps its message";
}

TEST(held_message, a_small_message_takes_one_allocation_class_of_112_bytes) {
  // ADR 0009: a live idle group's message, 8-byte body and one short key header, is the
  // struct alone; its strings stay inside it.
  static_assert(sizeof(held_message) <= 112);
  message m;
  m.body = std::string(8, 'x');
  m.headers = {{"g", "123456"}};
  held_message held{m};
  // Packed: the fairness key's length 1, the header count 1, "g" 2, "123456" 7, no attributes 1.
  EXPECT_EQ(held.footprint(), sizeof(held_message) + 8 + 12);
  EXPECT_LT(held.footprint(), memory_footprint(m)) << "packed is smaller than a whole message";
}

}  // namespace
}  // namespace laneq
