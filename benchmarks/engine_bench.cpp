// laneq_engine_bench: drives an in-process broker with the blocking API and prints JSON.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "laneq/actors/broker.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// -- options -------------------------------------------------------------------------------------

const std::vector<std::string> all_scenarios{"unordered", "groups_1000", "ordered",
                                             "fairness_skewed", "live_groups"};

struct options {
  std::vector<std::string> scenarios = all_scenarios;
  std::uint64_t messages = 200'000;
  std::uint64_t ordered_messages = 20'000;
  std::uint64_t groups = 1'000'000;
  std::uint32_t consumers = 4;
  std::uint32_t batch = 100;
  std::uint32_t receive_max = 100;
  std::int64_t wait_us = 50'000;
  std::uint64_t max_backlog = 20'000;
  std::uint32_t stall_s = 60;
  std::uint32_t teardown_limit_s = 60;
};

constexpr std::size_t body_bytes = 256;
constexpr std::size_t live_body_bytes = 8;
constexpr std::uint32_t live_batch = 1000;

void print_usage(std::ostream& out) {
  out << "laneq_engine_bench [flags] [CAF options]\n"
         "  --scenarios=a,b,...     unordered,groups_1000,ordered,fairness_skewed,live_groups "
         "(default: all)\n"
         "  --messages=N            messages per throughput scenario (default 200000)\n"
         "  --ordered-messages=N    messages of the ordered() scenario (default 20000; never more "
         "than --messages)\n"
         "  --groups=N              live groups of the live_groups scenario (default 1000000)\n"
         "  --consumers=N           consumer threads (default 4)\n"
         "  --batch=N               messages per enqueue call (default 100)\n"
         "  --receive-max=N         max per receive call (default 100)\n"
         "  --wait-us=N             receive long-poll wait in microseconds (default 50000)\n"
         "  --max-backlog=N         producer stays at most N messages ahead of the acks (0: no "
         "bound; default 20000)\n"
         "  --stall-s=N             fail a scenario that makes no progress for N seconds (default "
         "60)\n"
         "  --teardown-limit-s=N    how long to wait for the live_groups broker to stop (default "
         "60; "
         "past it the\n"
         "                          process prints its report and exits without stopping it)\n"
         "Every other argument goes to CAF (for example --scheduler.max-threads=2).\n";
}

template <class T>
bool parse_number(std::string_view text, T& out) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return false;
  out = value;
  return true;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto pos = text.find(sep);
    auto part = text.substr(0, pos);
    if (!part.empty()) out.emplace_back(part);
    if (pos == std::string_view::npos) break;
    text.remove_prefix(pos + 1);
  }
  return out;
}

/// Takes our own flags out of argv (both `--x=v` and `--x v`); the rest is left for CAF.
/// Returns false (after printing why) on a malformed flag.
bool parse_options(int argc, char** argv, options& opt, std::vector<char*>& rest, bool& help) {
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    if (arg == "--help" || arg == "-h") {
      help = true;
      rest.push_back(argv[i]);
      continue;
    }
    if (!arg.starts_with("--")) {
      rest.push_back(argv[i]);
      continue;
    }
    auto eq = arg.find('=');
    auto name = arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2);
    static const std::vector<std::string_view> ours{
        "scenarios",   "messages", "ordered-messages", "groups",  "consumers",       "batch",
        "receive-max", "wait-us",  "max-backlog",      "stall-s", "teardown-limit-s"};
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) {
      rest.push_back(argv[i]);
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::cerr << "laneq_engine_bench: --" << name << " needs a value\n";
      return false;
    }
    bool ok = true;
    if (name == "scenarios") {
      opt.scenarios = split(value, ',');
      for (const auto& s : opt.scenarios)
        if (std::find(all_scenarios.begin(), all_scenarios.end(), s) == all_scenarios.end()) {
          std::cerr << "laneq_engine_bench: unknown scenario '" << s << "'\n";
          return false;
        }
      ok = !opt.scenarios.empty();
    } else if (name == "messages") {
      ok = parse_number(value, opt.messages) && opt.messages > 0;
    } else if (name == "ordered-messages") {
      ok = parse_number(value, opt.ordered_messages) && opt.ordered_messages > 0;
    } else if (name == "groups") {
      ok = parse_number(value, opt.groups) && opt.groups > 0;
    } else if (name == "consumers") {
      ok = parse_number(value, opt.consumers) && opt.consumers > 0 && opt.consumers <= 256;
    } else if (name == "batch") {
      ok = parse_number(value, opt.batch) && opt.batch > 0 &&
           opt.batch <= laneq::limits::enqueue_batch_max;
    } else if (name == "receive-max") {
      ok = parse_number(value, opt.receive_max) && opt.receive_max > 0 &&
           opt.receive_max <= laneq::limits::receive_batch_max;
    } else if (name == "wait-us") {
      ok = parse_number(value, opt.wait_us) && opt.wait_us > 0 &&
           laneq::duration{opt.wait_us} <= laneq::limits::receive_wait_max;
    } else if (name == "max-backlog") {
      ok = parse_number(value, opt.max_backlog);
    } else if (name == "stall-s") {
      ok = parse_number(value, opt.stall_s) && opt.stall_s > 0;
    } else if (name == "teardown-limit-s") {
      ok = parse_number(value, opt.teardown_limit_s);
    }
    if (!ok) {
      std::cerr << "laneq_engine_bench: bad value '" << value << "' for --" << name << "\n";
      return false;
    }
  }
  return true;
}

