// The overlapping simulation (RELIABILITY.md T1, issue 22 part 3): the real broker on CAF's test
// coordinator with simulated time, like sim_test.cpp, but its client requests overlap. Several
// client actors issue enqueues, receives (a quarter of them long polls), acks, nacks and extends
// without waiting for the answers; between steps the test runs a random number of single jobs in
// a random order, moves time (lease timers fire while acks are under way), and sometimes crashes
// the broker in the middle: the store loses the writes it had taken but not yet committed, every
// answer not yet read is lost with its connection, and a new broker recovers from what the store
// committed. So acks race lease expiries, receives race enqueues, and a crash finds writes
// uncommitted.
// The checker (answer_checker.hpp, shared with the engine simulation in engine/) sees only what a
// client sees (the answers, in the order the clients read them), like the journals of
// tests/crash/kill9 and tests/crash/broker_power_loss, and judges lost (G1/G2), duplicate (R8),
// order (G3: each group has one producer that waits for an answer before its next enqueue of the
// group), in-flight (G4), stale-lease and live-lease (O5) and not-before (O6).
// Coverage is asserted: crashes that lost uncommitted writes, acks answered after their lease's
// deadline passed (the ack raced the expiry), and receives sent while an enqueue was under way.
// Environment: LANEQ_SIM_SEED (default random, printed), LANEQ_SIM_OVERLAP_STEPS.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "answer_checker.hpp"
#include "checks.hpp"
#include "harness.hpp"
#include "laneq/actors/memory_store.hpp"
#include "laneq/assert.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using sim::check;

#ifdef NDEBUG
constexpr std::uint64_t default_steps = 60'000;
#else
constexpr std::uint64_t default_steps = 6'000;
#endif
constexpr std::uint64_t episode_steps = 2'000;

/// A point of the simulated timeline, for messages: "1234us" since the start.
std::string at(timestamp t) {
  return std::to_string((t - test::sim_epoch).count()) + "us";
}

// -- the store: what a crash loses -------------------------------------------------------------

/// The power of one broker run's store; the test cuts it at a crash.
struct power_line {
  bool on = true;
  std::size_t uncommitted = 0;  ///< writes taken and not yet handed to the disk
};

/// The store a broker run writes through. It takes writes into a batch that closes when its
/// commit message comes round (like memory_store and the RocksDB actor), hands the batch to the
/// disk (a memory store that outlives every run) and answers each write once the disk committed
/// it. When the power goes, the batch is lost and nothing is answered any more: a write taken but
/// not committed is lost, as on a real crash, and was never answered OK.
class volatile_store : public actor_base<store_actor> {
 public:
  volatile_store(caf::actor_config& cfg, store_actor disk, std::shared_ptr<power_line> power)
      : actor_base<store_actor>(cfg), disk_(std::move(disk)), power_(std::move(power)) {}

  const char* name() const override { return "laneq.test.volatile_store"; }

  behavior_type make_behavior() override {
    return {
        [this](write_atom, store_write& w) -> caf::result<caf::ok_atom> {
          auto promise = make_response_promise<caf::ok_atom>();
          if (!power_->on) return promise;  // never answered
          if (batch_.empty()) send(caf::actor_cast<store_actor>(this), commit_atom_v, generation_);
          batch_.push_back(pending{std::move(w), promise});
          ++power_->uncommitted;
          return promise;
        },
        [this](commit_atom, std::uint64_t generation) {
          if (generation == generation_ && power_->on) hand_to_disk();
        },
        [this](scan_atom, std::string& from, std::string& to, std::uint32_t max) {
          return delegate(disk_, scan_atom_v, std::move(from), std::move(to), max);
        },
        [this](stats_atom) { return delegate(disk_, stats_atom_v); },
        [this](checkpoint_atom, std::string& dir) {
          return delegate(disk_, checkpoint_atom_v, std::move(dir));
        },
        [](reopen_atom) {},
    };
  }

