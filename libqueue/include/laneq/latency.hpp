// The buckets of every latency histogram laneq reports (Prometheus' usual ladder).
#pragma once

#include <array>
#include <cstddef>

#include "laneq/time.hpp"

namespace laneq {

/// Upper bounds, in seconds, of every latency histogram's buckets (a last bucket takes the
/// rest): Prometheus' usual ladder, from 0.5 ms to 30 s.
inline constexpr std::array<double, 15> latency_bounds_s{
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/// The latency_bounds_s bucket of `d`: the first whose bound it does not exceed, or the last.
inline std::size_t latency_bucket(duration d) {
  auto us = static_cast<double>(d.count() > 0 ? d.count() : 0);
  std::size_t i = 0;
  while (i < latency_bounds_s.size() && us > latency_bounds_s[i] * 1e6) ++i;
  return i;
}

}  // namespace laneq
