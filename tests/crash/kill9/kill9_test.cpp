// T3 of RELIABILITY.md: kill -9 of laneqd under load, repeated, across a real process boundary.
// Starts the real laneqd (apps/laneqd) with OS-picked ports, drives producers and consumers
// through its CAF remote admin actor and the queue handles it gives out, for a random
// 100-800 ms, kills it with SIGKILL (its exit status and stderr are judged: it must die of our
// signal, with no sanitizer report, failed assertion or crash before), restarts it on the same
// data directory, and goes on. After the last cycle it drains every queue until every lease has
// run out and the reclaim grace has passed, then checks the client-side journal (checker.hpp),
// asserts that the kills hit work in progress, and prints the RELIABILITY.md headline.
//
//   LANEQ_KILL9_SEED=<n>    rerun with that seed (the schedule; thread timing still varies)
//   LANEQ_KILL9_CYCLES=<n>  crash-restart cycles (default 20; 5 in builds without NDEBUG)
//   LANEQ_KILL9_GRACE_MS=<n> laneqd's reclaim grace (default 200; 0 turns the hold off)
//   LANEQ_KILL9_JOURNAL=<path> also write the journal there (tab-separated)
//   LANEQ_KILL9_LANEQD=<path>  run another laneqd binary (default: the one built with this test)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "checker.hpp"
#include "kill9_setup.hpp"
#include "laneq/actors/broker.hpp"
#include "laneq/actors/remote_admin.hpp"
#include "laneqd_child.hpp"

#ifndef LANEQD_BINARY
#error "LANEQD_BINARY must name the laneqd binary"
#endif

namespace laneq::kill9 {
namespace {

using namespace std::chrono_literals;
using handles = std::array<queue_api, queue_count>;

#ifdef NDEBUG
constexpr std::uint64_t cycles_default = 20;
#else
constexpr std::uint64_t cycles_default = 5;  // sanitizer builds are several times slower
#endif

/// The knobs of a run; every bound of the test in one place.
struct settings {
  std::string laneqd = LANEQD_BINARY;  ///< the daemon under test
  std::uint64_t seed = 0;
  std::uint64_t cycles = cycles_default;
  std::chrono::milliseconds load_min = 100ms;  ///< load before each kill: uniform in [min, max]
  std::chrono::milliseconds load_max = 800ms;
  std::chrono::milliseconds grace = 200ms;   ///< laneqd's reclaim grace
  std::chrono::milliseconds lease = 4000ms;  ///< outlives a kill and restart (about 2.3 s)
  std::chrono::milliseconds receive_wait = 20ms;
  caf::timespan request_timeout = std::chrono::seconds{2};
  std::chrono::milliseconds ready_timeout = 60s;
  std::chrono::seconds drain_timeout = 90s;
  /// The drain's final receive starts this long after the checker's horizon (every lease not
  /// confirmed acked ran out, the grace passed): slack for the clocks of different runs.
  std::chrono::milliseconds drain_slack = 1000ms;
  int ack_tries_max = 3;            ///< an unanswered ack is retried on the next run, up to this
  int drain_ack_tries_max = 20;     ///< ... and in the drain, where laneqd stays up
  std::size_t keys_per_queue = 10;  ///< in each of the two ordered queues
  std::size_t enqueue_batch_max = 8;
  std::uint32_t receive_max = 4;
  std::size_t consumers = 3;
  std::int64_t backlog_soft_max = 300;  ///< producers pause above this many unacked messages
  double abandon_probability = 0.02;    ///< a consumer drops a delivery without acking it
  double hold_probability = 0.1;        ///< ... or holds it up to 30 ms before acking
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  return std::strtoull(text, nullptr, 10);
}

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Writes the journal as tab-separated text, one event a line (LANEQ_KILL9_JOURNAL).
void write_journal(const std::string& path, const std::vector<event>& events) {
  std::ofstream out{path};
  out << "seq\tkind\trun\tqueue\tbody\tid\tlease\tgrant_us\tdeadline_us\tstart_us\tconsumer"
         "\trequest\n";
  for (const auto& e : events)
    out << e.seq << '\t' << static_cast<int>(e.kind) << '\t' << e.incarnation << '\t' << e.queue
        << '\t' << e.body << '\t' << e.id.value << '\t' << to_string(e.lease) << '\t' << e.grant_us
        << '\t' << e.deadline_us << '\t' << e.start_us << '\t' << e.consumer << '\t' << e.request
        << '\n';
  std::cout << "kill9: journal written to " << path << "\n";
}

/// An ack whose answer never came; retried on the next laneqd run (and in the drain).
struct pending_ack {
  std::size_t queue = 0;
  lease_token lease;
  std::string body;
  int tries = 1;
};

/// What the checker knows of the queues and laneqd's grace.
checker_options options_for(const settings& s) {
  checker_options opts;
  for (std::size_t i = 0; i < queue_count; ++i) {
    auto spec = spec_of(i);
    opts.queues.push_back(queue_traits{spec.name(), spec.ordered_by_key(),
                                       spec.delivery_mode() == delivery_durability::durable});
  }
  opts.reclaim_grace_us = std::chrono::duration_cast<std::chrono::microseconds>(s.grace).count();
  return opts;
}

/// The driver: laneqd processes, client threads and the journal.
class driver {
 public:
  driver(caf::actor_system& sys, settings s)
      : sys_(sys), s_(s), opts_(options_for(s)), rng_(s.seed) {
    run_dir_ = (std::filesystem::temp_directory_path() /
                ("laneq-kill9-" + std::to_string(::getpid()) + "-" + std::to_string(s.seed)))
                   .string();
    std::filesystem::remove_all(run_dir_);
    std::filesystem::create_directories(run_dir_);
    std::ofstream{config_path()} << make_config(s_.grace.count()) << "\n";
    pending_.resize(s_.consumers);
    next_n_.resize(queue_count);
  }

