// Unit tests for the storage codec (libqueue/include/laneq/codec.hpp): the key layout and the
// orderings the store relies on, lane ids, records of every kind round-trip, and any damage to a
// record is detected on read.
#include "laneq/codec.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using codec::lane_id;
using codec::tag;

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

std::string random_bytes(std::mt19937_64& rng, std::size_t max) {
  std::string s(rng() % (max + 1), '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xFF);  // any byte, NUL included
  return s;
}

message sample(std::mt19937_64& rng) {
  message m;
  m.id = message_id{rng()};
  m.seq = message_seq{rng()};
  m.enqueued_at = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.delay_until = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  m.not_before = timestamp{-static_cast<std::int64_t>(rng() >> 2)};
  m.attempts = static_cast<std::uint32_t>(rng());
  m.fairness_key = random_bytes(rng, 40);
  m.body = random_bytes(rng, 300);
  for (std::size_t i = rng() % 4; i > 0; --i)
    m.headers.push_back({random_bytes(rng, 10), random_bytes(rng, 20)});
  for (std::size_t i = rng() % 3; i > 0; --i)
    m.attributes.push_back({random_bytes(rng, 10), random_bytes(rng, 20)});
  return m;
}

/// A lane whose first 15 bytes are `fill` and whose last byte is `last`.
lane_id lane_of(std::uint8_t fill, std::uint8_t last) {
  lane_id lane;
  lane.bytes.fill(fill);
  lane.bytes.back() = last;
  return lane;
}

lane_id random_lane(std::mt19937_64& rng) {
  lane_id lane;
  for (auto& b : lane.bytes) b = static_cast<std::uint8_t>(rng() & 0xFF);
  return lane;
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    auto b = static_cast<std::uint8_t>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xF]);
  }
  return out;
}

std::string hex(const lane_id& lane) {
  return hex(std::string_view{reinterpret_cast<const char*>(lane.bytes.data()), lane.bytes.size()});
}

bool in_range(const std::pair<std::string, std::string>& range, const std::string& key) {
  return range.first <= key && key < range.second;
}

// -- record framing helpers --------------------------------------------------------------------

/// The body of a sealed record (after the version byte and the CRC).
std::string body_of(const std::string& record) {
  return record.substr(5);
}

/// Seals `body` the way the codec documents it: version byte, big-endian CRC32C of the body,
/// body. Used to build records whose checksum is right but whose contents are not.
std::string reseal(const std::string& body) {
  std::string out(1, static_cast<char>(codec::message_format_version));
  auto crc = codec::crc32c(body);
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFFu));
  return out + body;
}

/// Decodes a record of one kind, reporting only whether it was accepted.
struct record_kind {
  std::string name;  ///< as the codec names it in its errors
  std::function<result<ok_t>(std::string_view)> decode;
};

template <class T>
result<ok_t> drop_value(result<T> r) {
  if (!r) return r.err();
  return ok_t{};
}

const record_kind message_kind{
    "message", [](std::string_view r) { return drop_value(codec::decode_message(r)); }};
const record_kind queue_kind{"queue",
                             [](std::string_view r) { return drop_value(codec::decode_queue(r)); }};
const record_kind counters_kind{
    "counters", [](std::string_view r) { return drop_value(codec::decode_counters(r)); }};
const record_kind dead_kind{
    "dead letter", [](std::string_view r) { return drop_value(codec::decode_dead_letter(r)); }};
const record_kind lease_kind{"lease",
                             [](std::string_view r) { return drop_value(codec::decode_lease(r)); }};
const record_kind u64_kind{"metadata",
                           [](std::string_view r) { return drop_value(codec::decode_u64(r)); }};

/// Every single-bit flip, every truncation, a trailing byte, unknown versions, and (with a
/// correct checksum) a shortened or lengthened body: each is refused as corrupt_record.
void expect_every_damage_detected(const std::string& record, const record_kind& kind) {
  SCOPED_TRACE(kind.name + " record " + hex(record));
  ASSERT_TRUE(kind.decode(record).ok()) << "the undamaged record must decode";
  ASSERT_EQ(reseal(body_of(record)), record) << "layout: version, CRC32C(body) big-endian, body";
  for (std::size_t byte = 0; byte < record.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      auto damaged = record;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      auto r = kind.decode(damaged);
      ASSERT_FALSE(r.ok()) << "flip of bit " << bit << " in byte " << byte << " went unnoticed";
      EXPECT_EQ(r.err().code, errc::corrupt_record);
      EXPECT_NE(r.err().message.find(kind.name + " record"), std::string::npos) << r.err().message;
    }
  for (std::size_t n = 0; n < record.size(); ++n) {
    auto r = kind.decode(record.substr(0, n));
    ASSERT_FALSE(r.ok()) << "truncated to " << n << " bytes";
    EXPECT_EQ(r.err().code, errc::corrupt_record);
  }
  ASSERT_FALSE(kind.decode(record + "x").ok()) << "a trailing byte went unnoticed";

  // A valid checksum over a body that is not a whole record: the decoder still refuses it.
  auto body = body_of(record);
  for (std::size_t n = 0; n < body.size(); ++n) {
    auto r = kind.decode(reseal(body.substr(0, n)));
    ASSERT_FALSE(r.ok()) << "a body cut to " << n << " bytes under a valid checksum";
    EXPECT_EQ(r.err().code, errc::corrupt_record);
  }
  auto longer = kind.decode(reseal(body + std::string(1, '\0')));
  ASSERT_FALSE(longer.ok()) << "a trailing byte under a valid checksum went unnoticed";
  // (A queue record reads bytes past its last field as the start of an optional section.)
  auto says = [&longer](const char* what) {
    return longer.err().message.find(what) != std::string::npos;
  };
  EXPECT_TRUE(says("trailing bytes") || says("runs past the end")) << longer.err().message;

  for (int version : {0, codec::message_format_version + 1, 0xFF}) {
    if (version == codec::message_format_version) continue;
    auto other = record;
    other[0] = static_cast<char>(version);
    auto r = kind.decode(other);
    ASSERT_FALSE(r.ok()) << "version " << version << " was accepted";
    EXPECT_EQ(r.err().code, errc::corrupt_record);
    EXPECT_NE(r.err().message.find("format version " + std::to_string(version) + " is not known"),
              std::string::npos)
        << r.err().message;
  }
}

// -- checksums ---------------------------------------------------------------------------------

