// Prometheus metrics (apps/server/include/laneq/server/metrics.hpp).
#include "laneq/server/metrics.hpp"

#include "laneq/actors/context.hpp"

#include <cstdio>
#include <span>

namespace laneq::server {

namespace {

std::vector<double> latency_bounds() {
  return {latency_bounds_s.begin(), latency_bounds_s.end()};
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// Appends `<name>_bucket{<labels>,le=...}` (cumulative), `_sum` and `_count` lines from
/// per-bucket counts (`counts` has one more entry than `bounds`: the +Inf bucket).
void render_buckets(std::string& out, std::string_view name, std::string_view labels,
                    std::span<const double> bounds, std::span<const std::uint64_t> counts,
                    double sum) {
  std::uint64_t cumulative = 0;
  auto sep = labels.empty() ? "" : ",";
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += counts[i];
    out += name;
    out += "_bucket{";
    out += labels;
    out += sep;
    out += "le=\"";
    out += i < bounds.size() ? num(bounds[i]) : std::string{"+Inf"};
    out += "\"} ";
    out += std::to_string(cumulative);
    out += '\n';
  }
  auto braces = labels.empty() ? std::string{} : "{" + std::string{labels} + "}";
  out += std::string{name} + "_sum" + braces + " " + num(sum) + "\n";
  out += std::string{name} + "_count" + braces + " " + std::to_string(cumulative) + "\n";
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

/// A metric with one unlabelled sample: its HELP and TYPE lines, then the sample.
void single(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            std::uint64_t value) {
  header(out, name, type, help);
  out += name;
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

/// A sample of a labelled series: `name{label="value"} n`.
void labelled(std::string& out, std::string_view name, std::string_view label,
              std::string_view value, std::uint64_t n) {
  out += std::string{name} + "{" + std::string{label} + "=\"" + std::string{value} + "\"} " +
         std::to_string(n) + "\n";
}

/// The HTTP connections: open, the cap, refusals and failed accepts.
void render_connections(std::string& out, const connection_counts& c) {
  single(out, "laneq_http_connections", "gauge", "HTTP connections open.", c.open);
  single(out, "laneq_http_connections_max", "gauge",
         "The HTTP connection cap: limits.connections, lowered to fit the descriptor limit.",
         c.max);
  single(out, "laneq_http_connections_anonymous", "gauge",
         "HTTP connections open on which no valid token was seen yet.", c.anonymous);
  const char* refused = "laneq_http_connections_refused_total";
  header(out, refused, "counter",
         "HTTP connections closed at once at the connection cap (cap), anonymous requests "
         "refused on connections from the reserve (reserve), idle connections in the reserve "
         "closed at the cap to make room (evicted).");
  labelled(out, refused, "reason", "cap", c.refused_cap);
  labelled(out, refused, "reason", "reserve", c.refused_reserve);
  labelled(out, refused, "reason", "evicted", c.evicted);
  const char* accept = "laneq_http_accept_errors_total";
  header(out, accept, "counter",
         "HTTP accepts that failed: out of the process's descriptors (emfile), of the system's "
         "(enfile), other; each is followed by a 100 ms back-off.");
  labelled(out, accept, "reason", "emfile", c.accept_emfile);
  labelled(out, accept, "reason", "enfile", c.accept_enfile);
  labelled(out, accept, "reason", "other", c.accept_other);
  single(out, "laneq_http_tls_handshake_failures_total", "counter",
         "HTTPS connections closed because their TLS handshake failed or did not end within "
         "limits.head_timeout_ms (plain HTTP to the HTTPS port included).",
         c.tls_handshake_failed);
}

struct queue_series {
  const char* name;
  const char* type;
  const char* help;
  std::uint64_t queue_stats::*field;
};

constexpr queue_series per_queue[] = {
    {"laneq_enqueued_total", "counter", "Messages enqueued since the broker started.",
     &queue_stats::enqueued},
    {"laneq_delivered_total", "counter", "Deliveries (every attempt).", &queue_stats::delivered},
    {"laneq_acked_total", "counter", "Messages acknowledged.", &queue_stats::acked},
    {"laneq_nacked_total", "counter", "Deliveries given back with nack.", &queue_stats::nacked},
    {"laneq_lease_expired_total", "counter", "Leases that ran out.", &queue_stats::lease_expired},
    {"laneq_dead_lettered_total", "counter", "Messages moved to the dead-letter list.",
     &queue_stats::dead_lettered},
    {"laneq_redriven_total", "counter", "Dead letters redriven.", &queue_stats::redriven},
    {"laneq_purged_total", "counter", "Waiting messages removed by a purge.", &queue_stats::purged},
    {"laneq_dead_letters_deleted_total", "counter", "Dead letters deleted (not redriven).",
     &queue_stats::dead_letters_deleted},
    {"laneq_dead_letters_expired_total", "counter",
     "Dead letters deleted because they outlived the queue's dead_letter_retention_ms.",
     &queue_stats::dead_letters_expired},
    {"laneq_lane_key_missing_total", "counter", "Messages that lacked an ordering key component.",
     &queue_stats::key_missing},
    {"laneq_rejected_total", "counter", "Enqueues refused.", &queue_stats::rejected},
    {"laneq_deduplicated_total", "counter",
     "Enqueues answered with an earlier message's id (dedupe window).", &queue_stats::deduplicated},
    {"laneq_queue_full_total", "counter",
     "Enqueues refused with queue_full: the queue was at its max_depth.",
     &queue_stats::refused_full},
    {"laneq_dedupe_evictions_total", "counter",
     "Dedupe keys forgotten before their window ended: the window held its entry bound.",
     &queue_stats::dedupe_evictions},
    {"laneq_recovered_total", "counter", "Messages found in the store at start.",
     &queue_stats::recovered},
    {"laneq_window_reads_total", "counter",
     "Store reads of group windows (messages beyond group_window are read back).",
     &queue_stats::window_reads},
    {"laneq_window_read_messages_total", "counter", "Messages read back into group windows.",
     &queue_stats::window_read_messages},
    {"laneq_corrupt_records_total", "counter",
     "Message records that failed their checksum when read back; each stops its group.",
     &queue_stats::corrupt_records},
    {"laneq_backlog", "gauge", "Messages in the queue, in flight included.", &queue_stats::backlog},
    {"laneq_backlog_bytes", "gauge",
     "Body bytes of the messages in the queue (what max_depth.bytes bounds).",
     &queue_stats::backlog_bytes},
    {"laneq_in_flight", "gauge", "Messages delivered and not yet acked.", &queue_stats::in_flight},
    {"laneq_live_groups", "gauge", "Ordering groups with messages.", &queue_stats::live_groups},
    {"laneq_dead_letters", "gauge", "Messages on the dead-letter list.",
     &queue_stats::dead_letters},
    {"laneq_waiting_receives", "gauge", "Long-poll receives waiting.",
     &queue_stats::waiting_receives},
    {"laneq_window_bytes", "gauge",
     "Memory of the messages the queue's groups hold (counted against window_budget_mb).",
     &queue_stats::window_bytes},
    {"laneq_delayed_messages", "gauge",
     "Messages waiting for their not-before time (an enqueue delay or a nack's retry_after): "
     "unordered messages in memory and group heads.",
     &queue_stats::delayed},
    {"laneq_empty_receives_total", "counter",
     "Receives and long polls answered with no message (a long poll once its wait ran out).",
     &queue_stats::empty_receives},
};

/// Messages that outlived their queue's retention, per action taken (docs/api.md "Retention").
void render_expired(std::string& out, const std::vector<queue_stats>& queues) {
  const char* name = "laneq_expired_total";
  header(out, name, "counter",
         "Messages that outlived the queue's retention_ms: moved to the dead letters (also in "
         "laneq_dead_lettered_total) or dropped.");
  for (const auto& q : queues) {
    auto labels = std::string{name} + "{queue=\"" + escape_label(q.name) + "\",action=\"";
    out += labels + "dead_letter\"} " + std::to_string(q.expired_dead_lettered) + "\n";
    out += labels + "drop\"} " + std::to_string(q.expired_dropped) + "\n";
  }
}

/// A per-queue gauge of seconds from a figure in microseconds.
void render_ages(std::string& out, const std::vector<queue_stats>& queues, const char* name,
                 const char* help, std::int64_t queue_stats::*field) {
  header(out, name, "gauge", help);
  for (const auto& q : queues)
    out += std::string{name} + "{queue=\"" + escape_label(q.name) + "\"} " +
           num(static_cast<double>(q.*field) / 1e6) + "\n";
}

/// The figures the queues measure when asked: ages, groups per state, receive-to-ack times.
void render_queue_measures(std::string& out, const std::vector<queue_stats>& queues) {
  render_ages(out, queues, "laneq_oldest_waiting_message_age_seconds",
              "How long the message waiting longest for a consumer has waited since it became "
              "deliverable (ready or throttled; neither delayed nor in flight); 0 when none waits.",
              &queue_stats::oldest_waiting_us);
  render_ages(out, queues, "laneq_oldest_dead_letter_age_seconds",
              "Age of the oldest dead letter (since it was dead-lettered); 0 without dead letters.",
              &queue_stats::oldest_dead_letter_us);
  header(out, "laneq_groups", "gauge",
         "Live ordering groups per state, as GET /v1/queues/{q}/groups reports them.");
  for (const auto& q : queues) {
    if (q.groups_by_state.size() != group_status_count) continue;
    for (std::size_t i = 0; i < group_status_count; ++i)
      out += "laneq_groups{queue=\"" + escape_label(q.name) + "\",state=\"" +
             std::string{to_string(static_cast<group_status>(i))} + "\"} " +
             std::to_string(q.groups_by_state[i]) + "\n";
  }
  header(out, "laneq_receive_to_ack_seconds", "histogram",
         "Time from a delivery to the ack that ended its lease, per message acked.");
  for (const auto& q : queues) {
    if (q.receive_to_ack.size() != latency_bounds_s.size() + 1) continue;
    render_buckets(out, "laneq_receive_to_ack_seconds", "queue=\"" + escape_label(q.name) + "\"",
                   latency_bounds_s, q.receive_to_ack,
                   static_cast<double>(q.receive_to_ack_sum_us) / 1e6);
  }
}

/// RocksDB's figures (0 for the memory store).
void render_rocksdb(std::string& out, const store_stats& s) {
  single(out, "laneq_store_live_data_bytes", "gauge",
         "RocksDB's estimate of the live data in the store (rocksdb.estimate-live-data-size).",
         s.live_data_bytes);
  single(out, "laneq_store_pending_compaction_bytes", "gauge",
         "Bytes RocksDB estimates compaction has to rewrite "
         "(rocksdb.estimate-pending-compaction-bytes); writes slow, then stop, as it grows.",
         s.pending_compaction_bytes);
  single(out, "laneq_store_write_stopped", "gauge",
         "1 while RocksDB stops writes (rocksdb.is-write-stopped).", s.write_stopped ? 1 : 0);
  single(out, "laneq_store_delayed_write_rate_bytes", "gauge",
         "The write rate in bytes per second RocksDB slows writes to, 0 when not slowed "
         "(rocksdb.actual-delayed-write-rate).",
         s.delayed_write_rate);
  const char* stalls = "laneq_store_write_stalls_total";
  header(out, stalls, "counter",
         "RocksDB write stalls since start: stop (writes stopped), slowdown (writes slowed).");
  labelled(out, stalls, "kind", "stop", s.write_stops);
  labelled(out, stalls, "kind", "slowdown", s.write_slowdowns);
}

}  // namespace

std::string_view to_string(route r) {
  switch (r) {
    case route::list_queues: return "list_queues";
    case route::put_queue: return "put_queue";
    case route::get_queue: return "get_queue";
    case route::delete_queue: return "delete_queue";
    case route::patch_queue: return "patch_queue";
    case route::enqueue: return "enqueue";
    case route::receive: return "receive";
    case route::ack: return "ack";
    case route::nack: return "nack";
    case route::extend: return "extend";
    case route::dead_letters: return "dead_letters";
    case route::redrive: return "redrive";
    case route::groups: return "groups";
    case route::purge: return "purge";
    case route::peek: return "peek";
    case route::delete_dead_letters: return "delete_dead_letters";
    case route::delete_dead_letter: return "delete_dead_letter";
    case route::list_topics: return "list_topics";
    case route::put_topic: return "put_topic";
    case route::get_topic: return "get_topic";
    case route::delete_topic: return "delete_topic";
    case route::publish: return "publish";
    case route::checkpoint: return "checkpoint";
    case route::metrics: return "metrics";
    case route::healthz: return "healthz";
    case route::unknown: return "unknown";
  }
  return "unknown";
}

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double v) {
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
}

void histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  render_buckets(out, name, labels, bounds_, counts_, sum_);
}

server_metrics::server_metrics() {
  request_latency_.reserve(route_count);
  for (std::size_t i = 0; i < route_count; ++i) request_latency_.emplace_back(latency_bounds());
}

void server_metrics::observe_request(route r, unsigned status, double seconds) {
  std::lock_guard guard{mtx_};
  auto i = static_cast<std::size_t>(r);
  request_latency_[i].observe(seconds);
  auto cls = status / 100;
  if (cls < 6) ++responses_[i][cls];
}

std::string server_metrics::render(const std::vector<queue_stats>& queues,
                                   const store_stats* store) const {
  auto scrapes = ++scrapes_;
  std::string out;
  out.reserve(8192 + queues.size() * 2048);
  for (const auto& s : per_queue) {
    header(out, s.name, s.type, s.help);
    for (const auto& q : queues) {
      out += s.name;
      out += "{queue=\"" + escape_label(q.name) + "\"} ";
      out += std::to_string(q.*(s.field));
      out += '\n';
    }
  }
  header(out, "laneq_fairness_key_backlog", "gauge",
         "Messages ready or waiting for delivery per fairness key (group heads and unordered "
         "messages); the largest keys per queue, the rest summed under fairness_key=\"(other)\".");
  for (const auto& q : queues)
    for (const auto& f : q.fairness)
      out += "laneq_fairness_key_backlog{queue=\"" + escape_label(q.name) + "\",fairness_key=\"" +
             (f.other ? std::string{"(other)"} : escape_label(f.key)) + "\"} " +
             std::to_string(f.backlog) + "\n";
  header(out, "laneq_enqueue_to_delivery_seconds", "histogram",
         "Time from enqueue to first delivery (an enqueue delay included), however the message "
         "was received: HTTP, CAF remote or in process.");
  for (const auto& q : queues) {
    if (q.first_delivery.size() != latency_bounds_s.size() + 1) continue;
    render_buckets(out, "laneq_enqueue_to_delivery_seconds",
                   "queue=\"" + escape_label(q.name) + "\"", latency_bounds_s, q.first_delivery,
                   static_cast<double>(q.first_delivery_sum_us) / 1e6);
  }
  render_expired(out, queues);
  render_queue_measures(out, queues);
  single(out, "laneq_queues", "gauge", "Queues on this broker.", queues.size());
  if (store != nullptr) {
    header(out, "laneq_store_batch_writes", "histogram",
           "Write requests per committed store batch (group commit).");
    std::uint64_t cumulative = 0;
    for (std::size_t k = 0; k < store->batch_histogram.size(); ++k) {
      cumulative += store->batch_histogram[k];
      auto le = (std::uint64_t{1} << (k + 1)) - 1;
      out += "laneq_store_batch_writes_bucket{le=\"" + std::to_string(le) + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "laneq_store_batch_writes_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
    out += "laneq_store_batch_writes_sum " + std::to_string(store->writes) + "\n";
    out += "laneq_store_batch_writes_count " + std::to_string(cumulative) + "\n";
    header(out, "laneq_store_commit_seconds", "histogram",
           "Time to write one committed store batch, its WAL sync included.");
    if (store->commit_histogram.size() == latency_bounds_s.size() + 1)
      render_buckets(out, "laneq_store_commit_seconds", "", latency_bounds_s,
                     store->commit_histogram, static_cast<double>(store->commit_sum_us) / 1e6);
    single(out, "laneq_store_batches_total", "counter", "Committed store batches.", store->batches);
    single(out, "laneq_store_bytes_total", "counter", "Key and value bytes committed.",
           store->bytes);
    single(out, "laneq_store_syncs_total", "counter", "Batches written with sync.", store->syncs);
    single(out, "laneq_store_failed_batches_total", "counter", "Store batches that failed.",
           store->failed_batches);
    single(out, "laneq_store_degraded", "gauge", "1 while the store is degraded.",
           store->degraded ? 1 : 0);
    single(out, "laneq_store_free_bytes", "gauge",
           "Free bytes on the data directory's file system (0 without a disk).", store->free_bytes);
    single(out, "laneq_store_reserve_bytes", "gauge",
           "Free space below which enqueues are refused (storage_failed).", store->reserve_bytes);
    single(out, "laneq_store_low_space", "gauge",
           "1 while enqueues are refused for space (below the reserve).", store->low_space ? 1 : 0);
    single(out, "laneq_store_refused_low_space_total", "counter",
           "Enqueues refused because the disk was below its reserve.", store->refused_low_space);
    render_rocksdb(out, *store);
  }
  render_connections(out, connections_);
  single(out, "laneq_http_answer_bytes", "gauge",
         "Bytes of HTTP answers being written (limits.answer_bytes).", connections_.answer_bytes);
  single(out, "laneq_http_answers_refused_total", "counter",
         "Answers refused (503) because answers waiting for their clients held "
         "limits.answer_bytes.",
         connections_.refused_answers);
  const char* reload = "laneq_tokens_reload_total";
  header(out, reload, "counter",
         "tokens_file reloads on SIGHUP: ok (the new tokens are in force), error (the file was "
         "refused and the old tokens stay).");
  labelled(out, reload, "result", "ok", tokens_reloaded_);
  labelled(out, reload, "result", "error", tokens_reload_failed_);
  single(out, "laneq_metrics_scrapes_total", "counter", "/metrics pages served, this one included.",
         scrapes);
  header(out, "laneq_metrics_last_scrape_duration_seconds", "gauge",
         "How long the previous /metrics scrape took, from its request to its page (gathering "
         "every queue's and the store's figures included).");
  out += "laneq_metrics_last_scrape_duration_seconds " +
         num(static_cast<double>(last_scrape_us_.load()) / 1e6) + "\n";
  render_process(out);
  std::lock_guard guard{mtx_};
  header(out, "laneq_http_request_duration_seconds", "histogram",
         "HTTP request latency per route, from parsed request to response.");
  for (std::size_t i = 0; i < route_count; ++i)
    request_latency_[i].render(out, "laneq_http_request_duration_seconds",
                               "route=\"" + std::string{to_string(static_cast<route>(i))} + "\"");
  header(out, "laneq_http_responses_total", "counter", "HTTP responses per route and class.");
  for (std::size_t i = 0; i < route_count; ++i)
    for (std::size_t c = 1; c < 6; ++c)
      if (responses_[i][c] > 0)
        out += "laneq_http_responses_total{route=\"" +
               std::string{to_string(static_cast<route>(i))} + "\",code=\"" + std::to_string(c) +
               "xx\"} " + std::to_string(responses_[i][c]) + "\n";
  return out;
}

}  // namespace laneq::server