  ~driver() {
    static_cast<void>(laneqd_.kill9());
    if (keep_)
      std::cout << "kill9: run directory kept (data, config, each laneqd's stderr): " << run_dir_
                << "\n";
    else
      std::filesystem::remove_all(run_dir_);
  }

  void keep() { keep_ = true; }
  journal& log() { return journal_; }
  const checker_options& options() const { return opts_; }

  /// Starts laneqd, connects to its remote admin actor and looks the queues up; an empty
  /// string on success, else why not.
  std::string start() {
    auto started_at = wall_us();
    auto t0 = std::chrono::steady_clock::now();
    auto stderr_path = run_dir_ + "/laneqd-" + std::to_string(incarnation_ + 1) + ".stderr";
    if (auto err = laneqd_.start(s_.laneqd, config_path(), run_dir_ + "/data", stderr_path,
                                 s_.ready_timeout);
        !err.empty())
      return err;
    ++incarnation_;
    journal_.record(
        {.kind = event_kind::restart, .start_us = started_at, .incarnation = incarnation_});
    // A failure to connect may be laneqd's: kill it and say how it ended.
    auto failed = [this](const std::string& why) {
      auto ended = laneqd_.kill9();
      return why + (ended.empty() ? "" : "; " + ended);
    };
    auto admin = sys_.middleman().remote_actor<remote_admin_actor>("127.0.0.1", laneqd_.caf_port());
    if (!admin)
      return failed("remote_actor on CAF port " + std::to_string(laneqd_.caf_port()) + ": " +
                    sys_.render(admin.error()));
    admin_ = *admin;
    caf::scoped_actor self{sys_};
    for (std::size_t i = 0; i < queue_count; ++i) {
      std::string why;
      self->request(admin_, s_.ready_timeout, lookup_atom_v, std::string{queue_names[i]})
          .receive([&](queue_api& q) { queues_[i] = std::move(q); },
                   [&](caf::error& e) { why = to_string(from_caf(e)); });
      if (!why.empty()) return failed("lookup " + std::string{queue_names[i]} + ": " + why);
    }
    startup_total_ += std::chrono::steady_clock::now() - t0;
    return {};
  }