  /// Killed at a crash: the writes never handed to the disk are lost unanswered, and their
  /// promises (each a strong reference to the actor that wrote) go with them.
  void on_exit() override {
    batch_.clear();
    actor_base<store_actor>::on_exit();
  }

 private:
  struct pending {
    store_write write;
    caf::typed_response_promise<caf::ok_atom> promise;
  };

  void hand_to_disk() {
    ++generation_;
    for (auto& p : batch_)
      request(disk_, caf::infinite, write_atom_v, std::move(p.write))
          .then(
              [this, promise = p.promise](caf::ok_atom) mutable {
                if (power_->on) promise.deliver(caf::ok_atom_v);
              },
              [this, promise = p.promise](caf::error& e) mutable {
                if (power_->on) promise.deliver(std::move(e));
              });
    batch_.clear();
    power_->uncommitted = 0;
  }

  store_actor disk_;
  std::shared_ptr<power_line> power_;
  std::vector<pending> batch_;
  std::uint64_t generation_ = 0;
};

// -- the world: broker runs over one disk, on one timeline ---------------------------------------

/// A broker on the test coordinator whose actors run only when the test says so, and which the
/// test can crash. The harness (harness.hpp) runs the actors until idle after every call, so it
/// cannot overlap requests; this world only runs everything at its start, at a crash and in the
/// final drain.
class world {
 public:
  world(std::uint64_t seed, broker_options opts)
      : sys_(cfg_),
        sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
        self_(sys_, true),
        seed_(seed),
        opts_(std::move(opts)),
        disk_(sys_.spawn<memory_store_impl>()) {
    boot(test::sim_epoch);
  }