TEST(codec, crc32c_matches_the_standard_check_value) {
  EXPECT_EQ(codec::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(codec::crc32c(""), 0u);
  // Continuing a checksum over a second part gives the checksum of the whole.
  EXPECT_EQ(codec::crc32c("6789", codec::crc32c("12345")), 0xE3069283u);
}

// The 8-bytes-at-a-time path (SSE4.2 where the CPU has it) agrees with the bit-by-bit definition
// for every length and alignment, and across split points.
TEST(codec, crc32c_agrees_with_the_bitwise_definition) {
  auto bitwise = [](std::string_view bytes) {
    std::uint32_t c = ~0u;
    for (char ch : bytes) {
      c ^= static_cast<std::uint8_t>(ch);
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
  };
  std::string data;
  for (std::uint32_t i = 0; i < 300; ++i)
    data.push_back(static_cast<char>((i * 131u + 7u) & 0xFFu));
  for (std::size_t start = 0; start < 9; ++start)
    for (std::size_t len = 0; start + len <= data.size(); len += (len < 40 ? 1 : 37)) {
      std::string_view part{data.data() + start, len};
      ASSERT_EQ(codec::crc32c(part), bitwise(part)) << "start " << start << " length " << len;
      auto half = len / 2;
      EXPECT_EQ(codec::crc32c(part.substr(half), codec::crc32c(part.substr(0, half))),
                bitwise(part));
    }
}

// -- lanes -------------------------------------------------------------------------------------

TEST(codec, lane_id_is_the_first_16_bytes_of_sha256_of_name_nul_key) {
  // Computed independently: `printf 'q\0k' | sha256sum` gives
  // a683efe5aa4c58e1497a37d93bc9e2776b4e6faaa89a730eba3db7872f7f0ea4; the lane is its first half.
  EXPECT_EQ(hex(codec::make_lane_id("q", "k")), "a683efe5aa4c58e1497a37d93bc9e277");
  // `printf 'orders\0acct-42' | sha256sum`: d042579282fe8ea6ca18d23d5fd9ffaaaff6d28d...
  EXPECT_EQ(hex(codec::make_lane_id("orders", "acct-42")), "d042579282fe8ea6ca18d23d5fd9ffaa");
}

TEST(codec, lane_id_is_deterministic_and_depends_on_name_and_key) {
  EXPECT_EQ(codec::make_lane_id("orders", "k1"), codec::make_lane_id("orders", "k1"));
  EXPECT_NE(codec::make_lane_id("orders", "k1"), codec::make_lane_id("orders", "k2"));
  EXPECT_NE(codec::make_lane_id("orders", "k1"), codec::make_lane_id("orders2", "k1"));
  EXPECT_NE(codec::make_lane_id("a", "bc"), codec::make_lane_id("ab", "c"))
      << "the NUL separator keeps (name, key) pairs from running together";
  EXPECT_NE(codec::make_lane_id("q", std::string{whole_queue_group_key}),
            codec::make_lane_id("q", std::string{keyless_group_key}));
  EXPECT_NE(codec::make_lane_id("q", std::string("\0k", 2)), codec::make_lane_id("q", "k"))
      << "binary key bytes, NUL included, all count";
}

TEST(codec, lane_ids_are_never_the_unordered_lane_and_do_not_collide_in_a_sample) {
  EXPECT_TRUE(lane_id{}.unordered());
  EXPECT_FALSE(lane_of(0, 1).unordered()) << "a lane with only its last byte set is a lane";
  lane_id first_only;
  first_only.bytes.front() = 1;
  EXPECT_FALSE(first_only.unordered());
  std::set<std::string> seen;
  for (int q = 0; q < 20; ++q)
    for (int k = 0; k < 100; ++k) {
      auto lane = codec::make_lane_id("queue-" + std::to_string(q), "key-" + std::to_string(k));
      ASSERT_FALSE(lane.unordered());
      seen.insert(hex(lane));
    }
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_FALSE(codec::make_lane_id("", "").unordered());
}

// -- keys --------------------------------------------------------------------------------------

TEST(codec, keys_have_the_documented_layout) {
  lane_id lane;
  for (std::size_t i = 0; i < lane.bytes.size(); ++i)
    lane.bytes[i] = static_cast<std::uint8_t>(0x10 + i);
  auto m = codec::message_key(0x0102030405060708, lane, message_seq{0x1112131415161718});
  EXPECT_EQ(m.size(), 33u);
  EXPECT_EQ(hex(m),
            "4d"                                // 'M'
            "0102030405060708"                  // uid, big-endian
            "101112131415161718191a1b1c1d1e1f"  // lane
            "1112131415161718");                // seq, big-endian
  EXPECT_EQ(hex(codec::queue_key(0x0102030405060708)), "510102030405060708");
  EXPECT_EQ(hex(codec::counters_key(0x0102030405060708)), "430102030405060708");
  EXPECT_EQ(hex(codec::dead_key(1, 0x0A0B)),
            "44"
            "0000000000000001"
            "0000000000000a0b");
  EXPECT_EQ(hex(codec::lease_key(2, message_id{0xFF})),
            "45"
            "0000000000000002"
            "00000000000000ff");
  EXPECT_EQ(codec::meta_key("boot-epoch"), "Aboot-epoch");
  EXPECT_EQ(codec::meta_key(""), "A");
}

TEST(codec, message_keys_of_one_lane_sort_by_seq_across_byte_boundaries) {
  const std::vector<std::uint64_t> seqs{0,          1,
                                        2,          254,
                                        255,        256,
                                        257,        65'535,
                                        65'536,     (1ULL << 24) - 1,
                                        1ULL << 24, (1ULL << 32) - 1,
                                        1ULL << 32, (1ULL << 56) - 1,
                                        1ULL << 56, u64_max - 1,
                                        u64_max};
  for (auto lane : {lane_id{}, lane_of(0x5A, 0x80), lane_of(0xFF, 0xFF)})
    for (std::size_t i = 0; i < seqs.size(); ++i)
      for (std::size_t j = i + 1; j < seqs.size(); ++j)
        EXPECT_LT(codec::message_key(7, lane, message_seq{seqs[i]}),
                  codec::message_key(7, lane, message_seq{seqs[j]}))
            << seqs[i] << " < " << seqs[j] << " in lane " << hex(lane);

  auto seed = test::seed_from_env(20261130);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 5000; ++i) {
    auto uid = rng();
    auto lane = random_lane(rng);
    // Mostly nearby seqs, so that carries across byte boundaries are common.
    auto a = rng() >> (rng() % 64);
    auto b = rng() % 2 ? a + rng() % 300 : rng() >> (rng() % 64);
    auto ka = codec::message_key(uid, lane, message_seq{a});
    auto kb = codec::message_key(uid, lane, message_seq{b});
    ASSERT_EQ(a < b, ka < kb) << a << " vs " << b;
    ASSERT_EQ(a == b, ka == kb) << a << " vs " << b;
  }
}

TEST(codec, message_keys_sort_by_uid_then_lane_then_seq_so_lanes_are_contiguous) {
  auto seed = test::seed_from_env(20261130);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  const std::vector<std::uint64_t> uids{0, 1, 255, 256, 0x0100'0000'0000'0000, u64_max - 1};
  std::vector<lane_id> lanes{lane_id{},           lane_of(0, 1),       lane_of(0x5A, 0x7F),
                             lane_of(0x5A, 0x80), lane_of(0x5A, 0x81), lane_of(0xFF, 0xFE),
                             lane_of(0xFF, 0xFF)};
  for (int i = 0; i < 5; ++i) lanes.push_back(random_lane(rng));

  using parts = std::tuple<std::uint64_t, std::string, std::uint64_t>;
  std::vector<std::pair<std::string, parts>> keys;
  for (auto uid : uids)
    for (const auto& lane : lanes)
      for (auto seq : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{255}, std::uint64_t{256},
                       rng(), u64_max}) {
        keys.emplace_back(codec::message_key(uid, lane, message_seq{seq}),
                          parts{uid, hex(lane), seq});
      }
  std::sort(keys.begin(), keys.end());
  for (std::size_t i = 1; i < keys.size(); ++i)
    ASSERT_LE(keys[i - 1].second, keys[i].second)
        << "key order must be (uid, lane, seq) order at " << hex(keys[i].first);

  // Every key of a queue lies inside its message range, and no other queue's key does.
  for (auto uid : uids) {
    auto range = codec::queue_range(tag::message, uid);
    for (const auto& [key, p] : keys)
      EXPECT_EQ(in_range(range, key), std::get<0>(p) == uid) << hex(key) << " vs uid " << uid;
  }
}

TEST(codec, lane_range_holds_exactly_the_lanes_seqs_after_the_given_one) {
  constexpr std::uint64_t uid = 0x0100;  // uid - 1 and uid + 1 differ from it in the last byte
  const lane_id lane = lane_of(0x5A, 0x80);
  const std::vector<lane_id> neighbours{lane_of(0x5A, 0x7F), lane_of(0x5A, 0x81),
                                        lane_id{},           lane_of(0xFF, 0xFF),
                                        lane_of(0x5A, 0xFF), lane_of(0x5B, 0x00)};
  const std::vector<std::uint64_t> probes{0,   1,    2,    254,        255,         256,    257,
                                          999, 1000, 1001, 1ULL << 32, u64_max - 1, u64_max};
  for (std::uint64_t after : {0ULL, 1ULL, 255ULL, 256ULL, 1000ULL, (1ULL << 32) - 1}) {
    auto range = codec::lane_range(uid, lane, message_seq{after});
    ASSERT_LT(range.first, range.second);
    for (auto seq : probes) {
      EXPECT_EQ(in_range(range, codec::message_key(uid, lane, message_seq{seq})), seq > after)
          << "seq " << seq << " after " << after;
      for (const auto& other : neighbours)
        EXPECT_FALSE(in_range(range, codec::message_key(uid, other, message_seq{seq})))
            << "lane " << hex(other) << " seq " << seq << " leaked into lane " << hex(lane);
      for (auto other_uid : {uid - 1, uid + 1})
        EXPECT_FALSE(in_range(range, codec::message_key(other_uid, lane, message_seq{seq})))
            << "uid " << other_uid << " seq " << seq;
    }
  }
}

TEST(codec, lane_range_of_the_last_lane_and_the_unordered_lane_stays_inside_them) {
  // The all-0xFF lane is the last of its queue: its range must end before the next queue.
  auto last = codec::lane_range(9, lane_of(0xFF, 0xFF), message_seq{0});
  EXPECT_TRUE(in_range(last, codec::message_key(9, lane_of(0xFF, 0xFF), message_seq{u64_max})));
  EXPECT_FALSE(in_range(last, codec::message_key(10, lane_id{}, message_seq{0})));
  EXPECT_FALSE(in_range(last, codec::message_key(9, lane_of(0xFF, 0xFE), message_seq{u64_max})));
  EXPECT_FALSE(in_range(last, codec::queue_key(9)));
  // Lane 0 (unordered) ends before lane 00..01 begins.
  auto zero = codec::lane_range(9, lane_id{}, message_seq{0});
  EXPECT_TRUE(in_range(zero, codec::message_key(9, lane_id{}, message_seq{u64_max})));
  EXPECT_FALSE(in_range(zero, codec::message_key(9, lane_of(0, 1), message_seq{0})));
  EXPECT_FALSE(in_range(zero, codec::message_key(9, lane_id{}, message_seq{0})))
      << "seq 0 is not after 0";
  EXPECT_FALSE(in_range(zero, codec::message_key(8, lane_of(0xFF, 0xFF), message_seq{u64_max})));
}

TEST(codec, lane_range_admits_no_key_of_another_lane_in_random_probes) {
  auto seed = test::seed_from_env(20261130);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int round = 0; round < 200; ++round) {
    auto uid = 1 + rng() % 1000;
    auto lane = random_lane(rng);
    auto after = rng() % 2 ? rng() % 600 : rng() >> 1;
    auto range = codec::lane_range(uid, lane, message_seq{after});
    for (int i = 0; i < 50; ++i) {
      auto probe_uid = uid + rng() % 3 - 1;
      auto probe_lane = lane;
      if (rng() % 2) {
        // A lane that differs in one byte, by one.
        auto at = rng() % probe_lane.bytes.size();
        probe_lane.bytes[at] =
            static_cast<std::uint8_t>(probe_lane.bytes[at] + (rng() % 2 ? 1 : 255));
      }
      auto seq = rng() % 3 == 0 ? rng() : after + rng() % 5 - 2;
      auto key = codec::message_key(probe_uid, probe_lane, message_seq{seq});
      ASSERT_EQ(in_range(range, key), probe_uid == uid && probe_lane == lane && seq > after)
          << "uid " << probe_uid << " lane " << hex(probe_lane) << " seq " << seq << " after "
          << after;
    }
  }
}

