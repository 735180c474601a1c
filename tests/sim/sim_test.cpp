// The seeded simulation (RELIABILITY.md T1): the real actors on CAF's test coordinator, the job
// order drawn from the seed, simulated time, and random enqueue / receive / ack / nack / extend /
// silence / advance-time / redrive steps across many groups, fairness keys and throttles. A
// client-side model checks every invariant after every step:
//   G3/O3 group order: a delivery is always of its group's current head;
//   G4/O4 at most one message per group in flight;
//   O5/O6/O10 nothing is delivered before its not-before time;
//   O5 an ack after the lease deadline fails, before it succeeds;
//   every message is in exactly one state (stats: backlog, in flight, dead letters, live groups);
//   progress: a receive that returns fewer than it asked leaves nothing deliverable;
//   G5/F1 round-robin: the first k picks of a receive are k distinct eligible fairness keys;
//   G6/T2 throttle conformance: every delivery finds a token in a reference bucket.
// Environment: LANEQ_SIM_SEED (default: random, printed), LANEQ_SIM_STEPS (total steps).
// A failure prints "INVARIANT VIOLATED", the seed and a command that reruns it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "harness.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  if (const char* v = std::getenv(name); v && *v) return std::strtoull(v, nullptr, 10);
  return fallback;
}

#ifdef NDEBUG
constexpr std::uint64_t default_steps = 1'000'000;
#else
constexpr std::uint64_t default_steps = 150'000;  // sanitizer build: ~7x slower per step
#endif

/// What the model knows about one message.
struct model_msg {
  enum class state { pending, in_flight, acked, dead } st = state::pending;
  std::string group;  // "" = unordered
  std::string fairness_key;
  std::uint64_t position = 0;  // arrival order (seq), new on redrive
  timestamp delay_until;
  timestamp not_before;          // lower bound of the earliest legal delivery
  std::uint32_t deliveries = 0;  // attempts since the last (re)arrival
  lease_token lease;
  timestamp deadline;
  std::vector<std::string> buckets;
  bool delayed = false;  // enqueued with a delay
};

/// A reference token bucket (G6): continuous refill, every delivery needs one token.
struct ref_bucket {
  double tokens = 0;
  timestamp last;
};

struct episode_spec {
  queue_spec spec;
  std::vector<std::string> accounts;  // header "account" values; "" means header absent
  std::vector<std::string> tenants;   // fairness keys
};

/// How often each kind of event happened, across all episodes: proof the run reached them.
struct coverage {
  std::uint64_t deliveries = 0, acks = 0, nacks = 0, expiries = 0, dead_letters = 0, redrives = 0,
                stale_rejected = 0, grouped_deliveries = 0, throttled_episodes = 0,
                delayed_deliveries = 0;
};
coverage cov;

class checker_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class simulation {
 public:
  simulation(std::uint64_t seed, std::uint64_t episode, std::uint64_t steps)
      : seed_(seed), episode_(episode), steps_(steps), rng_(seed * 1'000'003 + episode), h_(seed) {
    h_.shuffle_jobs(&rng_);
    make_spec();
    auto q = h_.create(ep_.spec);
    if (!q) fail("create_queue: " + to_string(q.err()));
    q_ = q.value();
    if (!ep_.spec.throttles().empty()) ++cov.throttled_episodes;
  }

  void run() {
    for (step_ = 0; step_ < steps_; ++step_) {
      auto r = pick(100);
      if (r < 26)
        do_enqueue();
      else if (r < 50)
        do_receive();
      else if (r < 68)
        do_ack();
      else if (r < 74)
        do_nack(false);
      else if (r < 76)
        do_nack(true);
      else if (r < 79)
        do_silence();
      else if (r < 81)
        do_extend();
      else if (r < 83)
        do_stale_ack();
      else if (r < 85)
        do_redrive();
      else
        do_advance();
      check_stats();
    }
    // Drain: everything must end acked or dead, with time moving on (liveness).
    for (int i = 0; i < 10'000 && live() > 0; ++i) {
      do_receive();
      while (!held_.empty()) {
        auto d = held_.back();
        held_.pop_back();
        ack(d);
      }
      do_advance();
      check_stats();
    }
    if (live() > 0) fail("drain did not finish: " + std::to_string(live()) + " messages left");
  }