  /// One cycle: load for a random time, then kill -9 while the load runs. Returns "" when
  /// laneqd died of that kill with a clean stderr, else why not.
  std::string run_cycle() {
    std::uniform_int_distribution<std::int64_t> load{s_.load_min.count(), s_.load_max.count()};
    auto load_ms = std::chrono::milliseconds{load(rng_)};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (std::size_t q = 0; q < queue_count; ++q)
      threads.emplace_back([this, q, seed = rng_(), &stop] { produce(q, seed, stop); });
    for (std::size_t c = 0; c < s_.consumers; ++c)
      threads.emplace_back([this, c, seed = rng_(), &stop] {
        consume(static_cast<std::uint32_t>(c), seed, stop, false);
      });
    std::this_thread::sleep_for(load_ms);
    auto ended = kill_laneqd();  // under load: the threads are mid-request
    stop = true;
    for (auto& t : threads) t.join();
    return ended;
  }

  /// Journals the kill, then SIGKILLs laneqd and judges how it ended.
  std::string kill_laneqd() {
    journal_.record({.kind = event_kind::kill, .incarnation = incarnation_});
    auto ended = laneqd_.kill9();
    return ended.empty() ? ended : "run " + std::to_string(incarnation_) + ": " + ended;
  }

  /// After the last kill: restart, retry unanswered acks, and consume until every queue is
  /// empty, nothing is in flight, every lease not confirmed acked has run out and the reclaim
  /// grace has passed (`drain_horizon_us`); then a receive on every queue must find nothing.
  /// Journals drain_end. Returns an empty string when drained, else what was left.
  std::string drain() {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (std::size_t c = 0; c < s_.consumers; ++c)
      threads.emplace_back([this, c, seed = rng_(), &stop] {
        consume(static_cast<std::uint32_t>(c), seed, stop, true);
      });
    auto slack = std::chrono::duration_cast<std::chrono::microseconds>(s_.drain_slack).count();
    auto horizon = drain_horizon_us(journal_.events(), opts_) + slack;
    auto until = std::chrono::steady_clock::now() + s_.drain_timeout;
    std::string left = "not drained";
    while (std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(200ms);
      left = leftovers();
      if (!left.empty() || wall_us() < horizon) continue;
      // The drain's own deliveries count too: they may have moved the horizon.
      horizon = drain_horizon_us(journal_.events(), opts_) + slack;
      if (wall_us() >= horizon) break;
    }
    stop = true;
    for (auto& t : threads) t.join();
    if (!left.empty()) return left + (wall_us() < horizon ? " (leases still running)" : "");
    // Empty by the stats; a receive now, after every lease and the grace, must find nothing.
    journal_.record(
        {.kind = event_kind::drain_end, .start_us = wall_us(), .incarnation = incarnation_});
    for (std::size_t i = 0; i < queue_count; ++i) {
      blocking_queue bq{sys_, queues_[i], s_.request_timeout};
      auto wait = std::chrono::duration_cast<std::chrono::microseconds>(s_.grace + 100ms);
      auto got = bq.receive(receive_request{s_.receive_max, lease_us(), wait.count()});
      if (!got) return std::string{queue_names[i]} + ": final receive: " + to_string(got.err());
      for (auto& d : got.value()) record_delivery(i, d, 0);
      if (!got.value().empty())
        return std::string{queue_names[i]} + ": a receive after the drain still got messages";
    }
    return leftovers();
  }

  std::chrono::steady_clock::duration startup_total() const { return startup_total_; }

 private:
  std::string config_path() const { return run_dir_ + "/laneqd.json"; }

  std::int64_t lease_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(s_.lease).count();
  }