TEST(codec, tag_ranges_hold_exactly_their_tags_keys) {
  const std::vector<std::pair<tag, std::vector<std::string>>> keys_by_tag{
      {tag::meta, {codec::meta_key(""), codec::meta_key("next-uid"), codec::meta_key("\xFF\xFF")}},
      {tag::queue, {codec::queue_key(0), codec::queue_key(u64_max)}},
      {tag::counters, {codec::counters_key(0), codec::counters_key(u64_max)}},
      {tag::message,
       {codec::message_key(0, lane_id{}, message_seq{0}),
        codec::message_key(u64_max, lane_of(0xFF, 0xFF), message_seq{u64_max})}},
      {tag::dead, {codec::dead_key(0, 0), codec::dead_key(u64_max, u64_max)}},
      {tag::lease,
       {codec::lease_key(0, message_id{0}), codec::lease_key(u64_max, message_id{u64_max})}},
  };
  for (const auto& [t, _] : keys_by_tag) {
    auto range = codec::tag_range(t);
    for (const auto& [other, keys] : keys_by_tag)
      for (const auto& key : keys)
        EXPECT_EQ(in_range(range, key), other == t)
            << "tag '" << static_cast<char>(t) << "' range vs key " << hex(key);
  }
}

TEST(codec, queue_ranges_hold_exactly_one_queues_keys_of_one_tag) {
  using key_fn = std::function<std::string(std::uint64_t)>;
  const std::vector<std::pair<tag, std::vector<key_fn>>> makers{
      {tag::queue, {[](std::uint64_t u) { return codec::queue_key(u); }}},
      {tag::counters, {[](std::uint64_t u) { return codec::counters_key(u); }}},
      {tag::message,
       {[](std::uint64_t u) { return codec::message_key(u, lane_id{}, message_seq{0}); },
        [](std::uint64_t u) {
          return codec::message_key(u, lane_of(0xFF, 0xFF), message_seq{u64_max});
        }}},
      {tag::dead,
       {[](std::uint64_t u) { return codec::dead_key(u, 0); },
        [](std::uint64_t u) { return codec::dead_key(u, u64_max); }}},
      {tag::lease,
       {[](std::uint64_t u) { return codec::lease_key(u, message_id{0}); },
        [](std::uint64_t u) { return codec::lease_key(u, message_id{u64_max}); }}},
  };
  for (std::uint64_t uid : {1ULL, 255ULL, 256ULL, 0xFFFF'FFFFULL}) {
    for (const auto& [t, _] : makers) {
      auto range = codec::queue_range(t, uid);
      for (const auto& [other, fns] : makers)
        for (const auto& make : fns)
          for (auto probe : {uid - 1, uid, uid + 1})
            EXPECT_EQ(in_range(range, make(probe)), other == t && probe == uid)
                << "range of tag '" << static_cast<char>(t) << "' uid " << uid << " vs key "
                << hex(make(probe));
      EXPECT_FALSE(in_range(range, codec::meta_key("x")));
    }
  }
}

TEST(codec, parse_message_key_round_trips) {
  auto seed = test::seed_from_env(20261130);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 1000; ++i) {
    auto uid = rng();
    auto lane = i == 0 ? lane_id{} : random_lane(rng);
    auto seq = message_seq{i == 1 ? u64_max : rng()};
    auto parsed = codec::parse_message_key(codec::message_key(uid, lane, seq));
    ASSERT_TRUE(parsed.ok()) << to_string(parsed.err());
    EXPECT_EQ(parsed.value().uid, uid);
    EXPECT_EQ(parsed.value().lane, lane);
    EXPECT_EQ(parsed.value().seq, seq);
  }
}