// -- JSON ----------------------------------------------------------------------------------------

/// A small streaming JSON writer (pretty-printed, two-space indent).
class json_writer {
 public:
  explicit json_writer(std::ostream& out) : out_(out) {}

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }

  void key(std::string_view k) {
    separate();
    write_string(k);
    out_ << ": ";
    after_key_ = true;
  }

  void value(std::string_view s) {
    separate();
    write_string(s);
  }
  void value(const char* s) { value(std::string_view{s}); }
  void value(bool b) {
    separate();
    out_ << (b ? "true" : "false");
  }
  void value(std::uint64_t n) {
    separate();
    out_ << n;
  }
  void value(std::int64_t n) {
    separate();
    out_ << n;
  }
  void value(std::uint32_t n) { value(std::uint64_t{n}); }
  void value(double d) {
    separate();
    if (!std::isfinite(d)) {
      out_ << "null";
      return;
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f", d);
    out_ << buf;
  }

  template <class T>
  void field(std::string_view k, T v) {
    key(k);
    value(v);
  }

 private:
  void open(char c) {
    separate();
    out_ << c;
    first_.push_back(true);
  }
  void close(char c) {
    bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ << c;
    if (first_.empty()) out_ << '\n';
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ << ',';
    first_.back() = false;
    newline();
  }
  void newline() {
    out_ << '\n';
    for (std::size_t i = 0; i < first_.size(); ++i) out_ << "  ";
  }
  void write_string(std::string_view s) {
    out_ << '"';
    for (char c : s) {
      auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"': out_ << "\\\""; break;
        case '\\': out_ << "\\\\"; break;
        case '\n': out_ << "\\n"; break;
        case '\r': out_ << "\\r"; break;
        case '\t': out_ << "\\t"; break;
        default:
          if (u < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(u));
            out_ << buf;
          } else {
            out_ << c;
          }
      }
    }
    out_ << '"';
  }

  std::ostream& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

// -- process measurements ------------------------------------------------------------------------

/// A `VmXxx:` line of /proc/self/status, in bytes (0 if absent).
std::uint64_t proc_status_bytes(std::string_view field_name) {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(field_name) || line.size() <= field_name.size() ||
        line[field_name.size()] != ':')
      continue;
    std::istringstream rest{line.substr(field_name.size() + 1)};
    std::uint64_t kib = 0;
    rest >> kib;
    return kib * 1024;
  }
  return 0;
}

std::uint64_t heap_in_use_bytes() {
  auto mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

std::int64_t process_cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& tv) {
    return static_cast<std::int64_t>(tv.tv_sec) * 1'000'000 + static_cast<std::int64_t>(tv.tv_usec);
  };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

/// Waits until the process has (nearly) stopped using CPU: the actors have drained their
/// mailboxes. Returns false if that did not happen within `limit`.
bool wait_quiescent(std::chrono::milliseconds limit) {
  constexpr auto window = 200ms;
  constexpr std::int64_t idle_cpu_us = 10'000;  // < 5% of one core per window
  auto deadline = steady::now() + limit;
  int quiet = 0;
  auto before = process_cpu_us();
  while (steady::now() < deadline) {
    std::this_thread::sleep_for(window);
    auto after = process_cpu_us();
    quiet = after - before < idle_cpu_us ? quiet + 1 : 0;
    before = after;
    if (quiet >= 2) return true;
  }
  return false;
}

/// Waits until the actor system runs no more than `baseline` actors (a stopped broker's actors
/// are gone); returns the seconds it took, or a negative number after `limit`.
double wait_actors_gone(caf::actor_system& sys, std::size_t baseline, std::chrono::seconds limit) {
  auto start = steady::now();
  while (sys.registry().running() > baseline) {
    if (steady::now() - start > limit) return -1;
    std::this_thread::sleep_for(10ms);
  }
  return std::chrono::duration<double>(steady::now() - start).count();
}

constexpr auto teardown_limit = std::chrono::seconds{120};

std::string read_cpu_model() {
  std::ifstream in{"/proc/cpuinfo"};
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto v = line.substr(colon + 1);
    auto first = v.find_first_not_of(" \t");
    return first == std::string::npos ? std::string{} : v.substr(first);
  }
  return {};
}

std::uint64_t read_mem_total_bytes() {
  std::ifstream in{"/proc/meminfo"};
  std::string name;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit)
    if (name == "MemTotal:") return kib * 1024;
  return 0;
}

// -- throughput scenarios ------------------------------------------------------------------------

