// laneq_engine_bench: drives an in-process broker (in memory, or on RocksDB with --data-dir) with
// the blocking API and prints JSON. Durable runs measure docs/design/persistence.md (group commit,
// memory follows live groups) and recovery.md (restart).
#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "laneq/actors/broker.hpp"
#include "laneq/sharding.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// What a client actor of the benchmark sends itself to take its next step.
using next_atom = caf::atom_constant<caf::atom("next")>;

// -- options -------------------------------------------------------------------------------------

const std::vector<std::string> all_scenarios{"unordered", "groups_1000", "ordered",
                                             "fairness_skewed", "live_groups"};
/// Scenarios that run only when named: `restart` needs --data-dir.
const std::vector<std::string> extra_scenarios{"restart", "json_key_1kib", "header_key_1kib"};

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
  std::uint32_t producers = 1;
  /// Empty: in-memory brokers. Otherwise each scenario opens a fresh RocksDB directory below it.
  std::string data_dir;
  bool sync = true;
  bool durable_delivery = false;
  /// Shards of each scenario's queue (queue_spec::sharded; 1: one shard actor, no gateway).
  std::uint32_t shards = 1;
  /// The throughput scenarios' producers and consumers are event-based actors rather than
  /// threads calling through the blocking API.
  bool actor_clients = false;
  std::size_t group_window = laneq::limits::group_window_default;
  std::size_t group_window_max = laneq::limits::group_window_max_default;
  std::size_t window_budget_mb = laneq::limits::window_budget_bytes_default >> 20;
  std::uint64_t restart_messages = 1'000'000;
  std::uint32_t restart_producers = 8;
  std::uint64_t restart_sample = 10'000;
  bool keep_data = false;
};

constexpr std::size_t body_bytes = 256;
constexpr std::size_t live_body_bytes = 8;
constexpr std::uint32_t live_batch = 1000;
constexpr std::uint32_t restart_groups = 1000;
constexpr std::uint32_t restart_batch = 1000;
/// Ids remembered per group while filling the restart store, to check the drain after the
/// restart message by message (beyond that depth it checks increasing ids only).
constexpr std::size_t restart_check_depth = 64;

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
         "  --producers=N           producer threads of the throughput scenarios (default 1)\n"
         "  --data-dir=DIR          run on RocksDB: each scenario gets a fresh directory below "
         "DIR,\n"
         "                          removed afterwards (default: in-memory brokers)\n"
         "  --sync=true|false       broker_options::sync (default true; with --data-dir)\n"
         "  --delivery=fast|durable delivery durability of the queues (default fast)\n"
         "  --shards=N              shards of each scenario's queue (default 1)\n"
         "  --clients=threads|actors producers and consumers: threads on the blocking API, or\n"
         "                          event-based actors (default threads)\n"
         "  --group-window=N        messages a group holds in memory "
         "(broker_options::group_window,\n"
         "                          default 64; with --data-dir)\n"
         "  --group-window-max=N    messages a group may hold while the window budget has "
         "room\n"
         "                          (broker_options::group_window_max, default 1024)\n"
         "  --window-budget-mb=N    MiB all group windows may hold before groups stop growing\n"
         "                          (broker_options::window_budget_bytes, default 256; 0: "
         "never)\n"
         "  --restart-messages=N    messages stored before the restart scenario (default "
         "1000000)\n"
         "  --restart-producers=N   producer threads filling the restart store (default 8)\n"
         "  --restart-sample=N      messages drained after the restart (default 10000)\n"
         "  --keep-data=true|false  keep the scenario directories (default false)\n"
         "Scenarios restart (durable only), json_key_1kib and header_key_1kib run only when named "
         "in --scenarios.\n"
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
    static const std::vector<std::string_view> ours{"scenarios",         "messages",
                                                    "ordered-messages",  "groups",
                                                    "consumers",         "batch",
                                                    "receive-max",       "wait-us",
                                                    "max-backlog",       "stall-s",
                                                    "teardown-limit-s",  "producers",
                                                    "data-dir",          "sync",
                                                    "delivery",          "shards",
                                                    "clients",           "restart-messages",
                                                    "restart-producers", "restart-sample",
                                                    "keep-data",         "group-window",
                                                    "group-window-max",  "window-budget-mb"};
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
        if (std::find(all_scenarios.begin(), all_scenarios.end(), s) == all_scenarios.end() &&
            std::find(extra_scenarios.begin(), extra_scenarios.end(), s) == extra_scenarios.end()) {
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
    } else if (name == "producers") {
      ok = parse_number(value, opt.producers) && opt.producers > 0 && opt.producers <= 256;
    } else if (name == "data-dir") {
      opt.data_dir = std::string{value};
      ok = !opt.data_dir.empty();
    } else if (name == "sync" || name == "keep-data") {
      auto& flag = name == "sync" ? opt.sync : opt.keep_data;
      ok = value == "true" || value == "false";
      flag = value == "true";
    } else if (name == "group-window" || name == "group-window-max") {
      auto& n = name == "group-window" ? opt.group_window : opt.group_window_max;
      ok = parse_number(value, n) && n >= 2 && n <= 1'000'000;
    } else if (name == "window-budget-mb") {
      ok = parse_number(value, opt.window_budget_mb) && opt.window_budget_mb <= (1u << 20);
    } else if (name == "clients") {
      ok = value == "threads" || value == "actors";
      opt.actor_clients = value == "actors";
    } else if (name == "shards") {
      ok = parse_number(value, opt.shards) && opt.shards >= 1 &&
           opt.shards <= laneq::limits::queue_shards_max;
    } else if (name == "delivery") {
      ok = value == "fast" || value == "durable";
      opt.durable_delivery = value == "durable";
    } else if (name == "restart-messages") {
      ok = parse_number(value, opt.restart_messages) && opt.restart_messages >= restart_groups;
    } else if (name == "restart-producers") {
      ok = parse_number(value, opt.restart_producers) && opt.restart_producers > 0 &&
           opt.restart_producers <= 256;
    } else if (name == "restart-sample") {
      ok = parse_number(value, opt.restart_sample) && opt.restart_sample > 0;
    }
    if (!ok) {
      std::cerr << "laneq_engine_bench: bad value '" << value << "' for --" << name << "\n";
      return false;
    }
  }
  if (opt.data_dir.empty() &&
      std::find(opt.scenarios.begin(), opt.scenarios.end(), "restart") != opt.scenarios.end()) {
    std::cerr << "laneq_engine_bench: scenario restart needs --data-dir\n";
    return false;
  }
  if (opt.restart_sample > opt.restart_messages) opt.restart_sample = opt.restart_messages;
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

// -- durable runs: data directories, store and disk counters ------------------------------------

/// The I/O counters of /proc/self/io (all threads of the process, RocksDB's included).
struct io_counters {
  std::uint64_t wchar = 0;        ///< bytes passed to write(2) and friends
  std::uint64_t write_bytes = 0;  ///< bytes the process caused to be sent to storage (page cache
                                  ///< pages dirtied, counted again when dirtied again)
  std::uint64_t read_bytes = 0;   ///< bytes fetched from storage (not from the page cache)
};

io_counters read_proc_io() {
  io_counters c;
  std::ifstream in{"/proc/self/io"};
  std::string name;
  std::uint64_t v = 0;
  while (in >> name >> v) {
    if (name == "wchar:") c.wchar = v;
    if (name == "write_bytes:") c.write_bytes = v;
    if (name == "read_bytes:") c.read_bytes = v;
  }
  return c;
}

