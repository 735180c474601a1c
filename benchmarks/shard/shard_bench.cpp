// laneq_shard_bench: the pure shard engine (libqueue/shard_engine.hpp) on one thread, with no
// actors and no store: every write the engine asks for is answered as durable at once (its
// records are still encoded, as for a real store). Prints one JSON object per scenario.
//
//   lifecycle   enqueue batches, receive, ack in batches, until every message is acked: the
//               engine's messages per second and CPU per message (ADR 0009 step 5: "pure engine,
//               one thread, full lifecycle with 1,000 groups: at least 3 million messages/s").
//   idle_groups one small message in each of N groups, none delivered: the resident memory each
//               live idle group costs, everything included ("at most 512 bytes per live idle
//               group"), and the time the engine takes to free them all (what a queue's deletion
//               costs its shard; the store's range delete is apart).
//   groups_pages the same groups, then every page of the groups listing (`--page` groups a page,
//               default 1000): the longest page is the longest the shard is busy with one
//               introspection request (issue 22: a listing must not freeze the broker).
//
// Usage: laneq_shard_bench [--scenario lifecycle|idle_groups|groups_pages] [--groups N]
//                          [--messages M] [--batch B] [--receive-max R] [--body-bytes N]
//                          [--page P]
// --groups 0 is an unordered queue. See benchmarks/README.md for the figures.
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laneq/shard_engine.hpp"

namespace {

using namespace laneq;
using steady = std::chrono::steady_clock;

struct options {
  std::string scenario = "lifecycle";
  std::uint64_t groups = 1000;
  std::uint64_t messages = 2'000'000;
  std::uint32_t batch = 100;        // messages per enqueue, and leases per ack
  std::uint32_t receive_max = 100;  // messages per receive
  std::uint32_t body_bytes = 16;
  std::uint32_t page = 1000;  // groups per page of the groups listing
};

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k = argv[i];
    std::string_view v = argv[i + 1];
    auto num = [&v](auto& out) {
      return std::from_chars(v.data(), v.data() + v.size(), out).ec == std::errc{};
    };
    bool ok = k == "--scenario"      ? (o.scenario = std::string{v}, true)
              : k == "--groups"      ? num(o.groups)
              : k == "--messages"    ? num(o.messages)
              : k == "--batch"       ? num(o.batch)
              : k == "--page"        ? num(o.page)
              : k == "--receive-max" ? num(o.receive_max)
              : k == "--body-bytes"  ? num(o.body_bytes)
                                     : false;
    if (!ok) {
      std::fprintf(stderr, "laneq_shard_bench: bad option %s %s\n", argv[i], argv[i + 1]);
      return false;
    }
  }
  return argc % 2 == 1 && o.batch > 0 && o.receive_max > 0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

std::uint64_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace

// jemalloc's control interface, when the program is linked against jemalloc (cmake/allocator.cmake;
// not under the sanitizers): null otherwise.
extern "C" int mallctl(const char*, void*, std::size_t*, void*, std::size_t) __attribute__((weak));

namespace {

/// Bytes the program's live allocations hold, by jemalloc's count (`stats.allocated`); nullopt
/// without jemalloc. Unlike the RSS, it leaves out what the allocator keeps of freed memory.
std::optional<std::uint64_t> allocated_bytes() {
  if (mallctl == nullptr) return std::nullopt;
  std::uint64_t epoch = 1;
  auto size = sizeof(epoch);
  mallctl("epoch", &epoch, &size, &epoch, size);  // refreshes the statistics
  std::size_t allocated = 0;
  size = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &size, nullptr, 0) != 0) return std::nullopt;
  return allocated;
}

shard_config config(const options& o) {
  shard_config c;
  c.spec = queue_spec("bench");
  if (o.groups > 0) c.spec.ordered_by({key::header("g")});
  c.uid = 1;
  c.reclaim_grace = duration{0};
  c.nonces = nonce_source{1, 2};
  return c;
}