/// A failure shared by the threads of one scenario: the first one wins.
class failure_flag {
 public:
  void set(std::string why) {
    std::lock_guard<std::mutex> guard{mu_};
    if (failed_.load()) return;
    why_ = std::move(why);
    failed_.store(true);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::string why() const {
    std::lock_guard<std::mutex> guard{mu_};
    return why_;
  }

 private:
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::string why_;
};

struct latency_summary {
  std::uint64_t samples = 0;
  std::int64_t p50_us = 0;
  std::int64_t p99_us = 0;
  std::int64_t max_us = 0;
};

latency_summary summarize(std::vector<std::int64_t>& xs) {
  latency_summary s;
  s.samples = xs.size();
  if (xs.empty()) return s;
  auto at = [&xs](double q) {
    auto idx = static_cast<std::size_t>(q * static_cast<double>(xs.size() - 1));
    std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(idx), xs.end());
    return xs[idx];
  };
  s.p50_us = at(0.50);
  s.p99_us = at(0.99);
  s.max_us = *std::max_element(xs.begin(), xs.end());
  return s;
}

/// How a scenario shapes message `i` (headers, fairness key).
using shaper = std::function<void(std::uint64_t i, laneq::outgoing_message& m)>;
/// Which ordering group a delivered message belongs to, for the order check (-1: unchecked).
using group_of = std::function<std::int64_t(const laneq::delivery& d)>;

struct throughput_scenario {
  std::string name;
  laneq::queue_spec spec;
  std::uint64_t messages = 0;
  shaper shape;
  group_of group;               // empty: no order check
  std::size_t group_count = 0;  // size of the order-check table
  bool split_by_fairness = false;
};

struct throughput_result {
  std::string name;
  std::string spec;
  std::uint64_t messages = 0;
  std::uint64_t acked = 0;
  double seconds = 0;
  double msgs_per_s = 0;
  std::uint64_t enqueue_calls = 0;
  std::uint64_t receive_calls = 0;
  std::uint64_t empty_receives = 0;
  std::uint64_t ack_calls = 0;
  std::uint64_t group_incarnations = 0;
  double avg_receive_batch = 0;
  double cpu_seconds = 0;
  double cpu_us_per_msg = 0;
  double teardown_seconds = 0;
  latency_summary latency;
  latency_summary latency_big;
  latency_summary latency_small;
  bool split_by_fairness = false;
  bool order_checked = false;
  std::optional<laneq::queue_stats> stats;
  bool verified = false;
  std::string failure;
};

class throughput_run {
 public:
  throughput_run(caf::actor_system& sys, const options& opt, throughput_scenario sc)
      : sys_(sys), opt_(opt), sc_(std::move(sc)), acks_(sc_.messages + 1) {
    if (sc_.group) last_in_group_ = std::vector<std::atomic<std::uint64_t>>(sc_.group_count);
  }

  throughput_result run() {
    throughput_result r;
    r.name = sc_.name;
    r.spec = sc_.spec.describe();
    r.messages = sc_.messages;
    r.split_by_fairness = sc_.split_by_fairness;
    r.order_checked = static_cast<bool>(sc_.group);
    auto baseline = sys_.registry().running();
    {
      laneq::broker b{sys_};
      ctx_ = b.context();
      laneq::blocking_admin admin{sys_, b.admin()};
      auto q = admin.create_queue(sc_.spec);
      if (!q) {
        r.failure = "create_queue: " + laneq::to_string(q.err());
        return r;
      }
      queue_ = q.value();
      auto cpu_before = process_cpu_us();
      start_ = steady::now();
      last_progress_us_.store(0);
      std::vector<std::thread> threads;
      threads.emplace_back([this] { produce(); });
      std::vector<std::vector<std::int64_t>> lat(opt_.consumers);
      std::vector<std::vector<std::int64_t>> lat_big(opt_.consumers);
      std::vector<std::vector<std::int64_t>> lat_small(opt_.consumers);
      for (std::uint32_t c = 0; c < opt_.consumers; ++c)
        threads.emplace_back(
            [this, c, &lat, &lat_big, &lat_small] { consume(lat[c], lat_big[c], lat_small[c]); });
      for (auto& t : threads) t.join();
      auto cpu_after = process_cpu_us();
      auto end_us = end_us_.load();
      if (end_us == 0) end_us = elapsed_us();
      r.seconds = static_cast<double>(end_us) / 1e6;
      r.acked = acked_.load();
      r.msgs_per_s = r.seconds > 0 ? static_cast<double>(r.acked) / r.seconds : 0;
      r.enqueue_calls = enqueue_calls_.load();
      r.receive_calls = receive_calls_.load();
      r.empty_receives = empty_receives_.load();
      r.ack_calls = ack_calls_.load();
      r.group_incarnations = max_group_id_.load();
      auto full = r.receive_calls - r.empty_receives;
      r.avg_receive_batch = full > 0 ? static_cast<double>(r.acked) / static_cast<double>(full) : 0;
      // CPU of the whole process (actors, producer, consumers) until every thread is done; the
      // consumers' last long polls add a little idle time, no CPU.
      r.cpu_seconds = static_cast<double>(cpu_after - cpu_before) / 1e6;
      r.cpu_us_per_msg =
          r.acked > 0 ? static_cast<double>(cpu_after - cpu_before) / static_cast<double>(r.acked)
                      : 0;
      r.latency = merge(lat);
      if (sc_.split_by_fairness) {
        r.latency_big = merge(lat_big);
        r.latency_small = merge(lat_small);
      }
      laneq::blocking_queue bq{sys_, queue_};
      auto st = bq.stats();
      if (st) r.stats = st.value();
      if (failure_.failed()) {
        r.failure = failure_.why();
      } else if (!st) {
        r.failure = "stats: " + laneq::to_string(st.err());
      } else {
        r.failure = verify(st.value());
      }
      queue_ = nullptr;
      ctx_ = nullptr;
    }  // the broker stops its actors here
    r.teardown_seconds = wait_actors_gone(sys_, baseline, teardown_limit);
    if (r.teardown_seconds < 0 && r.failure.empty())
      r.failure = "the broker's actors did not stop within " +
                  std::to_string(teardown_limit.count()) + " s";
    r.verified = r.failure.empty();
    return r;
  }