  /// Backlog, messages in flight and dead letters of every queue; empty when all are 0.
  std::string leftovers() {
    std::string out;
    for (std::size_t i = 0; i < queue_count; ++i) {
      blocking_queue bq{sys_, queues_[i], s_.request_timeout};
      auto st = bq.stats();
      if (!st) {
        out += std::string{queue_names[i]} + ": stats: " + to_string(st.err()) + "; ";
      } else if (st.value().backlog != 0 || st.value().in_flight != 0 ||
                 st.value().dead_letters != 0) {
        out += std::string{queue_names[i]} + ": backlog " + std::to_string(st.value().backlog) +
               ", in flight " + std::to_string(st.value().in_flight) + ", dead letters " +
               std::to_string(st.value().dead_letters) + "; ";
      }
    }
    return out;
  }

  void produce(std::size_t qi, std::uint64_t seed, const std::atomic<bool>& stop) {
    std::mt19937_64 rng{seed};
    blocking_queue bq{sys_, queues_[qi], s_.request_timeout};
    auto inc = incarnation_;
    std::string queue{queue_names[qi]};
    bool keyed = spec_of(qi).ordered_by_key();
    while (!stop) {
      if (outstanding_[qi].load() > s_.backlog_soft_max) {
        std::this_thread::sleep_for(2ms);
        continue;
      }
      auto count = 1 + rng() % s_.enqueue_batch_max;
      std::vector<outgoing_message> batch;
      std::vector<std::string> bodies;
      for (std::size_t i = 0; i < count; ++i) {
        std::string k = keyed ? "k" + std::to_string(rng() % s_.keys_per_queue) : "p";
        auto body = make_body(k, ++next_n_[qi][k]);
        outgoing_message m;
        m.body = body;
        if (keyed) m.headers.push_back(header_field{std::string{key_header}, k});
        batch.push_back(std::move(m));
        journal_.record(
            {.kind = event_kind::enqueue_sent, .queue = queue, .body = body, .incarnation = inc});
        bodies.push_back(std::move(body));
      }
      auto ids = bq.enqueue(std::move(batch));
      bool ok = ids && ids.value().size() == bodies.size();
      for (std::size_t i = 0; i < bodies.size(); ++i) {
        event e{.kind = ok ? event_kind::enqueue_ok : event_kind::enqueue_unknown,
                .queue = queue,
                .body = bodies[i],
                .incarnation = inc};
        if (ok) e.id = ids.value()[i];
        journal_.record(std::move(e));
      }
      if (ok) outstanding_[qi] += static_cast<std::int64_t>(bodies.size());
    }
  }

  void record_delivery(std::size_t qi, const delivery& d, std::uint32_t consumer) {
    journal_.record({.kind = event_kind::deliver,
                     .queue = std::string{queue_names[qi]},
                     .body = d.msg.body,
                     .id = d.msg.id,
                     .lease = d.lease,
                     .grant_us = d.deadline.us - lease_us(),
                     .deadline_us = d.deadline.us,
                     .incarnation = incarnation_,
                     .consumer = consumer});
  }

  /// Acks `acks` (queue qi) in one request and journals each outcome; unanswered ones go to
  /// the consumer's pending list while they have tries left.
  void ack(std::uint32_t c, std::size_t qi, std::vector<pending_ack> acks, int tries_max) {
    if (acks.empty()) return;
    auto inc = incarnation_;
    std::string queue{queue_names[qi]};
    std::vector<std::uint64_t> requests;
    std::vector<lease_token> leases;
    for (auto& a : acks) {
      requests.push_back(++next_request_);
      leases.push_back(a.lease);
      journal_.record({.kind = event_kind::ack_sent,
                       .queue = queue,
                       .body = a.body,
                       .id = a.lease.msg,
                       .lease = a.lease,
                       .incarnation = inc,
                       .consumer = c,
                       .request = requests.back()});
    }
    blocking_queue bq{sys_, queues_[qi], s_.request_timeout};
    auto answer = bq.ack(std::move(leases));
    for (std::size_t i = 0; i < acks.size(); ++i) {
      auto kind = event_kind::ack_ok;
      if (!answer) {
        kind = answer.err().code == errc::unavailable ? event_kind::ack_unknown
                                                      : event_kind::ack_failed;
      } else {
        for (const auto& f : answer.value())
          if (f.lease == acks[i].lease)
            kind =
                f.err.code == errc::unavailable ? event_kind::ack_unknown : event_kind::ack_failed;
      }
      journal_.record({.kind = kind,
                       .queue = queue,
                       .body = acks[i].body,
                       .id = acks[i].lease.msg,
                       .lease = acks[i].lease,
                       .incarnation = inc,
                       .consumer = c,
                       .request = requests[i]});
      if (kind == event_kind::ack_ok) --outstanding_[qi];
      if (kind == event_kind::ack_unknown && acks[i].tries < tries_max) {
        ++acks[i].tries;
        pending_[c].push_back(std::move(acks[i]));
      }
    }
  }

