// Time as data: the pure core never reads a clock; every input carries `now` (ARCHITECTURE.md §3).
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <limits>

namespace laneq {

/// Durations in the core are microseconds.
using duration = std::chrono::microseconds;

/// A point on the broker's timeline: microseconds since the Unix epoch. The actor layer maps its
/// clock onto this timeline (wall clock in production, CAF's test clock in tests).
struct timestamp {
  std::int64_t us = 0;

  static constexpr timestamp from_ms(std::int64_t ms) { return timestamp{ms * 1000}; }
  static constexpr timestamp max() { return timestamp{std::numeric_limits<std::int64_t>::max()}; }
  constexpr std::int64_t ms() const { return us / 1000; }

  friend constexpr auto operator<=>(timestamp, timestamp) = default;
  friend constexpr timestamp operator+(timestamp t, duration d) {
    return timestamp{t.us + d.count()};
  }
  friend constexpr timestamp operator-(timestamp t, duration d) {
    return timestamp{t.us - d.count()};
  }
  friend constexpr duration operator-(timestamp a, timestamp b) { return duration{a.us - b.us}; }
};

template <class Inspector>
auto inspect(Inspector& f, timestamp& x) {
  return f(x.us);
}

}  // namespace laneq