/// Bytes in the files below `dir` (what the store occupies on disk).
std::uint64_t directory_bytes(const std::filesystem::path& dir) {
  std::error_code ec;
  std::uint64_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator{dir, ec};
       !ec && it != std::filesystem::recursive_directory_iterator{}; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      auto n = it->file_size(size_ec);
      if (!size_ec) total += n;
    }
  }
  return total;
}

/// fdatasync of a small append in `dir`, measured just before a durable scenario: how fast the
/// disk syncs right now (other jobs on the machine change it).
struct sync_probe_result {
  std::uint32_t samples = 0;
  std::int64_t p50_us = 0;
  std::int64_t p99_us = 0;
  double per_s = 0;  ///< samples / their total time
};

sync_probe_result probe_fdatasync(const std::filesystem::path& dir, std::uint32_t samples = 100) {
  sync_probe_result r;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto path = dir / "fdatasync-probe";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return r;
  std::vector<std::int64_t> us;
  std::string block(4096, 'p');
  auto total_start = steady::now();
  for (std::uint32_t i = 0; i < samples; ++i) {
    auto t0 = steady::now();
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) break;
    if (::fdatasync(fd) != 0) break;
    us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - t0).count());
  }
  auto total = std::chrono::duration<double>(steady::now() - total_start).count();
  ::close(fd);
  std::filesystem::remove(path, ec);
  if (us.empty()) return r;
  std::sort(us.begin(), us.end());
  auto at = [&us](double q) {
    return us[static_cast<std::size_t>(q * static_cast<double>(us.size() - 1))];
  };
  r.samples = static_cast<std::uint32_t>(us.size());
  r.p50_us = at(0.50);
  r.p99_us = at(0.99);
  r.per_s = total > 0 ? static_cast<double>(us.size()) / total : 0;
  return r;
}

/// Drops the files below `dir` from the page cache (written back first), so that the next open
/// reads them from the disk: a cold restart, without touching other processes' cache.
/// Returns the bytes advised away.
std::uint64_t evict_from_page_cache(const std::filesystem::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator{dir, ec};
       !ec && it != std::filesystem::recursive_directory_iterator{}; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    if (::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0) total += it->file_size(type_ec);
    ::close(fd);
  }
  return total;
}

/// A fresh directory for one scenario below --data-dir (an old one of the same name is removed).
std::filesystem::path scenario_dir(const options& opt, const std::string& scenario) {
  auto dir = std::filesystem::path{opt.data_dir} /
             ("laneq-bench-" + std::to_string(::getpid()) + "-" + scenario);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return dir;
}

void remove_scenario_dir(const options& opt, const std::filesystem::path& dir) {
  if (opt.keep_data || dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec)
    std::cerr << "laneq_engine_bench: could not remove " << dir << ": " << ec.message() << "\n";
}

/// An in-memory broker, or one on RocksDB in `dir` (broker::open: recovers what is stored).
laneq::result<std::unique_ptr<laneq::broker>> open_broker(
    caf::actor_system& sys, const options& opt, const std::filesystem::path& dir,
    laneq::duration reclaim_grace = laneq::limits::reclaim_grace_default) {
  if (opt.data_dir.empty()) return std::make_unique<laneq::broker>(sys);
  laneq::broker_options bo;
  bo.data_dir = dir.string();
  bo.sync = opt.sync;
  bo.reclaim_grace = reclaim_grace;
  bo.group_window = opt.group_window;
  bo.group_window_max = opt.group_window_max;
  bo.window_budget_bytes = opt.window_budget_mb << 20;
  return laneq::broker::open(sys, std::move(bo));
}

/// The scenario's queue spec with the delivery durability of --delivery and the shards of
/// --shards (not for a queue that is one ordering group, which one shard holds).
laneq::queue_spec with_delivery(laneq::queue_spec spec, const options& opt) {
  if (opt.durable_delivery) spec.delivery(laneq::delivery_durability::durable);
  if (opt.shards > 1 && spec.ordering() != laneq::ordering_mode::queue) spec.sharded(opt.shards);
  return spec;
}

/// What the store and the disk did during one measured interval.
struct store_report {
  laneq::store_stats delta;   ///< after - before (histogram bucket by bucket)
  io_counters io;             ///< after - before
  io_counters io_with_close;  ///< until the broker closed its database (memtable flush included)
  bool io_with_close_measured = false;
  std::uint64_t disk_bytes = 0;  ///< size of the data directory at the end of the interval
  sync_probe_result disk_sync;   ///< fdatasync probe just before the interval
  bool measured = false;
  std::string error;
};

laneq::store_stats stats_delta(const laneq::store_stats& a, const laneq::store_stats& b) {
  laneq::store_stats d;
  d.batches = b.batches - a.batches;
  d.writes = b.writes - a.writes;
  d.ops = b.ops - a.ops;
  d.bytes = b.bytes - a.bytes;
  d.syncs = b.syncs - a.syncs;
  d.failed_batches = b.failed_batches - a.failed_batches;
  d.reopens = b.reopens - a.reopens;
  d.batch_histogram.resize(b.batch_histogram.size());
  for (std::size_t k = 0; k < b.batch_histogram.size(); ++k)
    d.batch_histogram[k] =
        b.batch_histogram[k] - (k < a.batch_histogram.size() ? a.batch_histogram[k] : 0);
  d.degraded = b.degraded;
  d.reason = b.reason;
  return d;
}

io_counters io_delta(const io_counters& a, const io_counters& b) {
  return {b.wchar - a.wchar, b.write_bytes - a.write_bytes, b.read_bytes - a.read_bytes};
}

/// Starts measuring the store of `b`; `finish` closes the interval.
class store_probe {
 public:
  void start(const laneq::broker& b, const std::filesystem::path& dir) {
    disk_sync_ = probe_fdatasync(dir);
    auto st = b.storage_stats();
    if (st)
      before_ = st.value();
    else
      error_ = "storage_stats: " + laneq::to_string(st.err());
    io_before_ = read_proc_io();
  }
  store_report finish(const laneq::broker& b, const std::filesystem::path& dir) {
    store_report r;
    r.io = io_delta(io_before_, read_proc_io());
    auto st = b.storage_stats();
    if (!st) error_ = "storage_stats: " + laneq::to_string(st.err());
    r.error = error_;
    r.measured = error_.empty();
    if (st) r.delta = stats_delta(before_, st.value());
    r.disk_bytes = directory_bytes(dir);
    r.disk_sync = disk_sync_;
    return r;
  }
  /// After the broker is gone: its database is closed and its memtables flushed.
  void closed(store_report& r) const {
    r.io_with_close = io_delta(io_before_, read_proc_io());
    r.io_with_close_measured = true;
  }

 private:
  laneq::store_stats before_;
  io_counters io_before_;
  sync_probe_result disk_sync_;
  std::string error_;
};

/// An incompressible body (LZ4 would shrink a constant one to nothing and flatter the disk
/// numbers): splitmix64 over the message index.
void fill_random_body(std::string& body, std::uint64_t index) {
  body.resize(body_bytes);
  std::uint64_t x = index * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (std::size_t i = 0; i < body_bytes; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(body.data() + i, &z, std::min<std::size_t>(8, body_bytes - i));
  }
}