TEST(codec, parse_message_key_rejects_a_wrong_size_or_tag) {
  auto key = codec::message_key(3, lane_of(1, 2), message_seq{4});
  auto wrong_tag = key;
  wrong_tag[0] = static_cast<char>(tag::queue);
  for (const auto& bad : {std::string{}, std::string{"M"}, key.substr(0, 32), key + '\0', wrong_tag,
                          codec::queue_key(3), codec::dead_key(3, 4)}) {
    auto r = codec::parse_message_key(bad);
    ASSERT_FALSE(r.ok()) << hex(bad);
    EXPECT_EQ(r.err().code, errc::corrupt_record);
  }
}

TEST(codec, parse_uid_reads_the_uid_of_every_queue_key) {
  constexpr std::uint64_t uid = 0x0102030405060708;
  for (const auto& key : {codec::queue_key(uid), codec::counters_key(uid),
                          codec::message_key(uid, lane_of(0xFF, 0xFF), message_seq{9}),
                          codec::dead_key(uid, 5), codec::lease_key(uid, message_id{6})}) {
    auto r = codec::parse_uid(key);
    ASSERT_TRUE(r.ok()) << hex(key);
    EXPECT_EQ(r.value(), uid) << hex(key);
  }
  for (const auto& bad : {std::string{}, std::string{"Q"}, codec::queue_key(uid).substr(0, 8)}) {
    auto r = codec::parse_uid(bad);
    ASSERT_FALSE(r.ok()) << hex(bad);
    EXPECT_EQ(r.err().code, errc::corrupt_record);
  }
}

TEST(codec, parse_dead_order_reads_the_order_of_a_dead_key_only) {
  for (std::uint64_t order : {std::uint64_t{1}, std::uint64_t{256}, ~std::uint64_t{0}}) {
    auto r = codec::parse_dead_order(codec::dead_key(0x0102030405060708, order));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), order);
  }
  for (const auto& bad : {std::string{}, codec::lease_key(1, message_id{2}),
                          codec::dead_key(1, 2).substr(0, 16), codec::queue_key(1)}) {
    auto r = codec::parse_dead_order(bad);
    ASSERT_FALSE(r.ok()) << hex(bad);
    EXPECT_EQ(r.err().code, errc::corrupt_record);
  }
}

TEST(codec, dead_and_lease_keys_sort_by_order_and_id) {
  EXPECT_LT(codec::dead_key(1, 255), codec::dead_key(1, 256));
  EXPECT_LT(codec::dead_key(1, u64_max), codec::dead_key(2, 0));
  EXPECT_LT(codec::lease_key(1, message_id{255}), codec::lease_key(1, message_id{256}));
  EXPECT_LT(codec::lease_key(1, message_id{u64_max}), codec::lease_key(2, message_id{0}));
}

// -- message records ---------------------------------------------------------------------------

