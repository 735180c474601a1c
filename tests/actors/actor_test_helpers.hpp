// Small helpers shared by the actor tests (tests/actors): message builders and readers on top of
// the deterministic harness (tests/support/harness.hpp).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace laneq::test {

/// Headers from name/value pairs: `hdrs({{"account", "A"}})`.
inline std::vector<header_field> hdrs(std::vector<std::pair<std::string, std::string>> kv) {
  std::vector<header_field> out;
  for (auto& [k, v] : kv) out.push_back(header_field{std::move(k), std::move(v)});
  return out;
}

/// A message in account `account` (header "account").
inline outgoing_message in_account(std::string body, std::string account,
                                   duration delay = duration{0}) {
  return msg(std::move(body), hdrs({{"account", std::move(account)}}), {}, delay);
}

/// The bodies of a batch of deliveries, in delivery order.
inline std::vector<std::string> bodies(const std::vector<delivery>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.msg.body);
  return out;
}

using strings = std::vector<std::string>;

/// Receives up to `max` messages under `lease` (0: the queue's default lease); a failed receive
/// is a test failure (and yields nothing).
inline std::vector<delivery> take(harness& h, const queue_api& q, std::uint32_t max = 1,
                                  duration lease = duration{0}) {
  auto r = h.receive(q, max, lease);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : to_string(r.err()));
  if (!r.ok()) return {};
  return std::move(r).value();
}

/// Receives exactly one message and returns it (a test failure if there is not exactly one).
inline delivery take_one(harness& h, const queue_api& q, duration lease = duration{0}) {
  auto ds = take(h, q, 1, lease);
  EXPECT_EQ(ds.size(), 1u) << "expected one delivery";
  if (ds.empty()) return delivery{};
  return std::move(ds.front());
}

/// Moves simulated time to `t` after the start of the test.
inline void advance_to(harness& h, duration t) {
  auto now = h.elapsed();
  EXPECT_LE(now, t) << "time only moves forward";
  h.advance(t > now ? t - now : duration{0});
}

/// The stats of `q`; a failed call is a test failure.
inline queue_stats stats_of(harness& h, const queue_api& q) {
  auto s = h.stats(q);
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return queue_stats{};
  return std::move(s).value();
}

/// Creates a queue; a failed create is a test failure (and yields an invalid handle).
inline queue_api make_queue(harness& h, queue_spec spec) {
  auto q = h.create(std::move(spec));
  EXPECT_TRUE(q.ok()) << (q.ok() ? "" : to_string(q.err()));
  if (!q.ok()) return queue_api{};
  return std::move(q).value();
}

/// Enqueues one message and returns its id; a failed enqueue is a test failure.
inline message_id put(harness& h, const queue_api& q, outgoing_message m) {
  auto id = h.enqueue(q, std::move(m));
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : to_string(id.err()));
  if (!id.ok()) return message_id{};
  return id.value();
}

/// A timestamp `d` after the start of the test.
inline timestamp at(duration d) {
  return sim_epoch + d;
}

}  // namespace laneq::test

/// The helpers the actor tests call unqualified: `using namespace test::actor_helpers;` in a test
/// file's anonymous namespace instead of one using-declaration per helper.
namespace laneq::test::actor_helpers {
using test::advance_to;
using test::at;
using test::bodies;
using test::harness;
using test::hdrs;
using test::in_account;
using test::make_queue;
using test::msg;
using test::put;
using test::stats_of;
using test::strings;
using test::take;
using test::take_one;
}  // namespace laneq::test::actor_helpers