  ~world() {
    broker_.reset();
    caf::anon_send_exit(front_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(disk_, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  caf::actor_system& system() { return sys_; }
  caf::scheduler::test_coordinator& sched() { return sched_; }
  timestamp now() { return broker_->context()->time.now(sys_.clock()); }
  /// Writes the store has taken and not yet committed (a crash now loses them).
  std::size_t uncommitted() const { return power_->uncommitted; }

  /// Sends a request from the test's own actor, runs every actor until idle, takes the answer.
  template <class... Out, class Handle, class... Ts>
  std::optional<std::tuple<Out...>> ask(const Handle& dest, Ts&&... xs) {
    self_->send(dest, std::forward<Ts>(xs)...);
    sched_.run();
    std::optional<std::tuple<Out...>> out;
    self_->receive([&](Out&... x) { out.emplace(std::move(x)...); }, [&](caf::error&) {},
                   caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }

  admin_actor admin() const { return broker_->admin(); }

  /// A crash: the power goes (the store's uncommitted writes are lost, nothing more is
  /// answered), every broker actor stops, and a new broker recovers from the disk on the same
  /// timeline. Returns how many writes the crash lost.
  std::size_t crash() {
    auto lost = power_->uncommitted;
    power_->on = false;
    auto t = now();
    broker_.reset();
    caf::anon_send_exit(front_, caf::exit_reason::kill);
    sched_.run();
    boot(t);
    return lost;
  }

 private:
  void boot(timestamp t) {
    power_ = std::make_shared<power_line>();
    front_ = sys_.spawn<volatile_store>(disk_, power_);
    broker_.emplace(sys_, make_context(sys_, t, seed_), front_, opts_, false);
    sched_.run();
    auto n = ask<std::uint64_t>(broker_->admin(), recover_atom_v);
    if (!n) throw sim::checker_failure("INVARIANT VIOLATED (recovery): the broker did not recover");
  }

  test::test_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  caf::scoped_actor self_;
  std::uint64_t seed_;
  broker_options opts_;
  store_actor disk_;
  store_actor front_;
  std::shared_ptr<power_line> power_;
  std::optional<broker> broker_;
};

// -- the clients and the checker ------------------------------------------------------------------

class simulation;

/// A client connection: sends the requests the simulation hands it (by number), each without
/// waiting for the answers to the earlier ones.
caf::behavior client_actor(caf::event_based_actor* self, simulation* sim);

/// What the run reached; each of the first three must reach its minimum (see `unmet`).
struct overlap_coverage {
  std::uint64_t crashes_losing_writes = 0;     ///< crashes that found uncommitted writes
  std::uint64_t acks_racing_expiry = 0;        ///< acks sent before the deadline, answered after it
  std::uint64_t receives_racing_enqueues = 0;  ///< receives sent while an enqueue was under way
  std::uint64_t episodes = 0, crashes = 0, writes_lost = 0, enqueues_cut = 0, ends_cut = 0;
  std::uint64_t deliveries = 0, delivered_before_answer = 0, acks = 0, stale_refused = 0;
  std::uint64_t long_polls = 0, most_requests_open = 0;

  std::string render() const {
    std::ostringstream os;
    os << episodes << " episodes, " << crashes << " crashes, " << crashes_losing_writes
       << " crashes losing uncommitted writes (" << writes_lost << " writes), " << enqueues_cut
       << " enqueues and " << ends_cut << " acks, nacks and extends cut by a crash, " << deliveries
       << " deliveries (" << delivered_before_answer << " read before their enqueue's answer), "
       << receives_racing_enqueues << " receives sent during an enqueue, " << acks
       << " acks confirmed, " << acks_racing_expiry << " acks racing their lease's expiry, "
       << stale_refused << " stale leases refused, " << long_polls << " long polls, "
       << most_requests_open << " requests open at most";
    return os.str();
  }
};

/// The minimums a judged run must reach per episode: at most half of the lowest rates that 120
/// seeds of 60,000 steps reached (docs/guarantees.md); what it missed, one line each.
std::vector<std::string> unmet(const overlap_coverage& c) {
  std::vector<std::string> out;
  auto need = [&](const char* what, std::uint64_t got, std::uint64_t per_episode_x10) {
    auto min = std::max<std::uint64_t>(1, c.episodes * per_episode_x10 / 10);
    if (got < min)
      out.push_back(std::string{what} + ": " + std::to_string(got) + " in " +
                    std::to_string(c.episodes) + " episodes, at least " + std::to_string(min) +
                    " required");
  };
  // 0.3 per episode: over seeds 1000-1449 (30 episodes each) the fewest were 13 (0.43 per
  // episode, 5 seeds under 15), the median about 25 (docs/guarantees.md).
  need("crashes losing uncommitted writes", c.crashes_losing_writes, 3);
  need("acks racing their lease's expiry", c.acks_racing_expiry, 10);
  need("receives sent during an enqueue", c.receives_racing_enqueues, 100);
  return out;
}

/// A group of the queue as its producer knows it.
struct producer_group {
  std::size_t producer = 0;
  bool busy = false;  ///< its producer waits for an enqueue's answer
};

using sim::end_kind;

class simulation {
 public:
  simulation(std::uint64_t seed, std::uint64_t episode, std::uint64_t steps, overlap_coverage& cov)
      : seed_(seed),
        episode_(episode),
        steps_(steps),
        cov_(cov),
        rng_(seed * 1'000'003 + episode + 77),
        durable_(episode % 2 == 1),
        lease_(std::int64_t(50'000 + pick(500'000))),
        w_(seed, draw_options()),
        checker_(checker_setup()) {
    queue_spec spec("overlap");
    spec.ordered_by({key::header("account")})
        .when_ordering_key_missing(missing_ordering_key::unordered)
        .max_attempts(limits::max_attempts_max)
        .lease(lease_);
    if (durable_) spec.delivery(delivery_durability::durable);
    auto q = w_.ask<queue_api, bool>(w_.admin(), create_atom_v, spec);
    if (!q) checker_.fail(check::api, "create_queue failed");
    q_ = std::get<0>(*q);
    auto n_clients = 3 + pick(3);
    for (std::uint64_t i = 0; i < n_clients; ++i)
      clients_.push_back(w_.system().spawn(client_actor, this));
    for (std::uint64_t i = 0, n = 2 + pick(6); i < n; ++i)
      groups_["a" + std::to_string(i)].producer = i % n_clients;
    crash_per_mille_ = 1 + pick(4);
    ++cov_.episodes;
  }

  ~simulation() {
    run_ = 0;  // no answer is read any more
    ops_.clear();
    for (auto& c : clients_) caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
    w_.sched().run();
  }

  void run() {
    for (step_ = 0; step_ < steps_; ++step_) {
      step();
      cov_.most_requests_open =
          std::max<std::uint64_t>(cov_.most_requests_open, checker_.ends_open());
    }
    drain();
    const auto& n = checker_.counts();
    cov_.acks_racing_expiry += n.acks_racing_expiry;
    cov_.enqueues_cut += n.enqueues_cut;
    cov_.ends_cut += n.ends_cut;
    cov_.deliveries += n.deliveries;
    cov_.delivered_before_answer += n.delivered_before_answer;
    cov_.acks += n.acks;
    cov_.stale_refused += n.stale_refused;
  }

  /// Client side: sends request `op` (dropped when a crash came between the simulation handing
  /// it over and the client sending it).
  void start(std::uint64_t op, caf::event_based_actor* self) {
    auto it = ops_.find(op);
    if (it == ops_.end()) return;
    auto [run, f] = std::move(it->second);
    ops_.erase(it);
    if (run == run_) f(self);
  }

 private:
  using request_fn = std::function<void(caf::event_based_actor*)>;

  std::uint64_t pick(std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>{0, n - 1}(rng_);
  }

  broker_options draw_options() {
    broker_options o;
    o.reclaim_grace = duration{0};  // fast delivery: a restart ends every lease at once
    o.group_window = static_cast<std::size_t>(2 + pick(5));
    o.group_window_max = o.group_window + static_cast<std::size_t>(pick(5));
    return o;
  }

  /// The checker's view of the queue: delivery mode, no dead letter by expiry, no reclaim grace.
  sim::checker_config checker_setup() {
    sim::checker_config c;
    c.durable = durable_;
    c.max_attempts = limits::max_attempts_max;
    c.context = [this] { return context(); };
    c.trace = std::getenv("LANEQ_SIM_TRACE") != nullptr;
    c.origin = test::sim_epoch;
    c.label = "overlap";
    return c;
  }

  /// Where the run is, for a failure: the checker prints it after what failed.
  std::string context() {
    std::ostringstream os;
    os << "seed " << seed_ << ", episode " << episode_ << ", step " << step_
       << ", t=" << at(w_.now()) << ", lease " << lease_.count() << "us"
       << "\n  rerun: LANEQ_SIM_SEED=" << seed_
       << " LANEQ_SIM_OVERLAP_STEPS=" << sim::env_u64("LANEQ_SIM_OVERLAP_STEPS", default_steps)
       << " build/release/bin/laneq_sim_tests --gtest_filter='Sim.overlapping_requests'";
    return os.str();
  }

  /// A check that failed inside an actor's handler (where CAF may catch the exception) fails
  /// the run once the job is over.
  void rethrow() const {
    if (checker_.failure()) throw sim::checker_failure(*checker_.failure());
  }

  void settle() {
    w_.sched().run();
    rethrow();
  }

  // -- driving --------------------------------------------------------------------------------

  /// Hands request `f` to client `c`; it goes out when the client's job runs.
  void issue(std::size_t c, request_fn f) {
    auto op = next_op_++;
    ops_.emplace(op, std::pair{run_, std::move(f)});
    caf::anon_send(clients_[c], op);
  }

  void step() {
    if (pick(1000) < crash_per_mille_) return do_crash();
    auto r = pick(100);
    if (r < 14)
      move_time();
    else if (r < 40)
      do_enqueue();
    else if (r < 60)
      do_receive();
    else if (r < 76)
      end_held(end_kind::ack);
    else if (r < 82)
      end_held(end_kind::retry);
    else if (r < 84)
      end_held(end_kind::dead);
    else if (r < 88)
      end_held(end_kind::extend);
    else if (r < 92)
      do_silence();
    else
      do_stale();
    run_jobs(pick(14));
  }

  /// Runs up to `n` single jobs, each drawn from the ready ones.
  void run_jobs(std::uint64_t n) {
    auto& jobs = w_.sched().jobs;
    for (std::uint64_t i = 0; i < n && !jobs.empty(); ++i) {
      std::swap(jobs[0], jobs[pick(jobs.size())]);
      w_.sched().run_once();
      rethrow();
    }
  }

  /// Moves simulated time: timers that fall due (lease expiries, long polls' waits, retries)
  /// put their messages in the mailboxes, to be run by later steps.
  void move_time() {
    auto& sched = w_.sched();
    auto k = pick(4);
    caf::timespan d = std::chrono::microseconds(1 + pick(2'000));
    if (k == 1) d = std::chrono::microseconds(pick(std::uint64_t(lease_.count())));
    if (k == 2) d = std::chrono::microseconds(pick(std::uint64_t(lease_.count()) / 10 + 1));
    if (k == 3 && !sched.clock().schedule().empty()) {
      auto next = sched.clock().schedule().begin()->first;
      auto now = sched.clock().now();
      d = next > now ? next - now : caf::timespan{0};
    }
    sched.advance_time(d);
  }

  void do_crash() {
    if (std::getenv("LANEQ_SIM_TRACE")) std::cout << "  [" << at(w_.now()) << "] crash\n";
    ++cov_.crashes;
    checker_.crash(w_.now());
    ++run_;  // every answer not yet read is lost with its connection
    auto lost = w_.crash();
    if (lost > 0) {
      ++cov_.crashes_losing_writes;
      cov_.writes_lost += lost;
    }
    auto q = w_.ask<queue_api>(w_.admin(), lookup_atom_v, std::string{"overlap"});
    if (!q) checker_.fail(check::recovery, "the queue is gone after a restart");
    q_ = std::get<0>(*q);
    for (auto& [name, g] : groups_) g.busy = false;
    polls_open_ = 0;
  }

  /// Is the answer to a request sent in broker run `run` still read? (Not after a crash.)
  bool current(std::uint64_t run) const { return run == run_; }

  // -- requests -------------------------------------------------------------------------------

  /// A producer enqueues 1-3 messages: of its groups that wait for no answer, or unordered.
  void do_enqueue() {
    auto c = pick(clients_.size());
    std::vector<std::string> free;
    for (const auto& [name, g] : groups_)
      if (g.producer == c && !g.busy) free.push_back(name);
    std::vector<outgoing_message> batch;
    std::vector<std::uint64_t> bodies;
    std::set<std::string> used;
    for (std::uint64_t i = 0, n = 1 + pick(3); i < n; ++i) {
      outgoing_message om;
      std::string group;
      if (!free.empty() && pick(4) != 0) {
        group = free[pick(free.size())];
        om.headers.push_back({"account", group});
        used.insert(group);
      }
      auto body = checker_.new_message(group);
      om.body = sim::answer_checker::body_text(body);
      batch.push_back(std::move(om));
      bodies.push_back(body);
    }
    for (const auto& g : used) groups_.at(g).busy = true;
    issue(c, [this, batch = std::move(batch), bodies, used](caf::event_based_actor* self) {
      auto op = checker_.enqueue_sent(bodies, w_.now());
      auto run = run_;
      auto answered = [this, run, op, used](result<std::vector<message_id>> ids) {
        if (!current(run)) return;
        checker_.enqueue_answered(op, ids);
        for (const auto& g : used) groups_.at(g).busy = false;
      };
      self->request(q_, caf::infinite, enqueue_atom_v, batch)
          .then([answered](std::vector<message_id>& ids) { answered(std::move(ids)); },
                [answered](caf::error& e) { answered(from_caf(e)); });
    });
  }

  /// A receive of up to 4 messages; a quarter of them long polls (at most two wait at a time).
  void do_receive(std::uint32_t max = 0) {
    auto c = pick(clients_.size());
    if (max == 0) max = static_cast<std::uint32_t>(1 + pick(4));
    bool poll = !draining_ && polls_open_ < 2 && pick(4) == 0;
    std::int64_t wait = poll ? std::int64_t(1 + pick(300'000)) : 0;
    if (poll) ++polls_open_;
    issue(c, [this, c, max, wait, poll](caf::event_based_actor* self) {
      if (checker_.enqueues_open() > 0) ++cov_.receives_racing_enqueues;
      if (poll) ++cov_.long_polls;
      auto op = checker_.receive_sent(max, lease_, w_.now());
      auto run = run_;
      auto answered = [this, run, op, c, poll](result<std::vector<delivery>> ds) {
        if (!current(run)) return;
        if (poll) --polls_open_;
        last_received_ = ds ? ds.value().size() : 0;
        for (auto l : checker_.receive_answered(op, ds, w_.now(), c)) held_.push_back(l);
      };
      self->request(q_, caf::infinite, receive_atom_v, receive_request{max, 0, wait})
          .then([answered](std::vector<delivery>& ds) { answered(std::move(ds)); },
                [answered](caf::error& e) { answered(from_caf(e)); });
    });
  }

  /// Acks, nacks or extends a lease a consumer holds; the consumer lets go of it (not for an
  /// extend).
  void end_held(end_kind k) {
    if (held_.empty()) return;
    auto i = pick(held_.size());
    auto l = held_[i];
    if (k != end_kind::extend) held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    send_end(l, k);
  }

  /// A consumer goes silent: its lease must run out.
  void do_silence() {
    if (held_.empty()) return;
    auto i = pick(held_.size());
    keep_stale(held_[i]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void keep_stale(std::size_t l) {
    stale_.push_back(l);
    if (stale_.size() > 48) stale_.erase(stale_.begin());
  }

  /// A token that a consumer let go of, or that ran out, presented again.
  void do_stale() {
    if (stale_.empty()) return;
    auto l = stale_[pick(stale_.size())];
    auto r = pick(10);
    send_end(l, r < 7 ? end_kind::ack : r < 9 ? end_kind::retry : end_kind::extend);
  }

  void send_end(std::size_t l, end_kind k) {
    duration retry_after{std::int64_t(pick(3) == 0 ? 0 : pick(std::uint64_t(lease_.count())))};
    duration by{std::int64_t(1'000 + pick(std::uint64_t(lease_.count())))};
    issue(checker_.lease(l).client, [this, l, k, retry_after, by](caf::event_based_actor* self) {
      auto op = checker_.end_sent(l, k, w_.now(), retry_after, by);
      if (op == 0) return;  // an extend of it is under way
      request_end(self, op, checker_.lease(l).d.lease, k, retry_after, by);
    });
  }

  /// Client side: sends the ack, nack or extend `op`; its answer goes to the checker.
  void request_end(caf::event_based_actor* self, std::uint64_t op, const lease_token& token,
                   end_kind k, duration retry_after, duration by) {
    auto answered = [this, run = run_, op](const status& st, timestamp extended_to) {
      if (current(run)) checker_.end_answered(op, st, extended_to, w_.now());
    };
    auto failed = [answered](caf::error& err) { answered(from_caf(err), timestamp{}); };
    switch (k) {
      case end_kind::ack:
        self->request(q_, caf::infinite, ack_atom_v, std::vector<lease_token>{token})
            .then(
                [answered](std::vector<lease_outcome>& out) {
                  answered(out.empty() ? status{ok_t{}} : status{out.front().err}, timestamp{});
                },
                failed);
        break;
      case end_kind::retry:
      case end_kind::dead:
        self->request(q_, caf::infinite, nack_atom_v, token,
                      nack_request{k == end_kind::dead ? nack_kind::dead_letter : nack_kind::retry,
                                   retry_after.count()})
            .then([answered](caf::ok_atom) { answered(ok_t{}, timestamp{}); }, failed);
        break;
      case end_kind::extend:
        self->request(q_, caf::infinite, extend_atom_v, token, by.count())
            .then([answered](timestamp deadline) { answered(ok_t{}, deadline); }, failed);
        break;
      case end_kind::release:  // a batch's rest: this simulation receives no ordered batches
        LANEQ_ASSERT(false, "the overlapping simulation sends no release");
        break;
    }
  }

  // -- the drain ------------------------------------------------------------------------------

  /// No more crashes; every actor runs to idle. Each round acks what the consumers hold, lets
  /// every lease and retry time run out, and receives; it ends when a receive finds nothing and
  /// no consumer holds anything. Then every message the clients know was stored must have ended
  /// acked (confirmed, or its ack lost in a crash and it never came back) or dead.
  void drain() {
    draining_ = true;
    bool done = false;
    for (int round = 0; round < 1'000 && !done; ++round) {
      settle();
      auto held = std::move(held_);
      held_.clear();
      for (auto l : held) send_end(l, end_kind::ack);
      settle();
      w_.sched().advance_time(std::chrono::duration_cast<caf::timespan>(3 * lease_ + 1s));
      settle();
      last_received_ = std::numeric_limits<std::size_t>::max();
      do_receive(64);
      settle();
      done = last_received_ == 0 && held_.empty();
    }
    if (!done) checker_.fail(check::lost, "the drain did not end");
    auto dls = w_.ask<std::vector<dead_letter>>(q_, dlq_atom_v, std::uint32_t{100'000});
    if (!dls) checker_.fail(check::api, "dead_letters failed");
    std::set<message_id> dead;
    for (const auto& dl : std::get<0>(*dls)) dead.insert(dl.msg.id);
    checker_.judge_drain(dead);
  }

  std::uint64_t seed_, episode_, steps_;
  overlap_coverage& cov_;
  std::mt19937_64 rng_;
  bool durable_;
  duration lease_;
  world w_;
  sim::answer_checker checker_;
  queue_api q_;
  std::vector<caf::actor> clients_;
  std::uint64_t step_ = 0;
  std::uint64_t run_ = 1;  ///< the broker run; answers to requests of earlier runs are lost
  std::uint64_t crash_per_mille_ = 1;
  bool draining_ = false;
  std::uint64_t next_op_ = 1;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, request_fn>> ops_;  ///< not sent
  std::map<std::string, producer_group> groups_;
  std::vector<std::size_t> held_;   ///< leases whose consumers are working on them
  std::vector<std::size_t> stale_;  ///< leases whose consumers let go of them
  std::uint64_t polls_open_ = 0;
  std::size_t last_received_ = 0;
};

caf::behavior client_actor(caf::event_based_actor* self, simulation* sim) {
  return {[=](std::uint64_t op) { sim->start(op, self); }};
}

TEST(Sim, overlapping_requests) {
  auto seed = sim::env_u64("LANEQ_SIM_SEED", std::random_device{}());
  auto total = sim::env_u64("LANEQ_SIM_OVERLAP_STEPS", default_steps);
  auto rerun = "LANEQ_SIM_SEED=" + std::to_string(seed) +
               " LANEQ_SIM_OVERLAP_STEPS=" + std::to_string(total) +
               " build/release/bin/laneq_sim_tests --gtest_filter='Sim.overlapping_requests'";
  std::cout << "sim overlap: seed " << seed << ", " << total << " steps (rerun: " << rerun << ")"
            << std::endl;
  overlap_coverage cov;
  for (std::uint64_t done = 0, episode = 0; done < total; done += episode_steps, ++episode) {
    try {
      simulation s{seed, episode, std::min(total - done, episode_steps), cov};
      s.run();
    } catch (const sim::checker_failure& e) {
      std::cout << e.what() << std::endl;
      FAIL() << e.what();
    }
  }
  std::cout << "sim overlap: all invariants held; " << cov.render() << std::endl;
  bool judged = total / episode_steps >= 8;
  auto missed = unmet(cov);
  for (const auto& m : missed)
    std::cout << (judged ? "COVERAGE NOT REACHED: " : "sim overlap: (not judged, a short run) ")
              << m << std::endl;
  if (judged && !missed.empty())
    FAIL() << missed.size() << " coverage minimum(s) not reached (rerun: " << rerun << ")";
}

}  // namespace
}  // namespace laneq