TEST(codec, message_records_round_trip) {
  auto seed = test::seed_from_env(20261130);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 2000; ++i) {
    auto m = sample(rng);
    auto back = codec::decode_message(codec::encode_message(m));
    ASSERT_TRUE(back.ok()) << to_string(back.err());
    ASSERT_EQ(back.value(), m);
  }
}

/// Lowercase hex of `bytes`, for byte-exact expectations that print readably.
std::string hex_of(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (auto c : bytes) {
    auto b = static_cast<std::uint8_t>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xFu]);
  }
  return out;
}

/// A message with every field set, each to a value whose bytes are easy to spot.
message every_field_message() {
  message m;
  m.id = message_id{0x0102030405060708};
  m.seq = message_seq{0x1112131415161718};
  m.enqueued_at = timestamp{0x2122232425262728};
  m.delay_until = timestamp{0x3132333435363738};
  m.not_before = timestamp{-2};
  m.attempts = 0x41424344;
  m.fairness_key = "fk";
  m.body = "body";
  m.headers = {{"h1", "v1"}, {"H2", ""}};
  m.attributes = {{"a", "bc"}};
  m.redriven_after_s = 0x51525354;
  return m;
}

// Stored records are read back by older and newer builds: these pin the bytes, so a faster
// encoder cannot change them unnoticed.
TEST(codec, a_message_record_with_every_field_set_has_the_pinned_bytes) {
  auto m = every_field_message();
  // Header (version 1, CRC32C), id, seq, enqueued_at, delay_until, not_before, attempts,
  // fairness key, body, 2 headers, 1 attribute, each string after its 4-byte length, then
  // redriven_after_s.
  EXPECT_EQ(hex_of(codec::encode_message(m)),
            "01bddf2f43010203040506070811121314151617182122232425262728313233"
            "3435363738fffffffffffffffe4142434400000002666b00000004626f647900"
            "0000020000000268310000000276310000000248320000000000000001000000"
            "016100000002626351525354");
  m.redriven_after_s = 0;  // a message never redriven has no trailing field
  EXPECT_EQ(hex_of(codec::encode_message(m)),
            "019ea5aded010203040506070811121314151617182122232425262728313233"
            "3435363738fffffffffffffffe4142434400000002666b00000004626f647900"
            "0000020000000268310000000276310000000248320000000000000001000000"
            "0161000000026263");
}

TEST(codec, a_dead_letter_record_and_a_message_key_have_the_pinned_bytes) {
  dead_letter d{every_field_message(), dead_letter_reason::requested,
                timestamp{0x6162636465666768}};
  d.lane_known = true;
  d.lane = lane_of(0xAA, 0xBB).bytes;
  // Header, reason 2 with the lane flag, the time, the lane, the message's fields (a dead letter
  // does not store redriven_after_s).
  EXPECT_EQ(hex_of(codec::encode_dead_letter(d)),
            "013b9e3463826162636465666768aaaaaaaaaaaaaaaaaaaaaaaaaaaaaabb0102"
            "030405060708111213141516171821222324252627283132333435363738ffff"
            "fffffffffffe4142434400000002666b00000004626f64790000000200000002"
            "6831000000027631000000024832000000000000000100000001610000000262"
            "63");
  d.lane_known = false;  // as written before dead letters kept their lane
  EXPECT_EQ(hex_of(codec::encode_dead_letter(d)),
            "0116213532026162636465666768010203040506070811121314151617182122"
            "2324252627283132333435363738fffffffffffffffe4142434400000002666b"
            "00000004626f6479000000020000000268310000000276310000000248320000"
            "0000000000010000000161000000026263");
  EXPECT_EQ(hex_of(codec::message_key(0x0102030405060708, lane_of(0xAA, 0xBB),
                                      message_seq{0x1112131415161718})),
            "4d0102030405060708aaaaaaaaaaaaaaaaaaaaaaaaaaaaaabb1112131415161718");
}

TEST(codec, every_damaged_message_record_is_detected) {
  std::mt19937_64 rng{7};
  auto m = sample(rng);
  m.body = "payload";
  m.headers = {{"h", "v"}};
  m.attributes = {{"a", "b"}};
  expect_every_damage_detected(codec::encode_message(m), message_kind);
}

TEST(codec, message_record_with_too_many_headers_is_refused_under_a_valid_checksum) {
  auto m = test::make_message(1);
  m.fairness_key.clear();
  m.body.clear();
  auto body = body_of(codec::encode_message(m));
  // Fields before the header count: id, seq, 3 timestamps (8 each), attempts (4), two empty
  // byte strings (4 each).
  constexpr std::size_t header_count_at = 8 + 8 + 3 * 8 + 4 + 4 + 4;
  ASSERT_EQ(body.size(), header_count_at + 4 + 4);
  body[header_count_at + 3] = static_cast<char>(limits::headers_max + 1);
  auto r = codec::decode_message(reseal(body));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::corrupt_record);
  EXPECT_NE(r.err().message.find("too many headers"), std::string::npos) << r.err().message;
}

// -- queue records -----------------------------------------------------------------------------

void expect_same_queue(const codec::queue_record& back, const codec::queue_record& q) {
  EXPECT_EQ(back.uid, q.uid);
  EXPECT_EQ(back.had_hook, q.had_hook);
  const auto& a = back.spec;
  const auto& b = q.spec;
  EXPECT_TRUE(a.same_definition(b)) << a.describe() << " vs " << b.describe();
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.ordering(), b.ordering());
  EXPECT_EQ(a.ordering_key(), b.ordering_key());
  EXPECT_EQ(a.missing_key_policy(), b.missing_key_policy());
  EXPECT_EQ(a.lease_duration(), b.lease_duration());
  EXPECT_EQ(a.attempts_max(), b.attempts_max());
  EXPECT_EQ(a.throttles(), b.throttles());
  EXPECT_EQ(a.delivery_mode(), b.delivery_mode());
  EXPECT_EQ(a.syncs_writes(), b.syncs_writes());
  EXPECT_FALSE(static_cast<bool>(a.hook())) << "a hook is code: it is never stored";
  EXPECT_EQ(a.describe(), b.describe());
}

