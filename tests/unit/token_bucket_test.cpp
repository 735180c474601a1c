// Unit tests for token_bucket: exact refill arithmetic (docs/design/throttling.md T2).
#include "laneq/token_bucket.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace laneq {
namespace {

using namespace std::chrono_literals;

constexpr timestamp t0 = timestamp::from_ms(1'000'000);

TEST(token_bucket, starts_full_with_burst_tokens) {
  token_bucket b{1.0, 3, t0};
  EXPECT_EQ(b.tokens(t0), 3);
  EXPECT_TRUE(b.full(t0));
  EXPECT_EQ(b.next_available(t0), t0);
}

// throttling.md T5: a changed rate applies from the change; tokens held stay, cut to the burst.
TEST(token_bucket, reconfigure_keeps_the_tokens_and_refills_at_the_new_rate) {
  token_bucket b{1.0, 5, t0};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.try_take(t0));
  auto t1 = t0 + 1s;  // one token refilled at 1/s
  b.reconfigure(10.0, 5, t1);
  EXPECT_EQ(b.tokens(t1), 1);
  EXPECT_EQ(b.tokens(t1 + 100ms), 2);  // 10/s from t1 on
  EXPECT_EQ(b.next_available(t1 + 100ms), t1 + 100ms);
  b.reconfigure(10.0, 1, t1 + 300ms);  // 4 tokens, cut to the new burst
  EXPECT_EQ(b.tokens(t1 + 300ms), 1);
  EXPECT_TRUE(b.full(t1 + 300ms));
}

TEST(token_bucket, try_take_drains_one_token_at_a_time) {
  token_bucket b{1.0, 3, t0};
  EXPECT_TRUE(b.try_take(t0));
  EXPECT_FALSE(b.full(t0));
  EXPECT_EQ(b.tokens(t0), 2);
  EXPECT_TRUE(b.try_take(t0));
  EXPECT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.tokens(t0), 0);
  EXPECT_FALSE(b.try_take(t0));
  EXPECT_EQ(b.tokens(t0), 0);
}

