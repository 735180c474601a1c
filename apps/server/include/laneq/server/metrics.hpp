// Prometheus metrics of laneqd (docs/operations.md "Metrics"): HTTP request latency per route and
// enqueue-to-delivery latency observed here, plus the queues' and the store's own counters,
// rendered in the Prometheus text exposition format.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "laneq/actors/protocol.hpp"

namespace laneq::server {

/// The HTTP routes, a fixed set so the route label has bounded cardinality.
enum class route : std::uint8_t {
  list_queues,
  put_queue,
  get_queue,
  delete_queue,
  patch_queue,
  enqueue,
  receive,
  ack,
  nack,
  extend,
  dead_letters,
  redrive,
  groups,
  purge,
  peek,
  delete_dead_letters,
  delete_dead_letter,
  list_topics,
  put_topic,
  get_topic,
  delete_topic,
  publish,
  checkpoint,
  metrics,
  healthz,
  unknown,
};
inline constexpr std::size_t route_count = static_cast<std::size_t>(route::unknown) + 1;
std::string_view to_string(route r);

/// A histogram with fixed upper bounds (seconds, or any unit), Prometheus style.
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  /// Appends `<name>_bucket{<labels>,le=...}`, `_sum` and `_count` lines.
  void render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  ///< per bucket (not cumulative), +Inf last
  double sum_ = 0;
};

/// The HTTP connections: the listener (http_server.cpp) counts them and applies its cap to them.
struct connection_counts {
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> max{0};                ///< the cap (`limits.connections`) enforced
  std::atomic<std::size_t> anonymous{0};          ///< open connections no valid token was seen on
  std::atomic<std::uint64_t> refused_cap{0};      ///< closed at once: `limits.connections` open
  std::atomic<std::uint64_t> refused_reserve{0};  ///< anonymous requests refused in the reserve
  /// Idle connections in the reserve closed at the cap to make room for a new one.
  std::atomic<std::uint64_t> evicted{0};
  std::atomic<std::uint64_t> accept_emfile{0};  ///< accepts failed: the process's descriptors
  std::atomic<std::uint64_t> accept_enfile{0};  ///< accepts failed: the system's descriptors
  std::atomic<std::uint64_t> accept_other{0};   ///< accepts failed otherwise
  std::atomic<std::size_t> answer_bytes{0};     ///< answers being written (`limits.answer_bytes`)
  std::atomic<std::size_t> large_answer_bytes{0};  ///< of those, answers over 64 KiB (the bound's)
  std::atomic<std::uint64_t> refused_answers{0};   ///< answers refused over `limits.answer_bytes`
  /// HTTPS connections closed because their TLS handshake failed or timed out.
  std::atomic<std::uint64_t> tls_handshake_failed{0};
};

/// What the HTTP front end measures itself. Thread-safe.
class server_metrics {
 public:
  server_metrics();

  connection_counts& connections() { return connections_; }

  void observe_request(route r, unsigned status, double seconds);

  /// A tokens_file reload (SIGHUP): `ok` when the new tokens are in force, else the old ones stay.
  void count_tokens_reload(bool ok) { ++(ok ? tokens_reloaded_ : tokens_reload_failed_); }

  /// The whole exposition: the queues' counters and gauges, the store's batch histogram and
  /// health, this front end's histograms, and the process's figures. Counts a scrape.
  std::string render(const std::vector<queue_stats>& queues, const store_stats* store) const;

  /// A scrape took `seconds` from its request to its rendered page (the next scrape shows it).
  void note_scrape(double seconds) { last_scrape_us_ = static_cast<std::uint64_t>(seconds * 1e6); }

 private:
  mutable std::mutex mtx_;
  std::vector<histogram> request_latency_;                             ///< per route
  std::array<std::array<std::uint64_t, 6>, route_count> responses_{};  ///< per route, status/100
  connection_counts connections_;
  std::atomic<std::uint64_t> tokens_reloaded_{0};
  std::atomic<std::uint64_t> tokens_reload_failed_{0};
  mutable std::atomic<std::uint64_t> scrapes_{0};  ///< render() calls: /metrics pages served
  std::atomic<std::uint64_t> last_scrape_us_{0};
};

/// Appends the process's series (process_cpu_seconds_total, process_resident_memory_bytes,
/// process_virtual_memory_bytes, process_start_time_seconds, process_open_fds, process_max_fds,
/// read from /proc) and laneq_build_info (process_metrics.cpp).
void render_process(std::string& out);

/// Escapes a Prometheus label value (backslash, double quote, newline).
std::string escape_label(std::string_view v);

}  // namespace laneq::server
