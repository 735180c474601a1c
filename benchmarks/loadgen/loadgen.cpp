// laneq_loadgen: drives a running laneqd over HTTP or over CAF remote actors (issue 4 §6) and
// prints one JSON document of results on stdout; a live progress line goes to stderr.
// One producer (keeping up to --in-flight enqueue batches in flight, each on its own connection;
// a group's messages always go through the same connection, so their order is the producer's)
// and C consumer threads, each with its own connection. Every message
// carries its number, group and send time in its body, so the consumers measure
// enqueue-to-delivery and enqueue-to-ack latency on the same clock and check that each message
// is acked once and that a group's messages are delivered in order. See benchmarks/README.md.
// --mode=backlog only fills the queue: N messages left waiting, and laneqd's RSS before and after
// (what a deep backlog costs in memory; no consumers).
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "laneq/actors/protocol.hpp"
#include "laneq/actors/remote_admin.hpp"
#include "laneq/actors/remote_client.hpp"
#include "laneq/client/http_client.hpp"

namespace json = boost::json;
using clock_type = std::chrono::steady_clock;

namespace {

// -- options ------------------------------------------------------------------------------------

struct options {
  std::string mode = "flow";       ///< flow (produce and consume) | backlog (produce only)
  std::string transport = "http";  ///< http | caf
  std::string url = "http://127.0.0.1:7070";
  std::string token;
  std::string caf_host = "127.0.0.1";
  std::uint16_t caf_port = 7071;
  std::string queue;  ///< default: loadgen-<pid>-<n>
  std::uint64_t messages = 100'000;
  std::size_t size = 256;
  std::uint64_t groups = 0;  ///< 0: unordered
  std::uint32_t consumers = 4;
  std::uint32_t batch = 100;           ///< messages per enqueue request
  std::uint32_t in_flight = 1;         ///< enqueue requests the producer keeps in flight
  std::uint32_t receive_max = 100;     ///< max per receive; a receive's messages are acked together
  std::int64_t wait_ms = 100;          ///< long-poll of each receive
  double rate = 0;                     ///< offered msg/s; 0: flat out
  std::uint64_t max_backlog = 20'000;  ///< the producer stays at most this far ahead of the acks
  std::string durability = "durable";
  bool async_ack = false;  ///< --ack=async: acks on a connection of their own (consumer())
  std::int64_t server_pid = 0;
  std::int64_t stall_s = 60;
  bool keep = false;  ///< keep the queue afterwards
  bool progress = true;
  std::string cacert;  ///< https: trust this CA file instead of the system's (as laneq --cacert)
};

/// The HTTP client's options: the token, `timeout` per request and, for https, the CA file.
laneq::client::client_options http_options(const options& o, std::chrono::milliseconds timeout) {
  laneq::client::client_options c{o.token, timeout};
  c.cacert_file = o.cacert;
  return c;
}

void usage(std::ostream& o) {
  o << "usage: laneq_loadgen [--mode=flow|backlog] [--transport=http|caf]\n"
       "         [--url=http://127.0.0.1:7070] [--token=T] [--cacert=FILE (https)]\n"
       "         [--caf-host=127.0.0.1] [--caf-port=7071] [--queue=NAME] [--messages=N]\n"
       "         [--size=BYTES] [--groups=K (0: unordered)] [--consumers=C] [--batch=B]\n"
       "         [--in-flight=P (enqueue batches in flight)]\n"
       "         [--receive-max=M] [--wait-ms=W] [--rate=MSG_PER_S (0: flat out)]\n"
       "         [--max-backlog=N] [--durability=durable|fast] [--ack=sync|async]\n"
       "         [--server-pid=PID] [--stall-s=S] [--keep] [--no-progress]\n";
}

bool parse_options(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(std::cout);
      std::exit(0);
    }
    if (a == "--keep") {
      o.keep = true;
      continue;
    }
    if (a == "--no-progress") {
      o.progress = false;
      continue;
    }
    auto eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) {
      err = "bad argument \"" + a + "\" (options are --name=value)";
      return false;
    }
    auto name = a.substr(2, eq - 2);
    auto val = a.substr(eq + 1);
    auto num = [&](auto& out, double min, double max) {
      char* end = nullptr;
      double d = std::strtod(val.c_str(), &end);
      if (val.empty() || *end != '\0' || d < min || d > max) {
        err = "--" + name + " wants a number from " + std::to_string(min) + " to " +
              std::to_string(max) + ", got \"" + val + "\"";
        return false;
      }
      out = static_cast<std::remove_reference_t<decltype(out)>>(d);
      return true;
    };
    bool ok = true;
    if (name == "mode") {
      o.mode = val;
      if (val != "flow" && val != "backlog") {
        err = "--mode wants flow or backlog";
        return false;
      }
    } else if (name == "transport") {
      o.transport = val;
      if (val != "http" && val != "caf") {
        err = "--transport wants http or caf";
        return false;
      }
    } else if (name == "url") {
      o.url = val;
    } else if (name == "token") {
      o.token = val;
    } else if (name == "cacert") {
      o.cacert = val;
    } else if (name == "caf-host") {
      o.caf_host = val;
    } else if (name == "caf-port") {
      ok = num(o.caf_port, 1, 65535);
    } else if (name == "queue") {
      o.queue = val;
    } else if (name == "messages") {
      ok = num(o.messages, 1, 1e9);
    } else if (name == "size") {
      ok = num(o.size, 32, 1 << 20);
    } else if (name == "groups") {
      ok = num(o.groups, 0, 1e7);
    } else if (name == "consumers") {
      ok = num(o.consumers, 1, 256);
    } else if (name == "batch") {
      ok = num(o.batch, 1, 10'000);
    } else if (name == "in-flight") {
      ok = num(o.in_flight, 1, 64);
    } else if (name == "receive-max") {
      ok = num(o.receive_max, 1, 10'000);
    } else if (name == "wait-ms") {
      ok = num(o.wait_ms, 0, 60'000);
    } else if (name == "rate") {
      ok = num(o.rate, 0, 1e9);
    } else if (name == "max-backlog") {
      ok = num(o.max_backlog, 0, 1e9);
    } else if (name == "durability") {
      o.durability = val;
      if (val != "durable" && val != "fast") {
        err = "--durability wants durable or fast";
        return false;
      }
    } else if (name == "ack") {
      if (val != "sync" && val != "async") {
        err = "--ack wants sync or async";
        return false;
      }
      o.async_ack = val == "async";
    } else if (name == "server-pid") {
      ok = num(o.server_pid, 1, 1e9);
    } else if (name == "stall-s") {
      ok = num(o.stall_s, 1, 3600);
    } else {
      err = "unknown option --" + name;
      return false;
    }
    if (!ok) return false;
  }
  return true;
}

// -- the server process ---------------------------------------------------------------------------

struct proc_sample {
  double cpu_s = 0;  ///< user + system CPU seconds so far
  double rss_mb = 0;
  double hwm_mb = 0;
  bool ok = false;
};

proc_sample sample_process(std::int64_t pid) {
  proc_sample s;
  if (pid <= 0) return s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(text.substr(close + 2));
  std::vector<std::string> f;
  std::string w;
  while (rest >> w) f.push_back(w);
  // Fields after the command: state is field 3, utime 14 and stime 15 (1-based) -> index 11, 12.
  if (f.size() < 13) return s;
  auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  s.cpu_s = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    auto kb = [&](std::string_view key) { return std::stod(line.substr(key.size())) / 1024.0; };
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = kb("VmRSS:");
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_mb = kb("VmHWM:");
  }
  s.ok = true;
  return s;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// -- the machine --------------------------------------------------------------------------------

/// How fast this machine is right now, measured just before the run, so that runs on a shared VM
/// can be compared: its speed changes within minutes, and laneqd's CPU per message with it. A
/// dependent multiply-add chain times the core; a ping-pong between two threads over a mutex and a
/// condition variable times what every hand-off between laneqd's threads costs (two wake-ups).
json::object probe_machine() {
  auto t0 = clock_type::now();
  constexpr int iterations = 50'000'000;
  std::uint64_t v = 1;
  for (int i = 0; i < iterations; ++i) v = v * 6364136223846793005ULL + 1442695040888963407ULL;
  volatile std::uint64_t sink = v;  // keeps the chain from being optimised away
  (void)sink;
  auto loop_ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();

  constexpr int round_trips = 5'000;
  std::mutex m;
  std::condition_variable cv;
  bool ball_here = false;  // true: the partner's turn
  auto t1 = clock_type::now();
  std::thread partner([&] {
    for (int i = 0; i < round_trips; ++i) {
      std::unique_lock lock{m};
      cv.wait(lock, [&] { return ball_here; });
      ball_here = false;
      cv.notify_one();
    }
  });
  for (int i = 0; i < round_trips; ++i) {
    std::unique_lock lock{m};
    ball_here = true;
    cv.notify_one();
    cv.wait(lock, [&] { return !ball_here; });
  }
  partner.join();
  auto trip_us = std::chrono::duration<double, std::micro>(clock_type::now() - t1).count();

  json::object out;
  out["cpu_loop_ns"] = loop_ns / iterations;
  out["thread_round_trip_us"] = trip_us / round_trips;
  return out;
}

// -- message bodies -----------------------------------------------------------------------------

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

/// `<number>|<group>|<send time ns>|xxxx...` padded to `size` bytes. Written and read with
/// to_chars / from_chars: snprintf and sscanf were 2% of the machine's CPU samples under load.
std::string make_body(std::uint64_t n, std::int64_t group, std::int64_t t_ns, std::size_t size) {
  std::string body;
  body.reserve(size);
  auto field = [&](auto v) {
    char digits[24];  // any 64-bit integer
    body.append(digits, std::to_chars(digits, digits + sizeof digits, v).ptr);
    body += '|';
  };
  field(n);
  field(group);
  field(t_ns);
  if (body.size() < size) body.resize(size, 'x');
  return body;
}

struct body_fields {
  std::uint64_t n = 0;
  std::int64_t group = -1;
  std::int64_t t_ns = 0;
  bool ok = false;
};

body_fields parse_body(const std::string& b) {
  body_fields f;
  const char* at = b.data();
  const char* end = b.data() + b.size();
  // Each field, then its '|'.
  auto field = [&](auto& v) {
    auto r = std::from_chars(at, end, v);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != '|') return false;
    at = r.ptr + 1;
    return true;
  };
  f.ok = field(f.n) && field(f.group) && field(f.t_ns);
  return f;
}