  std::uint64_t steps_done() const { return step_; }

 private:
  std::uint64_t pick(std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>{0, n - 1}(rng_);
  }
  template <class T>
  const T& choose(const std::vector<T>& xs) {
    return xs[pick(xs.size())];
  }

  [[noreturn]] void fail(const std::string& what) {
    std::ostringstream os;
    os << "INVARIANT VIOLATED: " << what << "\n  seed " << seed_ << ", episode " << episode_
       << ", step " << step_ << ", t=" << h_.elapsed().count() << "us, queue "
       << ep_.spec.describe() << "\n  rerun: LANEQ_SIM_SEED=" << seed_
       << " LANEQ_SIM_STEPS=" << env_u64("LANEQ_SIM_STEPS", default_steps)
       << " build/dev/bin/laneq_sim_tests --gtest_filter='Sim.*'";
    throw checker_failure(os.str());
  }

  void make_spec() {
    queue_spec s("sim");
    auto mode = pick(5);
    if (mode == 1) s.ordered();
    if (mode == 2) s.ordered_by({key::header("account")});
    if (mode == 3) s.ordered_by({key::fairness_key(), key::header("Account")});
    if (mode == 4) s.ordered_by({key::header("account")});
    if (mode >= 2) {
      auto p = pick(3);
      s.when_ordering_key_missing(p == 0   ? missing_ordering_key::reject
                                  : p == 1 ? missing_ordering_key::unordered
                                           : missing_ordering_key::keyless_lane);
    }
    s.max_attempts(static_cast<std::uint32_t>(1 + pick(4)));
    s.lease(duration{std::int64_t(200'000 + pick(5'000'000))});
    if (pick(3) == 0) {
      auto rate = 0.5 + static_cast<double>(pick(40)) / 4.0;
      s.throttle({key::fairness_key()}, rate, static_cast<std::uint32_t>(1 + pick(4)));
    }
    if (pick(4) == 0) s.throttle({key::header("account")}, 2.0, 2);
    ep_.spec = s;
    auto n_accounts = 2 + pick(30);
    for (std::uint64_t i = 0; i < n_accounts; ++i)
      ep_.accounts.push_back("acct-" + std::to_string(i));
    ep_.accounts.push_back("");  // missing
    auto n_tenants = 1 + pick(5);
    for (std::uint64_t i = 0; i < n_tenants; ++i) ep_.tenants.push_back("t" + std::to_string(i));
  }

  // -- the model's view of placement (independent of libqueue's encoding) ----------------------

  /// Group of a message, "" for unordered; nullopt when the queue must reject it.
  std::optional<std::string> group_of(const std::string& account, const std::string& tenant) {
    const auto& s = ep_.spec;
    switch (s.ordering()) {
      case ordering_mode::none: return std::string{};
      case ordering_mode::queue: return std::string{"Q"};
      case ordering_mode::key: break;
    }
    bool with_tenant = s.ordering_key().size() == 2;
    if (account.empty()) {
      switch (s.missing_key_policy()) {
        case missing_ordering_key::reject: return std::nullopt;
        case missing_ordering_key::unordered: return std::string{};
        case missing_ordering_key::keyless_lane: return std::string{"KEYLESS"};
      }
    }
    return (with_tenant ? "T=" + tenant + "|" : std::string{}) + "A=" + account;
  }

  std::vector<std::string> buckets_of(const std::string& account, const std::string& tenant) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < ep_.spec.throttles().size(); ++i) {
      const auto& t = ep_.spec.throttles()[i];
      auto v = t.key.front().which() == key_component::kind::fairness_key
                   ? tenant
                   : (account.empty() ? std::string{"<none>"} : account);
      out.push_back(std::to_string(i) + "/" + v);
    }
    return out;
  }

  std::size_t live() const { return n_[0] + n_[1]; }

  static bool is_live(model_msg::state st) {
    return st == model_msg::state::pending || st == model_msg::state::in_flight;
  }

  /// Moves a message to a new state (and, for a redrive, a new position), keeping the
  /// per-group live sets and the counters in step.
  void transition(message_id id, model_msg::state to, std::uint64_t new_position = 0) {
    auto& m = msgs_.at(id);
    if (is_live(m.st)) {
      if (m.group.empty()) {
        unordered_live_.erase(id);
      } else {
        auto& set = live_by_group_[m.group];
        set.erase({m.position, id});
        if (set.empty()) live_by_group_.erase(m.group);
      }
    }
    --n_[static_cast<int>(m.st)];
    m.st = to;
    if (new_position) m.position = new_position;
    ++n_[static_cast<int>(m.st)];
    if (is_live(m.st)) {
      if (m.group.empty())
        unordered_live_.insert(id);
      else
        live_by_group_[m.group].insert({m.position, id});
    }
  }

  /// The group's head: its live message with the lowest position.
  const model_msg* head_of(const std::string& group) const {
    auto it = live_by_group_.find(group);
    if (it == live_by_group_.end()) return nullptr;
    return &msgs_.at(it->second.begin()->second);
  }

  /// Calls f(message) for every message the queue must be able to deliver at `now`.
  template <class F>
  void for_each_deliverable(timestamp now, F f) const {
    auto ready = [now](const model_msg& m) {
      return m.st == model_msg::state::pending && m.not_before <= now;
    };
    for (const auto& [g, set] : live_by_group_) {
      const auto& m = msgs_.at(set.begin()->second);
      if (ready(m)) f(m);
    }
    for (auto id : unordered_live_) {
      const auto& m = msgs_.at(id);
      if (ready(m)) f(m);
    }
  }

  // -- steps -------------------------------------------------------------------------------------

  void do_enqueue() {
    std::vector<outgoing_message> batch;
    std::vector<std::pair<std::string, std::string>> keys;
    auto n = 1 + pick(4);
    bool expect_reject = false;
    for (std::uint64_t i = 0; i < n; ++i) {
      outgoing_message m;
      auto account = choose(ep_.accounts);
      auto tenant = choose(ep_.tenants);
      if (!account.empty()) m.headers.push_back({pick(2) ? "account" : "ACCOUNT", account});
      m.fairness_key = tenant;
      m.body = "m" + std::to_string(next_body_++);
      if (pick(8) == 0) m.delay = duration{std::int64_t(pick(4'000'000))};
      if (!group_of(account, tenant)) expect_reject = true;
      keys.emplace_back(account, tenant);
      batch.push_back(std::move(m));
    }
    auto delays = batch;
    auto t = h_.now();
    auto ids = h_.enqueue(q_, std::move(batch));
    if (expect_reject) {
      if (ids || ids.err().code != errc::ordering_key_missing)
        fail("an enqueue without the ordering key must be rejected under policy reject");
      return;
    }
    if (!ids) fail("enqueue failed: " + to_string(ids.err()));
    if (ids.value().size() != n) fail("enqueue returned the wrong number of ids");
    for (std::size_t i = 0; i < n; ++i) {
      model_msg m;
      m.group = *group_of(keys[i].first, keys[i].second);
      m.fairness_key = keys[i].second;
      m.position = next_position_++;
      m.delay_until = t + delays[i].delay;
      m.delayed = delays[i].delay > duration{0};
      m.not_before = m.delay_until;
      m.buckets = buckets_of(keys[i].first, keys[i].second);
      auto id = ids.value()[i];
      if (msgs_.count(id)) fail("an id was issued twice");
      m.st = model_msg::state::acked;  // placeholder: transition() files it as pending
      msgs_.emplace(id, m);
      ++n_[static_cast<int>(model_msg::state::acked)];
      transition(id, model_msg::state::pending);
    }
  }

  void do_receive() {
    auto max = static_cast<std::uint32_t>(1 + pick(6));
    auto t = h_.now();
    // Eligible fairness keys and deliverable count before the receive (model view).
    std::set<std::string> eligible;
    std::size_t deliverable_before = 0;
    for_each_deliverable(t, [&](const model_msg& m) {
      eligible.insert(m.fairness_key);
      ++deliverable_before;
    });
    auto got = h_.receive(q_, max);
    if (!got) fail("receive failed: " + to_string(got.err()));
    const auto& ds = got.value();
    if (ds.size() > max) fail("receive returned more than max");
    std::vector<std::string> picked_keys;
    for (const auto& d : ds) {
      auto it = msgs_.find(d.msg.id);
      if (it == msgs_.end()) fail("delivered an unknown message " + std::to_string(d.msg.id.value));
      auto& m = it->second;
      if (m.st != model_msg::state::pending)
        fail("delivered message " + std::to_string(d.msg.id.value) + " that is not pending");
      if (m.not_before > t)
        fail("message " + std::to_string(d.msg.id.value) + " delivered before its not-before time");
      if (!m.group.empty()) {
        const auto* head = head_of(m.group);
        if (head != &m) fail("group order: delivered a message that is not its group's head");
        for (const auto& [pos, other] : live_by_group_.at(m.group))
          if (other != d.msg.id && msgs_.at(other).st == model_msg::state::in_flight)
            fail("two messages of group " + m.group + " in flight");
      }
      ++m.deliveries;
      ++cov.deliveries;
      if (!m.group.empty()) ++cov.grouped_deliveries;
      if (m.deliveries == 1 && m.delayed) ++cov.delayed_deliveries;
      if (d.lease.attempt != m.deliveries)
        fail("attempt number " + std::to_string(d.lease.attempt) + ", expected " +
             std::to_string(m.deliveries));
      if (d.msg.fairness_key != m.fairness_key) fail("the delivery's fairness key changed");
      transition(d.msg.id, model_msg::state::in_flight);
      m.lease = d.lease;
      m.deadline = d.deadline;
      for (const auto& b : m.buckets) charge(b, t);
      picked_keys.push_back(m.fairness_key);
      held_.push_back(d);
    }
    if (!ep_.spec.throttles().empty()) return;
    // Progress: a short answer means nothing was left to deliver.
    if (ds.size() < max && ds.size() != deliverable_before)
      fail("receive returned " + std::to_string(ds.size()) + " of " + std::to_string(max) +
           " while " + std::to_string(deliverable_before) + " were deliverable");
    // Round-robin: the first |eligible| picks are distinct fairness keys.
    std::set<std::string> seen;
    for (std::size_t i = 0; i < picked_keys.size() && i < eligible.size(); ++i)
      if (!seen.insert(picked_keys[i]).second)
        fail("fairness: key " + picked_keys[i] + " served twice within one round of " +
             std::to_string(eligible.size()) + " eligible keys");
    if (picked_keys.size() >= eligible.size() && seen != eligible)
      fail("fairness: an eligible key was skipped for a whole round");
  }

  void charge(const std::string& bucket, timestamp t) {
    auto idx = static_cast<std::size_t>(std::stoul(bucket.substr(0, bucket.find('/'))));
    const auto& th = ep_.spec.throttles()[idx];
    auto [it, fresh] = buckets_.emplace(bucket, ref_bucket{double(th.burst), t});
    auto& b = it->second;
    b.tokens =
        std::min<double>(th.burst, b.tokens + th.rate_per_s * double((t - b.last).count()) / 1e6);
    b.last = t;
    if (b.tokens < 1.0 - 1e-6)
      fail("throttle " + bucket + ": a delivery without a token (" + std::to_string(b.tokens) +
           ")");
    b.tokens -= 1.0;
  }

  std::optional<std::size_t> pick_held() {
    if (held_.empty()) return std::nullopt;
    return static_cast<std::size_t>(pick(held_.size()));
  }

  void ack(const delivery& d) {
    auto& m = msgs_.at(d.msg.id);
    bool valid = m.st == model_msg::state::in_flight && m.lease == d.lease && h_.now() < m.deadline;
    auto st = h_.ack(q_, d.lease);
    if (valid && !st) fail("ack of a live lease failed: " + to_string(st.err()));
    if (!valid && st) fail("ack of a stale lease " + to_string(d.lease) + " succeeded");
    if (!valid && st.err().code != errc::lease_not_found && st.err().code != errc::lease_expired)
      fail("stale ack: unexpected error " + to_string(st.err()));
    if (valid) {
      transition(d.msg.id, model_msg::state::acked);
      ++cov.acks;
    } else {
      ++cov.stale_rejected;
    }
  }

  void do_ack() {
    auto i = pick_held();
    if (!i) return;
    auto d = held_[*i];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(*i));
    ack(d);
  }