 private:
  std::int64_t elapsed_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start_).count();
  }

  static latency_summary merge(std::vector<std::vector<std::int64_t>>& parts) {
    std::vector<std::int64_t> all;
    std::size_t n = 0;
    for (const auto& p : parts) n += p.size();
    all.reserve(n);
    for (auto& p : parts) {
      all.insert(all.end(), p.begin(), p.end());
      p.clear();
      p.shrink_to_fit();
    }
    return summarize(all);
  }

  void produce() {
    laneq::blocking_queue bq{sys_, queue_};
    const std::string body(body_bytes, 'x');
    std::uint64_t i = 0;
    while (i < sc_.messages && !failure_.failed()) {
      if (opt_.max_backlog > 0) {
        while (!failure_.failed() && enqueued_.load() - acked_.load() >= opt_.max_backlog)
          std::this_thread::sleep_for(50us);
        if (failure_.failed()) return;
      }
      auto n = std::min<std::uint64_t>(opt_.batch, sc_.messages - i);
      std::vector<laneq::outgoing_message> batch(static_cast<std::size_t>(n));
      for (std::uint64_t k = 0; k < n; ++k) {
        auto& m = batch[static_cast<std::size_t>(k)];
        m.body = body;
        if (sc_.shape) sc_.shape(i + k, m);
      }
      auto ids = bq.enqueue(std::move(batch));
      enqueue_calls_.fetch_add(1, std::memory_order_relaxed);
      if (!ids) {
        failure_.set("enqueue: " + laneq::to_string(ids.err()));
        return;
      }
      if (ids.value().size() != n) {
        failure_.set("enqueue returned " + std::to_string(ids.value().size()) + " ids for " +
                     std::to_string(n) + " messages");
        return;
      }
      for (auto id : ids.value())
        if (id.value == 0 || id.value > sc_.messages) {
          failure_.set("enqueue returned an unexpected id " + std::to_string(id.value));
          return;
        }
      enqueued_.fetch_add(n);
      i += n;
    }
  }

  void consume(std::vector<std::int64_t>& lat, std::vector<std::int64_t>& lat_big,
               std::vector<std::int64_t>& lat_small) {
    laneq::blocking_queue bq{sys_, queue_};
    lat.reserve(static_cast<std::size_t>(sc_.messages / opt_.consumers + 1024));
    const laneq::receive_request req{opt_.receive_max, 0, opt_.wait_us};
    const auto stall_us = static_cast<std::int64_t>(opt_.stall_s) * 1'000'000;
    std::vector<laneq::lease_token> leases;
    while (!failure_.failed() && acked_.load() < sc_.messages) {
      auto got = bq.receive(req);
      receive_calls_.fetch_add(1, std::memory_order_relaxed);
      if (!got) {
        failure_.set("receive: " + laneq::to_string(got.err()));
        return;
      }
      auto& ds = got.value();
      if (ds.empty()) {
        empty_receives_.fetch_add(1, std::memory_order_relaxed);
        if (elapsed_us() - last_progress_us_.load() > stall_us)
          failure_.set("no progress for " + std::to_string(opt_.stall_s) + " s (acked " +
                       std::to_string(acked_.load()) + " of " + std::to_string(sc_.messages) + ")");
        continue;
      }
      leases.clear();
      for (const auto& d : ds) {
        if (d.msg.id.value == 0 || d.msg.id.value > sc_.messages) {
          failure_.set("delivered an unexpected id " + std::to_string(d.msg.id.value));
          return;
        }
        if (d.msg.body.size() != body_bytes) {
          failure_.set("message " + std::to_string(d.msg.id.value) + " has a body of " +
                       std::to_string(d.msg.body.size()) + " bytes");
          return;
        }
        if (sc_.group && !check_order(d)) return;
        // Group ids count up per group actor incarnation: the highest one is how many group
        // actors the queue spawned.
        auto seen = max_group_id_.load(std::memory_order_relaxed);
        while (d.lease.group.value > seen &&
               !max_group_id_.compare_exchange_weak(seen, d.lease.group.value)) {
        }
        leases.push_back(d.lease);
      }
      auto failed = bq.ack(leases);
      ack_calls_.fetch_add(1, std::memory_order_relaxed);
      if (!failed) {
        failure_.set("ack: " + laneq::to_string(failed.err()));
        return;
      }
      if (!failed.value().empty()) {
        const auto& f = failed.value().front();
        failure_.set(std::to_string(failed.value().size()) + " acks failed, first " +
                     laneq::to_string(f.lease) + ": " + laneq::to_string(f.err));
        return;
      }
      auto now = ctx_->time.now(sys_.clock());
      for (const auto& d : ds) {
        auto us = (now - d.msg.enqueued_at).count();
        lat.push_back(us);
        if (sc_.split_by_fairness)
          (d.msg.fairness_key == "big" ? lat_big : lat_small).push_back(us);
        auto times = acks_[static_cast<std::size_t>(d.msg.id.value)].fetch_add(1) + 1;
        if (times != 1) {
          failure_.set("message " + std::to_string(d.msg.id.value) + " acked " +
                       std::to_string(times) + " times");
          return;
        }
      }
      auto n = static_cast<std::uint64_t>(ds.size());
      auto total = acked_.fetch_add(n) + n;
      last_progress_us_.store(elapsed_us());
      if (total == sc_.messages) end_us_.store(elapsed_us());
    }
  }

  /// One message in flight per group, delivered in arrival (= id) order.
  bool check_order(const laneq::delivery& d) {
    auto g = sc_.group(d);
    if (g < 0 || static_cast<std::size_t>(g) >= last_in_group_.size()) {
      failure_.set("message " + std::to_string(d.msg.id.value) + " has no ordering group (key '" +
                   d.ordering_key + "')");
      return false;
    }
    auto& last = last_in_group_[static_cast<std::size_t>(g)];
    auto prev = last.exchange(d.msg.id.value);
    if (prev >= d.msg.id.value) {
      failure_.set("group " + std::to_string(g) + ": message " + std::to_string(d.msg.id.value) +
                   " delivered after " + std::to_string(prev));
      return false;
    }
    return true;
  }

  std::string verify(const laneq::queue_stats& st) {
    for (std::uint64_t id = 1; id <= sc_.messages; ++id) {
      auto times = acks_[static_cast<std::size_t>(id)].load();
      if (times != 1)
        return "message " + std::to_string(id) + " acked " + std::to_string(times) + " times";
    }
    if (acked_.load() != sc_.messages)
      return "acked " + std::to_string(acked_.load()) + " of " + std::to_string(sc_.messages);
    if (st.enqueued != sc_.messages || st.acked != sc_.messages || st.delivered != sc_.messages ||
        st.backlog != 0 || st.in_flight != 0 || st.dead_lettered != 0 || st.lease_expired != 0)
      return "queue stats disagree: enqueued " + std::to_string(st.enqueued) + ", delivered " +
             std::to_string(st.delivered) + ", acked " + std::to_string(st.acked) + ", backlog " +
             std::to_string(st.backlog) + ", in_flight " + std::to_string(st.in_flight) +
             ", dead_lettered " + std::to_string(st.dead_lettered) + ", lease_expired " +
             std::to_string(st.lease_expired);
    return {};
  }

  caf::actor_system& sys_;
  const options& opt_;
  throughput_scenario sc_;
  laneq::context_ptr ctx_;
  laneq::queue_api queue_;
  steady::time_point start_;
  failure_flag failure_;
  std::vector<std::atomic<std::uint8_t>> acks_;  // by message id: times acked
  std::vector<std::atomic<std::uint64_t>> last_in_group_;
  std::atomic<std::uint64_t> enqueued_{0};
  std::atomic<std::uint64_t> acked_{0};
  std::atomic<std::int64_t> last_progress_us_{0};
  std::atomic<std::int64_t> end_us_{0};
  std::atomic<std::uint64_t> enqueue_calls_{0};
  std::atomic<std::uint64_t> receive_calls_{0};
  std::atomic<std::uint64_t> empty_receives_{0};
  std::atomic<std::uint64_t> ack_calls_{0};
  std::atomic<std::uint64_t> max_group_id_{0};
};

