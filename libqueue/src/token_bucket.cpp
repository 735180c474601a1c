// Token bucket arithmetic (libqueue/include/laneq/token_bucket.hpp).
#include "laneq/token_bucket.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "laneq/assert.hpp"

namespace laneq {

// Refill: rate_per_s tokens per second = rate_per_s * unit micro-tokens per 1e6 us
//       = rate_per_s micro-tokens per us. Kept as an integer per 1000 us: the rate has a
// resolution of 0.001/s and is rounded DOWN, so a bucket never refills faster than its spec
// (rounding up would break the G6 bound). The relative epsilon (1e-12) only absorbs binary
// representation error (0.3 * 1000 is 299.99999999999994); it cannot lift a rate across a step.
namespace {
std::int64_t rate_x1000(double rate_per_s) {
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(rate_per_s * 1000.0 * (1.0 + 1e-12))));
}
}  // namespace

token_bucket::token_bucket(double rate_per_s, std::uint32_t burst, timestamp now)
    : rate_micro_per_us_x1000_(rate_x1000(rate_per_s)),
      capacity_(static_cast<std::int64_t>(burst) * unit),
      level_(capacity_),
      last_(now) {
  LANEQ_ASSERT(burst >= 1, "a bucket holds at least one token");
}

std::int64_t token_bucket::level_at(timestamp now) const {
  if (now <= last_) return level_;
  auto elapsed = (now - last_).count();
  // Saturate before multiplying to avoid overflow on long idle periods.
  auto needed = capacity_ - level_;
  if (needed <= 0) return capacity_;
  // refill = elapsed * rate / 1000 (micro-tokens); compare without overflow.
  if (elapsed >= (needed * 1000) / rate_micro_per_us_x1000_ + 1) return capacity_;
  return std::min(capacity_, level_ + elapsed * rate_micro_per_us_x1000_ / 1000);
}

bool token_bucket::try_take(timestamp now) {
  // A refused take changes nothing: committing the refill here would drop the fraction of a
  // micro-token not credited yet, and a bucket polled often enough would never refill.
  if (level_at(now) < unit) return false;
  if (now > last_) {
    if (level_at(now) >= capacity_) {
      level_ = capacity_;  // a full bucket discards further refill, so nothing is lost
      last_ = now;
    } else {
      // Credit whole steps only (the shortest interval whose refill is a whole number of
      // micro-tokens): last_ stays less than one step behind `now` and keeps the remainder.
      auto step = 1000 / std::gcd(rate_micro_per_us_x1000_, std::int64_t{1000});
      auto whole = (now - last_).count() / step * step;
      level_ += whole * rate_micro_per_us_x1000_ / 1000;
      last_ = last_ + duration{whole};
    }
  }
  level_ -= unit;  // may dip below 0 by less than one step's refill, which level_at(now) covers
  return true;
}

timestamp token_bucket::next_available(timestamp now) const {
  if (level_at(now) >= unit) return now;
  // Counted from last_, where level_ is exact (counting from `now` would drop the fraction of a
  // micro-token refilled since last_). time (us) = missing * 1000 / rate_x1000, rounded up.
  auto missing = unit - level_;  // micro-tokens
  auto wait = (missing * 1000 + rate_micro_per_us_x1000_ - 1) / rate_micro_per_us_x1000_;
  return last_ + duration{wait};
}

std::int64_t token_bucket::tokens(timestamp now) const {
  return level_at(now) / unit;
}

bool token_bucket::full(timestamp now) const {
  return level_at(now) >= capacity_;
}

duration token_bucket::refill_interval() const {
  return duration{(unit * 1000 + rate_micro_per_us_x1000_ - 1) / rate_micro_per_us_x1000_};
}

void token_bucket::reconfigure(double rate_per_s, std::uint32_t burst, timestamp now) {
  LANEQ_ASSERT(burst >= 1, "a bucket holds at least one token");
  // The level as it stands now under the old rate, then the new rate from now on: no token is
  // credited twice, and none refilled under the old rate is lost (up to the new burst).
  auto level = level_at(now);
  rate_micro_per_us_x1000_ = rate_x1000(rate_per_s);
  capacity_ = static_cast<std::int64_t>(burst) * unit;
  level_ = std::min(level, capacity_);
  last_ = std::max(last_, now);
}

}  // namespace laneq
