// A token bucket: at most `burst` at once, `rate_per_s` sustained (docs/design/throttling.md T2).
#pragma once

#include <cstdint>

#include "laneq/time.hpp"

namespace laneq {

/// Token bucket with exact arithmetic: tokens are kept in micro-tokens, so refills add
/// `rate_per_s` micro-tokens per elapsed microsecond. A new bucket is full.
class token_bucket {
 public:
  static constexpr std::int64_t unit = 1'000'000;  ///< micro-tokens per token

  token_bucket(double rate_per_s, std::uint32_t burst, timestamp now);

  /// Takes one token if one is available at `now`.
  bool try_take(timestamp now);
  /// Earliest time at which a token is available (now, if one is).
  timestamp next_available(timestamp now) const;
  /// Whole tokens available at `now`.
  std::int64_t tokens(timestamp now) const;
  /// True when the bucket is full at `now` (it then behaves exactly like a new bucket).
  bool full(timestamp now) const;
  /// Time one token takes to refill (rounded up).
  duration refill_interval() const;
  /// Takes a new rate and burst at `now` (a queue's settings changed, throttling.md T5): the
  /// tokens it holds stay, cut to the new burst; from `now` on it refills at the new rate.
  void reconfigure(double rate_per_s, std::uint32_t burst, timestamp now);

 private:
  std::int64_t level_at(timestamp now) const;

  std::int64_t rate_micro_per_us_x1000_;  // refill in micro-tokens per 1000 us (rate * 1000)
  std::int64_t capacity_;                 // burst * unit
  std::int64_t level_;                    // micro-tokens at `last_`
  timestamp last_;
};

}  // namespace laneq