codec::queue_record full_queue() {
  codec::queue_record q;
  q.uid = 0x0102030405060708;
  q.spec = queue_spec("account-events")
               .ordered_by({key::fairness_key(), key::header("account"), key::attribute("region")})
               .when_ordering_key_missing(missing_ordering_key::keyless_lane)
               .lease(1'234'567us)  // not a whole millisecond
               .max_attempts(7)
               .throttle({key::header("tenant")}, 2.5, 4)
               .throttle({}, 1.0 / 3.0, 1)  // no exact decimal form
               .throttle({key::fairness_key(), key::attribute("region")}, 0.001, 1'000'000)
               .delivery(delivery_durability::durable)
               .sync_writes(false);
  q.had_hook = true;
  return q;
}

TEST(codec, queue_record_round_trips_every_field_of_the_spec) {
  auto q = full_queue();
  auto back = codec::decode_queue(codec::encode_queue(q));
  ASSERT_TRUE(back.ok()) << to_string(back.err());
  expect_same_queue(back.value(), q);
  ASSERT_EQ(back.value().spec.throttles().size(), 3u);
  EXPECT_EQ(back.value().spec.throttles()[1].rate_per_s, 1.0 / 3.0) << "bit-exact";
  EXPECT_EQ(back.value().spec.delivery_mode(), delivery_durability::durable);
  EXPECT_FALSE(back.value().spec.syncs_writes());
}

TEST(codec, queue_record_round_trips_each_mode_policy_and_default) {
  std::vector<codec::queue_record> queues;
  queues.push_back({1, queue_spec("plain"), false});
  queues.push_back({2, queue_spec("whole").ordered().lease(limits::lease_max), false});
  for (auto policy : {missing_ordering_key::reject, missing_ordering_key::unordered,
                      missing_ordering_key::keyless_lane})
    queues.push_back(
        {3, queue_spec("keyed").ordered_by({key::header("h")}).when_ordering_key_missing(policy),
         true});
  queues.push_back({u64_max, queue_spec("fast-synced").delivery(delivery_durability::fast), false});
  queues.push_back({4, queue_spec("durable-only").delivery(delivery_durability::durable), false});
  queues.push_back({5, queue_spec("unsynced-only").sync_writes(false), false});
  // max_depth follows the shard part, which a queue of one shard then writes too.
  queues.push_back({6, queue_spec("bounded").max_depth(100, std::nullopt), false});
  queues.push_back({7, queue_spec("bounded-bytes").max_depth(std::nullopt, 1 << 20), false});
  queues.push_back(
      {8,
       queue_spec("bounded-sharded").ordered_by({key::header("h")}).sharded(2).max_depth(5, 9),
       false,
       {9}});
  // Retention follows max_depth, which is then written too (empty).
  queues.push_back({10, queue_spec("retained").retention(5s), false});
  queues.push_back(
      {11, queue_spec("retained-drop").retention(1ms, expiry_action::drop, 366 * 24h), false});
  queues.push_back(
      {12, queue_spec("dead-retained").retention(std::nullopt, expiry_action::dead_letter, 2min),
       false});
  queues.push_back(
      {13, queue_spec("drop-only").retention(std::nullopt, expiry_action::drop), false});
  queues.push_back({14,
                    queue_spec("retained-sharded")
                        .ordered_by({key::header("h")})
                        .sharded(2)
                        .max_depth(5, std::nullopt)
                        .retention(1500ms, expiry_action::drop, 3s),
                    false,
                    {15}});
  for (const auto& q : queues) {
    SCOPED_TRACE(q.spec.describe());
    auto back = codec::decode_queue(codec::encode_queue(q));
    ASSERT_TRUE(back.ok()) << to_string(back.err());
    expect_same_queue(back.value(), q);
  }
}

TEST(codec, queue_record_keeps_retention_and_an_old_record_decodes_without_it) {
  codec::queue_record q{3, queue_spec("r").retention(90s, expiry_action::drop, 7 * 24h), false};
  auto back = codec::decode_queue(codec::encode_queue(q));
  ASSERT_TRUE(back.ok()) << to_string(back.err());
  const auto& kept = back.value().spec.retention_rule();
  EXPECT_EQ(kept.max_age, std::optional<duration>{90s});
  EXPECT_EQ(kept.on_expiry, expiry_action::drop);
  EXPECT_EQ(kept.dead_letter_max_age, std::optional<duration>{7 * 24h});
  EXPECT_EQ(back.value().spec.depth_max(), depth_bounds{});
  // A record from before retention (here: with max_depth, the last block then) decodes with none.
  auto old = codec::decode_queue(
      codec::encode_queue({4, queue_spec("old").max_depth(10, std::nullopt), false}));
  ASSERT_TRUE(old.ok()) << to_string(old.err());
  EXPECT_EQ(old.value().spec.retention_rule(), retention_rules{});
  EXPECT_EQ(old.value().spec.depth_max().messages, std::optional<std::uint64_t>{10});
  // A queue without retention keeps the record it had before retention existed, byte for byte.
  EXPECT_EQ(body_of(codec::encode_queue({1, queue_spec("q"), false})).size(), 44u);
  // An unknown expiry action under a valid checksum is refused: it is the 10th byte from the end
  // (flag, i64, action, flag, i64).
  auto body = body_of(codec::encode_queue(q));
  body[body.size() - 10] = 2;
  auto bad = codec::decode_queue(reseal(body));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::corrupt_record);
}

TEST(codec, queue_records_that_differ_in_one_field_encode_differently) {
  auto base = full_queue();
  auto encoded = codec::encode_queue(base);
  std::vector<codec::queue_record> variants(9, base);
  variants[0].uid = 9;
  variants[1].had_hook = false;
  variants[2].spec.delivery(delivery_durability::fast);
  variants[3].spec.sync_writes(true);
  variants[4].spec.lease(1'234'568us);
  variants[5].spec.max_attempts(8);
  variants[6].spec.when_ordering_key_missing(missing_ordering_key::unordered);
  variants[7].spec.throttle({}, 1.0, 1);
  variants[8].spec.ordered_by({key::fairness_key()});
  for (std::size_t i = 0; i < variants.size(); ++i) {
    EXPECT_NE(codec::encode_queue(variants[i]), encoded) << "variant " << i;
    auto back = codec::decode_queue(codec::encode_queue(variants[i]));
    ASSERT_TRUE(back.ok()) << "variant " << i;
    expect_same_queue(back.value(), variants[i]);
  }
}

TEST(codec, every_damaged_queue_record_is_detected) {
  expect_every_damage_detected(codec::encode_queue(full_queue()), queue_kind);
}

