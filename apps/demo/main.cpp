// laneq_demo: a short in-process walk through ordering, retries, dead letters and throttles on a
// broker with a RocksDB data directory, ending with a restart that keeps every message, its
// order and a durable lease.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "laneq/actors/broker.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// A step of the demo did not go as expected.
struct demo_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Prints one line prefixed with the seconds since start; safe from any thread.
class printer {
 public:
  void line(const std::string& text) {
    auto s = std::chrono::duration<double>(steady::now() - start_).count();
    std::lock_guard<std::mutex> guard{mu_};
    std::cout << "[" << std::fixed << std::setprecision(3) << std::setw(6) << s << "s] " << text
              << std::endl;
  }
  void section(const std::string& title) {
    std::lock_guard<std::mutex> guard{mu_};
    std::cout << "\n== " << title << " ==" << std::endl;
  }

 private:
  std::mutex mu_;
  steady::time_point start_ = steady::now();
};

template <class T>
T must(laneq::result<T> r, const std::string& what) {
  if (!r) throw demo_failure{what + ": " + laneq::to_string(r.err())};
  return std::move(r).value();
}

void must_ok(const laneq::status& s, const std::string& what) {
  if (!s) throw demo_failure{what + ": " + laneq::to_string(s.err())};
}

laneq::outgoing_message make(std::string body, std::vector<laneq::header_field> headers = {}) {
  laneq::outgoing_message m;
  m.body = std::move(body);
  m.headers = std::move(headers);
  return m;
}

std::string ids_text(const std::vector<laneq::message_id>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "#" : ", #") + std::to_string(id.value);
  return out;
}

/// `#7 'a1' key=header:account=A attempt=1`
std::string describe(const laneq::delivery& d) {
  std::ostringstream out;
  out << "#" << d.msg.id.value << " '" << d.msg.body
      << "' key=" << (d.ordering_key.empty() ? "(unordered)" : d.ordering_key)
      << " attempt=" << d.lease.attempt;
  return out.str();
}

/// The delivery whose body is `body`.
const laneq::delivery& find(const std::vector<laneq::delivery>& ds, const std::string& body) {
  for (const auto& d : ds)
    if (d.msg.body == body) return d;
  throw demo_failure{"expected a delivery of '" + body + "'"};
}

std::vector<laneq::lease_token> leases_of(const std::vector<laneq::delivery>& ds) {
  std::vector<laneq::lease_token> out;
  for (const auto& d : ds) out.push_back(d.lease);
  return out;
}

void ack_all(laneq::blocking_queue& q, const std::vector<laneq::delivery>& ds) {
  auto failed = must(q.ack(leases_of(ds)), "ack");
  if (!failed.empty()) throw demo_failure{"ack failed: " + laneq::to_string(failed.front().err)};
}

/// Runs `body` on a thread; the first failure of any such thread is kept for the main thread.
class worker_group {
 public:
  template <class F>
  void start(F body) {
    threads_.emplace_back([this, body]() mutable {
      try {
        body();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> guard{mu_};
        if (error_.empty()) error_ = e.what();
      }
    });
  }
  void join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (!error_.empty()) throw demo_failure{error_};
  }

 private:
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::string error_;
};

struct demo {
  caf::actor_system& sys;
  laneq::broker& broker;
  printer& out;

  std::int64_t ms_from_now(laneq::timestamp t) const {
    return (t - broker.context()->time.now(sys.clock())).count() / 1000;
  }

  void print_blocked_groups(laneq::blocking_queue& q) {
    auto groups = must(q.groups(true), "groups");
    if (groups.empty()) out.line("  groups(true): no group is blocked");
    for (const auto& g : groups) {
      std::ostringstream s;
      s << "  groups(true): " << g.key << " is " << laneq::to_string(g.state) << " (head #"
        << g.head.value << ", backlog " << g.backlog;
      if (g.until.us != 0) s << ", until +" << ms_from_now(g.until) << " ms";
      s << ")";
      out.line(s.str());
    }
  }

