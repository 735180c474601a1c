// The kill -9 checker on synthetic journals (RELIABILITY.md T3): a clean history passes, and each
// kind of broken promise is reported, so a checker that went blind fails here (the canary).
#include <gtest/gtest.h>

#include <csignal>
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
  /// The driver is about to SIGKILL the current run.
  void kill() { add({.kind = event_kind::kill, .incarnation = run_}); }
  /// The drain's last receive came back empty at `at_us`.
  void drain_end(std::int64_t at_us) {
    add({.kind = event_kind::drain_end, .start_us = at_us, .incarnation = run_});
  }
  /// An enqueue about to be sent (its outcome follows with `enqueued` or `enqueue_unknown`).
  void sent(const std::string& q, const std::string& k, std::uint64_t n) {
    add({.kind = event_kind::enqueue_sent,
         .queue = q,
         .body = make_body(k, n),
         .incarnation = run_});
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
  std::vector<event> events() const { return j_.events(); }
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
  h.kill();
  // The group moved on before the crash (the ack was applied in memory)...
  h.restart(2'000'000);
  // ...but the delete was not durable: 1 comes back after the restart, which is allowed.
  auto l1b = h.deliver("ordered", "a", 1, 11, 2'300'000);
  h.ack("ordered", "a", 1, l1b, event_kind::ack_ok);
  auto l2 = h.deliver("ordered", "a", 2, 12, 2'300'100);
  h.ack("ordered", "a", 2, l2, event_kind::ack_ok);
  auto l3 = h.deliver("ordered", "a", 3, 13, 2'300'200);  // the unknown enqueue was stored
  h.ack("ordered", "a", 3, l3, event_kind::ack_ok);
  h.drain_end(2'300'300);
  auto r = h.check();
  EXPECT_TRUE(r.clean()) << render(1, r);
  EXPECT_EQ(r.acknowledged, 2u);
  EXPECT_EQ(r.unknown_delivered, 1u);
  EXPECT_EQ(r.duplicates_after_restart, 1u);  // 1 came back after its ack was lost
  EXPECT_EQ(r.kills, 1u);
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

TEST(kill9_checker, a_delivered_message_that_vanishes_unacked_is_lost) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  h.deliver("plain", "p", 1, 1, 10);  // the consumer drops it: its lease must run out
  h.kill();
  h.restart(100'000);
  h.drain_end(5'000'000);  // every lease ran out; 1 never came back
  auto r = h.check();
  EXPECT_EQ(r.lost, 1u) << render(1, r);
  EXPECT_EQ(r.drain_too_early, 0u) << render(1, r);
  EXPECT_FALSE(r.clean());
}

TEST(kill9_checker, a_message_whose_ack_was_refused_and_that_vanishes_is_lost) {
  history h;
  h.restart(0);
  h.enqueued("durable", "a", 1, 1);
  auto l = h.deliver("durable", "a", 1, 1, 10);
  h.ack("durable", "a", 1, l, event_kind::ack_failed);  // lease_expired: the message stays
  h.drain_end(5'000'000);
  auto r = h.check();
  EXPECT_EQ(r.lost, 1u) << render(1, r);
}

TEST(kill9_checker, an_unanswered_enqueue_that_was_delivered_and_vanished_is_lost) {
  history h;
  h.restart(0);
  h.sent("plain", "p", 1);
  h.enqueue_unknown("plain", "p", 1);  // no answer, but the delivery shows it was stored
  h.deliver("plain", "p", 1, 1, 10);
  h.drain_end(5'000'000);
  auto r = h.check();
  EXPECT_EQ(r.lost, 1u) << render(1, r);
  EXPECT_EQ(r.acknowledged, 0u);
}

TEST(kill9_checker, an_unanswered_ack_whose_message_never_returns_counts_as_acked) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  auto l = h.deliver("plain", "p", 1, 1, 10);
  h.ack("plain", "p", 1, l, event_kind::ack_unknown);  // applied before the kill
  h.kill();
  h.restart(100'000);
  h.ack("plain", "p", 1, l, event_kind::ack_failed);  // the retry: lease_not_found
  h.drain_end(5'000'000);
  auto r = h.check();
  EXPECT_TRUE(r.clean()) << render(1, r);
  EXPECT_EQ(r.acks_cut_by_kill, 1u);
}

TEST(kill9_checker, a_redelivery_after_an_unanswered_ack_is_a_counted_duplicate) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  h.enqueued("plain", "p", 2, 2);
  auto l1 = h.deliver("plain", "p", 1, 1, 10);
  h.ack("plain", "p", 1, l1, event_kind::ack_unknown);  // lost in the kill
  auto l2 = h.deliver("plain", "p", 2, 2, 20);
  h.ack("plain", "p", 2, l2, event_kind::ack_unknown);  // no answer in time, same run
  auto l2b = h.deliver("plain", "p", 2, 2, 2'000'000);
  h.ack("plain", "p", 2, l2b, event_kind::ack_ok);
  h.kill();
  h.restart(2'100'000);
  auto l1b = h.deliver("plain", "p", 1, 1, 2'200'000);
  h.ack("plain", "p", 1, l1b, event_kind::ack_ok);
  h.drain_end(5'000'000);
  auto r = h.check();
  EXPECT_TRUE(r.clean()) << render(1, r);
  EXPECT_EQ(r.duplicates_after_restart, 1u) << render(1, r);
  EXPECT_EQ(r.duplicates_in_run, 1u) << render(1, r);
}

