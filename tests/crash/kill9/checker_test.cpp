// The kill -9 checker on synthetic journals (RELIABILITY.md T3): a clean history passes, and each
// kind of broken promise is reported, so a checker that went blind fails here (the canary).
#include <gtest/gtest.h>

#include <iostream>
#include <map>

#include "checker.hpp"
#include "kill9_setup.hpp"

namespace laneq::kill9 {
namespace {

constexpr std::int64_t lease_us = 1'000'000;
constexpr std::int64_t grace_us = 200'000;

/// Builds a journal by hand: one broker run at a time, times in microseconds.
class history {
 public:
  void restart(std::int64_t at_us) {
    ++run_;
    add({.kind = event_kind::restart, .start_us = at_us, .incarnation = run_});
  }
  void enqueued(const std::string& q, const std::string& k, std::uint64_t n, std::uint64_t id) {
    add({.kind = event_kind::enqueue_ok,
         .queue = q,
         .body = make_body(k, n),
         .id = message_id{id},
         .incarnation = run_});
  }
  void enqueue_unknown(const std::string& q, const std::string& k, std::uint64_t n) {
    add({.kind = event_kind::enqueue_unknown,
         .queue = q,
         .body = make_body(k, n),
         .incarnation = run_});
  }
  /// A delivery at `at_us` (lease start); returns its lease.
  lease_token deliver(const std::string& q, const std::string& k, std::uint64_t n, std::uint64_t id,
                      std::int64_t at_us) {
    lease_token l{group_id{1}, message_id{id}, ++attempts_[id], ++nonce_};
    add({.kind = event_kind::deliver,
         .queue = q,
         .body = make_body(k, n),
         .id = message_id{id},
         .lease = l,
         .grant_us = at_us,
         .deadline_us = at_us + lease_us,
         .incarnation = run_});
    return l;
  }
  /// An ack of `l` and its outcome (ack_ok, ack_failed or ack_unknown).
  void ack(const std::string& q, const std::string& k, std::uint64_t n, const lease_token& l,
           event_kind result) {
    auto req = ++request_;
    add({.kind = event_kind::ack_sent,
         .queue = q,
         .body = make_body(k, n),
         .id = l.msg,
         .lease = l,
         .incarnation = run_,
         .request = req});
    add({.kind = result,
         .queue = q,
         .body = make_body(k, n),
         .id = l.msg,
         .lease = l,
         .incarnation = run_,
         .request = req});
  }
  /// Any event, as given.
  void raw(event e) { add(std::move(e)); }
  check_report check() const {
    checker_options opts{{{"ordered", true, false}, {"durable", true, true}, {"plain"}}, grace_us};
    return kill9::check(j_.events(), opts);
  }

 private:
  void add(event e) { j_.record(std::move(e)); }
  journal j_;
  std::uint32_t run_ = 0;
  std::uint64_t nonce_ = 0;
  std::uint64_t request_ = 0;
  std::map<std::uint64_t, std::uint32_t> attempts_;
};

TEST(kill9_checker, a_clean_history_with_a_crash_and_a_lost_ack_passes) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 11);
  h.enqueued("ordered", "a", 2, 12);
  h.enqueue_unknown("ordered", "a", 3);
  auto l1 = h.deliver("ordered", "a", 1, 11, 10);
  h.ack("ordered", "a", 1, l1, event_kind::ack_unknown);  // the broker dies meanwhile
  // The group moved on before the crash (the ack was applied in memory)...
  h.restart(2'000'000);
  // ...but the delete was not durable: 1 comes back after the restart, which is allowed.
  auto l1b = h.deliver("ordered", "a", 1, 11, 2'300'000);
  h.ack("ordered", "a", 1, l1b, event_kind::ack_ok);
  auto l2 = h.deliver("ordered", "a", 2, 12, 2'300'100);
  h.ack("ordered", "a", 2, l2, event_kind::ack_ok);
  auto l3 = h.deliver("ordered", "a", 3, 13, 2'300'200);  // the unknown enqueue was stored
  h.ack("ordered", "a", 3, l3, event_kind::ack_ok);
  auto r = h.check();
  EXPECT_TRUE(r.clean()) << render(1, r);
  EXPECT_EQ(r.acknowledged, 2u);
  EXPECT_EQ(r.unknown_delivered, 1u);
  EXPECT_EQ(headline(1, r),
            "1 crash-restart cycles, 2 acknowledged messages, 0 lost, 0 unexpected, 0 order "
            "violations, 0 in-flight violations, 0 duplicates after a confirmed ack.");
}