void write_store(json_writer& w, const options& opt, const store_report& r, std::uint64_t messages,
                 double seconds) {
  w.key("store");
  w.begin_object();
  w.field("sync", opt.sync);
  w.field("delivery", opt.durable_delivery ? "durable" : "fast");
  if (!r.measured) {
    w.field("error", r.error);
    w.end_object();
    return;
  }
  const auto& d = r.delta;
  auto per = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  auto msgs = static_cast<double>(messages);
  w.field("batches", d.batches);
  w.field("writes", d.writes);
  w.field("ops", d.ops);
  w.field("bytes", d.bytes);
  w.field("syncs", d.syncs);
  w.field("failed_batches", d.failed_batches);
  w.field("fsyncs_per_s", per(static_cast<double>(d.syncs), seconds));
  w.field("batches_per_s", per(static_cast<double>(d.batches), seconds));
  w.field("writes_per_batch", per(static_cast<double>(d.writes), static_cast<double>(d.batches)));
  w.field("ops_per_batch", per(static_cast<double>(d.ops), static_cast<double>(d.batches)));
  w.field("msgs_per_sync", per(msgs, static_cast<double>(d.syncs)));
  w.key("batch_histogram");  // writes per batch -> batches
  w.begin_object();
  for (std::size_t k = 0; k < d.batch_histogram.size(); ++k) {
    if (d.batch_histogram[k] == 0) continue;
    auto lo = std::uint64_t{1} << k;
    auto hi = (std::uint64_t{1} << (k + 1)) - 1;
    w.field(lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi),
            d.batch_histogram[k]);
  }
  w.end_object();
  w.field("store_bytes_per_msg", per(static_cast<double>(d.bytes), msgs));
  w.field("syscall_write_bytes_per_msg", per(static_cast<double>(r.io.wchar), msgs));
  w.field("disk_write_bytes_per_msg", per(static_cast<double>(r.io.write_bytes), msgs));
  if (r.io_with_close_measured)
    w.field("disk_write_bytes_per_msg_with_close",
            per(static_cast<double>(r.io_with_close.write_bytes), msgs));
  w.field("disk_read_bytes", r.io.read_bytes);
  w.field("data_dir_bytes_at_end", r.disk_bytes);
  w.key("fdatasync_probe");  // 4 KiB append + fdatasync, just before the scenario
  w.begin_object();
  w.field("samples", r.disk_sync.samples);
  w.field("p50_us", r.disk_sync.p50_us);
  w.field("p99_us", r.disk_sync.p99_us);
  w.field("per_s", r.disk_sync.per_s);
  w.end_object();
  w.field("degraded", d.degraded);
  w.end_object();
}

// -- throughput scenarios ------------------------------------------------------------------------

