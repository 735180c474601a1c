// Unit tests for lease tokens: text form, parsing and nonces (docs/design/ordering.md O4).
#include "laneq/lease.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"

namespace laneq {
namespace {

TEST(lease, prints_group_message_attempt_and_nonce_in_lowercase_hex) {
  lease_token x{group_id{0x1f}, message_id{0xab}, 2, 0xdeadbeefULL};
  EXPECT_EQ(to_string(x), "1f.ab.2.deadbeef");
}

TEST(lease, prints_an_unordered_lease_with_group_zero) {
  lease_token x{group_id{0}, message_id{1}, 1, 0};
  EXPECT_EQ(to_string(x), "0.1.1.0");
}

TEST(lease, parses_what_it_prints) {
  std::vector<lease_token> tokens{
      {group_id{0x1f}, message_id{0xab}, 2, 0xdeadbeefULL},
      {group_id{0}, message_id{1}, 1, 0},
      {group_id{std::numeric_limits<std::uint64_t>::max()},
       message_id{std::numeric_limits<std::uint64_t>::max()},
       std::numeric_limits<std::uint32_t>::max(), std::numeric_limits<std::uint64_t>::max()},
      {group_id{42}, message_id{0x0123456789abcdefULL}, 1000, 0xfedcba9876543210ULL},
  };
  for (const auto& x : tokens) {
    auto text = to_string(x);
    auto parsed = parse_lease_token(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, x) << text;
  }
}

TEST(lease, rejects_malformed_tokens) {
  const std::vector<std::string> malformed{
      "",
      "1.2.3",                    // three parts
      "1.2.3.4.5.6",              // six parts
      "1.2.3.4.1",                // a batch of one has the four-part form only
      "1.2.3.4.0",                // a batch of none
      "1.2.3.4.65",               // a batch of 101, past limits::ordered_batch_max
      "1.2.3.4.",                 // trailing dot
      ".1.2.3",                   // leading dot
      "1..3.4",                   // empty part
      "1.2.x.4",                  // not hex
      "1.2.3.4g",                 // trailing garbage
      "1.2.0.4",                  // attempt 0 is never issued
      "1.0.1.4",                  // message 0 does not exist
      "1.2.100000000.4",          // attempt wider than 32 bits
      "1.2.3.10000000000000000",  // 17 hex digits
      "-1.2.3.4",                 // sign
      "+1.2.3.4",                 // sign
      " 1.2.3.4",                 // whitespace
      "1.2.3.4 ",                 // whitespace
      "0x1.2.3.4",                // prefix
  };
  for (const auto& text : malformed) EXPECT_EQ(parse_lease_token(text), std::nullopt) << text;
}

TEST(lease, nonce_source_is_deterministic_per_key) {
  nonce_source a{7, 1};
  nonce_source b{7, 1};
  nonce_source c{7, 2};
  std::set<std::uint64_t> seen;
  bool differs_from_other_seed = false;
  for (int i = 0; i < 1000; ++i) {
    auto x = a.next();
    EXPECT_EQ(x, b.next());
    differs_from_other_seed = differs_from_other_seed || x != c.next();
    seen.insert(x);
  }
  EXPECT_TRUE(differs_from_other_seed);
  EXPECT_EQ(seen.size(), 1000u);
}

// The reference test vector of SipHash-2-4: key 00..0f, message 00..07 (8 bytes).
TEST(lease, nonce_source_is_siphash_2_4) {
  nonce_source s{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
  // vectors.h of the reference implementation, entry 8: 62 24 93 9a 79 f5 f5 93.
  EXPECT_EQ(s.siphash(0x0706050403020100ULL), 0x93f5f5799a932462ULL);
}

// Entries 16 and 32 of the same vectors: the message is read as 8-byte little-endian words.
TEST(lease, nonce_source_hashes_words_as_siphash_2_4) {
  nonce_source s{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
  const std::uint64_t words[] = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL,
                                 0x1716151413121110ULL, 0x1f1e1d1c1b1a1918ULL};
  EXPECT_EQ(s.siphash(std::span<const std::uint64_t>{words, 2}), 0x3f2acc7f57c29bdbULL);
  EXPECT_EQ(s.siphash(std::span<const std::uint64_t>{words, 4}), 0x7127512f72f27cceULL);
  EXPECT_EQ(s.siphash(std::span<const std::uint64_t>{words, 1}), s.siphash(words[0]));
}

// -- lease_nonce: a keyed MAC of the delivery ----------------------------------------------------

lease_subject subject() {
  lease_subject s;
  s.queue_uid = 3;
  s.msg = message_id{42};
  s.seq = message_seq{17};
  s.attempt = 2;
  s.epoch = 5;
  return s;
}

TEST(lease, lease_nonce_is_deterministic_for_a_key_and_subject) {
  nonce_source a{7, 1};
  nonce_source b{7, 1};
  EXPECT_EQ(a.lease_nonce(subject()), b.lease_nonce(subject()));
  EXPECT_EQ(a.lease_nonce(subject()), a.lease_nonce(subject())) << "it reads no counter";
  auto before = a.lease_nonce(subject());
  (void)a.next();
  EXPECT_EQ(a.lease_nonce(subject()), before) << "next() does not disturb it";
}

TEST(lease, lease_nonce_changes_with_every_field_of_the_subject) {
  nonce_source key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  const auto base = key.lease_nonce(subject());
  std::vector<std::pair<std::string, lease_subject>> variants;
  auto vary = [&variants](std::string name, auto change) {
    auto s = subject();
    change(s);
    variants.emplace_back(std::move(name), s);
  };
  vary("queue_uid", [](lease_subject& s) { s.queue_uid = 4; });
  vary("msg", [](lease_subject& s) { s.msg = message_id{43}; });
  vary("seq", [](lease_subject& s) { s.seq = message_seq{18}; });
  vary("attempt", [](lease_subject& s) { s.attempt = 3; });
  vary("epoch", [](lease_subject& s) { s.epoch = 6; });
  vary("queue_uid 0", [](lease_subject& s) { s.queue_uid = 0; });
  vary("attempt high bit", [](lease_subject& s) { s.attempt |= 0x8000'0000u; });
  vary("epoch low bit", [](lease_subject& s) { s.epoch = 4; });
  std::set<std::uint64_t> seen{base};
  for (const auto& [name, s] : variants) {
    auto nonce = key.lease_nonce(s);
    EXPECT_NE(nonce, base) << "changing " << name << " kept the nonce";
    seen.insert(nonce);
  }
  EXPECT_EQ(seen.size(), variants.size() + 1) << "every variant has its own nonce";
}

TEST(lease, lease_nonce_moves_words_between_fields_without_colliding) {
  // The words are hashed in order, not xored together: swapping values between fields changes
  // the MAC.
  nonce_source key{11, 12};
  lease_subject a = subject();
  lease_subject b = subject();
  b.queue_uid = a.msg.value;
  b.msg = message_id{a.queue_uid};
  EXPECT_NE(key.lease_nonce(a), key.lease_nonce(b));
  lease_subject c = subject();
  c.seq = message_seq{a.msg.value};
  c.msg = message_id{a.seq.value};
  EXPECT_NE(key.lease_nonce(a), key.lease_nonce(c));
}

TEST(lease, lease_nonce_is_one_siphash_of_the_subject_words) {
  nonce_source key{5, 6};
  auto s = subject();
  const std::uint64_t words[] = {3, 42, 17, 2 | (std::uint64_t{5} << 32), 4};
  EXPECT_EQ(key.lease_nonce(s), key.siphash(std::span<const std::uint64_t>{words, 4}));
  s.batch = 4;
  EXPECT_EQ(key.lease_nonce(s), key.siphash(std::span<const std::uint64_t>{words, 5}))
      << "a batch's size is the fifth word";
  EXPECT_NE(key.lease_nonce(s), key.chained_lease_nonce(s));
}

// Fast delivery's reclaim after a restart (recovery.md R6): a token of one of the last
// reclaim_epochs runs, in today's form or in the chained form of brokers before the upgrade.
TEST(lease, issued_before_restart_knows_both_forms_of_earlier_runs) {
  nonce_source key{21, 22};
  auto s = subject();  // issued in run 5 (epoch), attempt 2
  auto token_of = [&](std::uint64_t nonce) {
    return lease_token{group_id{9}, s.msg, s.attempt, nonce, s.batch};
  };
  const std::uint32_t attempts_before = s.attempt - 1;
  for (auto nonce : {key.lease_nonce(s), key.chained_lease_nonce(s)}) {
    EXPECT_TRUE(
        issued_before_restart(key, s.queue_uid, 6, token_of(nonce), s.msg, s.seq, attempts_before));
    EXPECT_TRUE(issued_before_restart(key, s.queue_uid, 5 + reclaim_epochs, token_of(nonce), s.msg,
                                      s.seq, attempts_before));
    EXPECT_FALSE(
        issued_before_restart(key, s.queue_uid, 5, token_of(nonce), s.msg, s.seq, attempts_before))
        << "a token of this run is not one of an earlier run";
    EXPECT_FALSE(issued_before_restart(key, s.queue_uid, 6 + reclaim_epochs, token_of(nonce), s.msg,
                                       s.seq, attempts_before))
        << "too many runs ago";
    EXPECT_FALSE(issued_before_restart(nonce_source{21, 23}, s.queue_uid, 6, token_of(nonce), s.msg,
                                       s.seq, attempts_before))
        << "another key";
  }
  EXPECT_FALSE(issued_before_restart(key, s.queue_uid, 6, token_of(key.lease_nonce(s) ^ 1), s.msg,
                                     s.seq, attempts_before));
}

TEST(lease, lease_nonce_depends_on_the_key) {
  nonce_source a{7, 1};
  EXPECT_NE(a.lease_nonce(subject()), nonce_source(7, 2).lease_nonce(subject()));
  EXPECT_NE(a.lease_nonce(subject()), nonce_source(8, 1).lease_nonce(subject()));
  EXPECT_NE(a.lease_nonce(subject()), nonce_source(1, 7).lease_nonce(subject()));
}

TEST(lease, lease_nonces_of_many_subjects_do_not_collide) {
  nonce_source key{99, 100};
  std::set<std::uint64_t> seen;
  int n = 0;
  for (std::uint64_t uid = 1; uid <= 4; ++uid)
    for (std::uint64_t msg = 1; msg <= 10; ++msg)
      for (std::uint32_t attempt = 1; attempt <= 5; ++attempt)
        for (std::uint64_t epoch = 1; epoch <= 5; ++epoch, ++n)
          seen.insert(
              key.lease_nonce({uid, message_id{msg}, message_seq{msg + 100}, attempt, epoch}));
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
}

}  // namespace
}  // namespace laneq