TEST(kill9_checker, reports_a_lost_acknowledged_enqueue) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  h.enqueued("plain", "p", 2, 2);
  auto l = h.deliver("plain", "p", 1, 1, 10);
  h.ack("plain", "p", 1, l, event_kind::ack_ok);
  auto r = h.check();
  EXPECT_EQ(r.lost, 1u) << render(1, r);
  EXPECT_FALSE(r.clean());
}

TEST(kill9_checker, reports_a_message_that_was_never_enqueued_or_changed_its_id) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  h.deliver("plain", "p", 1, 7, 10);  // wrong id
  h.deliver("plain", "p", 9, 9, 20);  // never sent
  auto r = h.check();
  EXPECT_EQ(r.unexpected, 2u) << render(1, r);
}

TEST(kill9_checker, reports_a_delivery_that_overtakes_an_unacked_predecessor) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.enqueued("ordered", "a", 2, 2);
  auto l2 = h.deliver("ordered", "a", 2, 2, 10);  // 2 before 1
  h.ack("ordered", "a", 2, l2, event_kind::ack_ok);
  auto l1 = h.deliver("ordered", "a", 1, 1, 20);
  h.ack("ordered", "a", 1, l1, event_kind::ack_ok);
  auto r = h.check();
  EXPECT_EQ(r.order_violations, 1u) << render(1, r);
}

TEST(kill9_checker, a_corrupted_delivery_is_unexpected_and_lost_but_not_an_order_cascade) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.enqueued("ordered", "a", 2, 2);
  // Message 1 comes back with its body wiped (same id): its content never reached a consumer.
  lease_token l1{group_id{1}, message_id{1}, 1, 99};
  h.raw({.kind = event_kind::deliver,
         .queue = "ordered",
         .body = "",
         .id = message_id{1},
         .lease = l1,
         .grant_us = 10,
         .deadline_us = 10 + lease_us,
         .incarnation = 1});
  h.raw({.kind = event_kind::ack_sent,
         .queue = "ordered",
         .body = "",
         .id = message_id{1},
         .lease = l1,
         .incarnation = 1,
         .request = 1000});
  h.raw({.kind = event_kind::ack_ok,
         .queue = "ordered",
         .body = "",
         .id = message_id{1},
         .lease = l1,
         .incarnation = 1,
         .request = 1000});
  auto l2 = h.deliver("ordered", "a", 2, 2, 20);
  h.ack("ordered", "a", 2, l2, event_kind::ack_ok);
  auto r = h.check();
  EXPECT_EQ(r.unexpected, 1u) << render(1, r);
  EXPECT_EQ(r.lost, 1u) << render(1, r);
  EXPECT_EQ(r.order_violations, 0u) << render(1, r);
}

TEST(kill9_checker, a_message_that_comes_back_behind_a_later_one_in_the_same_run_is_reported) {
  history h;
  h.restart(0);
  h.enqueued("durable", "a", 1, 1);
  h.enqueued("durable", "a", 2, 2);
  auto l1 = h.deliver("durable", "a", 1, 1, 10);
  h.ack("durable", "a", 1, l1, event_kind::ack_unknown);  // released, but the broker kept it
  auto l2 = h.deliver("durable", "a", 2, 2, 20);
  h.ack("durable", "a", 2, l2, event_kind::ack_ok);
  h.deliver("durable", "a", 1, 1, 30);  // 1 was still there when 2 was handed out
  auto r = h.check();
  EXPECT_EQ(r.order_violations, 1u) << render(1, r);
}

TEST(kill9_checker, a_refused_ack_does_not_release_the_message) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.enqueued("ordered", "a", 2, 2);
  auto l1 = h.deliver("ordered", "a", 1, 1, 10);
  h.ack("ordered", "a", 1, l1, event_kind::ack_failed);  // lease expired
  h.deliver("ordered", "a", 2, 2, 2'000'000);            // 1 was never redelivered
  auto r = h.check();
  EXPECT_EQ(r.order_violations, 1u) << render(1, r);
  EXPECT_EQ(r.in_flight_violations, 0u) << render(1, r);  // 1's deadline had passed
}

