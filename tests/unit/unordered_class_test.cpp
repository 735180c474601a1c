// Unit tests for unordered messages by class (docs/design/persistence.md P12,
// libqueue/src/shard_unordered.cpp): a class's window of ready messages in memory, the rest read
// back from its own store lane in arrival order, receives that wait for a read-back, delayed
// messages that take no place in the window, recovery of the window and of leased messages past
// it, and unordered messages stored in lane 0 before classes, moved to their class's lane.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/engine_driver.hpp"
#include "laneq/shard_engine.hpp"
#include "support.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::bodies;
using test::deliveries;
using test::engine_driver;
using test::message_records;
using test::test_config;

/// An unordered queue whose classes hold `window` ready messages in memory.
shard_config unordered(std::size_t window, queue_spec spec = queue_spec("jobs")) {
  auto c = test_config(std::move(spec));
  c.window = 2;
  c.window_max = window;
  return c;
}

outgoing_message msg(std::string body, std::string fairness = {}) {
  outgoing_message m;
  m.body = std::move(body);
  m.fairness_key = std::move(fairness);
  return m;
}

std::vector<outgoing_message> numbered(int from, int to, std::string fairness = {}) {
  std::vector<outgoing_message> out;
  for (int i = from; i <= to; ++i) out.push_back(msg("m" + std::to_string(i), fairness));
  return out;
}

std::vector<std::string> names(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i <= to; ++i) out.push_back("m" + std::to_string(i));
  return out;
}

/// Receives and acks until nothing comes: the bodies in the order they came.
std::vector<std::string> drain(engine_driver& d, std::uint32_t max) {
  std::vector<std::string> out;
  for (;;) {
    auto got = deliveries(d, d.receive(max));
    if (got.empty()) return out;
    std::vector<lease_token> leases;
    for (const auto& g : got) {
      out.push_back(g.msg.body);
      leases.push_back(g.lease);
    }
    d.ack(leases);
  }
}

TEST(unordered_class, a_backlog_past_the_window_stays_in_the_store_and_comes_back_in_order) {
  engine_driver d{unordered(4)};
  d.enqueue(numbered(1, 20));
  EXPECT_EQ(message_records(d), 20u);
  auto held = d.engine().stats(d.now).window_bytes;
  EXPECT_GT(held, 0u);
  EXPECT_LE(held, 4 * (sizeof(message) + 3)) << "only the window is in memory";
  EXPECT_EQ(d.engine().stats(d.now).backlog, 20u) << "the rest is counted";
  // A receive takes what memory holds and waits for each read-back: a short answer still means
  // that nothing else could go.
  auto all = deliveries(d, d.receive(20));
  EXPECT_EQ(bodies(all), names(1, 20));
  EXPECT_GE(d.engine().stats(d.now).window_reads, 4u);
  std::vector<lease_token> leases;
  for (const auto& x : all) leases.push_back(x.lease);
  d.ack(leases);
  EXPECT_EQ(message_records(d), 0u);
  EXPECT_EQ(d.engine().stats(d.now).window_bytes, 0u);
}

TEST(unordered_class, arrivals_after_one_is_left_in_the_store_wait_behind_it) {
  engine_driver d{unordered(2)};
  d.enqueue(numbered(1, 3));  // m3 is left in the store
  auto first = deliveries(d, d.receive(1));
  ASSERT_EQ(bodies(first), names(1, 1));
  d.enqueue(numbered(4, 4));
  d.ack({first[0].lease});
  EXPECT_EQ(drain(d, 10), names(2, 4)) << "each once, m4 after m3";
  EXPECT_EQ(message_records(d), 0u);
  EXPECT_EQ(d.engine().stats(d.now).backlog, 0u);
}

TEST(unordered_class, a_receive_waits_for_a_read_back_and_no_lease_runs_out_meanwhile) {
  engine_driver d{unordered(2)};
  d.enqueue(numbered(1, 6));
  d.hold_reads = true;
  auto r = d.receive(6, 1s);
  EXPECT_EQ(d.reply(r), nullptr) << "answered before the rest was read back";
  ASSERT_FALSE(d.pending_reads.empty());
  d.advance(10s);  // a slow store: the leases of what it took must not run out meanwhile
  EXPECT_EQ(d.reply(r), nullptr);
  EXPECT_EQ(d.engine().stats(d.now).lease_expired, 0u);
  d.answer_reads();
  auto got = deliveries(d, r);
  EXPECT_EQ(bodies(got), names(1, 6));
  for (const auto& x : got) EXPECT_EQ(x.deadline, d.now + 1s) << "the lease runs from the answer";
  d.advance(2s);
  EXPECT_EQ(d.engine().stats(d.now).lease_expired, 6u);
}

TEST(unordered_class, a_fairness_key_whose_backlog_fills_its_window_holds_back_no_other_key) {
  // F1: each fairness key is a class of its own, with a window of its own.
  engine_driver d{unordered(2)};
  d.enqueue(numbered(1, 10, "A"));
  d.enqueue({msg("b1", "B")});
  auto got = deliveries(d, d.receive(2));
  EXPECT_EQ(bodies(got), (std::vector<std::string>{"m1", "b1"}));
}