TEST(kill9_checker, two_confirmed_acks_of_one_message_are_reported) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  auto l1 = h.deliver("plain", "p", 1, 1, 10);
  auto l2 = h.deliver("plain", "p", 1, 1, 1'000'010);  // l1 ran out: redelivered
  h.ack("plain", "p", 1, l2, event_kind::ack_ok);
  h.ack("plain", "p", 1, l1, event_kind::ack_ok);  // a stale lease accepted
  h.drain_end(5'000'000);
  auto r = h.check();
  EXPECT_EQ(r.acked_twice, 1u) << render(1, r);
  EXPECT_EQ(r.duplicates_after_ack, 0u);  // no delivery came after a confirmed ack
  EXPECT_FALSE(r.clean());
}

TEST(kill9_checker, a_drain_that_ends_while_a_lease_may_run_is_reported) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  h.deliver("plain", "p", 1, 1, 10);  // held until 1'000'010
  h.drain_end(500'000);
  auto early = h.check();
  EXPECT_EQ(early.drain_too_early, 1u) << render(1, early);
  EXPECT_FALSE(early.clean());

  history g;  // within the last run's reclaim grace
  g.restart(0);
  g.drain_end(grace_us - 1);
  EXPECT_EQ(g.check().drain_too_early, 1u);

  history none;  // no drain at all
  none.restart(0);
  EXPECT_EQ(none.check().drain_too_early, 1u);
}

TEST(kill9_checker, the_drain_horizon_is_the_last_unconfirmed_lease_or_the_last_grace) {
  history h;
  h.restart(0);
  h.enqueued("plain", "p", 1, 1);
  h.enqueued("plain", "p", 2, 2);
  auto l1 = h.deliver("plain", "p", 1, 1, 10);
  h.deliver("plain", "p", 2, 2, 3'000'000);
  h.ack("plain", "p", 1, l1, event_kind::ack_ok);
  checker_options opts{{{"plain"}}, grace_us};
  EXPECT_EQ(drain_horizon_us(h.events(), opts), 3'000'000 + lease_us);  // 2's lease, not 1's
  h.restart(3'900'000);
  EXPECT_EQ(drain_horizon_us(h.events(), opts), 3'900'000 + grace_us);
}