TEST(codec, queue_record_with_unknown_enum_values_is_refused_under_a_valid_checksum) {
  // Body of queue "q", no key, no throttles: uid(8) name(4+1) mode(1) components(4)
  // missing(1) lease(8) attempts(4) throttles(4) delivery(1) sync(1) had_hook(1)
  // header_policy(1) header_names(4) dedupe(1).
  auto body = body_of(codec::encode_queue({1, queue_spec("q"), false}));
  ASSERT_EQ(body.size(), 44u);
  constexpr std::size_t mode_at = 13;
  constexpr std::size_t missing_at = 18;
  constexpr std::size_t throttles_at = 31;
  constexpr std::size_t delivery_at = 35;
  ASSERT_TRUE(codec::decode_queue(reseal(body)).ok());
  auto with = [&body](std::size_t at, std::uint8_t value) {
    auto b = body;
    b[at] = static_cast<char>(value);
    return codec::decode_queue(reseal(b));
  };
  for (auto [at, value] :
       {std::pair<std::size_t, std::uint8_t>{mode_at, 3},
        {missing_at, 3},
        {delivery_at, 2},
        {throttles_at + 3, static_cast<std::uint8_t>(limits::throttles_max + 1)}}) {
    auto r = with(at, value);
    ASSERT_FALSE(r.ok()) << "byte " << at << " = " << int{value};
    EXPECT_EQ(r.err().code, errc::corrupt_record);
  }
  // An unknown key component kind (the first component's kind byte follows its count).
  auto keyed =
      body_of(codec::encode_queue({1, queue_spec("q").ordered_by({key::header("h")}), false}));
  for (int kind : {0, 6}) {
    auto b = keyed;
    b[18] = static_cast<char>(kind);
    auto r = codec::decode_queue(reseal(b));
    ASSERT_FALSE(r.ok()) << "component kind " << kind;
    EXPECT_NE(r.err().message.find("unknown key component kind"), std::string::npos)
        << r.err().message;
  }
}

// -- counters, dead letters, leases, metadata --------------------------------------------------

TEST(codec, counters_round_trip) {
  for (const auto& c : {codec::counters_record{}, codec::counters_record{u64_max, 1ULL << 32, 256},
                        codec::counters_record{2, 3, 4}}) {
    auto back = codec::decode_counters(codec::encode_counters(c));
    ASSERT_TRUE(back.ok()) << to_string(back.err());
    EXPECT_EQ(back.value(), c);
  }
  auto back = codec::decode_counters(codec::encode_counters(codec::counters_record{2, 3, 4}));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value().next_id, 2u) << "fields are not swapped";
  EXPECT_EQ(back.value().next_seq, 3u);
  EXPECT_EQ(back.value().next_dead, 4u);
}

TEST(codec, every_damaged_counters_record_is_detected) {
  expect_every_damage_detected(codec::encode_counters({11, 22, 33}), counters_kind);
}

TEST(codec, dead_letters_round_trip) {
  auto seed = test::seed_from_env(20261130);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 200; ++i) {
    dead_letter d;
    d.msg = sample(rng);
    d.reason = i % 2 ? dead_letter_reason::requested : dead_letter_reason::max_attempts;
    d.at = timestamp{static_cast<std::int64_t>(rng() >> 1)};
    d.lane_known = i % 3 != 0;
    if (d.lane_known)
      for (auto& b : d.lane) b = static_cast<std::uint8_t>(rng());
    auto back = codec::decode_dead_letter(codec::encode_dead_letter(d));
    ASSERT_TRUE(back.ok()) << to_string(back.err());
    EXPECT_EQ(back.value().msg, d.msg);
    EXPECT_EQ(back.value().reason, d.reason);
    EXPECT_EQ(back.value().at, d.at);
    EXPECT_EQ(back.value().lane_known, d.lane_known);
    EXPECT_EQ(back.value().lane, d.lane);
  }
}

// A dead letter keeps the lane it was stored under (lanes.md L7); a record written before dead
// letters kept their lane (no flag bit, no lane bytes) still decodes, its lane unknown.
TEST(codec, a_dead_letter_keeps_its_lane_and_an_old_record_without_one_still_decodes) {
  dead_letter d{test::make_message(5), dead_letter_reason::requested, timestamp::from_ms(3)};
  d.lane = codec::make_lane_id("q", "key").bytes;
  d.lane_known = true;
  auto body = body_of(codec::encode_dead_letter(d));
  ASSERT_EQ(static_cast<std::uint8_t>(body[0]), 0x82) << "reason 2 with the lane flag";
  EXPECT_EQ(body.substr(9, 16), std::string(d.lane.begin(), d.lane.end()));
  auto old_body = body;
  old_body[0] = static_cast<char>(dead_letter_reason::requested);
  old_body.erase(9, 16);
  auto old = codec::decode_dead_letter(reseal(old_body));
  ASSERT_TRUE(old.ok()) << to_string(old.err());
  EXPECT_FALSE(old.value().lane_known);
  EXPECT_EQ(old.value().msg, d.msg);
  EXPECT_EQ(old.value().at, d.at);
  EXPECT_EQ(old.value().reason, d.reason);
  d.lane_known = false;
  EXPECT_EQ(body_of(codec::encode_dead_letter(d)), old_body) << "without a lane: the old layout";
}

TEST(codec, every_damaged_dead_letter_record_is_detected) {
  dead_letter d{test::make_message(5, timestamp::from_ms(1)), dead_letter_reason::requested,
                timestamp::from_ms(2)};
  expect_every_damage_detected(codec::encode_dead_letter(d), dead_kind);
}

TEST(codec, dead_letter_with_an_unknown_reason_is_refused_under_a_valid_checksum) {
  dead_letter d{test::make_message(5), dead_letter_reason::max_attempts, timestamp{}};
  auto body = body_of(codec::encode_dead_letter(d));
  for (int reason : {0, 4, 0xFF}) {
    auto b = body;
    b[0] = static_cast<char>(reason);
    auto r = codec::decode_dead_letter(reseal(b));
    ASSERT_FALSE(r.ok()) << "reason " << reason;
    EXPECT_NE(r.err().message.find("unknown reason"), std::string::npos) << r.err().message;
  }
}