  /// Presents consumer c's unanswered acks again (fast delivery: a reclaim after a restart).
  void retry_pending(std::uint32_t c, int tries_max) {
    auto retry = std::move(pending_[c]);
    pending_[c].clear();
    for (std::size_t qi = 0; qi < queue_count; ++qi) {
      std::vector<pending_ack> same;
      for (auto& p : retry)
        if (p.queue == qi) same.push_back(p);
      ack(c, qi, std::move(same), tries_max);
    }
  }

  void consume(std::uint32_t c, std::uint64_t seed, const std::atomic<bool>& stop, bool draining) {
    std::mt19937_64 rng{seed};
    std::bernoulli_distribution abandon{draining ? 0.0 : s_.abandon_probability};
    std::bernoulli_distribution hold{draining ? 0.0 : s_.hold_probability};
    auto tries_max = draining ? s_.drain_ack_tries_max : s_.ack_tries_max;
    retry_pending(c, tries_max);
    std::size_t qi = c % queue_count;
    while (!stop) {
      if (draining) retry_pending(c, tries_max);  // laneqd stays up: every ack gets an answer
      qi = (qi + 1) % queue_count;
      blocking_queue bq{sys_, queues_[qi], s_.request_timeout};
      auto wait = std::chrono::duration_cast<std::chrono::microseconds>(s_.receive_wait);
      auto got = bq.receive(receive_request{s_.receive_max, lease_us(), wait.count()});
      if (!got) {
        std::this_thread::sleep_for(5ms);  // laneqd is gone; stop comes soon
        continue;
      }
      std::vector<pending_ack> acks;
      for (auto& d : got.value()) {
        record_delivery(qi, d, static_cast<std::uint32_t>(c));
        if (abandon(rng)) continue;  // a worker that died: the lease must run out
        acks.push_back(pending_ack{qi, d.lease, d.msg.body});
      }
      if (hold(rng)) std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 30});
      ack(static_cast<std::uint32_t>(c), qi, std::move(acks), tries_max);
    }
  }

  caf::actor_system& sys_;
  settings s_;
  checker_options opts_;
  std::mt19937_64 rng_;
  std::string run_dir_;  ///< data/, laneqd.json, laneqd-<run>.stderr
  bool keep_ = false;
  laneqd_child laneqd_;
  remote_admin_actor admin_;
  handles queues_;
  std::uint32_t incarnation_ = 0;
  journal journal_;
  std::atomic<std::uint64_t> next_request_{0};
  std::array<std::atomic<std::int64_t>, queue_count> outstanding_{};
  std::vector<std::map<std::string, std::uint64_t>> next_n_;  ///< per queue: last n per key
  std::vector<std::vector<pending_ack>> pending_;             ///< per consumer
  std::chrono::steady_clock::duration startup_total_{};
};