/// A failure shared by the threads of one scenario: the first one wins.
class failure_flag {
 public:
  /// Records why the run failed (the first reason only); returns false, so a check can
  /// `return failure_.set(...)`.
  bool set(std::string why) {
    std::lock_guard<std::mutex> guard{mu_};
    if (failed_.load()) return false;
    why_ = std::move(why);
    failed_.store(true);
    return false;
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
  std::size_t body = body_bytes;  // bytes of every body (`shape` may write its own)
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
  std::optional<store_report> store;  // with --data-dir
  bool verified = false;
  std::string failure;
};

class throughput_run {
 public:
  throughput_run(caf::actor_system& sys, const options& opt, throughput_scenario sc)
      : sys_(sys), opt_(opt), sc_(std::move(sc)), acks_(opt.shards * (sc_.messages + 1)) {
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
    const bool durable = !opt_.data_dir.empty();
    auto dir = durable ? scenario_dir(opt_, sc_.name) : std::filesystem::path{};
    store_probe probe;
    {
      auto opened = open_broker(sys_, opt_, dir);
      if (!opened) {
        r.failure = "open: " + laneq::to_string(opened.err());
        return r;
      }
      auto b = std::move(opened).value();
      ctx_ = b->context();
      laneq::blocking_admin admin{sys_, b->admin()};
      auto q = admin.create_queue(sc_.spec);
      if (!q) {
        r.failure = "create_queue: " + laneq::to_string(q.err());
        return r;
      }
      queue_ = q.value();
      if (durable) probe.start(*b, dir);
      auto cpu_before = process_cpu_us();
      start_ = steady::now();
      last_progress_us_.store(0);
      std::vector<latencies> lat(opt_.consumers);
      if (opt_.actor_clients)
        run_actor_clients(lat);
      else
        run_thread_clients(lat);
      auto cpu_after = process_cpu_us();
      if (durable) r.store = probe.finish(*b, dir);
      record_counts(r, cpu_after - cpu_before, lat);
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
      if (r.failure.empty() && r.store && !r.store->measured) r.failure = r.store->error;
      if (r.failure.empty() && r.store && r.store->delta.failed_batches > 0)
        r.failure = std::to_string(r.store->delta.failed_batches) + " store batches failed";
      queue_ = nullptr;
      ctx_ = nullptr;
    }  // the broker stops its actors here (and waits for its store to close the database)
    if (r.store) probe.closed(*r.store);
    if (durable) remove_scenario_dir(opt_, dir);
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

  /// One consumer's latencies (enqueue to ack, microseconds): all, and with --split-by-fairness
  /// the big tenant's and the small ones'.
  struct latencies {
    std::vector<std::int64_t> all, big, small;
  };

  static latency_summary merge(std::vector<latencies>& parts,
                               std::vector<std::int64_t> latencies::*which) {
    std::vector<std::int64_t> all;
    std::size_t n = 0;
    for (const auto& p : parts) n += (p.*which).size();
    all.reserve(n);
    for (auto& p : parts) {
      all.insert(all.end(), (p.*which).begin(), (p.*which).end());
      (p.*which).clear();
      (p.*which).shrink_to_fit();
    }
    return summarize(all);
  }

  /// The run's counts, rates, CPU (`cpu_us`, of the whole process while the clients ran) and
  /// latencies into `r`.
  void record_counts(throughput_result& r, std::int64_t cpu_us, std::vector<latencies>& lat) {
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
    // CPU of the whole process (actors, producers, consumers) until every client is done; the
    // consumers' last long polls add a little idle time, no CPU.
    r.cpu_seconds = static_cast<double>(cpu_us) / 1e6;
    r.cpu_us_per_msg = r.acked > 0 ? static_cast<double>(cpu_us) / static_cast<double>(r.acked) : 0;
    r.latency = merge(lat, &latencies::all);
    if (sc_.split_by_fairness) {
      r.latency_big = merge(lat, &latencies::big);
      r.latency_small = merge(lat, &latencies::small);
    }
  }

  /// --producers and --consumers threads, each calling through a blocking_queue.
  void run_thread_clients(std::vector<latencies>& lat) {
    std::vector<std::thread> threads;
    for (std::uint32_t p = 0; p < opt_.producers; ++p) threads.emplace_back([this] { produce(); });
    for (std::uint32_t c = 0; c < opt_.consumers; ++c)
      threads.emplace_back([this, &l = lat[c]] { consume(l); });
    for (auto& t : threads) t.join();
  }

  /// --producers and --consumers event-based actors on CAF's scheduler, as a CAF application's
  /// own actors would call the queue: no thread of their own, nothing to wake but the scheduler's
  /// workers. This thread waits until they are done.
  void run_actor_clients(std::vector<latencies>& lat) {
    std::vector<caf::actor> clients;
    for (std::uint32_t p = 0; p < opt_.producers; ++p)
      clients.push_back(
          sys_.spawn([this](caf::event_based_actor* self) { return producer(self); }));
    for (std::uint32_t c = 0; c < opt_.consumers; ++c)
      clients.push_back(sys_.spawn(
          [this, &l = lat[c]](caf::event_based_actor* self) { return consumer(self, l); }));
    // A stalled run fails in the consumers' receives (--stall-s), so this ends.
    while (!done()) std::this_thread::sleep_for(1ms);
    for (auto& a : clients) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::scoped_actor waiter{sys_};
    for (auto& a : clients) waiter->wait_for(a);
  }

  /// The next `batch` message indexes' messages, or none once every message was taken.
  std::optional<std::vector<laneq::outgoing_message>> next_batch() {
    auto i = next_index_.fetch_add(opt_.batch);
    if (i >= sc_.messages) return std::nullopt;
    auto n = std::min<std::uint64_t>(opt_.batch, sc_.messages - i);
    std::vector<laneq::outgoing_message> batch(static_cast<std::size_t>(n));
    for (std::uint64_t k = 0; k < n; ++k) {
      auto& m = batch[static_cast<std::size_t>(k)];
      if (!opt_.data_dir.empty())
        fill_random_body(m.body, i + k);
      else
        m.body.assign(body_bytes, 'x');
      if (sc_.shape) sc_.shape(i + k, m);
    }
    return batch;
  }

  /// Checks an enqueue's answer for `n` messages and counts them; false (and the run failed)
  /// when it is wrong.
  bool enqueued(const laneq::result<std::vector<laneq::message_id>>& ids, std::size_t n) {
    enqueue_calls_.fetch_add(1, std::memory_order_relaxed);
    if (!ids) return failure_.set("enqueue: " + laneq::to_string(ids.err()));
    if (ids.value().size() != n)
      return failure_.set("enqueue returned " + std::to_string(ids.value().size()) + " ids for " +
                          std::to_string(n) + " messages");
    for (auto id : ids.value())
      if (!slot_of(id))
        return failure_.set("enqueue returned an unexpected id " + std::to_string(id.value));
    enqueued_.fetch_add(n);
    return true;
  }

  /// One of --producers threads: each takes the next `batch` message indexes in turn.
  void produce() {
    laneq::blocking_queue bq{sys_, queue_};
    while (!failure_.failed()) {
      if (opt_.max_backlog > 0) {
        wait_for_room();
        if (failure_.failed()) return;
      }
      auto batch = next_batch();
      if (!batch) return;
      auto n = batch->size();
      if (!enqueued(bq.enqueue(std::move(*batch)), n)) return;
    }
  }

  bool backlog_full() const { return enqueued_.load() - acked_.load() >= opt_.max_backlog; }

  /// Blocks while the backlog is at --max-backlog. Producers sleep on a condition variable that
  /// acks signal: polling with short sleeps cost the 2-core machine tens of thousands of wake-ups
  /// a second, CPU the broker under test then lacked. The timeout only bounds a failed run.
  void wait_for_room() {
    if (!backlog_full()) return;
    std::unique_lock<std::mutex> lock{room_mutex_};
    ++producers_waiting_;
    while (!failure_.failed() && backlog_full()) room_cv_.wait_for(lock, 10ms);
    --producers_waiting_;
  }

  /// Wakes waiting producers after an ack (the lock orders this with their check of the backlog).
  void signal_room() {
    if (producers_waiting_.load() == 0) return;
    std::lock_guard<std::mutex> lock{room_mutex_};
    room_cv_.notify_all();
  }

  /// Checks a receive's answer and fills `leases` with what to ack; false (and the run failed,
  /// or, for an empty answer, nothing to ack) otherwise.
  bool received(const laneq::result<std::vector<laneq::delivery>>& got,
                std::vector<laneq::lease_token>& leases) {
    receive_calls_.fetch_add(1, std::memory_order_relaxed);
    leases.clear();
    if (!got) return failure_.set("receive: " + laneq::to_string(got.err()));
    const auto& ds = got.value();
    if (ds.empty()) {
      empty_receives_.fetch_add(1, std::memory_order_relaxed);
      const auto stall_us = static_cast<std::int64_t>(opt_.stall_s) * 1'000'000;
      if (elapsed_us() - last_progress_us_.load() > stall_us)
        failure_.set("no progress for " + std::to_string(opt_.stall_s) + " s (acked " +
                     std::to_string(acked_.load()) + " of " + std::to_string(sc_.messages) + ")");
      return false;
    }
    for (const auto& d : ds) {
      if (!slot_of(d.msg.id))
        return failure_.set("delivered an unexpected id " + std::to_string(d.msg.id.value));
      if (d.msg.body.size() != sc_.body)
        return failure_.set("message " + std::to_string(d.msg.id.value) + " has a body of " +
                            std::to_string(d.msg.body.size()) + " bytes");
      if (sc_.group && !check_order(d)) return false;
      // The shard engine numbers each group it makes from (boot epoch << 32) + 1 up: the
      // highest low half is how many groups the queue made (a group removed when idle and
      // made again counts twice).
      auto incarnation = d.lease.group.value & 0xffff'ffffull;
      auto seen = max_group_id_.load(std::memory_order_relaxed);
      while (incarnation > seen && !max_group_id_.compare_exchange_weak(seen, incarnation)) {
      }
      leases.push_back(d.lease);
    }
    return true;
  }

  /// Checks the ack of the deliveries `ds` and counts them; false (and the run failed) when it
  /// is wrong.
  bool acked(const laneq::result<std::vector<laneq::lease_outcome>>& failed,
             const std::vector<laneq::delivery>& ds, latencies& lat) {
    ack_calls_.fetch_add(1, std::memory_order_relaxed);
    if (!failed) return failure_.set("ack: " + laneq::to_string(failed.err()));
    if (!failed.value().empty()) {
      const auto& f = failed.value().front();
      failure_.set(std::to_string(failed.value().size()) + " acks failed, first " +
                   laneq::to_string(f.lease) + ": " + laneq::to_string(f.err));
      return false;
    }
    auto now = ctx_->time.now(sys_.clock());
    for (const auto& d : ds) {
      auto us = (now - d.msg.enqueued_at).count();
      lat.all.push_back(us);
      if (sc_.split_by_fairness) (d.msg.fairness_key == "big" ? lat.big : lat.small).push_back(us);
      auto times = acks_[*slot_of(d.msg.id)].fetch_add(1) + 1;
      if (times != 1)
        return failure_.set("message " + std::to_string(d.msg.id.value) + " acked " +
                            std::to_string(times) + " times");
    }
    auto n = static_cast<std::uint64_t>(ds.size());
    auto total = acked_.fetch_add(n) + n;
    signal_room();
    last_progress_us_.store(elapsed_us());
    if (total == sc_.messages) end_us_.store(elapsed_us());
    return true;
  }

  bool done() const { return failure_.failed() || acked_.load() >= sc_.messages; }

  /// A producer actor: enqueues the next batch whenever the last is answered, while the backlog
  /// has room (otherwise it looks again after a pause).
  caf::behavior producer(caf::event_based_actor* self) {
    self->send(self, next_atom::value);
    return {[this, self](next_atom) {
      if (failure_.failed()) return self->quit();
      if (opt_.max_backlog > 0 && backlog_full()) {
        self->delayed_send(self, 100us, next_atom::value);
        return;
      }
      auto batch = next_batch();
      if (!batch) return self->quit();
      auto n = batch->size();
      self->request(queue_, caf::infinite, laneq::enqueue_atom_v, std::move(*batch))
          .then(
              [this, self, n](std::vector<laneq::message_id>& ids) {
                if (enqueued(laneq::result<std::vector<laneq::message_id>>{std::move(ids)}, n))
                  self->send(self, next_atom::value);
              },
              [this](caf::error& e) { enqueued(laneq::from_caf(e), 0); });
    }};
  }

  /// A consumer actor: receive, check, ack, receive again, until every message is acked.
  caf::behavior consumer(caf::event_based_actor* self, latencies& lat) {
    lat.all.reserve(static_cast<std::size_t>(sc_.messages / opt_.consumers + 1024));
    self->send(self, next_atom::value);
    return {[this, self, &lat](next_atom) {
      if (done()) return self->quit();
      const laneq::receive_request req{opt_.receive_max, 0, opt_.wait_us};
      self->request(queue_, caf::infinite, laneq::receive_atom_v, req)
          .then(
              [this, self, &lat](std::vector<laneq::delivery>& ds) {
                laneq::result<std::vector<laneq::delivery>> got{std::move(ds)};
                std::vector<laneq::lease_token> leases;
                if (!received(got, leases)) return self->send(self, next_atom::value);
                auto delivered =
                    std::make_shared<std::vector<laneq::delivery>>(std::move(got).value());
                self->request(queue_, caf::infinite, laneq::ack_atom_v, std::move(leases))
                    .then(
                        [this, self, &lat, delivered](std::vector<laneq::lease_outcome>& failed) {
                          using outcomes = laneq::result<std::vector<laneq::lease_outcome>>;
                          if (acked(outcomes{std::move(failed)}, *delivered, lat))
                            self->send(self, next_atom::value);
                        },
                        [this, &lat](caf::error& e) { acked(laneq::from_caf(e), {}, lat); });
              },
              [this](caf::error& e) {
                std::vector<laneq::lease_token> none;
                received(laneq::from_caf(e), none);
              });
    }};
  }

  /// One of --consumers threads: receive, check, ack, until every message is acked.
  void consume(latencies& lat) {
    laneq::blocking_queue bq{sys_, queue_};
    lat.all.reserve(static_cast<std::size_t>(sc_.messages / opt_.consumers + 1024));
    const laneq::receive_request req{opt_.receive_max, 0, opt_.wait_us};
    std::vector<laneq::lease_token> leases;
    while (!done()) {
      auto got = bq.receive(req);
      if (!received(got, leases)) continue;
      if (!acked(bq.ack(leases), got.value(), lat)) return;
    }
  }

  /// One message in flight per group, delivered in arrival (= id) order.
  /// Where `acks_` counts message `id`: each shard numbers its messages from 1 below its index in
  /// the id's high bits (sharding.hpp), so shard s's ids take slots s * (messages + 1) + 1 on. None
  /// for an id no shard of this run could have given out.
  std::optional<std::size_t> slot_of(laneq::message_id id) const {
    auto shard = laneq::shard_of_id(id);
    auto local = id.value - laneq::first_id_of_shard(shard) + 1;
    if (shard >= opt_.shards || local == 0 || local > sc_.messages) return std::nullopt;
    return static_cast<std::size_t>(shard * (sc_.messages + 1) + local);
  }

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
    std::uint64_t once = 0;
    for (std::size_t slot = 0; slot < acks_.size(); ++slot) {
      auto times = acks_[slot].load();
      if (times > 1)
        return "message in slot " + std::to_string(slot) + " acked " + std::to_string(times) +
               " times";
      once += times;
    }
    if (once != sc_.messages)
      return std::to_string(once) + " messages acked once of " + std::to_string(sc_.messages);
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
  std::vector<std::atomic<std::uint8_t>> acks_;  // by slot_of(id): times acked
  std::vector<std::atomic<std::uint64_t>> last_in_group_;
  std::atomic<std::uint64_t> next_index_{0};  // next message index a producer takes
  std::atomic<std::uint64_t> enqueued_{0};
  std::atomic<std::uint64_t> acked_{0};
  std::mutex room_mutex_;
  std::condition_variable room_cv_;
  std::atomic<int> producers_waiting_{0};
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

throughput_scenario make_scenario_spec(const std::string& name, const options& opt) {
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
  } else if (name == "json_key_1kib" || name == "header_key_1kib") {
    // Enqueue cost of a JSON-path key (docs/design/lanes.md L2) against a header key, on the
    // same 1 KiB JSON bodies and 1,000 groups; the header `k` carries the group for checking.
    bool json = name == "json_key_1kib";
    sc.spec = laneq::queue_spec(json ? "bench-json-key" : "bench-header-key")
                  .ordered_by(
                      {json ? laneq::key::json("data.object.customer") : laneq::key::header("k")});
    sc.shape = [](std::uint64_t i, laneq::outgoing_message& m) {
      auto g = std::to_string(i % 1000);
      m.body = R"({"id": "evt_)" + std::to_string(i) +
               R"(", "type": "invoice.paid", "data": {"object": {"customer": ")" + g +
               R"(", "pad": ")";
      m.body.append(1024 - m.body.size() - 4, 'x');
      m.body += R"("}}})";
      m.headers.push_back({"k", g});
    };
    sc.group = group_from_header;
    sc.group_count = 1000;
    sc.body = 1024;
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

throughput_scenario make_scenario(const std::string& name, const options& opt) {
  auto sc = make_scenario_spec(name, opt);
  sc.spec = with_delivery(std::move(sc.spec), opt);
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

void write_stats(json_writer& w, const laneq::queue_stats& s,
                 std::string_view key = "queue_stats") {
  w.key(key);
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
  if (s.recovered > 0) w.field("recovered", s.recovered);
  w.field("window_reads", s.window_reads);
  w.field("window_read_messages", s.window_read_messages);
  w.field("window_bytes", s.window_bytes);
  w.end_object();
}

void write_throughput(json_writer& w, const options& opt, const throughput_result& r) {
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
  if (r.store) write_store(w, opt, *r.store, r.acked, r.seconds);
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
    // The shard engine routes a batch to its groups before it answers the enqueue, so little
    // runs after the last answer; measure once the process is idle all the same.
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
  }  // the broker stops its actors here; the shard actor frees the groups with its engine
  // A bounded wait for them to go (--teardown-limit-s).
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

// -- restart -------------------------------------------------------------------------------------

struct restart_result {
  std::uint64_t messages = 0;
  std::uint32_t producers = 0;
  double fill_seconds = 0;
  double fill_msgs_per_s = 0;
  double fill_cpu_us_per_msg = 0;
  std::optional<store_report> fill_store;
  std::optional<laneq::queue_stats> stats_after_fill;
  std::uint64_t rss_before_fill = 0;
  std::uint64_t rss_after_fill = 0;
  double close_seconds = 0;
  std::uint64_t data_dir_bytes = 0;
  std::uint64_t rss_before_open = 0;
  std::uint64_t rss_after_open = 0;          // as open returned
  std::uint64_t rss_after_open_trimmed = 0;  // after malloc_trim
  std::uint64_t heap_before_open = 0;
  std::uint64_t heap_after_open = 0;
  std::uint64_t hwm_during_open = 0;  // VmHWM reset before the open (0: could not reset)
  double restart_seconds = 0;
  double restart_cpu_seconds = 0;
  double warm_close_seconds = 0;
  std::uint64_t evicted_bytes = 0;
  double cold_restart_seconds = 0;
  double cold_restart_cpu_seconds = 0;
  std::uint64_t cold_restart_read_bytes = 0;
  std::uint64_t restart_read_bytes = 0;  // from storage (not the page cache) during the open
  double rss_delta_per_stored_message = 0;
  double heap_delta_per_stored_message = 0;
  std::optional<laneq::queue_stats> stats_after_open;
  std::uint64_t sample_acked = 0;
  double drain_seconds = 0;
  double drain_msgs_per_s = 0;
  std::uint64_t sample_checked_exactly = 0;  // deliveries compared with the remembered ids
  std::optional<laneq::queue_stats> stats_after_drain;
  bool verified = false;
  std::string failure;
};

/// Resets VmHWM to the current RSS (Linux: "5" to clear_refs); false if the kernel refuses.
bool reset_peak_rss() {
  std::ofstream out{"/proc/self/clear_refs"};
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

/// Fills a store with --restart-messages messages over 1,000 groups, closes the broker, times
/// `broker::open` on the same directory (recovery), measures its memory and drains a sample.
class restart_run {
 public:
  restart_run(caf::actor_system& sys, const options& opt)
      : sys_(sys),
        opt_(opt),
        expected_(restart_groups),
        positions_(restart_groups),
        last_(restart_groups) {}

  restart_result run() {
    restart_result r;
    r.messages = opt_.restart_messages;
    r.producers = opt_.restart_producers;
    auto dir = scenario_dir(opt_, "restart");
    auto baseline = sys_.registry().running();
    r.failure = fill(r, dir);
    if (r.failure.empty()) r.failure = reopen_and_drain(r, dir);
    wait_actors_gone(sys_, baseline, teardown_limit);
    remove_scenario_dir(opt_, dir);
    r.verified = r.failure.empty();
    return r;
  }

 private:
  laneq::queue_spec spec() const {
    return with_delivery(laneq::queue_spec("bench-restart").ordered_by({laneq::key::header("k")}),
                         opt_);
  }

  std::string fill(restart_result& r, const std::filesystem::path& dir) {
    wait_quiescent(10s);
    malloc_trim(0);
    r.rss_before_fill = proc_status_bytes("VmRSS");
    store_probe probe;
    {
      auto opened = open_broker(sys_, opt_, dir);
      if (!opened) return "open: " + laneq::to_string(opened.err());
      auto b = std::move(opened).value();
      laneq::blocking_admin admin{sys_, b->admin()};
      auto q = admin.create_queue(spec());
      if (!q) return "create_queue: " + laneq::to_string(q.err());
      probe.start(*b, dir);
      // Per producer and group the first ids it got: a producer's ids grow call by call, so the
      // union holds each group's first restart_check_depth ids.
      std::vector<std::vector<std::vector<std::uint64_t>>> seen(opt_.restart_producers);
      auto cpu_before = process_cpu_us();
      auto start = steady::now();
      std::vector<std::thread> threads;
      for (std::uint32_t p = 0; p < opt_.restart_producers; ++p)
        threads.emplace_back([this, &q, &seen, p] { produce(q.value(), seen[p]); });
      for (auto& t : threads) t.join();
      r.fill_seconds = std::chrono::duration<double>(steady::now() - start).count();
      auto cpu_after = process_cpu_us();
      r.fill_msgs_per_s = static_cast<double>(enqueued_.load()) / r.fill_seconds;
      r.fill_cpu_us_per_msg = static_cast<double>(cpu_after - cpu_before) /
                              static_cast<double>(std::max<std::uint64_t>(1, enqueued_.load()));
      if (failure_.failed()) return failure_.why();
      for (std::uint32_t g = 0; g < restart_groups; ++g) {
        auto& ids = expected_[g];
        for (auto& per_producer : seen)
          ids.insert(ids.end(), per_producer[g].begin(), per_producer[g].end());
        std::sort(ids.begin(), ids.end());
        if (ids.size() > restart_check_depth) ids.resize(restart_check_depth);
        ids.shrink_to_fit();
      }
      seen.clear();
      seen.shrink_to_fit();
      r.fill_store = probe.finish(*b, dir);
      laneq::blocking_queue bq{sys_, q.value()};
      auto st = bq.stats();
      if (!st) return "stats after fill: " + laneq::to_string(st.err());
      r.stats_after_fill = st.value();
      if (st.value().enqueued != r.messages || st.value().backlog != r.messages)
        return "after the fill: enqueued " + std::to_string(st.value().enqueued) + ", backlog " +
               std::to_string(st.value().backlog) + " of " + std::to_string(r.messages);
      malloc_trim(0);
      r.rss_after_fill = proc_status_bytes("VmRSS");
      std::cerr << "  filled " << r.messages << " in " << r.fill_seconds << " s; closing\n";
      auto close_start = steady::now();
      b.reset();  // waits until the store has closed the database (memtables flushed)
      r.close_seconds = std::chrono::duration<double>(steady::now() - close_start).count();
    }
    probe.closed(*r.fill_store);
    r.data_dir_bytes = directory_bytes(dir);
    return {};
  }

  void produce(const laneq::queue_api& q, std::vector<std::vector<std::uint64_t>>& seen) {
    seen.assign(restart_groups, {});
    laneq::blocking_queue bq{sys_, q};
    const auto n_total = opt_.restart_messages;
    while (!failure_.failed()) {
      auto i = next_index_.fetch_add(restart_batch);
      if (i >= n_total) return;
      auto n = std::min<std::uint64_t>(restart_batch, n_total - i);
      std::vector<laneq::outgoing_message> batch(static_cast<std::size_t>(n));
      for (std::uint64_t k = 0; k < n; ++k) {
        auto& m = batch[static_cast<std::size_t>(k)];
        fill_random_body(m.body, i + k);
        m.headers.push_back({"k", std::to_string((i + k) % restart_groups)});
      }
      auto ids = bq.enqueue(std::move(batch));
      if (!ids) {
        failure_.set("enqueue: " + laneq::to_string(ids.err()));
        return;
      }
      if (ids.value().size() != n) {
        failure_.set("enqueue returned " + std::to_string(ids.value().size()) + " ids");
        return;
      }
      for (std::uint64_t k = 0; k < n; ++k) {
        auto& list = seen[static_cast<std::size_t>((i + k) % restart_groups)];
        if (list.size() < restart_check_depth)
          list.push_back(ids.value()[static_cast<std::size_t>(k)].value);
      }
      auto before = enqueued_.fetch_add(n);
      if ((before + n) / 1'000'000 != before / 1'000'000)
        std::cerr << "  enqueued " << (before + n) << "\n";
    }
  }

  std::string reopen_and_drain(restart_result& r, const std::filesystem::path& dir) {
    wait_quiescent(10s);
    malloc_trim(0);
    bool hwm_reset = reset_peak_rss();
    r.rss_before_open = proc_status_bytes("VmRSS");
    r.heap_before_open = heap_in_use_bytes();
    auto io_before = read_proc_io();
    auto cpu_before = process_cpu_us();
    auto start = steady::now();
    // No reclaim grace: nothing was in flight, and the drain below should not wait for it.
    auto opened = open_broker(sys_, opt_, dir, laneq::duration{0});
    r.restart_seconds = std::chrono::duration<double>(steady::now() - start).count();
    r.restart_cpu_seconds = static_cast<double>(process_cpu_us() - cpu_before) / 1e6;
    r.restart_read_bytes = io_delta(io_before, read_proc_io()).read_bytes;
    if (!opened) return "reopen: " + laneq::to_string(opened.err());
    auto b = std::move(opened).value();
    r.rss_after_open = proc_status_bytes("VmRSS");
    if (hwm_reset) r.hwm_during_open = proc_status_bytes("VmHWM");
    malloc_trim(0);
    r.rss_after_open_trimmed = proc_status_bytes("VmRSS");
    r.heap_after_open = heap_in_use_bytes();
    auto n = static_cast<double>(r.messages);
    r.rss_delta_per_stored_message =
        (static_cast<double>(r.rss_after_open_trimmed) - static_cast<double>(r.rss_before_open)) /
        n;
    r.heap_delta_per_stored_message =
        (static_cast<double>(r.heap_after_open) - static_cast<double>(r.heap_before_open)) / n;
    std::cerr << "  reopened in " << r.restart_seconds << " s; again with a cold page cache\n";
    // The same restart from the disk: close, drop the files from the page cache, open again.
    auto close_start = steady::now();
    b.reset();
    r.warm_close_seconds = std::chrono::duration<double>(steady::now() - close_start).count();
    r.evicted_bytes = evict_from_page_cache(dir);
    io_before = read_proc_io();
    cpu_before = process_cpu_us();
    start = steady::now();
    opened = open_broker(sys_, opt_, dir, laneq::duration{0});
    r.cold_restart_seconds = std::chrono::duration<double>(steady::now() - start).count();
    r.cold_restart_cpu_seconds = static_cast<double>(process_cpu_us() - cpu_before) / 1e6;
    r.cold_restart_read_bytes = io_delta(io_before, read_proc_io()).read_bytes;
    if (!opened) return "cold reopen: " + laneq::to_string(opened.err());
    b = std::move(opened).value();
    std::cerr << "  cold reopen in " << r.cold_restart_seconds << " s; draining "
              << opt_.restart_sample << "\n";
    laneq::blocking_admin admin{sys_, b->admin()};
    auto q = admin.lookup("bench-restart");
    if (!q) return "lookup after restart: " + laneq::to_string(q.err());
    queue_ = q.value();
    laneq::blocking_queue bq{sys_, queue_};
    auto st = bq.stats();
    if (!st) return "stats after restart: " + laneq::to_string(st.err());
    r.stats_after_open = st.value();
    if (st.value().recovered != r.messages || st.value().backlog != r.messages)
      return "after the restart: recovered " + std::to_string(st.value().recovered) + ", backlog " +
             std::to_string(st.value().backlog) + " of " + std::to_string(r.messages);
    auto drain_start = steady::now();
    start_ = drain_start;
    std::vector<std::thread> threads;
    for (std::uint32_t c = 0; c < opt_.consumers; ++c) threads.emplace_back([this] { consume(); });
    for (auto& t : threads) t.join();
    r.drain_seconds = std::chrono::duration<double>(steady::now() - drain_start).count();
    r.sample_acked = acked_.load();
    r.sample_checked_exactly = checked_exactly_.load();
    r.drain_msgs_per_s = static_cast<double>(r.sample_acked) / r.drain_seconds;
    if (failure_.failed()) return failure_.why();
    auto after = bq.stats();
    if (!after) return "stats after the drain: " + laneq::to_string(after.err());
    r.stats_after_drain = after.value();
    if (after.value().acked != r.sample_acked ||
        after.value().backlog != r.messages - r.sample_acked || after.value().in_flight != 0)
      return "after the drain: acked " + std::to_string(after.value().acked) + " (we acked " +
             std::to_string(r.sample_acked) + "), backlog " +
             std::to_string(after.value().backlog) + ", in_flight " +
             std::to_string(after.value().in_flight);
    queue_ = nullptr;
    return {};
  }

  void consume() {
    laneq::blocking_queue bq{sys_, queue_};
    const laneq::receive_request req{opt_.receive_max, 0, opt_.wait_us};
    const auto stall_us = static_cast<std::int64_t>(opt_.stall_s) * 1'000'000;
    std::vector<laneq::lease_token> leases;
    while (!failure_.failed() && acked_.load() < opt_.restart_sample) {
      auto got = bq.receive(req);
      if (!got) {
        failure_.set("receive: " + laneq::to_string(got.err()));
        return;
      }
      auto& ds = got.value();
      if (ds.empty()) {
        if (elapsed_us() - last_progress_us_.load() > stall_us)
          failure_.set("no delivery for " + std::to_string(opt_.stall_s) + " s after the restart");
        continue;
      }
      leases.clear();
      for (const auto& d : ds) {
        if (!check(d)) return;
        leases.push_back(d.lease);
      }
      auto failed = bq.ack(leases);
      if (!failed || !failed.value().empty()) {
        failure_.set(!failed ? "ack: " + laneq::to_string(failed.err())
                             : std::to_string(failed.value().size()) + " acks failed");
        return;
      }
      acked_.fetch_add(ds.size());
      last_progress_us_.store(elapsed_us());
    }
  }

  /// Per group: the remembered first ids one by one, then increasing ids.
  bool check(const laneq::delivery& d) {
    auto g = group_from_header(d);
    if (g < 0 || g >= static_cast<std::int64_t>(restart_groups)) {
      failure_.set("message " + std::to_string(d.msg.id.value) + " has no group");
      return false;
    }
    if (d.msg.body.size() != body_bytes) {
      failure_.set("message " + std::to_string(d.msg.id.value) + " has a body of " +
                   std::to_string(d.msg.body.size()) + " bytes");
      return false;
    }
    auto gi = static_cast<std::size_t>(g);
    auto pos = positions_[gi].fetch_add(1);
    auto prev = last_[gi].exchange(d.msg.id.value);
    const auto& want = expected_[gi];
    if (pos < want.size()) {
      if (d.msg.id.value != want[pos]) {
        failure_.set("group " + std::to_string(g) + ": delivery " + std::to_string(pos) +
                     " after the restart is message " + std::to_string(d.msg.id.value) +
                     ", expected " + std::to_string(want[pos]));
        return false;
      }
      checked_exactly_.fetch_add(1, std::memory_order_relaxed);
    } else if (d.msg.id.value <= prev) {
      failure_.set("group " + std::to_string(g) + ": message " + std::to_string(d.msg.id.value) +
                   " delivered after " + std::to_string(prev));
      return false;
    }
    return true;
  }

  std::int64_t elapsed_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start_).count();
  }

  caf::actor_system& sys_;
  const options& opt_;
  failure_flag failure_;
  laneq::queue_api queue_;
  steady::time_point start_;
  std::vector<std::vector<std::uint64_t>> expected_;   // per group: its first ids
  std::vector<std::atomic<std::uint64_t>> positions_;  // per group: deliveries seen
  std::vector<std::atomic<std::uint64_t>> last_;       // per group: last id delivered
  std::atomic<std::uint64_t> next_index_{0};
  std::atomic<std::uint64_t> enqueued_{0};
  std::atomic<std::uint64_t> acked_{0};
  std::atomic<std::uint64_t> checked_exactly_{0};
  std::atomic<std::int64_t> last_progress_us_{0};
};

void write_restart(json_writer& w, const options& opt, const restart_result& r) {
  w.begin_object();
  w.field("name", "restart");
  w.field("kind", "restart");
  w.field("queue", "bench-restart: ordered_by(header:k), 1,000 groups, " +
                       std::to_string(body_bytes) + "-byte random bodies");
  w.field("messages", r.messages);
  w.field("producers", r.producers);
  w.field("enqueue_batch", restart_batch);
  w.field("fill_seconds", r.fill_seconds);
  w.field("fill_msgs_per_s", r.fill_msgs_per_s);
  w.field("fill_cpu_us_per_msg", r.fill_cpu_us_per_msg);
  w.field("rss_before_fill_bytes", r.rss_before_fill);
  w.field("rss_after_fill_bytes", r.rss_after_fill);
  if (r.stats_after_fill) write_stats(w, *r.stats_after_fill, "queue_stats_after_fill");
  if (r.fill_store) write_store(w, opt, *r.fill_store, r.messages, r.fill_seconds);
  w.field("close_seconds", r.close_seconds);
  w.field("data_dir_bytes", r.data_dir_bytes);
  w.field("restart_seconds", r.restart_seconds);
  w.field("restart_cpu_seconds", r.restart_cpu_seconds);
  w.field("restart_msgs_per_s",
          r.restart_seconds > 0 ? static_cast<double>(r.messages) / r.restart_seconds : 0.0);
  w.field("restart_read_bytes_from_storage", r.restart_read_bytes);
  w.field("warm_close_seconds", r.warm_close_seconds);
  w.field("evicted_from_page_cache_bytes", r.evicted_bytes);
  w.field("cold_restart_seconds", r.cold_restart_seconds);
  w.field("cold_restart_cpu_seconds", r.cold_restart_cpu_seconds);
  w.field("cold_restart_read_bytes_from_storage", r.cold_restart_read_bytes);
  w.field("rss_before_open_bytes", r.rss_before_open);
  w.field("rss_after_open_bytes", r.rss_after_open);
  w.field("rss_after_open_trimmed_bytes", r.rss_after_open_trimmed);
  w.field("vm_hwm_during_open_bytes", r.hwm_during_open);
  w.field("heap_in_use_before_open_bytes", r.heap_before_open);
  w.field("heap_in_use_after_open_bytes", r.heap_after_open);
  w.field("rss_delta_per_stored_message", r.rss_delta_per_stored_message);
  w.field("heap_delta_per_stored_message", r.heap_delta_per_stored_message);
  w.field("payload_bytes_per_message", static_cast<std::uint64_t>(body_bytes));
  if (r.stats_after_open) write_stats(w, *r.stats_after_open, "queue_stats_after_open");
  w.field("sample_acked", r.sample_acked);
  w.field("sample_checked_against_enqueue_ids", r.sample_checked_exactly);
  w.field("drain_seconds", r.drain_seconds);
  w.field("drain_msgs_per_s", r.drain_msgs_per_s);
  if (r.stats_after_drain) write_stats(w, *r.stats_after_drain, "queue_stats_after_drain");
  w.field("verified", r.verified);
  if (!r.failure.empty()) w.field("failure", r.failure);
  w.end_object();
}

}  // namespace