TEST(token_bucket, next_available_is_exact_after_the_bucket_empties) {
  token_bucket b{2.0, 1, t0};
  ASSERT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.next_available(t0), t0 + 500'000us);
  EXPECT_EQ(b.next_available(t0 + 123'456us), t0 + 500'000us);
  EXPECT_EQ(b.tokens(t0 + 499'999us), 0);
  EXPECT_FALSE(b.try_take(t0 + 499'999us));
  EXPECT_TRUE(b.try_take(t0 + 500'000us));
  EXPECT_EQ(b.next_available(t0 + 500'000us), t0 + 1'000'000us);
}

TEST(token_bucket, next_available_returns_now_while_a_token_is_left) {
  token_bucket b{2.0, 2, t0};
  ASSERT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.next_available(t0 + 7us), t0 + 7us);
}

TEST(token_bucket, refills_at_the_sustained_rate_once_drained) {
  token_bucket b{4.0, 2, t0};
  ASSERT_TRUE(b.try_take(t0));
  ASSERT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.tokens(t0 + 249'999us), 0);
  EXPECT_EQ(b.tokens(t0 + 250'000us), 1);
  EXPECT_EQ(b.tokens(t0 + 499'999us), 1);
  EXPECT_EQ(b.tokens(t0 + 500'000us), 2);
  EXPECT_TRUE(b.full(t0 + 500'000us));
}

TEST(token_bucket, never_holds_more_than_burst_after_a_long_idle) {
  token_bucket b{1.0, 2, t0};
  ASSERT_TRUE(b.try_take(t0));
  ASSERT_TRUE(b.try_take(t0));
  auto later = t0 + std::chrono::hours{1};
  EXPECT_EQ(b.tokens(later), 2);
  EXPECT_TRUE(b.full(later));
  auto much_later = t0 + std::chrono::hours{24 * 365 * 100};
  EXPECT_EQ(b.tokens(much_later), 2);
  EXPECT_TRUE(b.try_take(much_later));
  EXPECT_TRUE(b.try_take(much_later));
  EXPECT_FALSE(b.try_take(much_later));
}

TEST(token_bucket, long_idle_at_the_highest_rate_does_not_overflow) {
  token_bucket b{1'000'000.0, 1'000'000, t0};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.tokens(timestamp::max()), 1'000'000);
}

TEST(token_bucket, half_a_token_per_second_gives_one_token_every_two_seconds) {
  token_bucket b{0.5, 1, t0};
  ASSERT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.next_available(t0), t0 + 2s);
  EXPECT_EQ(b.tokens(t0 + 2s - 1us), 0);
  EXPECT_FALSE(b.try_take(t0 + 2s - 1us));
  EXPECT_TRUE(b.try_take(t0 + 2s));
  EXPECT_EQ(b.next_available(t0 + 2s), t0 + 4s);
}

TEST(token_bucket, next_available_is_exact_when_asked_between_refill_microseconds) {
  // At 0.5 tokens/s a microsecond refills half a micro-token; asking at an odd offset must not
  // round that half away and report a time one microsecond late.
  token_bucket b{0.5, 1, t0};
  ASSERT_TRUE(b.try_take(t0));
  EXPECT_EQ(b.next_available(t0 + 1us), t0 + 2s);
  EXPECT_EQ(b.next_available(t0 + 1'999'999us), t0 + 2s);
}

TEST(token_bucket, refused_takes_do_not_slow_the_refill) {
  // Polling a drained bucket every 3 us at 0.5 tokens/s: each poll covers 1.5 micro-tokens of
  // refill. The first poll at or after t0 + 2 s must succeed.
  token_bucket b{0.5, 1, t0};
  ASSERT_TRUE(b.try_take(t0));
  auto t = t0 + 3us;
  while (t < t0 + 5s && !b.try_take(t)) t = t + 3us;
  EXPECT_EQ(t, t0 + 2'000'001us);
}

TEST(token_bucket, takes_at_odd_times_keep_the_exact_long_run_rate) {
  // 0.3 tokens/s, burst 2, drained at t0, then every take as early as possible. The bucket never
  // fills, so no refill is discarded: the n-th take happens at the first microsecond at or after
  // n / 0.3 s, with no drift from rounding.
  token_bucket b{0.3, 2, t0};
  ASSERT_TRUE(b.try_take(t0));
  ASSERT_TRUE(b.try_take(t0));
  timestamp t = t0;
  for (std::int64_t n = 1; n <= 30; ++n) {
    t = b.next_available(t);
    std::int64_t exact_us = (n * 10'000'000 + 2) / 3;  // ceil(n / 0.3 s) in microseconds
    ASSERT_EQ(t, t0 + duration{exact_us}) << "take " << n;
    ASSERT_FALSE(b.try_take(t - 1us)) << "take " << n;
    ASSERT_TRUE(b.try_take(t)) << "take " << n;
  }
}

TEST(token_bucket, a_full_bucket_discards_refill_beyond_burst) {
  // Burst 1 at 0.3 tokens/s: the token is back at 3333333.3 us, but a take at 3333334 us finds
  // the bucket capped at one token, so the next token is a full 1 / 0.3 s after that take.
  token_bucket b{0.3, 1, t0};
  ASSERT_TRUE(b.try_take(t0));
  ASSERT_EQ(b.next_available(t0), t0 + 3'333'334us);
  ASSERT_TRUE(b.try_take(t0 + 3'333'334us));
  EXPECT_EQ(b.next_available(t0 + 3'333'334us), t0 + 3'333'334us + 3'333'334us);
}

TEST(token_bucket, burst_then_sustained_rate_with_fractional_rate) {
  token_bucket b{0.5, 3, t0};
  EXPECT_TRUE(b.try_take(t0));
  EXPECT_TRUE(b.try_take(t0));
  EXPECT_TRUE(b.try_take(t0));
  EXPECT_FALSE(b.try_take(t0));
  EXPECT_EQ(b.tokens(t0 + 6s), 3);
  EXPECT_EQ(b.tokens(t0 + 5s), 2);
  EXPECT_EQ(b.tokens(t0 + 3s), 1);
}

/// Exact reference: the level in nano-tokens (1e-9 token), so a refill of rate_milli nano-tokens
/// per microsecond is always a whole number and nothing is ever rounded.
class reference_bucket {
 public:
  static constexpr std::int64_t token = 1'000'000'000;

  reference_bucket(std::int64_t rate_milli, std::int64_t burst, timestamp now)
      : rate_(rate_milli), cap_(burst * token), level_(cap_), last_(now) {}

  bool try_take(timestamp now) {
    advance(now);
    if (level_ < token) return false;
    level_ -= token;
    return true;
  }
  timestamp next_available(timestamp now) {
    advance(now);
    if (level_ >= token) return now;
    return last_ + duration{(token - level_ + rate_ - 1) / rate_};
  }
  std::int64_t tokens(timestamp now) {
    advance(now);
    return level_ / token;
  }

 private:
  void advance(timestamp now) {
    if (now <= last_) return;
    level_ = std::min(cap_, level_ + (now - last_).count() * rate_);
    last_ = now;
  }
  std::int64_t rate_;
  std::int64_t cap_;
  std::int64_t level_;
  timestamp last_;
};

TEST(token_bucket, matches_an_exact_reference_model_at_random_times) {
  std::uint64_t seed = 0x70c3'b0c7;
  if (const char* env = std::getenv("LANEQ_UNIT_SEED")) seed = std::strtoull(env, nullptr, 10);
  SCOPED_TRACE("seed " + std::to_string(seed) +
               "; reproduce: LANEQ_UNIT_SEED=" + std::to_string(seed) +
               " build/dev/bin/laneq_unit_tests --gtest_filter='token_bucket.matches_an_exact_"
               "reference_model_at_random_times'");
  std::mt19937_64 rng{seed};
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>{lo, hi}(rng);
  };
  for (int run = 0; run < 50; ++run) {
    // Rates with three decimals (what the bucket keeps), from 0.001/s to 1000/s.
    auto rate_milli = uniform(0, 2) == 0 ? uniform(1, 999) : uniform(1, 1'000'000);
    auto burst = uniform(1, 5);
    token_bucket b{static_cast<double>(rate_milli) / 1000.0, static_cast<std::uint32_t>(burst), t0};
    reference_bucket ref{rate_milli, burst, t0};
    auto now = t0;
    for (int step = 0; step < 400; ++step) {
      // Mostly short, odd steps (where rounding bites), sometimes a jump to the next token.
      auto kind = uniform(0, 9);
      if (kind < 6)
        now = now + duration{uniform(0, 7)};
      else if (kind < 9)
        now = now + duration{uniform(0, std::int64_t{3'000'000'000} / rate_milli)};
      else
        now = b.next_available(now);
      ASSERT_EQ(b.next_available(now), ref.next_available(now))
          << "run " << run << " step " << step << " rate " << rate_milli << "/1000 burst " << burst;
      ASSERT_EQ(b.tokens(now), ref.tokens(now)) << "run " << run << " step " << step;
      ASSERT_EQ(b.try_take(now), ref.try_take(now)) << "run " << run << " step " << step;
    }
  }
}

}  // namespace
}  // namespace laneq

namespace laneq {
namespace {

// T2: a rate is applied with 0.001/s resolution, rounded down, never up.
TEST(token_bucket, rates_round_down_to_the_milli_token) {
  token_bucket exact{0.3, 1, t0};  // 0.3 * 1000 is 299.99999999999994 in binary
  EXPECT_EQ(exact.refill_interval(), duration{3'333'334});
  token_bucket below{1.9999999, 1, t0};  // rounds to 1.999/s, not 2/s
  EXPECT_EQ(below.refill_interval(), duration{500'251});
  token_bucket two{2.0, 1, t0};
  EXPECT_EQ(two.refill_interval(), duration{500'000});
}

}  // namespace
}  // namespace laneq