TEST(kill9, acknowledged_messages_survive_repeated_kill9_of_laneqd_under_load) {
  settings s;
  s.seed = env_number("LANEQ_KILL9_SEED", std::random_device{}());
  s.cycles = env_number("LANEQ_KILL9_CYCLES", cycles_default);
  s.grace = std::chrono::milliseconds{env_number("LANEQ_KILL9_GRACE_MS", 200)};
  if (const char* bin = std::getenv("LANEQ_KILL9_LANEQD"); bin && *bin) s.laneqd = bin;
  ASSERT_GE(s.cycles, 1u);
  // A receive answer that arrives at all arrives before its lease can run out, so the journal
  // never records a delivery after the redelivery that replaced it.
  ASSERT_GT(s.lease, s.request_timeout + s.receive_wait + 1s);
  auto rerun = "LANEQ_KILL9_SEED=" + std::to_string(s.seed) +
               " LANEQ_KILL9_CYCLES=" + std::to_string(s.cycles) +
               " LANEQ_KILL9_GRACE_MS=" + std::to_string(s.grace.count()) + " " +
               ::testing::internal::GetArgvs().front() + " --gtest_filter=kill9.*";
  std::cout << "kill9: seed " << s.seed << ", " << s.cycles << " cycles, laneqd " << s.laneqd
            << "; rerun: " << rerun << std::endl;

  caf::actor_system_config cfg;
  add_message_types(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  check_report report;
  {
    driver d{sys, s};
    auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < s.cycles; ++i) {
      if (auto err = d.start(); !err.empty()) {
        d.keep();
        FAIL() << "cycle " << i + 1 << ": laneqd start failed: " << err << "\nrerun: " << rerun;
      }
      if (auto ended = d.run_cycle(); !ended.empty()) {
        d.keep();
        FAIL() << "cycle " << i + 1 << ": " << ended << "\nrerun: " << rerun;
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    if (auto err = d.start(); !err.empty()) {
      d.keep();
      FAIL() << "final start: " << err << "\nrerun: " << rerun;
    }
    auto left = d.drain();
    auto t2 = std::chrono::steady_clock::now();
    EXPECT_EQ(left, "") << "the queues did not drain; rerun: " << rerun;
    auto ended = d.kill_laneqd();
    EXPECT_EQ(ended, "") << "the drain's laneqd; rerun: " << rerun;

    report = check(d.log().events(), d.options());
    if (const char* path = std::getenv("LANEQ_KILL9_JOURNAL"); path && *path)
      write_journal(path, d.log().events());
    auto ms = [](auto dur) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(dur).count();
    };
    std::cout << render(s.cycles, report) << "  time: " << ms(t1 - t0) << " ms for " << s.cycles
              << " cycles (" << ms(t1 - t0) / static_cast<std::int64_t>(s.cycles)
              << " ms per cycle; laneqd start and connect "
              << ms(d.startup_total()) / static_cast<std::int64_t>(s.cycles + 1)
              << " ms each), drain " << ms(t2 - t1) << " ms\n"
              << "  seed " << s.seed << "; rerun: " << rerun << std::endl;
    if (!report.clean() || !left.empty() || !ended.empty()) d.keep();
  }
  EXPECT_EQ(report.lost, 0u) << rerun;
  EXPECT_EQ(report.unexpected, 0u) << rerun;
  EXPECT_EQ(report.order_violations, 0u) << rerun;
  EXPECT_EQ(report.in_flight_violations, 0u) << rerun;
  EXPECT_EQ(report.duplicates_after_ack, 0u) << rerun;
  EXPECT_EQ(report.acked_twice, 0u) << rerun;
  EXPECT_EQ(report.drain_too_early, 0u) << "the harness judged too early; " << rerun;
  EXPECT_GT(report.acknowledged, 0u);
  EXPECT_EQ(report.restarts, s.cycles + 1);
  EXPECT_EQ(report.kills, s.cycles + 1);
  // The kills hit work in progress: a run that only killed an idle laneqd proves nothing.
  EXPECT_GT(report.enqueues_cut_by_kill, 0u) << "no enqueue was in flight at any kill; " << rerun;
  EXPECT_GT(report.leases_across_restart, 0u) << "no lease outlived its run; " << rerun;
}

}  // namespace
}  // namespace laneq::kill9