TEST(kill9_checker, only_work_sent_before_a_kill_counts_as_cut_by_it) {
  history idle;  // the kill found nothing in flight: requests after it fail at once
  idle.restart(0);
  idle.sent("plain", "p", 1);
  idle.enqueued("plain", "p", 1, 1);
  auto l = idle.deliver("plain", "p", 1, 1, 10);
  idle.ack("plain", "p", 1, l, event_kind::ack_ok);
  idle.kill();
  idle.sent("plain", "p", 2);
  idle.enqueue_unknown("plain", "p", 2);  // connection refused
  idle.restart(100'000);
  idle.drain_end(5'000'000);
  auto r = idle.check();
  EXPECT_TRUE(r.clean()) << render(1, r);
  EXPECT_EQ(r.enqueues_cut_by_kill, 0u);
  EXPECT_EQ(r.leases_across_restart, 0u);
  EXPECT_FALSE(r.kills_hit_work());

  history busy;
  busy.restart(0);
  busy.sent("durable", "a", 1);
  busy.enqueued("durable", "a", 1, 1);
  busy.deliver("durable", "a", 1, 1, 10);  // held across the kill
  busy.sent("durable", "a", 2);
  busy.kill();
  busy.enqueue_unknown("durable", "a", 2);  // sent before the kill, no answer
  busy.enqueued("plain", "p", 1, 3);
  auto lp = busy.deliver("plain", "p", 1, 3, 20);
  busy.ack("plain", "p", 1, lp, event_kind::ack_unknown);  // sent after the kill: counts too
  busy.restart(100'000);
  auto l1 = busy.deliver("durable", "a", 1, 1, 1'000'010);
  busy.ack("durable", "a", 1, l1, event_kind::ack_ok);
  auto lp2 = busy.deliver("plain", "p", 1, 3, 1'000'020);
  busy.ack("plain", "p", 1, lp2, event_kind::ack_ok);
  busy.drain_end(5'000'000);
  auto b = busy.check();
  EXPECT_TRUE(b.clean()) << render(1, b);
  EXPECT_EQ(b.enqueues_cut_by_kill, 1u);
  EXPECT_EQ(b.acks_cut_by_kill, 0u);  // the ack went out after the kill
  EXPECT_EQ(b.leases_across_restart, 2u);
  EXPECT_EQ(b.durable_leases_across_restart, 1u);
  EXPECT_TRUE(b.kills_hit_work());
}

TEST(kill9_checker, a_killed_process_must_die_of_our_sigkill_with_a_clean_stderr) {
  EXPECT_EQ(judge_exit(128 + SIGKILL, ""), "");
  EXPECT_EQ(judge_exit(128 + SIGKILL, "laneqd: some warning\n"), "");
  // Died before the kill: an abort, a segfault, a sanitizer's exit code.
  EXPECT_NE(judge_exit(128 + SIGABRT, ""), "");
  EXPECT_NE(judge_exit(128 + SIGSEGV, ""), "");
  EXPECT_NE(judge_exit(1, ""), "");
  EXPECT_NE(judge_exit(0, ""), "");
  // Killed by us, but a report was written before the kill (UBSan goes on after one).
  auto ubsan = judge_exit(128 + SIGKILL,
                          "x.cpp:10:5: runtime error: signed integer overflow\n"
                          "SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior x.cpp:10:5\n");
  EXPECT_NE(ubsan.find("runtime error: signed integer overflow"), std::string::npos) << ubsan;
  EXPECT_NE(judge_exit(128 + SIGKILL, "==1==ERROR: AddressSanitizer: heap-use-after-free\n"), "");
  EXPECT_NE(judge_exit(128 + SIGKILL, "laneqd: a.cpp:3: f: Assertion `x' failed.\n"), "");
  EXPECT_NE(judge_exit(128 + SIGKILL, "terminate called after throwing an instance\n"), "");
  auto both = judge_exit(128 + SIGABRT, "==7==ERROR: AddressSanitizer: SEGV on unknown address\n");
  EXPECT_NE(both.find("SIGABRT"), std::string::npos) << both;
  EXPECT_NE(both.find("SEGV on unknown address"), std::string::npos) << both;
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
  h.enqueued("plain", "p", 1, 5);
  h.deliver("plain", "p", 1, 5, 50);  // lost: delivered, never acked, gone
  h.enqueued("plain", "p", 2, 6);
  auto s1 = h.deliver("plain", "p", 2, 6, 60);
  auto s2 = h.deliver("plain", "p", 2, 6, 1'000'060);
  h.ack("plain", "p", 2, s2, event_kind::ack_ok);
  h.ack("plain", "p", 2, s1, event_kind::ack_ok);  // acked twice
  h.drain_end(900'000);                            // drain too early: 5's lease runs on
  auto r = h.check();
  EXPECT_EQ(r.lost, 2u);
  EXPECT_EQ(r.order_violations, 1u);
  EXPECT_EQ(r.duplicates_after_ack, 1u);
  EXPECT_EQ(r.unexpected, 1u);
  EXPECT_EQ(r.acked_twice, 1u);
  EXPECT_EQ(r.drain_too_early, 1u);
  EXPECT_FALSE(r.clean());
  std::cout << render(1, r);
}

TEST(kill9_checker, bodies_round_trip) {
  auto b = parse_body(make_body("key7", 42));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "key7");
  EXPECT_EQ(b->n, 42u);
  EXPECT_FALSE(parse_body("k=a n=4x"));
  EXPECT_FALSE(parse_body("hello"));
}

}  // namespace
}  // namespace laneq::kill9