TEST(codec, lease_records_round_trip) {
  std::vector<codec::lease_record> leases{
      {lease_token{group_id{1}, message_id{2}, 3, 4}, timestamp{5}, message_seq{6}},
      {lease_token{group_id{0}, message_id{1}, 1, 0}, timestamp{-1}, message_seq{1}},
      {lease_token{group_id{u64_max}, message_id{u64_max},
                   std::numeric_limits<std::uint32_t>::max(), u64_max},
       timestamp{std::numeric_limits<std::int64_t>::max()}, message_seq{u64_max}},
  };
  for (const auto& l : leases) {
    auto back = codec::decode_lease(codec::encode_lease(l));
    ASSERT_TRUE(back.ok()) << to_string(back.err());
    EXPECT_EQ(back.value(), l);
  }
}

TEST(codec, every_damaged_lease_record_is_detected) {
  expect_every_damage_detected(
      codec::encode_lease(
          {lease_token{group_id{1}, message_id{2}, 3, 0xABCDEF}, timestamp{5}, message_seq{6}}),
      lease_kind);
}

TEST(codec, u64_metadata_round_trips) {
  for (std::uint64_t x :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0x0102030405060708}, u64_max}) {
    auto back = codec::decode_u64(codec::encode_u64(x));
    ASSERT_TRUE(back.ok()) << to_string(back.err());
    EXPECT_EQ(back.value(), x);
  }
}

TEST(codec, every_damaged_u64_record_is_detected) {
  expect_every_damage_detected(codec::encode_u64(0x0102030405060708), u64_kind);
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

// -- transport forms --------------------------------------------------------------------------

delivery sample_delivery(std::mt19937_64& rng) {
  delivery d;
  d.msg = sample(rng);
  d.msg.redriven_after_s = rng() % 2 ? static_cast<std::uint32_t>(rng()) : 0;
  d.lease = lease_token{group_id{rng()}, message_id{rng()}, static_cast<std::uint32_t>(rng()),
                        rng(), static_cast<std::uint32_t>(rng() % 100 + 1)};
  d.deadline = timestamp{static_cast<std::int64_t>(rng() >> 1)};
  d.ordering_key = random_bytes(rng, 60);
  d.batch_index = static_cast<std::uint32_t>(rng() % 100);
  return d;
}

outgoing_message sample_outgoing(std::mt19937_64& rng) {
  auto m = sample(rng);
  return outgoing_message{m.body, m.headers, m.fairness_key,
                          duration{static_cast<std::int64_t>(rng() >> 20)}};
}

void expect_same(const delivery& a, const delivery& b) {
  EXPECT_EQ(a.msg, b.msg);
  EXPECT_EQ(a.lease, b.lease);
  EXPECT_EQ(a.deadline, b.deadline);
  EXPECT_EQ(a.ordering_key, b.ordering_key);
  EXPECT_EQ(a.batch_index, b.batch_index);
}

std::string lease_bytes(const lease_token& t) {
  std::string out(codec::lease_transport_bytes, '\0');
  codec::encode_transport(t, out.data());
  return out;
}

TEST(codec, transport_forms_round_trip) {
  auto seed = test::seed_from_env(20261207);
  SCOPED_TRACE(test::rerun_hint(seed));
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 2000; ++i) {
    auto d = sample_delivery(rng);
    auto d_back = codec::decode_transport_delivery(codec::encode_transport(d));
    ASSERT_TRUE(d_back.ok()) << to_string(d_back.err());
    expect_same(d_back.value(), d);

    auto m = sample_outgoing(rng);
    auto m_back = codec::decode_transport_outgoing(codec::encode_transport(m));
    ASSERT_TRUE(m_back.ok()) << to_string(m_back.err());
    ASSERT_EQ(m_back.value(), m);

    auto t_back = codec::decode_transport_lease(lease_bytes(d.lease));
    ASSERT_TRUE(t_back.ok()) << to_string(t_back.err());
    ASSERT_EQ(t_back.value(), d.lease);
  }
}

TEST(codec, a_transport_form_of_another_version_is_refused_with_a_reason) {
  std::mt19937_64 rng{7};
  auto d = codec::encode_transport(sample_delivery(rng));
  auto m = codec::encode_transport(sample_outgoing(rng));
  auto t = lease_bytes(lease_token{group_id{1}, message_id{2}, 3, 4, 1});
  for (auto* bytes : {&d, &m, &t}) {
    ASSERT_EQ(static_cast<std::uint8_t>((*bytes)[0]), codec::transport_format_version);
    (*bytes)[0] = static_cast<char>(codec::transport_format_version + 1);
  }
  auto d_back = codec::decode_transport_delivery(d);
  ASSERT_FALSE(d_back.ok());
  EXPECT_EQ(d_back.err().code, errc::invalid_argument);
  EXPECT_NE(d_back.err().message.find("transport form version 2 is not known"), std::string::npos)
      << d_back.err().message;
  EXPECT_NE(d_back.err().message.find("same release"), std::string::npos);
  EXPECT_FALSE(codec::decode_transport_outgoing(m).ok());
  EXPECT_FALSE(codec::decode_transport_lease(t).ok());
}

TEST(codec, a_cut_or_padded_transport_form_is_refused) {
  std::mt19937_64 rng{11};
  auto d = codec::encode_transport(sample_delivery(rng));
  auto m = codec::encode_transport(sample_outgoing(rng));
  auto t = lease_bytes(lease_token{group_id{1}, message_id{2}, 3, 4, 1});
  for (std::size_t n = 0; n < d.size(); ++n)
    ASSERT_FALSE(codec::decode_transport_delivery(d.substr(0, n)).ok()) << n << " bytes";
  for (std::size_t n = 0; n < m.size(); ++n)
    ASSERT_FALSE(codec::decode_transport_outgoing(m.substr(0, n)).ok()) << n << " bytes";
  for (std::size_t n = 0; n < t.size(); ++n)
    ASSERT_FALSE(codec::decode_transport_lease(t.substr(0, n)).ok()) << n << " bytes";
  auto padded = codec::decode_transport_delivery(d + "x");
  ASSERT_FALSE(padded.ok());
  EXPECT_NE(padded.err().message.find("trailing bytes"), std::string::npos);
  EXPECT_FALSE(codec::decode_transport_outgoing(m + "x").ok());
  EXPECT_FALSE(codec::decode_transport_lease(t + "x").ok());
}

TEST(codec, a_transport_form_with_more_headers_than_the_limit_is_refused) {
  outgoing_message m;
  for (std::size_t i = 0; i <= limits::headers_max; ++i) m.headers.push_back({"h", "v"});
  auto back = codec::decode_transport_outgoing(codec::encode_transport(m));
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.err().message.find("too many headers"), std::string::npos) << back.err().message;
}

}  // namespace
}  // namespace laneq