/// Drives one engine: answers every write as durable and collects the replies.
class driver {
 public:
  explicit driver(const options& o) : engine_(config(o)) {}
  shard_engine& engine() { return engine_; }
  timestamp now{1'000'000'000};
  std::vector<engine_reply> replies;

  void settle() {
    for (;;) {
      auto fx = engine_.take_effects();
      for (auto& r : fx.replies) replies.push_back(std::move(r));
      if (fx.writes.empty()) return;
      for (auto& w : fx.writes) engine_.on_written(w.id, std::nullopt, now);
    }
  }

 private:
  shard_engine engine_;
};

std::vector<outgoing_message> batch_of(const options& o, std::uint64_t first, std::uint64_t n,
                                       const std::string& body) {
  std::vector<outgoing_message> out(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    out[i].body = body;
    if (o.groups > 0)
      out[i].headers.push_back(header_field{"g", std::to_string((first + i) % o.groups)});
  }
  return out;
}

int lifecycle(const options& o) {
  driver d{o};
  std::string body(o.body_bytes, 'x');
  request_id next = 1;
  std::uint64_t enqueued = 0, acked = 0;
  std::vector<lease_token> to_ack;
  auto cpu0 = cpu_seconds();
  auto t0 = steady::now();
  while (acked < o.messages) {
    // Keep a backlog of a few batches per group, as a loaded queue has.
    while (enqueued < o.messages && enqueued - acked < 4ull * o.batch + o.groups) {
      auto n = std::min<std::uint64_t>(o.batch, o.messages - enqueued);
      d.engine().enqueue(next++, batch_of(o, enqueued, n, body), d.now);
      enqueued += n;
    }
    d.engine().receive(next++, receive_request{o.receive_max, 0, 0}, d.now);
    d.settle();
    for (auto& r : d.replies)
      if (auto* ds = std::get_if<std::vector<delivery>>(&r.value))
        for (auto& x : *ds) to_ack.push_back(x.lease);
    d.replies.clear();
    for (std::size_t i = 0; i < to_ack.size(); i += o.batch) {
      auto end = std::min<std::size_t>(to_ack.size(), i + o.batch);
      std::vector<lease_token> part(to_ack.begin() + static_cast<std::ptrdiff_t>(i),
                                    to_ack.begin() + static_cast<std::ptrdiff_t>(end));
      acked += part.size();
      d.engine().ack(next++, part, d.now);
    }
    to_ack.clear();
    d.settle();
    d.replies.clear();
  }
  auto secs = std::chrono::duration<double>(steady::now() - t0).count();
  auto cpu = cpu_seconds() - cpu0;
  std::printf(
      "{\"scenario\": \"lifecycle\", \"groups\": %llu, \"messages\": %llu, \"batch\": %u, "
      "\"receive_max\": %u, \"seconds\": %.3f, \"messages_per_s\": %.0f, "
      "\"cpu_us_per_message\": %.3f}\n",
      static_cast<unsigned long long>(o.groups), static_cast<unsigned long long>(o.messages),
      o.batch, o.receive_max, secs, static_cast<double>(o.messages) / secs,
      cpu * 1e6 / static_cast<double>(o.messages));
  return acked == o.messages ? 0 : 1;
}

/// One small message in each of `o.groups` groups, none delivered.
void fill_groups(driver& d, const options& o) {
  std::string body(o.body_bytes, 'x');
  request_id next = 1;
  for (std::uint64_t g = 0; g < o.groups; g += o.batch) {
    auto n = std::min<std::uint64_t>(o.batch, o.groups - g);
    d.engine().enqueue(next++, batch_of(o, g, n, body), d.now);
    d.settle();
    d.replies.clear();
  }
}

int idle_groups(const options& o) {
  auto rss0 = rss_bytes();
  auto allocated0 = allocated_bytes();
  auto d = std::make_unique<driver>(o);
  fill_groups(*d, o);
  auto rss1 = rss_bytes();
  auto allocated1 = allocated_bytes();
  auto live = d->engine().live_groups();
  auto per_group = [&](std::uint64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(live ? live : 1);
  };
  std::string allocated = "null";
  if (allocated0 && allocated1) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", per_group(*allocated1 - *allocated0));
    allocated = text;
  }
  auto t0 = steady::now();
  d.reset();
  auto teardown = std::chrono::duration<double>(steady::now() - t0).count();
  std::printf(
      "{\"scenario\": \"idle_groups\", \"groups\": %llu, \"live_groups\": %zu, "
      "\"body_bytes\": %u, \"rss_delta_bytes\": %llu, \"bytes_per_group\": %.1f, "
      "\"allocated_bytes_per_group\": %s, \"teardown_seconds\": %.3f}\n",
      static_cast<unsigned long long>(o.groups), live, o.body_bytes,
      static_cast<unsigned long long>(rss1 - rss0), per_group(rss1 - rss0), allocated.c_str(),
      teardown);
  return live == o.groups ? 0 : 1;
}

int groups_pages(const options& o) {
  driver d{o};
  fill_groups(d, o);
  groups_query q;
  q.limit = o.page;
  std::uint64_t listed = 0, pages = 0;
  double longest = 0;
  auto t0 = steady::now();
  for (;;) {
    auto p0 = steady::now();
    auto page = d.engine().groups(q, d.now);
    longest = std::max(longest, std::chrono::duration<double>(steady::now() - p0).count());
    if (!page) {
      std::fprintf(stderr, "laneq_shard_bench: groups: %s\n", page.err().message.c_str());
      return 1;
    }
    ++pages;
    listed += page.value().groups.size();
    if (page.value().next.empty()) break;
    q.after = std::move(page.value().next);
  }
  auto secs = std::chrono::duration<double>(steady::now() - t0).count();
  std::printf(
      "{\"scenario\": \"groups_pages\", \"groups\": %llu, \"page\": %u, \"pages\": %llu, "
      "\"listed\": %llu, \"seconds\": %.3f, \"longest_page_ms\": %.3f}\n",
      static_cast<unsigned long long>(o.groups), o.page, static_cast<unsigned long long>(pages),
      static_cast<unsigned long long>(listed), secs, longest * 1e3);
  return listed == o.groups ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: laneq_shard_bench [--scenario lifecycle|idle_groups|groups_pages] "
                 "[--groups N] [--messages M] [--batch B] [--receive-max R] [--body-bytes N] "
                 "[--page P]\n");
    return 2;
  }
  if (o.scenario == "lifecycle") return lifecycle(o);
  if (o.scenario == "idle_groups") return idle_groups(o);
  if (o.scenario == "groups_pages") return groups_pages(o);
  std::fprintf(stderr, "laneq_shard_bench: unknown scenario %s\n", o.scenario.c_str());
  return 2;
}