TEST(kill9_checker, reports_two_leases_of_one_key_at_once) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.deliver("ordered", "a", 1, 1, 10);
  h.deliver("ordered", "a", 1, 1, 500);  // the first lease runs until 1'000'010
  auto r = h.check();
  EXPECT_EQ(r.in_flight_violations, 1u) << render(1, r);
}

TEST(kill9_checker, allows_a_fast_overlap_after_the_grace_but_never_a_durable_one) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.enqueued("durable", "a", 1, 2);
  h.deliver("ordered", "a", 1, 1, 10);  // the worker keeps these leases across the crash
  h.deliver("durable", "a", 1, 2, 10);
  h.restart(100'000);
  auto lf = h.deliver("ordered", "a", 1, 1, 100'000 + grace_us + 1);  // after the grace: allowed
  auto ld = h.deliver("durable", "a", 1, 2, 100'000 + grace_us + 1);  // durable: a violation
  h.ack("ordered", "a", 1, lf, event_kind::ack_ok);
  h.ack("durable", "a", 1, ld, event_kind::ack_ok);
  auto r = h.check();
  EXPECT_EQ(r.fast_overlaps_after_restart, 1u) << render(1, r);
  EXPECT_EQ(r.in_flight_violations, 1u) << render(1, r);
}

TEST(kill9_checker, a_fast_overlap_within_the_grace_is_a_violation) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.deliver("ordered", "a", 1, 1, 10);
  h.restart(100'000);
  h.deliver("ordered", "a", 1, 1, 100'000 + grace_us / 2);
  auto r = h.check();
  EXPECT_EQ(r.in_flight_violations, 1u) << render(1, r);
  EXPECT_EQ(r.fast_overlaps_after_restart, 0u);
}

TEST(kill9_checker, reports_a_redelivery_after_a_confirmed_ack) {
  history h;
  h.restart(0);
  h.enqueued("durable", "a", 1, 1);
  auto l = h.deliver("durable", "a", 1, 1, 10);
  h.ack("durable", "a", 1, l, event_kind::ack_ok);
  h.restart(100'000);
  h.deliver("durable", "a", 1, 1, 2'000'000);
  auto r = h.check();
  EXPECT_EQ(r.duplicates_after_ack, 1u) << render(1, r);
}

TEST(kill9_checker, a_synthetic_bad_run_reports_every_kind_at_once) {
  history h;
  h.restart(0);
  h.enqueued("ordered", "a", 1, 1);
  h.enqueued("ordered", "a", 2, 2);
  h.enqueued("ordered", "a", 3, 3);               // lost
  auto l2 = h.deliver("ordered", "a", 2, 2, 10);  // order violation
  h.ack("ordered", "a", 2, l2, event_kind::ack_ok);
  auto l1 = h.deliver("ordered", "a", 1, 1, 20);
  h.ack("ordered", "a", 1, l1, event_kind::ack_ok);
  h.deliver("ordered", "a", 2, 2, 30);  // duplicate after a confirmed ack
  h.deliver("ordered", "b", 1, 4, 40);  // unexpected
  auto r = h.check();
  EXPECT_EQ(r.lost, 1u);
  EXPECT_EQ(r.order_violations, 1u);
  EXPECT_EQ(r.duplicates_after_ack, 1u);
  EXPECT_EQ(r.unexpected, 1u);
  EXPECT_FALSE(r.clean());
  std::cout << render(1, r);
}

TEST(kill9_checker, bodies_and_ready_lines_round_trip) {
  auto b = parse_body(make_body("key7", 42));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "key7");
  EXPECT_EQ(b->n, 42u);
  EXPECT_FALSE(parse_body("k=a n=4x"));
  EXPECT_FALSE(parse_body("hello"));
  auto p = parse_ready_line(make_ready_line({1000, 2000, 3000}));
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)[2], 3000);
  EXPECT_FALSE(parse_ready_line("ready 1 2"));
}

}  // namespace
}  // namespace laneq::kill9