TEST(unordered_class, delayed_and_retrying_messages_take_no_place_in_the_window) {
  // O1: a message that is delayed or retrying holds back nothing else.
  engine_driver d{unordered(2)};
  auto later = numbered(1, 2);
  for (auto& m : later) m.delay = 10s;
  d.enqueue(later);
  d.enqueue(numbered(3, 6));
  auto got = deliveries(d, d.receive(10));
  EXPECT_EQ(bodies(got), names(3, 6)) << "the delayed ones do not fill the window";
  d.nack(got[0].lease, nack_kind::retry, 5s);
  d.nack(got[1].lease, nack_kind::retry, 5s);
  d.enqueue(numbered(7, 8));
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), names(7, 8)) << "nor do the retrying ones";
  d.advance(10s);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), names(1, 4)) << "oldest first once due";
}

TEST(unordered_class, a_throttled_class_holds_back_no_other_class) {
  // O1, T1: the throttle's buckets are part of the class, so a throttled backlog keeps its own
  // window and the other bucket's messages are not left in the store behind it.
  auto spec = queue_spec("jobs").throttle({key::header("tenant")}, 1.0, 1);
  engine_driver d{unordered(2, spec)};
  auto to = [](std::string body, std::string tenant) {
    auto m = msg(std::move(body));
    m.headers.push_back(header_field{"tenant", std::move(tenant)});
    return m;
  };
  d.enqueue(
      {to("a1", "a"), to("a2", "a"), to("a3", "a"), to("a4", "a"), to("b1", "b"), to("b2", "b")});
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a1", "b1"}));
  d.advance(1s);
  EXPECT_EQ(bodies(deliveries(d, d.receive(10))), (std::vector<std::string>{"a2", "b2"}));
}

// P4, P12: a class made again after it emptied stores its messages in the lane it had; the
// shard's memo of class lanes (`class_lanes_`) starts afresh past its bound and still agrees.
TEST(unordered_class, a_class_made_again_keeps_its_lane_past_the_lane_memo_bound) {
  engine_driver d{unordered(8)};
  auto lane_of_only_record = [&d]() -> std::optional<codec::lane_id> {
    auto [from, to] = codec::queue_range(codec::tag::message, 42);
    auto it = d.store.lower_bound(from);
    if (it == d.store.end() || it->first >= to) return std::nullopt;
    auto parts = codec::parse_message_key(it->first);
    if (!parts) return std::nullopt;
    return parts.value().lane;
  };
  for (std::size_t k = 0; k < limits::class_lanes_cached + 44; ++k) {
    auto key = "tenant-" + std::to_string(k);
    std::optional<codec::lane_id> lanes[2];
    for (auto& lane : lanes) {
      d.enqueue({msg("m", key)});
      ASSERT_EQ(message_records(d), 1u);
      lane = lane_of_only_record();
      ASSERT_EQ(drain(d, 10), (std::vector<std::string>{"m"}));
    }
    ASSERT_TRUE(lanes[0] && lanes[1]);
    EXPECT_EQ(*lanes[0], *lanes[1]) << "fairness key " << key;
  }
}

TEST(unordered_class, a_restart_loads_the_window_and_the_leased_messages_past_it) {
  auto cfg = unordered(8);
  cfg.spec.delivery(delivery_durability::durable);
  engine_driver d{cfg};
  d.enqueue(numbered(1, 6));
  auto first = deliveries(d, d.receive(4, 1h));
  ASSERT_EQ(bodies(first), names(1, 4));
  for (std::size_t i = 0; i < 3; ++i) d.nack(first[i].lease, nack_kind::retry, 10s);  // not m4
  cfg.epoch = 4;
  cfg.window_max = 2;  // m1, m2 in the window; m3, m5, m6 left in the store; m4 in flight
  d.restart(cfg);
  ASSERT_NE(d.reply_as<ok_t>(d.recover()), nullptr);
  EXPECT_EQ(d.engine().stats(d.now).backlog, 6u);
  EXPECT_EQ(d.engine().stats(d.now).in_flight, 1u) << "R7: m4's durable lease runs on";
  d.advance(10s);
  EXPECT_EQ(drain(d, 10), (std::vector<std::string>{"m1", "m2", "m3", "m5", "m6"}))
      << "each once: the read-back passes m4, which is in flight";
  const auto* failed = d.reply_as<std::vector<lease_outcome>>(d.ack({first[3].lease}));
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->empty());
  EXPECT_EQ(message_records(d), 0u);
  EXPECT_EQ(d.engine().stats(d.now).backlog, 0u);
}

TEST(unordered_class, messages_stored_in_lane_zero_move_to_their_class_lane_at_recovery) {
  // Unordered messages stored before classes had lanes (all in lane 0) come back, each once,
  // and leave lane 0.
  auto cfg = unordered(2);
  engine_driver d{cfg};
  for (std::uint64_t i = 1; i <= 5; ++i) {
    message m;
    m.id = message_id{i};
    m.seq = message_seq{i};
    m.body = "m" + std::to_string(i);
    m.fairness_key = i % 2 == 0 ? "even" : "odd";
    d.store[codec::message_key(42, codec::lane_id{}, m.seq)] = codec::encode_message(m);
  }
  codec::counters_record counters{6, 6, 1};
  d.store[codec::counters_key(42)] = codec::encode_counters(counters);
  d.restart(cfg);
  ASSERT_NE(d.reply_as<ok_t>(d.recover()), nullptr);
  auto [zero, zero_end] = codec::lane_range(42, codec::lane_id{}, message_seq{0});
  EXPECT_EQ(d.store.lower_bound(zero), d.store.lower_bound(zero_end)) << "lane 0 is empty";
  EXPECT_EQ(message_records(d), 5u);
  auto out = drain(d, 10);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, names(1, 5));
  EXPECT_EQ(message_records(d), 0u);
}

}  // namespace
}  // namespace laneq