/// Writes the JSON report; returns true if every scenario verified.
bool write_report(std::ostream& out, const options& opt, std::size_t workers,
                  const std::vector<throughput_result>& throughput,
                  const std::optional<live_groups_result>& live,
                  const std::optional<restart_result>& restart) {
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
  w.field("producers", opt.producers);
  w.field("consumers", opt.consumers);
  w.field("batch", opt.batch);
  w.field("receive_max", opt.receive_max);
  w.field("wait_us", opt.wait_us);
  w.field("body_bytes", static_cast<std::uint64_t>(body_bytes));
  w.field("messages", opt.messages);
  w.field("ordered_messages", std::min(opt.messages, opt.ordered_messages));
  w.field("max_backlog", opt.max_backlog);
  w.field("groups", opt.groups);
  w.field("store", opt.data_dir.empty() ? "memory" : "rocksdb");
  if (!opt.data_dir.empty()) {
    w.field("data_dir", opt.data_dir);
    w.field("sync", opt.sync);
    w.field("group_window", opt.group_window);
    w.field("group_window_max", opt.group_window_max);
    w.field("window_budget_mb", opt.window_budget_mb);
    w.field("bodies", "random (incompressible)");
  }
  w.field("delivery", opt.durable_delivery ? "durable" : "fast");
  w.field("shards", opt.shards);
  w.field("clients", opt.actor_clients ? "actors" : "threads");
  if (restart) {
    w.field("restart_messages", opt.restart_messages);
    w.field("restart_producers", opt.restart_producers);
    w.field("restart_sample", opt.restart_sample);
  }
  w.end_object();
  w.key("scenarios");
  w.begin_array();
  for (const auto& r : throughput) {
    write_throughput(w, opt, r);
    all_ok = all_ok && r.verified;
  }
  if (live) {
    write_live_groups(w, *live);
    all_ok = all_ok && live->verified;
  }
  if (restart) {
    write_restart(w, opt, *restart);
    all_ok = all_ok && restart->verified;
  }
  w.end_array();
  w.key("targets");
  w.begin_object();
  // In memory: 300,000 / 200,000 msg/s. Durable (enqueue, deliver, ack all synced with group
  // commit): 100,000 msg/s for both.
  const bool durable = !opt.data_dir.empty();
  const std::uint64_t unordered_min = durable ? 100'000 : 300'000;
  const std::uint64_t groups_min = durable ? 100'000 : 200'000;
  for (const auto& r : throughput) {
    if (r.name == "unordered") {
      w.field("unordered_min_msgs_per_s", unordered_min);
      w.field("unordered_met", r.verified && r.msgs_per_s >= static_cast<double>(unordered_min));
    } else if (r.name == "groups_1000") {
      w.field("groups_1000_min_msgs_per_s", groups_min);
      w.field("groups_1000_met", r.verified && r.msgs_per_s >= static_cast<double>(groups_min));
    }
  }
  if (restart) {
    // A stored backlog must not need its payloads in memory: less than one body per message.
    w.field("restart_max_rss_bytes_per_stored_message", static_cast<std::uint64_t>(body_bytes));
    w.field("restart_met", restart->verified && restart->rss_delta_per_stored_message <
                                                    static_cast<double>(body_bytes));
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
  // As laneqd runs it (one worker fewer than the cores, no sleep-polling). CAF arguments below
  // may override (`--scheduler.max-threads=N`).
  laneq::tune_scheduler(cfg);
  if (auto err = cfg.parse(static_cast<int>(caf_args.size()), caf_args.data())) {
    std::cerr << "laneq_engine_bench: " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;

  std::vector<throughput_result> throughput;
  std::optional<live_groups_result> live;
  std::optional<restart_result> restart;
  caf::actor_system sys{cfg};
  auto workers = sys.scheduler().num_workers();
  // live_groups runs last: if its broker has not stopped within --teardown-limit-s, the
  // program leaves without waiting for it (below).
  auto order = opt.scenarios;
  std::stable_partition(order.begin(), order.end(),
                        [](const std::string& s) { return s != "live_groups"; });
  if (!opt.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.data_dir, ec);
    if (ec) {
      std::cerr << "laneq_engine_bench: cannot create " << opt.data_dir << ": " << ec.message()
                << "\n";
      return 2;
    }
  }
  for (const auto& name : order) {
    if (name == "live_groups") {
      std::cerr << "laneq_engine_bench: running live_groups\n";
      live = run_live_groups(sys, opt);
      if (!live->verified) std::cerr << "  FAILED: " << live->failure << "\n";
      continue;
    }
    if (name == "restart") {
      std::cerr << "laneq_engine_bench: running restart (" << opt.restart_messages
                << " messages)\n";
      restart = restart_run{sys, opt}.run();
      if (!restart->verified) std::cerr << "  FAILED: " << restart->failure << "\n";
      wait_quiescent(30s);
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
  }
  bool ok = write_report(std::cout, opt, workers, throughput, live, restart);
  int rc = ok ? 0 : 1;
  if (live && !live->teardown_completed) {
    // ~actor_system would wait for the broker's actors to stop: leave without it.
    std::cerr << "laneq_engine_bench: the live_groups broker is still stopping; exiting now\n";
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(rc);
  }
  return rc;
}