  void do_nack(bool dead) {
    auto i = pick_held();
    if (!i) return;
    auto d = held_[*i];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(*i));
    auto& m = msgs_.at(d.msg.id);
    bool valid = m.st == model_msg::state::in_flight && m.lease == d.lease && h_.now() < m.deadline;
    duration retry_after{pick(3) == 0 ? 0 : std::int64_t(pick(3'000'000))};
    auto t = h_.now();
    auto st = h_.nack(q_, d.lease, retry_after, dead);
    if (valid != st.ok())
      fail(std::string{"nack of a "} + (valid ? "live" : "stale") + " lease " +
           (st.ok() ? "succeeded" : "failed: " + to_string(st.err())));
    if (!valid) return;
    ++cov.nacks;
    if (dead || m.deliveries >= ep_.spec.attempts_max()) {
      ++cov.dead_letters;
      transition(d.msg.id, model_msg::state::dead);
      dead_order_.push_back(d.msg.id);
    } else {
      m.not_before = t + retry_after;
      transition(d.msg.id, model_msg::state::pending);
    }
  }

  void do_silence() {
    // The consumer crashes or stalls: it never answers; the lease must expire.
    auto i = pick_held();
    if (!i) return;
    stale_.push_back(held_[*i]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(*i));
  }

  void do_stale_ack() {
    if (stale_.empty()) return;
    auto d = stale_[pick(stale_.size())];
    ack(d);  // valid only while its lease is still running
  }

  void do_extend() {
    auto i = pick_held();
    if (!i) return;
    const auto& d = held_[*i];
    auto& m = msgs_.at(d.msg.id);
    bool valid = m.st == model_msg::state::in_flight && m.lease == d.lease && h_.now() < m.deadline;
    duration by{std::int64_t(1000 + pick(3'000'000))};
    auto r = h_.extend(q_, d.lease, by);
    if (valid != r.ok())
      fail("extend: live lease " + std::string{valid ? "failed" : "stale succeeded"});
    if (valid) {
      if (r.value() != h_.now() + by) fail("extend returned the wrong deadline");
      m.deadline = r.value();
    }
  }

  void do_redrive() {
    if (dead_order_.empty()) return;
    // Redrive a random subset in a random order; each becomes a new arrival in that order.
    std::vector<message_id> ids;
    std::vector<message_id> keep;
    for (auto id : dead_order_) (pick(2) ? ids : keep).push_back(id);
    if (ids.empty()) return;
    std::shuffle(ids.begin(), ids.end(), rng_);
    auto n = h_.redrive(q_, ids);
    if (!n || n.value() != ids.size()) fail("redrive failed");
    cov.redrives += ids.size();
    for (auto id : ids) {
      auto& m = msgs_.at(id);
      m.deliveries = 0;
      m.not_before = m.delay_until;  // the enqueue delay still counts from enqueued_at
      transition(id, model_msg::state::pending, next_position_++);
    }
    dead_order_ = keep;
  }

  void do_advance() {
    auto kind = pick(4);
    if (kind == 0)
      h_.advance(duration{std::int64_t(1 + pick(2'000))});
    else if (kind == 1)
      h_.advance(duration{std::int64_t(pick(1'500'000))});
    else if (!h_.advance_to_next_timer())
      h_.advance(1ms);
    auto t = h_.now();
    // Leases at or past their deadline have expired: a failed attempt each.
    std::vector<message_id> due;
    for (const auto* list : {&held_, &stale_})
      for (const auto& d : *list) {
        const auto& m = msgs_.at(d.msg.id);
        if (m.st == model_msg::state::in_flight && m.lease == d.lease && m.deadline <= t)
          due.push_back(d.msg.id);
      }
    std::sort(due.begin(), due.end());
    due.erase(std::unique(due.begin(), due.end()), due.end());
    for (auto id : due) {
      auto& m = msgs_.at(id);
      ++cov.expiries;
      if (m.deliveries >= ep_.spec.attempts_max()) {
        transition(id, model_msg::state::dead);
        dead_order_.push_back(id);
      } else {
        m.not_before = m.deadline;
        transition(id, model_msg::state::pending);
      }
    }
    auto expired = [&](const delivery& d) {
      const auto& m = msgs_.at(d.msg.id);
      return m.st != model_msg::state::in_flight || !(m.lease == d.lease);
    };
    for (auto it = held_.begin(); it != held_.end();)
      if (expired(*it)) {
        stale_.push_back(*it);
        it = held_.erase(it);
      } else {
        ++it;
      }
    // Keep every token whose lease may still run (silenced consumers) and a few stale ones.
    std::vector<delivery> keep;
    std::size_t stale_kept = 0;
    for (auto it = stale_.rbegin(); it != stale_.rend(); ++it) {
      const auto& m = msgs_.at(it->msg.id);
      bool running = m.st == model_msg::state::in_flight && m.lease == it->lease;
      if (running || stale_kept++ < 32) keep.push_back(*it);
    }
    stale_ = std::move(keep);
  }

  void check_stats() {
    auto s = h_.stats(q_);
    if (!s) fail("stats failed");
    std::uint64_t pending = n_[0], in_flight = n_[1], dead = n_[3];
    const auto& v = s.value();
    auto expect = [&](const char* what, std::uint64_t got, std::uint64_t want) {
      if (got != want)
        fail(std::string{"state accounting: "} + what + " is " + std::to_string(got) +
             ", model says " + std::to_string(want));
    };
    expect("backlog", v.backlog, pending + in_flight);
    expect("in_flight", v.in_flight, in_flight);
    expect("dead_letters", v.dead_letters, dead);
    expect("live_groups", v.live_groups, live_by_group_.size());
  }

  std::uint64_t seed_, episode_, steps_;
  std::uint64_t step_ = 0;
  std::mt19937_64 rng_;
  test::harness h_;
  episode_spec ep_;
  queue_api q_;
  std::unordered_map<message_id, model_msg> msgs_;
  std::map<std::string, std::set<std::pair<std::uint64_t, message_id>>> live_by_group_;
  std::set<message_id> unordered_live_;
  std::uint64_t n_[4] = {0, 0, 0, 0};  // messages per state: pending, in_flight, acked, dead
  std::vector<delivery> held_;
  std::vector<delivery> stale_;
  std::vector<message_id> dead_order_;
  std::unordered_map<std::string, ref_bucket> buckets_;
  std::uint64_t next_position_ = 1;
  std::uint64_t next_body_ = 1;
};

TEST(Sim, invariants_hold_over_seeded_random_runs) {
  auto seed = env_u64("LANEQ_SIM_SEED", std::random_device{}());
  auto total = env_u64("LANEQ_SIM_STEPS", default_steps);
  std::cout << "sim: seed " << seed << ", " << total << " steps (rerun: LANEQ_SIM_SEED=" << seed
            << " LANEQ_SIM_STEPS=" << total << ")" << std::endl;
  std::uint64_t done = 0;
  std::uint64_t episode = 0;
  while (done < total) {
    auto steps = std::min<std::uint64_t>(total - done, 2'000);
    try {
      simulation sim{seed, episode, steps};
      sim.run();
    } catch (const checker_failure& e) {
      std::cout << e.what() << std::endl;
      FAIL() << e.what();
    }
    done += steps;
    ++episode;
  }
  std::cout << "sim: " << done << " steps in " << episode << " episodes, all invariants held\n"
            << "sim: coverage: " << cov.deliveries << " deliveries (" << cov.grouped_deliveries
            << " grouped, " << cov.delayed_deliveries << " after an enqueue delay), " << cov.acks
            << " acks, " << cov.nacks << " nacks, " << cov.expiries << " lease expiries, "
            << cov.dead_letters << " dead letters on nack, " << cov.redrives << " redriven, "
            << cov.stale_rejected << " stale leases rejected, " << cov.throttled_episodes
            << " throttled episodes" << std::endl;
}

}  // namespace
}  // namespace laneq