/// The ordering group index encoded in header `k` (a decimal number), or -1.
std::int64_t group_from_header(const laneq::delivery& d) {
  const auto* v = laneq::header_value(d.msg.headers, "k");
  std::int64_t g = -1;
  if (!v || !parse_number(std::string_view{*v}, g)) return -1;
  return g;
}

throughput_scenario make_scenario(const std::string& name, const options& opt) {
  throughput_scenario sc;
  sc.name = name;
  sc.messages = opt.messages;
  if (name == "unordered") {
    sc.spec = laneq::queue_spec("bench-unordered");
  } else if (name == "groups_1000") {
    sc.spec = laneq::queue_spec("bench-groups").ordered_by({laneq::key::header("k")});
    sc.shape = [](std::uint64_t i, laneq::outgoing_message& m) {
      m.headers.push_back({"k", std::to_string(i % 1000)});
    };
    sc.group = group_from_header;
    sc.group_count = 1000;
  } else if (name == "ordered") {
    sc.spec = laneq::queue_spec("bench-ordered").ordered();
    sc.messages = std::min(opt.messages, opt.ordered_messages);
    sc.group = [](const laneq::delivery&) -> std::int64_t { return 0; };
    sc.group_count = 1;
  } else if (name == "fairness_skewed") {
    sc.spec = laneq::queue_spec("bench-fairness");
    // 90% to tenant "big", every tenth message to one of 99 small tenants in turn.
    sc.shape = [](std::uint64_t i, laneq::outgoing_message& m) {
      m.fairness_key = i % 10 != 9 ? std::string{"big"} : "small-" + std::to_string((i / 10) % 99);
    };
    sc.split_by_fairness = true;
  }
  return sc;
}