// -- transports ---------------------------------------------------------------------------------

struct received {
  std::string body;
  std::string http_lease;
  laneq::lease_token caf_lease;
};

/// One connection's worth of API: each thread has its own.
class transport {
 public:
  virtual ~transport() = default;
  virtual bool send(std::vector<std::string> bodies, std::vector<std::string> groups,
                    std::string& err) = 0;
  virtual bool receive(std::uint32_t max, std::int64_t wait_ms, std::vector<received>& out,
                       std::string& err) = 0;
  /// Acks `batch`; `ok[i]` tells whether batch[i] was acked.
  virtual bool ack(const std::vector<received>& batch, std::vector<bool>& ok, std::string& err) = 0;
};

class http_transport : public transport {
 public:
  http_transport(const laneq::client::endpoint& ep, const options& o)
      : c_(ep, http_options(o, std::chrono::milliseconds(60'000))), queue_(o.queue) {}
  bool send(std::vector<std::string> bodies, std::vector<std::string> groups,
            std::string& err) override {
    std::vector<laneq::client::outgoing> msgs(bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      msgs[i].body = std::move(bodies[i]);
      if (!groups[i].empty()) msgs[i].headers.emplace_back("g", groups[i]);
    }
    auto r = c_.send(queue_, msgs);
    if (!r) err = to_string(r.err());
    return r.ok();
  }
  bool receive(std::uint32_t max, std::int64_t wait_ms, std::vector<received>& out,
               std::string& err) override {
    auto r = c_.receive(queue_, {max, std::nullopt, wait_ms});
    if (!r) {
      err = to_string(r.err());
      return false;
    }
    const auto* msgs = r.value().as_object().if_contains("messages");
    if (msgs == nullptr || !msgs->is_array()) {
      err = "receive answer without messages";
      return false;
    }
    for (const auto& m : msgs->as_array()) {
      const auto& o = m.as_object();
      received x;
      x.body = std::string(o.at("body").as_string());
      x.http_lease = std::string(o.at("lease").as_string());
      out.push_back(std::move(x));
    }
    return true;
  }
  bool ack(const std::vector<received>& batch, std::vector<bool>& ok, std::string& err) override {
    ok.assign(batch.size(), true);
    std::vector<std::string> leases;
    leases.reserve(batch.size());
    for (const auto& b : batch) leases.push_back(b.http_lease);
    auto r = c_.ack(queue_, leases);
    if (!r) {
      // A single stale lease comes back as an error answer: that lease failed, nothing else.
      if (batch.size() == 1 && r.err().kind == laneq::client::failure_kind::server &&
          r.err().http_status == 404) {
        ok[0] = false;
        return true;
      }
      err = to_string(r.err());
      return false;
    }
    if (const auto* failed = r.value().as_object().if_contains("failed"))
      for (const auto& f : failed->as_array()) {
        auto lease = f.as_object().at("lease").as_string();
        for (std::size_t i = 0; i < batch.size(); ++i)
          if (batch[i].http_lease == lease) ok[i] = false;
      }
    return true;
  }

 private:
  laneq::client::http_client c_;
  std::string queue_;
};

class caf_transport : public transport {
 public:
  caf_transport(caf::actor_system& sys, laneq::queue_api q) : self_(sys), q_(std::move(q)) {}
  bool send(std::vector<std::string> bodies, std::vector<std::string> groups,
            std::string& err) override {
    std::vector<laneq::outgoing_message> msgs(bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      msgs[i].body = std::move(bodies[i]);
      if (!groups[i].empty()) msgs[i].headers.push_back({"g", groups[i]});
    }
    bool ok = false;
    self_->request(q_, timeout, laneq::enqueue_atom_v, std::move(msgs))
        .receive([&](const std::vector<laneq::message_id>&) { ok = true; },
                 [&](caf::error& e) { err = laneq::to_string(laneq::from_caf(e)); });
    return ok;
  }
  bool receive(std::uint32_t max, std::int64_t wait_ms, std::vector<received>& out,
               std::string& err) override {
    bool ok = false;
    laneq::receive_request req{max, 0, wait_ms * 1000};
    self_->request(q_, timeout, laneq::receive_atom_v, req)
        .receive(
            [&](std::vector<laneq::delivery>& ds) {
              for (auto& d : ds) out.push_back({std::move(d.msg.body), {}, d.lease});
              ok = true;
            },
            [&](caf::error& e) { err = laneq::to_string(laneq::from_caf(e)); });
    return ok;
  }
  bool ack(const std::vector<received>& batch, std::vector<bool>& ok, std::string& err) override {
    ok.assign(batch.size(), true);
    std::vector<laneq::lease_token> leases;
    leases.reserve(batch.size());
    for (const auto& b : batch) leases.push_back(b.caf_lease);
    bool done = false;
    self_->request(q_, timeout, laneq::ack_atom_v, std::move(leases))
        .receive(
            [&](const std::vector<laneq::lease_outcome>& failed) {
              for (const auto& f : failed)
                for (std::size_t i = 0; i < batch.size(); ++i)
                  if (batch[i].caf_lease == f.lease) ok[i] = false;
              done = true;
            },
            [&](caf::error& e) { err = laneq::to_string(laneq::from_caf(e)); });
    return done;
  }

 private:
  // No timeout: in CAF 0.17 each request timeout is set and cancelled on the clock thread, two
  // wake-ups of it per call (about 1 us of this process's CPU per message at 100 per call). A
  // laneqd that stops answering is caught by the stall check instead, which abandons the call.
  static constexpr auto timeout = caf::infinite;
  caf::scoped_actor self_;
  laneq::queue_api q_;
};

// -- the run ------------------------------------------------------------------------------------

struct shared_state {
  const options& opt;
  std::vector<std::atomic<std::uint8_t>> acked;    ///< per message: acked at least once
  std::vector<std::atomic<std::int64_t>> last_in;  ///< per group: last number delivered
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> acked_distinct{0};
  std::atomic<std::uint64_t> duplicates{0};
  std::atomic<std::uint64_t> order_violations{0};
  std::atomic<std::uint64_t> failed_acks{0};
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> last_send_done_ns{0};
  std::atomic<std::int64_t> last_ack_ns{0};
  std::mutex err_mtx;
  std::string first_error;
  // The producer's wait for the acks to catch up (--max-backlog). A condition variable, not a
  // sleep loop: 200 us sleeps were 18% of this process's CPU samples with 1,000 groups, each one
  // a timer and a task switch on the cores laneqd needs. `waiting` and `acked_distinct` are
  // seq_cst, so a consumer that sees no waiter made its acks visible to the waiter's check.
  std::mutex backlog_mtx;
  std::condition_variable backlog_cv;
  std::atomic<std::uint32_t> waiting{0};
  // Producer and consumer threads still running; main waits for them (threads_ended_within).
  std::mutex threads_mtx;
  std::condition_variable threads_cv;
  std::size_t threads_running = 0;

  explicit shared_state(const options& o)
      : opt(o), acked(o.messages), last_in(std::max<std::uint64_t>(o.groups, 1)) {
    for (auto& a : acked) a.store(0);
    for (auto& g : last_in) g.store(-1);
  }
  void thread_ended() {
    std::lock_guard<std::mutex> g(threads_mtx);
    --threads_running;
    threads_cv.notify_all();
  }
  /// True when every thread ended within `grace`.
  bool threads_ended_within(std::chrono::seconds grace) {
    std::unique_lock<std::mutex> lock(threads_mtx);
    return threads_cv.wait_for(lock, grace, [&] { return threads_running == 0; });
  }
  void fail(std::string what) {
    {
      std::lock_guard<std::mutex> g(err_mtx);
      if (first_error.empty()) first_error = std::move(what);
      stop = true;
    }
    acks_advanced();
  }
  /// Blocks until `at_least` messages are acked or the run stops.
  void wait_for_acks(std::uint64_t at_least) {
    auto ready = [&] { return stop || acked_distinct.load() >= at_least; };
    if (ready()) return;
    ++waiting;
    {
      std::unique_lock<std::mutex> g(backlog_mtx);
      // The timeout only bounds a wait whose stop was set without a notify (main's end).
      while (!ready()) backlog_cv.wait_for(g, std::chrono::milliseconds(100));
    }
    --waiting;
  }
  /// After acks are counted (or the run stops): wakes a waiting producer.
  void acks_advanced() {
    if (waiting.load() == 0) return;
    std::lock_guard<std::mutex> g(backlog_mtx);
    backlog_cv.notify_all();
  }
};

/// How long each call of one thread took, from its send to its answer: where a run's time goes.
struct call_log {
  std::vector<std::int64_t> enqueue_us;
  std::vector<std::int64_t> receive_us;  ///< receives that brought messages
  std::vector<std::int64_t> ack_us;
  std::uint64_t empty_receives = 0;
  std::uint64_t received = 0;
};

/// Slot `slot` of the producer's `--in-flight` slots. A slot owns every message whose group
/// falls to it (unordered: every slot-th batch), sends them in number order and waits for each
/// batch to be durable, so a group's order is the order its slot sent it in.
void producer(shared_state& st, transport& t, std::int64_t t0_ns, std::uint32_t slot,
              call_log& calls) {
  const auto& o = st.opt;
  const std::uint64_t slots = o.in_flight;
  auto owns = [&](std::uint64_t k) {
    return o.groups == 0 ? (k / o.batch) % slots == slot : (k % o.groups) % slots == slot;
  };
  std::uint64_t k = 0;  // the next message number this slot considers
  std::vector<std::string> bodies;
  std::vector<std::string> groups;
  while (k < o.messages && !st.stop) {
    if (o.max_backlog > 0 && k > o.max_backlog) st.wait_for_acks(k - o.max_backlog);
    if (o.rate > 0) {
      auto due = t0_ns + static_cast<std::int64_t>(static_cast<double>(k) / o.rate * 1e9);
      auto wait = due - now_ns();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    }
    bodies.clear();
    groups.clear();
    auto t_send = now_ns();
    for (; k < o.messages && bodies.size() < o.batch; ++k) {
      if (!owns(k)) continue;
      std::int64_t g = o.groups == 0 ? -1 : static_cast<std::int64_t>(k % o.groups);
      bodies.push_back(make_body(k, g, t_send, o.size));
      groups.push_back(g < 0 ? std::string() : "g" + std::to_string(g));
    }
    if (bodies.empty()) break;
    auto count = bodies.size();
    std::string err;
    if (!t.send(std::move(bodies), std::move(groups), err)) {
      st.fail("enqueue failed: " + err);
      return;
    }
    st.sent += count;
    auto done = now_ns();
    calls.enqueue_us.push_back((done - t_send) / 1000);
    auto last = st.last_send_done_ns.load();
    while (last < done && !st.last_send_done_ns.compare_exchange_weak(last, done)) {
    }
  }
}

/// A received batch on its way to being acked.
struct to_ack {
  std::vector<received> batch;
  std::vector<std::int64_t> sent_at;  ///< per message: its send time, from its body
  std::int64_t received_ns = 0;
};

/// What one consumer measures: enqueue-to-delivery and enqueue-to-ack per acked message, and
/// its calls.
struct consumer_log {
  std::vector<std::int64_t> deliver_us;
  std::vector<std::int64_t> ack_us;
  call_log calls;
};

/// Acks `a` on `t` and counts the outcome: duplicates, failed acks, latencies.
bool settle(shared_state& st, transport& t, const to_ack& a, consumer_log& log) {
  std::vector<bool> ok;
  std::string err;
  auto t_ask = now_ns();
  if (!t.ack(a.batch, ok, err)) {
    st.fail("ack failed: " + err);
    return false;
  }
  auto t_ack = now_ns();
  log.calls.ack_us.push_back((t_ack - t_ask) / 1000);
  for (std::size_t i = 0; i < a.batch.size(); ++i) {
    if (!ok[i]) {
      ++st.failed_acks;
      continue;
    }
    auto f = parse_body(a.batch[i].body);
    if (st.acked[f.n].exchange(1) != 0) {
      ++st.duplicates;
      continue;
    }
    log.deliver_us.push_back((a.received_ns - a.sent_at[i]) / 1000);
    log.ack_us.push_back((t_ack - a.sent_at[i]) / 1000);
    ++st.acked_distinct;
  }
  st.last_ack_ns = t_ack;
  st.acks_advanced();
  return true;
}

/// --ack=async: one consumer's acks, on a connection of their own, one batch at a time, while
/// the consumer receives its next batch (as with Pulsar's acknowledgeAsync or Kafka's
/// commitAsync). A consumer holds at most two batches: the one it is acking and the one it
/// received last; it hands that one over only once the previous ack is answered.
class async_acker {
 public:
  async_acker(shared_state& st, transport& t, consumer_log& log)
      : st_(st), t_(t), log_(log), thread_([this] { run(); }) {}
  ~async_acker() {
    {
      std::lock_guard<std::mutex> g(mtx_);
      closing_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  async_acker(const async_acker&) = delete;
  async_acker& operator=(const async_acker&) = delete;

  /// Waits until the previous batch is acked, then hands `a` over.
  void hand(to_ack a) {
    std::unique_lock<std::mutex> g(mtx_);
    cv_.wait(g, [this] { return !next_ && !busy_; });
    next_ = std::move(a);
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> g(mtx_);
    for (;;) {
      cv_.wait(g, [this] { return next_ || closing_; });
      if (!next_) return;  // closing with nothing left
      auto a = std::move(*next_);
      next_.reset();
      busy_ = true;
      g.unlock();
      settle(st_, t_, a, log_);
      g.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  shared_state& st_;
  transport& t_;
  consumer_log& log_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::optional<to_ack> next_;
  bool busy_ = false;
  bool closing_ = false;
  std::thread thread_;
};

/// Receives batches and acks each one whole: on the same connection after each receive, or on
/// `ack_conn` while receiving the next (--ack=async).
void consumer(shared_state& st, transport& t, transport* ack_conn, consumer_log& log) {
  const auto& o = st.opt;
  std::optional<async_acker> acker;
  if (ack_conn != nullptr) acker.emplace(st, *ack_conn, log);
  while (!st.stop && st.acked_distinct.load() < o.messages) {
    to_ack a;
    std::string err;
    auto t_ask = now_ns();
    if (!t.receive(o.receive_max, o.wait_ms, a.batch, err)) {
      st.fail("receive failed: " + err);
      return;
    }
    a.received_ns = now_ns();
    if (a.batch.empty()) {
      ++log.calls.empty_receives;
      continue;
    }
    log.calls.receive_us.push_back((a.received_ns - t_ask) / 1000);
    log.calls.received += a.batch.size();
    for (const auto& m : a.batch) {
      auto f = parse_body(m.body);
      if (!f.ok || f.n >= o.messages) {
        st.fail("a received body is not one of this run's: " + m.body.substr(0, 40));
        return;
      }
      if (f.group >= 0) {
        auto prev =
            st.last_in[static_cast<std::size_t>(f.group)].exchange(static_cast<std::int64_t>(f.n));
        // A redelivery repeats the number; a lower one means an overtaking message.
        if (prev > static_cast<std::int64_t>(f.n)) ++st.order_violations;
      }
      a.sent_at.push_back(f.t_ns);
    }
    if (acker) {
      acker->hand(std::move(a));
    } else if (!settle(st, t, a, log)) {
      return;
    }
  }
}

json::object percentiles(std::vector<std::int64_t>& v) {
  json::object o;
  o["count"] = v.size();
  if (v.empty()) return o;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
  };
  o["p50_us"] = at(0.50);
  o["p99_us"] = at(0.99);
  o["p999_us"] = at(0.999);
  o["max_us"] = v.back();
  return o;
}

/// --mode=backlog: fills the queue with `messages` waiting messages over the producer's
/// `--in-flight` connections, consumes nothing, and reports laneqd's RSS before and after: what
/// a deep backlog holds in memory (benchmarks/README.md, "Backlog memory").
int run_backlog(options o, const std::function<std::unique_ptr<transport>()>& make,
                const std::function<void()>& drop_queue) {
  o.max_backlog = 0;  // nothing is acked: the producer must not wait for acks
  shared_state st(o);
  std::vector<std::unique_ptr<transport>> conns;
  for (std::uint32_t i = 0; i < o.in_flight; ++i) conns.push_back(make());
  std::vector<call_log> calls(o.in_flight);
  auto before = sample_process(o.server_pid);
  auto t0 = now_ns();
  std::vector<std::thread> threads;
  st.threads_running = o.in_flight;
  for (std::uint32_t i = 0; i < o.in_flight; ++i)
    threads.emplace_back([&, i] {
      producer(st, *conns[i], t0, i, calls[i]);
      st.thread_ended();
    });
  while (!st.threads_ended_within(std::chrono::seconds(1)))
    if (o.progress) {
      auto s = sample_process(o.server_pid);
      std::fprintf(stderr, "\r[loadgen backlog] sent %" PRIu64 "  server rss %d MB   ",
                   st.sent.load(), static_cast<int>(s.rss_mb));
    }
  for (auto& t : threads) t.join();
  if (o.progress) std::fprintf(stderr, "\n");
  auto after = sample_process(o.server_pid);
  auto enq_s = static_cast<double>(st.last_send_done_ns - t0) / 1e9;
  conns.clear();
  // How long laneqd takes to answer the queue's deletion, with everything still waiting in it.
  double drop_s = 0;
  if (!o.keep) {
    auto d0 = now_ns();
    drop_queue();
    drop_s = static_cast<double>(now_ns() - d0) / 1e9;
  }

  call_log all;
  for (auto& c : calls)
    all.enqueue_us.insert(all.enqueue_us.end(), c.enqueue_us.begin(), c.enqueue_us.end());
  auto sent = st.sent.load();
  bool ok = st.first_error.empty() && sent == o.messages && before.ok && after.ok;
  json::object out;
  out["ok"] = ok;
  if (!st.first_error.empty()) out["error"] = st.first_error;
  if (!before.ok || !after.ok) out["error"] = "cannot read /proc/" + std::to_string(o.server_pid);
  out["mode"] = "backlog";
  out["transport"] = o.transport;
  out["queue"] = o.queue;
  out["messages"] = o.messages;
  out["body_bytes"] = o.size;
  out["groups"] = o.groups;
  out["durability"] = o.durability;
  out["producer_batch"] = o.batch;
  out["producer_in_flight"] = o.in_flight;
  out["enqueued"] = sent;
  out["enqueue_rate"] = enq_s > 0 ? static_cast<double>(sent) / enq_s : 0.0;
  out["duration_s"] = enq_s;
  if (!o.keep) out["drop_seconds"] = drop_s;
  out["enqueue"] = percentiles(all.enqueue_us);
  json::object srv;
  srv["pid"] = o.server_pid;
  srv["rss_mb_before"] = before.rss_mb;
  srv["rss_mb_after"] = after.rss_mb;
  srv["rss_mb_hwm"] = after.hwm_mb;
  srv["rss_bytes_per_message"] =
      sent > 0 ? (after.rss_mb - before.rss_mb) * 1024 * 1024 / static_cast<double>(sent) : 0.0;
  out["server"] = std::move(srv);
  std::cout << json::serialize(out) << std::endl;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  std::string err;
  if (!parse_options(argc, argv, o, err)) {
    std::cerr << "laneq_loadgen: " << err << "\n";
    usage(std::cerr);
    return 2;
  }
  if (o.mode == "backlog" && o.server_pid == 0) {
    std::cerr << "laneq_loadgen: --mode=backlog needs --server-pid (laneqd's RSS is read from "
                 "/proc/PID/status)\n";
    return 2;
  }
  if (o.queue.empty())
    o.queue = "loadgen-" + std::to_string(getpid()) + "-" + std::to_string(now_ns() % 1'000'000);
  json::object spec;
  spec["delivery_durability"] = o.durability;
  if (o.groups > 0)
    spec["ordering"] =
        json::object{{"mode", "key"}, {"key", json::array{json::object{{"header", "g"}}}}};
  auto spec_text = json::serialize(spec);

  // Both transports: HTTP for setup checks, CAF when asked.
  auto ep = laneq::client::parse_url(o.url);
  if (!ep) {
    std::cerr << "laneq_loadgen: " << to_string(ep.err()) << "\n";
    return 2;
  }
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::laneq>();
  cfg.add_message_types<caf::id_block::laneq_remote>();
  cfg.load<caf::io::middleman>();
  laneq::tune_scheduler(cfg, 2);
  caf::actor_system sys{cfg};
  laneq::queue_api caf_queue;
  laneq::scoped_admin_actor caf_admin;
  if (o.transport == "caf") {
    // --token logs in over CAF as it authenticates over HTTP.
    auto admin = laneq::connect_to_laneqd(sys, o.caf_host, o.caf_port, o.token);
    if (!admin) {
      std::cerr << "laneq_loadgen: laneqd's CAF port " << o.caf_host << ":" << o.caf_port << ": "
                << laneq::to_string(admin.err()) << "\n";
      return admin.err().code == laneq::errc::unauthorized ? 1 : 3;
    }
    caf_admin = std::move(admin).value();
    caf::scoped_actor self{sys};
    bool ok = false;
    self->request(caf_admin, std::chrono::seconds(30), laneq::create_atom_v, o.queue, spec_text)
        .receive(
            [&](laneq::queue_api q, bool) {
              caf_queue = std::move(q);
              ok = true;
            },
            [&](caf::error& e) { err = laneq::to_string(laneq::from_caf(e)); });
    if (!ok) {
      std::cerr << "laneq_loadgen: create " << o.queue << ": " << err << "\n";
      return 1;
    }
  } else {
    laneq::client::http_client c(ep.value(), http_options(o, std::chrono::milliseconds(30'000)));
    auto r = c.create_queue(o.queue, spec);
    if (!r) {
      std::cerr << "laneq_loadgen: create " << o.queue << ": " << to_string(r.err()) << "\n";
      return r.err().kind == laneq::client::failure_kind::unreachable ? 3 : 1;
    }
  }
  auto make = [&]() -> std::unique_ptr<transport> {
    if (o.transport == "caf") return std::make_unique<caf_transport>(sys, caf_queue);
    return std::make_unique<http_transport>(ep.value(), o);
  };
  auto drop_queue = [&] {
    if (o.transport == "caf") {
      caf::scoped_actor self{sys};
      self->request(caf_admin, std::chrono::seconds(30), laneq::drop_atom_v, o.queue, true)
          .receive([](caf::ok_atom) {}, [](caf::error&) {});
    } else {
      laneq::client::http_client c(ep.value(), http_options(o, std::chrono::milliseconds(30'000)));
      (void)c.delete_queue(o.queue, /*force=*/true);
    }
  };
  if (o.mode == "backlog") return run_backlog(o, make, drop_queue);

  auto machine = probe_machine();
  shared_state st(o);
  auto load_start = loadavg();
  auto srv0 = sample_process(o.server_pid);
  auto self0 = sample_process(getpid());
  double rss_max = srv0.rss_mb;
  std::vector<consumer_log> logs(o.consumers);
  for (auto& l : logs) {
    l.deliver_us.reserve(o.messages / o.consumers + 1);
    l.ack_us.reserve(o.messages / o.consumers + 1);
  }
  std::vector<call_log> producer_calls(o.in_flight);
  // Connections: the producer's slots, then the consumers', then (--ack=async) their acks'.
  std::vector<std::unique_ptr<transport>> conns;
  for (std::uint32_t i = 0; i < o.in_flight + o.consumers * (o.async_ack ? 2 : 1); ++i)
    conns.push_back(make());
  auto t0 = now_ns();
  std::vector<std::thread> threads;
  st.threads_running = o.in_flight + o.consumers;
  for (std::uint32_t i = 0; i < o.in_flight; ++i)
    threads.emplace_back([&, i] {
      producer(st, *conns[i], t0, i, producer_calls[i]);
      st.thread_ended();
    });
  for (std::uint32_t i = 0; i < o.consumers; ++i)
    threads.emplace_back([&, i] {
      auto* ack_conn = o.async_ack ? conns[o.in_flight + o.consumers + i].get() : nullptr;
      consumer(st, *conns[o.in_flight + i], ack_conn, logs[i]);
      st.thread_ended();
    });

  // Progress, stall detection and server sampling on this thread.
  std::uint64_t prev_acked = 0;
  auto last_progress = clock_type::now();
  auto prev_tick = clock_type::now();
  std::uint64_t prev_tick_acked = 0;
  while (!st.stop && st.acked_distinct.load() < o.messages) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto now = clock_type::now();
    auto acked = st.acked_distinct.load();
    if (acked != prev_acked) {
      prev_acked = acked;
      last_progress = now;
    } else if (now - last_progress > std::chrono::seconds(o.stall_s)) {
      st.fail("stalled: no ack for " + std::to_string(o.stall_s) + " s at " +
              std::to_string(acked) + " of " + std::to_string(o.messages));
    }
    if (now - prev_tick >= std::chrono::seconds(1)) {
      auto s = sample_process(o.server_pid);
      rss_max = std::max(rss_max, s.rss_mb);
      auto secs = std::chrono::duration<double>(now - prev_tick).count();
      if (o.progress) {
        std::fprintf(
            stderr,
            "\r[loadgen %s] sent %" PRIu64 "  acked %" PRIu64 " (%.0f msg/s)  backlog %" PRIu64
            "%s   ",
            o.transport.c_str(), st.sent.load(), acked,
            static_cast<double>(acked - prev_tick_acked) / secs, st.sent.load() - acked,
            s.ok ? (" server rss " + std::to_string(static_cast<int>(s.rss_mb)) + " MB").c_str()
                 : "");
      }
      prev_tick = now;
      prev_tick_acked = acked;
    }
  }
  st.stop = true;
  st.acks_advanced();
  if (!st.threads_ended_within(std::chrono::seconds(o.stall_s))) {
    // A thread is still waiting on a call laneqd never answered (a CAF call has no timeout of its
    // own). Its log may still change, so the full report cannot be built: say what is known and
    // leave without the threads.
    json::object out;
    out["ok"] = false;
    out["error"] = (st.first_error.empty() ? std::string{"the run ended"} : st.first_error) +
                   "; a call was still unanswered " + std::to_string(o.stall_s) + " s later";
    out["transport"] = o.transport;
    out["messages"] = o.messages;
    out["acked"] = st.acked_distinct.load();
    std::cout << json::serialize(out) << std::endl;
    std::_Exit(1);
  }
  for (auto& t : threads) t.join();
  if (o.progress) std::fprintf(stderr, "\n");
  auto srv1 = sample_process(o.server_pid);
  auto self1 = sample_process(getpid());
  rss_max = std::max(rss_max, srv1.rss_mb);
  auto load_end = loadavg();
  conns.clear();

  // Clean up the queue unless asked to keep it.
  if (!o.keep) drop_queue();

  std::vector<std::int64_t> all_deliver, all_ack;
  for (auto& l : logs) {
    all_deliver.insert(all_deliver.end(), l.deliver_us.begin(), l.deliver_us.end());
    all_ack.insert(all_ack.end(), l.ack_us.begin(), l.ack_us.end());
  }
  auto acked = st.acked_distinct.load();
  bool ok = st.first_error.empty() && acked == o.messages && st.order_violations == 0;
  auto enq_s = static_cast<double>(st.last_send_done_ns - t0) / 1e9;
  auto e2e_s = static_cast<double>(st.last_ack_ns - t0) / 1e9;
  json::object out;
  out["ok"] = ok;
  if (!st.first_error.empty()) out["error"] = st.first_error;
  out["transport"] = o.transport;
  out["queue"] = o.queue;
  out["messages"] = o.messages;
  out["body_bytes"] = o.size;
  out["groups"] = o.groups;
  out["consumers"] = o.consumers;
  out["producer_batch"] = o.batch;
  out["producer_in_flight"] = o.in_flight;
  out["receive_max"] = o.receive_max;
  out["offered_rate"] = o.rate;
  out["durability"] = o.durability;
  out["ack"] = o.async_ack ? "async" : "sync";
  out["acked"] = acked;
  out["duplicates"] = st.duplicates.load();
  out["failed_acks"] = st.failed_acks.load();
  out["order_violations"] = st.order_violations.load();
  out["enqueue_rate"] = enq_s > 0 ? static_cast<double>(st.sent.load()) / enq_s : 0.0;
  out["end_to_end_rate"] = e2e_s > 0 ? static_cast<double>(acked) / e2e_s : 0.0;
  out["duration_s"] = e2e_s;
  out["enqueue_to_delivery"] = percentiles(all_deliver);
  out["enqueue_to_ack"] = percentiles(all_ack);
  {
    call_log all;
    auto calls = std::move(producer_calls);
    for (auto& l : logs) calls.push_back(std::move(l.calls));
    for (auto& c : calls) {
      all.enqueue_us.insert(all.enqueue_us.end(), c.enqueue_us.begin(), c.enqueue_us.end());
      all.receive_us.insert(all.receive_us.end(), c.receive_us.begin(), c.receive_us.end());
      all.ack_us.insert(all.ack_us.end(), c.ack_us.begin(), c.ack_us.end());
      all.empty_receives += c.empty_receives;
      all.received += c.received;
    }
    json::object c;
    c["enqueue"] = percentiles(all.enqueue_us);
    c["receive"] = percentiles(all.receive_us);
    c["ack"] = percentiles(all.ack_us);
    c["empty_receives"] = all.empty_receives;
    c["messages_per_receive"] =
        all.receive_us.empty()
            ? 0.0
            : static_cast<double>(all.received) / static_cast<double>(all.receive_us.size());
    out["calls"] = std::move(c);
  }
  // CPU per acked message: what each message costs, whatever the run's length or rate. On a shared
  // VM it still rises when the host is busy (compare "machine").
  auto per_message_us = [&](double cpu_s) {
    return acked > 0 ? cpu_s * 1e6 / static_cast<double>(acked) : 0.0;
  };
  if (srv0.ok && srv1.ok) {
    json::object s;
    s["pid"] = o.server_pid;
    s["cpu_s"] = srv1.cpu_s - srv0.cpu_s;
    s["cpu_cores"] = e2e_s > 0 ? (srv1.cpu_s - srv0.cpu_s) / e2e_s : 0.0;
    s["cpu_us_per_message"] = per_message_us(srv1.cpu_s - srv0.cpu_s);
    s["rss_mb_end"] = srv1.rss_mb;
    s["rss_mb_max_sampled"] = rss_max;
    s["rss_mb_hwm"] = srv1.hwm_mb;
    out["server"] = std::move(s);
  }
  if (self0.ok && self1.ok) {
    // This process's own share of the machine: on a small host the load generator's JSON work
    // competes with laneqd for the same cores.
    json::object s;
    s["cpu_s"] = self1.cpu_s - self0.cpu_s;
    s["cpu_cores"] = e2e_s > 0 ? (self1.cpu_s - self0.cpu_s) / e2e_s : 0.0;
    s["cpu_us_per_message"] = per_message_us(self1.cpu_s - self0.cpu_s);
    out["loadgen"] = std::move(s);
  }
  out["loadavg_start"] = load_start;
  out["loadavg_end"] = load_end;
  out["machine"] = std::move(machine);
  std::cout << json::serialize(out) << std::endl;
  return ok ? 0 : 1;
}
