// A randomized test of retention (docs/design/retention.md, docs/guarantees.md G10): one shard
// engine on a memory store with a drawn retention, driven by random enqueues (some delayed),
// receives (some of ordered batches), acks, nacks, dead-letter requests, redrives and time. It
// checks, at every delivery, that no message is delivered at or after its retention (RT6), that
// a group never has two leases in flight and never goes back in arrival order (RT3, RT4), and at
// the end, once every lease and retention has run out, that nothing is left (RT1, RT9). The shard's
// invariants are checked after every step (engine_driver). Seeds: LANEQ_RETENTION_SEED=<n> runs
// one; the failure message names the seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../support/engine_driver.hpp"
#include "laneq/shard_engine.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::deliveries;
using test::engine_driver;
using test::message_records;
using test::test_config;

class retention_run {
 public:
  explicit retention_run(std::uint64_t seed) : seed_(seed), rng_(seed) {}

  void run() {
    auto spec = draw_spec();
    auto cfg = test_config(spec);
    if (pick(2) == 0) cfg.window = cfg.window_max = 2;  // most messages wait in the store
    engine_driver d{cfg};
    for (int step = 0; step < 300 && !::testing::Test::HasFailure(); ++step) act(d);
    // The end: no consumer; every lease, retry, delay and retention runs out.
    for (int i = 0; i < 40; ++i) d.advance(5s);
    auto s = d.engine().stats(d.now);
    EXPECT_EQ(s.backlog, 0u) << where();
    EXPECT_EQ(s.dead_letters, 0u) << where();
    EXPECT_EQ(message_records(d), 0u) << where();
    EXPECT_EQ(d.engine().live_groups(), 0u) << where();
    EXPECT_GT(s.expired_dead_lettered + s.expired_dropped, 0u) << where() << ": nothing expired";
  }

 private:
  std::uint64_t pick(std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>{0, n - 1}(rng_);
  }
  std::string where() const {
    return "seed " + std::to_string(seed_) +
           " (rerun: LANEQ_RETENTION_SEED=" + std::to_string(seed_) +
           " laneq_unit_tests --gtest_filter='retention_property.*')";
  }

  queue_spec draw_spec() {
    queue_spec spec{"orders"};
    if (pick(3) > 0) spec.ordered_by({key::header("account")});
    retention_ = std::chrono::seconds{1 + static_cast<std::int64_t>(pick(20))};
    auto action = pick(2) == 0 ? expiry_action::drop : expiry_action::dead_letter;
    // A dead-letter retention always: at the end the list must be empty too.
    spec.retention(retention_, action,
                   std::chrono::seconds{1 + static_cast<std::int64_t>(pick(30))});
    spec.max_attempts(3);
    return spec;
  }

  void act(engine_driver& d) {
    switch (pick(8)) {
      case 0:
      case 1: return enqueue(d);
      case 2:
      case 3: return receive(d);
      case 4: return end(d, pick(3));
      case 5: d.advance(std::chrono::milliseconds{static_cast<std::int64_t>(pick(3000))}); return;
      case 6:
        d.redrive();
        d.settle();
        return;
      default: d.advance(std::chrono::milliseconds{static_cast<std::int64_t>(pick(300))}); return;
    }
  }

  void enqueue(engine_driver& d) {
    std::vector<outgoing_message> batch(1 + pick(3));
    for (auto& m : batch) {
      m.body = "m";
      m.headers.push_back(header_field{"account", "a" + std::to_string(pick(3))});
      if (pick(4) == 0) m.delay = std::chrono::milliseconds{static_cast<std::int64_t>(pick(5000))};
    }
    d.enqueue(std::move(batch));
  }

  void receive(engine_driver& d) {
    auto lease = std::chrono::milliseconds{500 + static_cast<std::int64_t>(pick(5000))};
    auto r = pick(2) == 0 ? d.receive(static_cast<std::uint32_t>(1 + pick(4)), lease)
                          : d.receive_batch(4, static_cast<std::uint32_t>(1 + pick(3)), lease);
    for (const auto& x : deliveries(d, r)) check_delivery(d, x);
  }

  void check_delivery(const engine_driver& d, const delivery& x) {
    EXPECT_GT(x.msg.entered_at() + retention_, d.now)
        << where() << ": message " << x.msg.id.value << " delivered after its retention";
    if (x.ordering_key.empty()) {
      held_.push_back(held{x.lease, x.deadline});
      return;
    }
    auto& g = groups_[x.ordering_key];
    if (x.batch_index > 0) {
      EXPECT_GT(x.msg.seq.value, g.last_seq) << where() << ": a batch behind its head";
      return;
    }
    // A head is the one before again (a retry, or a batch given back), or one behind it: never
    // an earlier one (a redriven message comes with a later seq).
    EXPECT_GE(x.msg.seq.value, g.last_seq) << where() << ": group " << x.ordering_key;
    g.last_seq = x.msg.seq.value;
    EXPECT_FALSE(g.lease && *g.lease != x.lease && in_flight(*g.lease, d.now))
        << where() << ": group " << x.ordering_key << " has two leases in flight";
    g.lease = x.lease;
    held_.push_back(held{x.lease, x.deadline});
  }

  /// Whether `l` is held by its consumer, not ended, and its deadline has not come.
  bool in_flight(const lease_token& l, timestamp now) const {
    for (const auto& h : held_)
      if (h.lease == l) return h.deadline > now;
    return false;
  }

  /// Ends a held lease: ack, nack (retry, perhaps later), or nack to the dead letters.
  void end(engine_driver& d, std::uint64_t how) {
    if (held_.empty()) return;
    auto i = pick(held_.size());
    auto l = held_[i].lease;
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    if (how == 0) {
      d.ack({l});
    } else {
      auto after = std::chrono::milliseconds{static_cast<std::int64_t>(pick(2000))};
      d.nack(l, how == 1 ? nack_kind::retry : nack_kind::dead_letter, after);
    }
  }

  struct group_seen {
    std::uint64_t last_seq = 0;
    std::optional<lease_token> lease;
  };

  std::uint64_t seed_;
  std::mt19937_64 rng_;
  duration retention_{0};
  struct held {
    lease_token lease;
    timestamp deadline;
  };
  std::vector<held> held_;
  std::map<std::string, group_seen> groups_;
};

TEST(retention_property, no_delivery_after_its_retention_and_nothing_left_at_the_end) {
  if (const char* one = std::getenv("LANEQ_RETENTION_SEED")) {
    retention_run{std::strtoull(one, nullptr, 10)}.run();
    return;
  }
  std::random_device rd;
  auto base = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  for (std::uint64_t i = 0; i < 40 && !HasFailure(); ++i) {
    auto seed = base + i;
    SCOPED_TRACE("seed " + std::to_string(seed));
    retention_run{seed}.run();
  }
  std::cout << "retention_property: 40 runs from seed " << base << "\n";
}

}  // namespace
}  // namespace laneq