void write_latency(json_writer& w, std::string_view k, const latency_summary& s) {
  w.key(k);
  w.begin_object();
  w.field("samples", s.samples);
  w.field("p50_us", s.p50_us);
  w.field("p99_us", s.p99_us);
  w.field("max_us", s.max_us);
  w.end_object();
}

void write_stats(json_writer& w, const laneq::queue_stats& s) {
  w.key("queue_stats");
  w.begin_object();
  w.field("enqueued", s.enqueued);
  w.field("delivered", s.delivered);
  w.field("acked", s.acked);
  w.field("nacked", s.nacked);
  w.field("lease_expired", s.lease_expired);
  w.field("dead_lettered", s.dead_lettered);
  w.field("backlog", s.backlog);
  w.field("in_flight", s.in_flight);
  w.field("live_groups", s.live_groups);
  w.end_object();
}

void write_throughput(json_writer& w, const throughput_result& r) {
  w.begin_object();
  w.field("name", r.name);
  w.field("kind", "throughput");
  w.field("queue", r.spec);
  w.field("messages", r.messages);
  w.field("acked", r.acked);
  w.field("seconds", r.seconds);
  w.field("msgs_per_s", r.msgs_per_s);
  w.field("cpu_seconds", r.cpu_seconds);
  w.field("cpu_us_per_msg", r.cpu_us_per_msg);
  w.field("enqueue_calls", r.enqueue_calls);
  w.field("receive_calls", r.receive_calls);
  w.field("empty_receives", r.empty_receives);
  w.field("ack_calls", r.ack_calls);
  w.field("avg_receive_batch", r.avg_receive_batch);
  if (r.order_checked) w.field("group_incarnations", r.group_incarnations);
  write_latency(w, "enqueue_to_ack", r.latency);
  if (r.split_by_fairness) {
    write_latency(w, "enqueue_to_ack_big_tenant", r.latency_big);
    write_latency(w, "enqueue_to_ack_small_tenants", r.latency_small);
  }
  w.field("teardown_seconds", r.teardown_seconds);
  w.field("order_checked", r.order_checked);
  if (r.stats) write_stats(w, *r.stats);
  w.field("verified", r.verified);
  if (!r.failure.empty()) w.field("failure", r.failure);
  w.end_object();
}

// -- live groups ---------------------------------------------------------------------------------

struct live_groups_result {
  std::uint64_t groups = 0;
  double enqueue_seconds = 0;
  double enqueue_msgs_per_s = 0;
  bool quiescent = false;
  std::uint64_t rss_before = 0;
  std::uint64_t rss_after = 0;
  std::uint64_t hwm_before = 0;
  std::uint64_t hwm_after = 0;
  std::uint64_t heap_before = 0;
  std::uint64_t heap_after = 0;
  double bytes_per_live_group = 0;
  double heap_bytes_per_live_group = 0;
  double payload_bytes_per_message = 0;
  double bytes_per_live_group_beyond_payload = 0;
  double teardown_seconds = 0;
  bool teardown_completed = false;
  std::optional<laneq::queue_stats> stats;
  bool verified = false;
  std::string failure;
};

