// Shared helpers for the libqueue unit tests: GoogleTest printers and a message builder.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laneq/ids.hpp"
#include "laneq/lease.hpp"
#include "laneq/message.hpp"
#include "laneq/time.hpp"

namespace laneq {

// Printers found by ADL, so failures show values instead of bytes.
inline void PrintTo(timestamp x, std::ostream* os) {
  *os << x.us << "us";
}
template <class Tag>
void PrintTo(strong_id<Tag> x, std::ostream* os) {
  *os << '#' << x.value;
}
inline void PrintTo(const lease_token& x, std::ostream* os) {
  *os << "lease " << to_string(x);
}
inline void PrintTo(const message& x, std::ostream* os) {
  *os << "message{id=" << x.id.value << " seq=" << x.seq.value << " fairness_key='"
      << x.fairness_key << "' attempts=" << x.attempts << " not_before=" << x.not_before.us
      << "us}";
}

namespace test {

/// The seed of a randomized test: LANEQ_UNIT_SEED when set, `fallback` otherwise.
inline std::uint64_t seed_from_env(std::uint64_t fallback) {
  if (const char* s = std::getenv("LANEQ_UNIT_SEED")) return std::strtoull(s, nullptr, 10);
  return fallback;
}

/// The seed and a one-line command that reruns the current test of `binary` with it, for
/// failure messages.
inline std::string rerun_hint(std::uint64_t seed, std::string_view binary = "laneq_unit_tests") {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = info ? std::string{info->test_suite_name()} + "." + info->name() : "*";
  return "seed " + std::to_string(seed) + "; rerun: LANEQ_UNIT_SEED=" + std::to_string(seed) +
         " build/dev/bin/" + std::string{binary} + " --gtest_filter='" + filter + "'";
}

/// A message with id = seq = `n`, enqueued at `at`, deliverable from `at`.
inline message make_message(std::uint64_t n, timestamp at = {}, std::string fairness_key = {},
                            std::vector<header_field> headers = {}) {
  message m;
  m.id = message_id{n};
  m.seq = message_seq{n};
  m.body = "body-" + std::to_string(n);
  m.fairness_key = std::move(fairness_key);
  m.headers = std::move(headers);
  m.enqueued_at = at;
  m.not_before = at;
  return m;
}

}  // namespace test
}  // namespace laneq