  /// Unordered queue: one producer thread, two consumer threads sharing the work.
  void jobs(const laneq::queue_api& handle) {
    out.section("jobs: unordered, 1 producer and 2 consumer threads");
    constexpr std::uint64_t total = 9;
    std::atomic<std::uint64_t> acked{0};
    auto deadline = steady::now() + 3s;
    worker_group threads;
    threads.start([&] {
      laneq::blocking_queue q{sys, handle};
      for (int b = 0; b < 3; ++b) {
        std::vector<laneq::outgoing_message> batch;
        for (int i = 0; i < 3; ++i) batch.push_back(make("job-" + std::to_string(b * 3 + i + 1)));
        auto ids = must(q.enqueue(std::move(batch)), "enqueue jobs");
        out.line("producer: enqueued " + ids_text(ids));
        std::this_thread::sleep_for(30ms);
      }
    });
    for (int c = 1; c <= 2; ++c) {
      threads.start([&, c] {
        laneq::blocking_queue q{sys, handle};
        auto name = "consumer-" + std::to_string(c);
        while (acked.load() < total && steady::now() < deadline) {
          auto ds = must(q.receive({2, 0, 200'000}), "receive jobs");
          for (const auto& d : ds) out.line(name + ": got " + describe(d));
          if (ds.empty()) continue;
          std::this_thread::sleep_for(10ms);  // "work"
          ack_all(q, ds);
          acked.fetch_add(ds.size());
        }
      });
    }
    threads.join();
    if (acked.load() != total)
      throw demo_failure{"jobs: acked " + std::to_string(acked.load()) + " of " +
                         std::to_string(total)};
    out.line("all " + std::to_string(total) + " jobs acked");
  }

  /// ordered_by(account), missing account -> unordered: group holds, nack with retry_after,
  /// dead letter and redrive.
  void accounts(const laneq::queue_api& handle) {
    out.section("account-events: ordered_by(header:account), missing key -> unordered");
    laneq::blocking_queue q{sys, handle};
    auto acct = [](const char* a) { return std::vector<laneq::header_field>{{"account", a}}; };
    std::vector<laneq::outgoing_message> batch;
    batch.push_back(make("a1", acct("A")));
    batch.push_back(make("a2", acct("A")));
    batch.push_back(make("s1"));  // no account header: unordered
    batch.push_back(make("b1", acct("B")));
    batch.push_back(make("b2", acct("B")));
    auto ids = must(q.enqueue(std::move(batch)), "enqueue accounts");
    out.line("producer: enqueued a1 a2 (account A), s1 (no account), b1 b2 (account B) as " +
             ids_text(ids));

    // The enqueue is answered once its messages are routed, so a1 and b1 (their groups' heads)
    // and s1 can be delivered at once; short long polls collect the three.
    std::vector<laneq::delivery> first;
    for (int i = 0; i < 10 && first.size() < 3; ++i)
      for (auto& d : must(q.receive({10, 0, 200'000}), "receive")) first.push_back(std::move(d));
    for (const auto& d : first) out.line("consumer-1: got " + describe(d));
    out.line("a2 and b2 are not offered: their groups have a message in flight");
    print_blocked_groups(q);
    const auto& a1 = find(first, "a1");
    const auto& s1 = find(first, "s1");
    const auto& b1 = find(first, "b1");

    must_ok(q.nack(a1.lease, 400ms), "nack a1");
    out.line("consumer-1: nack a1 with retry_after=400ms (group A is held until then)");
    must_ok(q.ack(s1.lease), "ack s1");
    out.line("consumer-1: ack s1");
    must_ok(q.dead_letter(b1.lease), "dead-letter b1");
    out.line("consumer-1: dead-letter b1 (poison message); group B moves on to b2");
    print_blocked_groups(q);

    auto second = must(q.receive({10, 0, 200'000}), "receive");
    for (const auto& d : second) out.line("consumer-2: got " + describe(d));
    if (second.size() != 1 || second.front().msg.body != "b2")
      throw demo_failure{"expected only b2 while group A waits for its retry"};
    out.line("a2 is still held: group A waits for a1's retry");
    ack_all(q, second);
    out.line("consumer-2: ack b2");

    auto dead = must(q.dead_letters(), "dead_letters");
    for (const auto& dl : dead)
      out.line("dead letter: #" + std::to_string(dl.msg.id.value) + " '" + dl.msg.body +
               "' reason=" + std::string{laneq::to_string(dl.reason)} +
               " attempts=" + std::to_string(dl.msg.attempts));
    auto redriven = must(q.redrive(), "redrive");
    out.line("redrive: " + std::to_string(redriven) + " message(s) back in the queue");
    auto third = must(q.receive({10, 0, 1'000'000}), "receive");
    for (const auto& d : third) out.line("consumer-2: got " + describe(d) + " (redriven)");
    ack_all(q, third);
    out.line("consumer-2: ack");

    out.line("consumer-1: waiting (long poll) for a1's retry ...");
    std::vector<std::string> order;
    auto deadline = steady::now() + 3s;
    while (order.size() < 2 && steady::now() < deadline) {
      auto ds = must(q.receive({10, 0, 1'000'000}), "receive");
      for (const auto& d : ds) {
        out.line("consumer-1: got " + describe(d));
        order.push_back(d.msg.body);
      }
      if (!ds.empty()) ack_all(q, ds);
    }
    if (order != std::vector<std::string>{"a1", "a2"})
      throw demo_failure{"expected a1 (attempt 2) then a2"};
    out.line("group A delivered a1 (second attempt) before a2: order kept across the retry");
  }

  /// ordered(): the whole queue is one group, so two consumers still take one at a time.
  void audit(const laneq::queue_api& handle) {
    out.section("audit: ordered(), 2 consumer threads, one message in flight at a time");
    {
      laneq::blocking_queue q{sys, handle};
      std::vector<laneq::outgoing_message> batch;
      for (int i = 1; i <= 5; ++i) batch.push_back(make("audit-" + std::to_string(i)));
      auto ids = must(q.enqueue(std::move(batch)), "enqueue audit");
      out.line("producer: enqueued " + ids_text(ids));
    }
    std::mutex mu;
    std::vector<std::uint64_t> order;
    std::atomic<int> in_flight{0};
    std::atomic<int> max_in_flight{0};
    auto deadline = steady::now() + 3s;
    worker_group threads;
    for (int c = 1; c <= 2; ++c) {
      threads.start([&, c] {
        laneq::blocking_queue q{sys, handle};
        auto name = "consumer-" + std::to_string(c);
        for (;;) {
          {
            std::lock_guard<std::mutex> guard{mu};
            if (order.size() >= 5) return;
          }
          if (steady::now() >= deadline) return;
          auto ds = must(q.receive({5, 0, 200'000}), "receive audit");
          if (ds.empty()) continue;
          auto now_in_flight =
              in_flight.fetch_add(static_cast<int>(ds.size())) + static_cast<int>(ds.size());
          auto seen = max_in_flight.load();
          while (now_in_flight > seen &&
                 !max_in_flight.compare_exchange_weak(seen, now_in_flight)) {
          }
          for (const auto& d : ds) out.line(name + ": got " + describe(d));
          std::this_thread::sleep_for(20ms);  // "work"
          {
            std::lock_guard<std::mutex> guard{mu};
            for (const auto& d : ds) order.push_back(d.msg.id.value);
          }
          in_flight.fetch_sub(static_cast<int>(ds.size()));
          ack_all(q, ds);
        }
      });
    }
    threads.join();
    if (order.size() != 5 || !std::is_sorted(order.begin(), order.end()))
      throw demo_failure{"audit: expected 5 entries in arrival order"};
    out.line("audit entries processed in arrival order; at most " +
             std::to_string(max_in_flight.load()) + " in flight at any moment");
  }

  /// A throttle per domain: 4 per second with a burst of 1.
  void emails(const laneq::queue_api& handle) {
    out.section("emails: throttle(header:domain, 4/s, burst 1)");
    laneq::blocking_queue q{sys, handle};
    auto domain = [](const char* d) { return std::vector<laneq::header_field>{{"domain", d}}; };
    std::vector<laneq::outgoing_message> batch;
    for (int i = 1; i <= 4; ++i)
      batch.push_back(make("a.com mail " + std::to_string(i), domain("a.com")));
    for (int i = 1; i <= 2; ++i)
      batch.push_back(make("b.com mail " + std::to_string(i), domain("b.com")));
    auto ids = must(q.enqueue(std::move(batch)), "enqueue emails");
    out.line("producer: enqueued 4 mails to a.com and 2 to b.com as " + ids_text(ids));
    std::size_t got = 0;
    auto deadline = steady::now() + 3s;
    while (got < 6 && steady::now() < deadline) {
      auto ds = must(q.receive({10, 0, 500'000}), "receive emails");
      for (const auto& d : ds) out.line("consumer-1: got '" + d.msg.body + "'");
      got += ds.size();
      if (!ds.empty()) ack_all(q, ds);
    }
    if (got != 6) throw demo_failure{"emails: got " + std::to_string(got) + " of 6"};
    out.line("a.com mails came about 250 ms apart; b.com was not held back by a.com");
  }

  void final_stats(laneq::blocking_admin& admin) {
    out.section("final stats");
    for (const auto& name : must(admin.list_queues(), "list_queues")) {
      auto d = must(admin.describe(name), "describe " + name);
      const auto& s = d.stats;
      out.line(d.summary);
      std::ostringstream line;
      line << "  enqueued=" << s.enqueued << " delivered=" << s.delivered << " acked=" << s.acked
           << " nacked=" << s.nacked << " dead_lettered=" << s.dead_lettered
           << " redriven=" << s.redriven << " key_missing=" << s.key_missing
           << " backlog=" << s.backlog << " in_flight=" << s.in_flight
           << " live_groups=" << s.live_groups << " dead_letters=" << s.dead_letters;
      out.line(line.str());
      if (s.backlog != 0 || s.in_flight != 0)
        throw demo_failure{"queue '" + name + "' is not drained"};
    }
  }

  void run() {
    laneq::blocking_admin admin{sys, broker.admin()};
    out.section("creating queues");
    auto create = [&](laneq::queue_spec spec) {
      auto summary = spec.describe();
      auto q = must(admin.create_queue(std::move(spec)), "create " + summary);
      out.line("created " + summary);
      return q;
    };
    auto jobs_q = create(laneq::queue_spec("jobs").lease(5s));
    auto accounts_q =
        create(laneq::queue_spec("account-events")
                   .ordered_by({laneq::key::header("account")})
                   .when_ordering_key_missing(laneq::missing_ordering_key::unordered));
    auto audit_q = create(laneq::queue_spec("audit").ordered());
    auto emails_q =
        create(laneq::queue_spec("emails").throttle({laneq::key::header("domain")}, 4.0, 1));
    jobs(jobs_q);
    accounts(accounts_q);
    audit(audit_q);
    emails(emails_q);
    final_stats(admin);
  }
};

/// The restart chapter, part 1: a durable ledger queue with messages waiting and one in flight.
laneq::delivery before_restart(caf::actor_system& sys, laneq::broker& broker, printer& out) {
  out.section("restart: before");
  laneq::blocking_admin admin{sys, broker.admin()};
  auto handle = must(admin.create_queue(laneq::queue_spec("ledger")
                                            .ordered_by({laneq::key::header("account")})
                                            .delivery(laneq::delivery_durability::durable)),
                     "create ledger");
  laneq::blocking_queue q{sys, handle};
  std::vector<laneq::outgoing_message> batch;
  for (int i = 1; i <= 3; ++i) {
    batch.push_back(make("a" + std::to_string(i), {{"account", "A"}}));
    batch.push_back(make("b" + std::to_string(i), {{"account", "B"}}));
  }
  out.line("enqueued " + ids_text(must(q.enqueue(std::move(batch)), "enqueue ledger")) +
           " (accounts A and B; synced before the ids came back)");
  auto ds = must(q.receive({1, 30'000'000, 0}), "receive ledger");
  if (ds.size() != 1) throw demo_failure{"expected one ledger delivery"};
  out.line("delivered " + describe(ds[0]) +
           " under a 30 s durable lease (committed before it was handed out)");
  out.line("the broker stops now, with this lease open and 5 messages waiting");
  return ds[0];
}

/// The restart chapter, part 2: everything is back, the open lease is honoured.
void after_restart(caf::actor_system& sys, laneq::broker& broker, printer& out,
                   const laneq::delivery& open) {
  out.section("restart: after");
  laneq::blocking_admin admin{sys, broker.admin()};
  auto d = must(admin.describe("ledger"), "describe ledger");
  out.line("recovered " + d.summary + " with " + std::to_string(d.stats.recovered) + " messages, " +
           std::to_string(d.stats.in_flight) + " in flight");
  laneq::blocking_queue q{sys, must(admin.lookup("ledger"), "lookup ledger")};
  auto ds = must(q.receive({10, 0, 500'000}), "receive ledger");
  for (const auto& x : ds) out.line("delivered " + describe(x));
  for (const auto& x : ds)
    if (x.ordering_key == open.ordering_key)
      throw demo_failure{"the leased account was delivered again before its lease ran out"};
  out.line("nothing of " + open.ordering_key + " was delivered: its open lease is honoured");
  must_ok(q.ack(open.lease), "ack with the lease from before the restart");
  out.line("acked with the token from before the restart");
  ack_all(q, ds);
  std::string last_a, last_b;  // bodies a1..a3, b1..b3 sort in order
  (open.msg.body[0] == 'a' ? last_a : last_b) = open.msg.body;
  for (const auto& x : ds) (x.msg.body[0] == 'a' ? last_a : last_b) = x.msg.body;
  for (int round = 0; round < 10; ++round) {
    auto more = must(q.receive({10, 0, 300'000}), "receive ledger");
    if (more.empty()) break;
    for (const auto& x : more) {
      out.line("delivered " + describe(x));
      auto& last = x.msg.body[0] == 'a' ? last_a : last_b;
      if (x.msg.body <= last) throw demo_failure{"'" + x.msg.body + "' came after '" + last + "'"};
      last = x.msg.body;
    }
    ack_all(q, more);
  }
  auto stats = must(q.stats(), "stats");
  if (stats.backlog != 0) throw demo_failure{"the ledger is not drained"};
  out.line("ledger drained in per-account order; deleting it");
  must_ok(admin.delete_queue("ledger"), "delete ledger");
}

}  // namespace

/// CAF's config plus the demo's own option.
struct demo_config : caf::actor_system_config {
  std::string data_dir = "laneq-demo-data";
  demo_config() {
    opt_group{custom_options_, "global"}.add(data_dir, "data-dir",
                                             "RocksDB data directory (default ./laneq-demo-data)");
  }
};

int main(int argc, char** argv) {
  demo_config cfg;
  laneq::add_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  const auto& data_dir = cfg.data_dir;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "laneq_demo: " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;
  caf::actor_system sys{cfg};
  printer out;
  laneq::broker_options opts;
  opts.data_dir = data_dir;
  out.line("data directory: " + data_dir);
  try {
    laneq::delivery open_lease;
    {
      auto broker = must(laneq::broker::open(sys, opts), "open the broker");
      demo{sys, *broker, out}.run();
      open_lease = before_restart(sys, *broker, out);
    }  // the broker stops: RocksDB is closed
    auto broker = must(laneq::broker::open(sys, opts), "reopen the broker");
    after_restart(sys, *broker, out, open_lease);
    out.line("demo finished");
  } catch (const std::exception& e) {
    std::cerr << "laneq_demo: FAILED: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