live_groups_result run_live_groups(caf::actor_system& sys, const options& opt) {
  live_groups_result r;
  r.groups = opt.groups;
  auto baseline = sys.registry().running();
  {
    laneq::broker b{sys};
    laneq::blocking_admin admin{sys, b.admin()};
    auto q = admin.create_queue(
        laneq::queue_spec("bench-live-groups").ordered_by({laneq::key::header("k")}));
    if (!q) {
      r.failure = "create_queue: " + laneq::to_string(q.err());
      return r;
    }
    laneq::blocking_queue bq{sys, q.value()};
    // Hand freed memory of earlier scenarios back to the kernel so the RSS delta is ours alone.
    wait_quiescent(10s);
    malloc_trim(0);
    r.rss_before = proc_status_bytes("VmRSS");
    r.hwm_before = proc_status_bytes("VmHWM");
    r.heap_before = heap_in_use_bytes();
    const std::string body(live_body_bytes, 'x');
    std::uint64_t key_bytes = 0;
    auto start = steady::now();
    for (std::uint64_t i = 0; i < opt.groups && r.failure.empty();) {
      auto n = std::min<std::uint64_t>(live_batch, opt.groups - i);
      std::vector<laneq::outgoing_message> batch(static_cast<std::size_t>(n));
      for (std::uint64_t k = 0; k < n; ++k) {
        auto& m = batch[static_cast<std::size_t>(k)];
        m.body = body;
        m.headers.push_back({"k", std::to_string(i + k)});
        key_bytes += 1 + m.headers.back().value.size();
      }
      auto ids = bq.enqueue(std::move(batch));
      if (!ids)
        r.failure = "enqueue: " + laneq::to_string(ids.err());
      else if (ids.value().size() != n)
        r.failure = "enqueue returned " + std::to_string(ids.value().size()) + " ids";
      i += n;
    }
    r.enqueue_seconds = std::chrono::duration<double>(steady::now() - start).count();
    r.enqueue_msgs_per_s =
        r.enqueue_seconds > 0 ? static_cast<double>(opt.groups) / r.enqueue_seconds : 0;
    // Group actors and the fairness actor work through their mailboxes after the enqueue
    // replies: measure once the process is idle.
    r.quiescent = wait_quiescent(120s);
    auto st = bq.stats();
    r.rss_after = proc_status_bytes("VmRSS");
    r.hwm_after = proc_status_bytes("VmHWM");
    r.heap_after = heap_in_use_bytes();
    auto g = static_cast<double>(opt.groups);
    r.bytes_per_live_group =
        (static_cast<double>(r.rss_after) - static_cast<double>(r.rss_before)) / g;
    r.heap_bytes_per_live_group =
        (static_cast<double>(r.heap_after) - static_cast<double>(r.heap_before)) / g;
    r.payload_bytes_per_message =
        static_cast<double>(live_body_bytes) + static_cast<double>(key_bytes) / g;
    r.bytes_per_live_group_beyond_payload = r.bytes_per_live_group - r.payload_bytes_per_message;
    if (st) r.stats = st.value();
    if (r.failure.empty()) {
      if (!st) {
        r.failure = "stats: " + laneq::to_string(st.err());
      } else if (st.value().live_groups != opt.groups || st.value().enqueued != opt.groups ||
                 st.value().backlog != opt.groups) {
        r.failure = "expected " + std::to_string(opt.groups) + " live groups, stats say " +
                    std::to_string(st.value().live_groups) + " (enqueued " +
                    std::to_string(st.value().enqueued) + ", backlog " +
                    std::to_string(st.value().backlog) + ")";
      } else if (!r.quiescent) {
        r.failure = "the broker did not become idle within 120 s";
      }
    }
  }  // the broker stops its actors (and the groups) here
  // Stopping a broker with many live groups is slow (see README): bounded wait.
  auto secs = wait_actors_gone(sys, baseline, std::chrono::seconds{opt.teardown_limit_s});
  r.teardown_completed = secs >= 0;
  r.teardown_seconds = r.teardown_completed ? secs : static_cast<double>(opt.teardown_limit_s);
  r.verified = r.failure.empty();
  return r;
}

void write_live_groups(json_writer& w, const live_groups_result& r) {
  w.begin_object();
  w.field("name", "live_groups");
  w.field("kind", "memory");
  w.field("queue", "bench-live-groups: ordered_by(header:k), one message per key");
  w.field("groups", r.groups);
  w.field("enqueue_seconds", r.enqueue_seconds);
  w.field("enqueue_msgs_per_s", r.enqueue_msgs_per_s);
  w.field("quiescent", r.quiescent);
  w.field("rss_before_bytes", r.rss_before);
  w.field("rss_after_bytes", r.rss_after);
  w.field("vm_hwm_before_bytes", r.hwm_before);
  w.field("vm_hwm_after_bytes", r.hwm_after);
  w.field("heap_in_use_before_bytes", r.heap_before);
  w.field("heap_in_use_after_bytes", r.heap_after);
  w.field("bytes_per_live_group", r.bytes_per_live_group);
  w.field("heap_bytes_per_live_group", r.heap_bytes_per_live_group);
  w.field("payload_bytes_per_message", r.payload_bytes_per_message);
  w.field("bytes_per_live_group_beyond_payload", r.bytes_per_live_group_beyond_payload);
  w.field("teardown_completed", r.teardown_completed);
  w.field("teardown_seconds", r.teardown_seconds);
  if (r.stats) write_stats(w, *r.stats);
  w.field("verified", r.verified);
  if (!r.failure.empty()) w.field("failure", r.failure);
  w.end_object();
}

}  // namespace

/// Writes the JSON report; returns true if every scenario verified.
bool write_report(std::ostream& out, const options& opt, std::size_t workers,
                  const std::vector<throughput_result>& throughput,
                  const std::optional<live_groups_result>& live) {
  bool all_ok = true;
  json_writer w{out};
  w.begin_object();
  w.field("benchmark", "laneq_engine_bench");
  w.key("machine");
  w.begin_object();
  w.field("nproc", static_cast<std::uint64_t>(std::thread::hardware_concurrency()));
  w.field("cpu_model", read_cpu_model());
  w.field("mem_total_bytes", read_mem_total_bytes());
  w.field("compiler", __VERSION__);
#ifdef LANEQ_BUILD_TYPE
  w.field("build_type", LANEQ_BUILD_TYPE);
#endif
#ifdef __OPTIMIZE__
  w.field("optimized", true);
#else
  w.field("optimized", false);
#endif
#ifdef NDEBUG
  w.field("assertions", false);
#else
  w.field("assertions", true);
#endif
  w.field("caf_version", std::to_string(CAF_MAJOR_VERSION) + "." +
                             std::to_string(CAF_MINOR_VERSION) + "." +
                             std::to_string(CAF_PATCH_VERSION));
  w.field("scheduler_workers", static_cast<std::uint64_t>(workers));
  w.end_object();
  w.key("config");
  w.begin_object();
  w.field("producers", std::uint64_t{1});
  w.field("consumers", opt.consumers);
  w.field("batch", opt.batch);
  w.field("receive_max", opt.receive_max);
  w.field("wait_us", opt.wait_us);
  w.field("body_bytes", static_cast<std::uint64_t>(body_bytes));
  w.field("messages", opt.messages);
  w.field("ordered_messages", std::min(opt.messages, opt.ordered_messages));
  w.field("max_backlog", opt.max_backlog);
  w.field("groups", opt.groups);
  w.end_object();
  w.key("scenarios");
  w.begin_array();
  for (const auto& r : throughput) {
    write_throughput(w, r);
    all_ok = all_ok && r.verified;
  }
  if (live) {
    write_live_groups(w, *live);
    all_ok = all_ok && live->verified;
  }
  w.end_array();
  w.key("targets");
  w.begin_object();
  for (const auto& r : throughput) {
    if (r.name == "unordered") {
      w.field("unordered_min_msgs_per_s", std::uint64_t{300'000});
      w.field("unordered_met", r.verified && r.msgs_per_s >= 300'000);
    } else if (r.name == "groups_1000") {
      w.field("groups_1000_min_msgs_per_s", std::uint64_t{200'000});
      w.field("groups_1000_met", r.verified && r.msgs_per_s >= 200'000);
    }
  }
  if (live) {
    w.field("live_group_max_bytes_beyond_payload", std::uint64_t{1024});
    w.field("live_groups_met",
            live->verified && live->bytes_per_live_group_beyond_payload <= 1024.0);
  }
  w.end_object();
  w.field("ok", all_ok);
  w.end_object();
  out.flush();
  return all_ok;
}

int main(int argc, char** argv) {
  options opt;
  std::vector<char*> caf_args;
  bool help = false;
  if (!parse_options(argc, argv, opt, caf_args, help)) {
    print_usage(std::cerr);
    return 2;
  }
  if (help) print_usage(std::cerr);
  caf::actor_system_config cfg;
  laneq::add_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  if (auto err = cfg.parse(static_cast<int>(caf_args.size()), caf_args.data())) {
    std::cerr << "laneq_engine_bench: " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;

  std::vector<throughput_result> throughput;
  std::optional<live_groups_result> live;
  caf::actor_system sys{cfg};
  auto workers = sys.scheduler().num_workers();
  // live_groups runs last: its broker can take very long to stop (see README).
  auto order = opt.scenarios;
  std::stable_partition(order.begin(), order.end(),
                        [](const std::string& s) { return s != "live_groups"; });
  std::optional<steady::time_point> last_throughput_end;  // of a scenario with groups
  for (const auto& name : order) {
    if (name == "live_groups") {
      // Group actors of a finished scenario stay in memory until their lease timers fire
      // (README): wait for that so they cannot blur the RSS delta.
      if (last_throughput_end) {
        auto until = *last_throughput_end + laneq::limits::lease_default + 2s;
        if (steady::now() < until) {
          std::cerr << "laneq_engine_bench: waiting for earlier lease timers to fire\n";
          std::this_thread::sleep_until(until);
        }
      }
      std::cerr << "laneq_engine_bench: running live_groups\n";
      live = run_live_groups(sys, opt);
      if (!live->verified) std::cerr << "  FAILED: " << live->failure << "\n";
      continue;
    }
    std::cerr << "laneq_engine_bench: running " << name << "\n";
    throughput_run run{sys, opt, make_scenario(name, opt)};
    throughput.push_back(run.run());
    const auto& r = throughput.back();
    if (!r.verified)
      std::cerr << "  FAILED: " << r.failure << "\n";
    else
      std::cerr << "  " << static_cast<std::uint64_t>(r.msgs_per_s) << " msg/s\n";
    wait_quiescent(30s);  // its actors are gone; let the process settle
    if (r.order_checked) last_throughput_end = steady::now();
  }
  bool ok = write_report(std::cout, opt, workers, throughput, live);
  int rc = ok ? 0 : 1;
  if (live && !live->teardown_completed) {
    // ~actor_system would wait for every group actor to stop: leave without it.
    std::cerr << "laneq_engine_bench: the live_groups broker is still stopping; exiting now\n";
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(rc);
  }
  return rc;
}
