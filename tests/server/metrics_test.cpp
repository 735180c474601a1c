// The series of /metrics an operator watches a queue and the process by (docs/operations.md
// "Metrics"): each scraped after doing what moves it, through a real socket to an in-process
// server over an in-memory broker.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "laneq/version.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

using namespace std::chrono_literals;

/// The value of the sample `series` (name and labels exactly as printed) in a /metrics page;
/// -1 when it is absent.
double sample(const std::string& page, const std::string& series) {
  auto at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(page.c_str() + at + series.size() + 2, nullptr);
}

class metrics : public ::testing::Test {
 protected:
  in_process_server srv_;
  std::uint16_t port() const { return srv_.port(); }

  void create(const std::string& name, const std::string& spec = "{}") {
    auto r = put(port(), "/v1/queues/" + name, spec);
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.body;
  }
  void send(const std::string& name, const std::string& body) {
    auto r = post(port(), "/v1/queues/" + name + "/messages", body);
    ASSERT_EQ(r.status, 200u) << r.body;
  }
  json::array receive(const std::string& name, const std::string& body = R"({"max": 10})") {
    auto r = post(port(), "/v1/queues/" + name + "/receive", body);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.status == 200 ? r.obj().at("messages").as_array() : json::array{};
  }
  static std::string lease_of(const json::value& m) {
    return std::string{m.as_object().at("lease").as_string()};
  }
  std::string scrape() {
    auto r = get(port(), "/metrics");
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.body;
  }
};

TEST_F(metrics, an_empty_receive_and_an_empty_long_poll_each_count_once) {
  create("q");
  EXPECT_EQ(sample(scrape(), "laneq_empty_receives_total{queue=\"q\"}"), 0);
  EXPECT_TRUE(receive("q", R"({"max": 1})").empty());
  EXPECT_EQ(sample(scrape(), "laneq_empty_receives_total{queue=\"q\"}"), 1);
  EXPECT_TRUE(receive("q", R"({"max": 1, "wait_ms": 50})").empty());
  EXPECT_EQ(sample(scrape(), "laneq_empty_receives_total{queue=\"q\"}"), 2);
  send("q", R"({"body": "x"})");
  EXPECT_EQ(receive("q", R"({"max": 1})").size(), 1u);
  EXPECT_EQ(sample(scrape(), "laneq_empty_receives_total{queue=\"q\"}"), 2);
}

// A sharded queue's gateway asks each shard without waiting: the queue counts the receive once,
// not once per shard that had nothing.
TEST_F(metrics, a_sharded_queue_counts_an_empty_receive_once) {
  create("s", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]},
                  "shards": 3, "shard_key": [{"header": "account"}]})");
  EXPECT_TRUE(receive("s", R"({"max": 1})").empty());
  EXPECT_TRUE(receive("s", R"({"max": 1, "wait_ms": 50})").empty());
  EXPECT_EQ(sample(scrape(), "laneq_empty_receives_total{queue=\"s\"}"), 2);
}

// Retention's counters (docs/api.md "Retention") are there for every queue from its start, the
// expired messages per action taken; GET stats shows the same figures.
TEST_F(metrics, expiry_counters_are_exposed_per_queue_and_action) {
  create("r", R"({"retention_ms": 60000, "on_expiry": "drop",
                  "dead_letter_retention_ms": 3600000})");
  auto page = scrape();
  EXPECT_NE(page.find("# TYPE laneq_expired_total counter\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE laneq_dead_letters_expired_total counter\n"), std::string::npos);
  EXPECT_EQ(sample(page, "laneq_expired_total{queue=\"r\",action=\"dead_letter\"}"), 0) << page;
  EXPECT_EQ(sample(page, "laneq_expired_total{queue=\"r\",action=\"drop\"}"), 0) << page;
  EXPECT_EQ(sample(page, "laneq_dead_letters_expired_total{queue=\"r\"}"), 0) << page;
  auto got = get(port(), "/v1/queues/r");
  ASSERT_EQ(got.status, 200u) << got.body;
  const auto& stats = got.obj().at("stats").as_object();
  for (const char* f : {"expired_dead_lettered", "expired_dropped", "dead_letters_expired"})
    EXPECT_EQ(stats.at(f).to_number<std::int64_t>(), 0) << f << ": " << got.body;
}

TEST_F(metrics, the_oldest_dead_letter_ages_until_it_is_redriven) {
  create("q");
  auto page = scrape();
  EXPECT_EQ(sample(page, "laneq_oldest_dead_letter_age_seconds{queue=\"q\"}"), 0) << page;
  send("q", R"({"body": "x"})");
  auto got = receive("q", R"({"max": 1})");
  ASSERT_EQ(got.size(), 1u);
  auto n = post(port(), "/v1/queues/q/nack",
                R"({"lease": ")" + lease_of(got[0]) + R"(", "dead_letter": true})");
  ASSERT_EQ(n.status, 200u) << n.body;
  std::this_thread::sleep_for(30ms);  // the broker's wall clock moves on
  page = scrape();
  EXPECT_EQ(sample(page, "laneq_dead_letters{queue=\"q\"}"), 1) << page;
  auto age = sample(page, "laneq_oldest_dead_letter_age_seconds{queue=\"q\"}");
  EXPECT_GE(age, 0.02) << page;
  EXPECT_LT(age, 60) << page;
  ASSERT_EQ(post(port(), "/v1/queues/q/dead-letters/redrive", "{}").status, 200u);
  page = scrape();
  EXPECT_EQ(sample(page, "laneq_oldest_dead_letter_age_seconds{queue=\"q\"}"), 0) << page;
}

TEST_F(metrics, the_oldest_waiting_message_ages_and_in_flight_ones_do_not_count) {
  create("q");
  send("q", R"({"body": "x"})");
  std::this_thread::sleep_for(30ms);
  auto page = scrape();
  auto age = sample(page, "laneq_oldest_waiting_message_age_seconds{queue=\"q\"}");
  EXPECT_GE(age, 0.02) << page;
  EXPECT_LT(age, 60) << page;
  ASSERT_EQ(receive("q", R"({"max": 1})").size(), 1u);
  page = scrape();
  EXPECT_EQ(sample(page, "laneq_oldest_waiting_message_age_seconds{queue=\"q\"}"), 0) << page;
}

TEST_F(metrics, groups_are_counted_per_state_and_delayed_messages_per_queue) {
  create("q", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  send("q", R"({"messages": [{"body": "1", "headers": {"account": "a"}},
                             {"body": "2", "headers": {"account": "b"}},
                             {"body": "3", "headers": {"account": "c"}, "delay_ms": 600000}]})");
  ASSERT_EQ(receive("q", R"({"max": 1})").size(), 1u);  // one of a and b goes in flight
  auto page = scrape();
  EXPECT_EQ(sample(page, "laneq_groups{queue=\"q\",state=\"in_flight\"}"), 1) << page;
  EXPECT_EQ(sample(page, "laneq_groups{queue=\"q\",state=\"ready\"}"), 1) << page;
  EXPECT_EQ(sample(page, "laneq_groups{queue=\"q\",state=\"delayed\"}"), 1) << page;
  EXPECT_EQ(sample(page, "laneq_groups{queue=\"q\",state=\"throttled\"}"), 0) << page;
  EXPECT_EQ(sample(page, "laneq_delayed_messages{queue=\"q\"}"), 1) << page;
}

TEST_F(metrics, an_unordered_delayed_message_counts_as_delayed) {
  create("q");
  send("q", R"({"body": "later", "delay_ms": 600000})");
  auto page = scrape();
  EXPECT_EQ(sample(page, "laneq_delayed_messages{queue=\"q\"}"), 1) << page;
  // Not deliverable yet: it does not wait for a consumer.
  EXPECT_EQ(sample(page, "laneq_oldest_waiting_message_age_seconds{queue=\"q\"}"), 0) << page;
}

TEST_F(metrics, receive_to_ack_time_is_observed_per_acked_message) {
  create("q");
  send("q", R"({"body": "x"})");
  auto got = receive("q", R"({"max": 1})");
  ASSERT_EQ(got.size(), 1u);
  std::this_thread::sleep_for(20ms);
  ASSERT_EQ(post(port(), "/v1/queues/q/ack", R"({"lease": ")" + lease_of(got[0]) + R"("})").status,
            200u);
  auto page = scrape();
  EXPECT_EQ(sample(page, "laneq_receive_to_ack_seconds_count{queue=\"q\"}"), 1) << page;
  EXPECT_GE(sample(page, "laneq_receive_to_ack_seconds_sum{queue=\"q\"}"), 0.015) << page;
  EXPECT_EQ(sample(page, "laneq_receive_to_ack_seconds_bucket{queue=\"q\",le=\"0.001\"}"), 0)
      << page;
  EXPECT_EQ(sample(page, "laneq_receive_to_ack_seconds_bucket{queue=\"q\",le=\"+Inf\"}"), 1)
      << page;
}

/// Spends `cpu` of this process's CPU time (proc(5) counts it in clock ticks of 10 ms, so a
/// fresh process in a fast build may show none at all).
void burn_cpu(std::chrono::milliseconds cpu) {
  auto until = std::clock() + static_cast<std::clock_t>(cpu.count() * CLOCKS_PER_SEC / 1000);
  volatile std::uint64_t sink = 0;
  while (std::clock() < until)
    for (int i = 0; i < 10000; ++i) sink = sink + static_cast<std::uint64_t>(i);
}

TEST_F(metrics, the_process_series_have_plausible_values) {
  burn_cpu(50ms);
  auto page = scrape();
  EXPECT_GT(sample(page, "process_resident_memory_bytes"), 1e6) << page;
  EXPECT_GT(sample(page, "process_virtual_memory_bytes"), 1e6) << page;
  EXPECT_GE(sample(page, "process_cpu_seconds_total"), 0.03) << page;  // the 50 ms burnt
  auto fds = sample(page, "process_open_fds");
  EXPECT_GE(fds, 3) << page;  // stdin, stdout, stderr at least, and the listener
  EXPECT_GE(sample(page, "process_max_fds"), fds) << page;
  auto now = static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  auto start = sample(page, "process_start_time_seconds");
  // The start time is the kernel's boot time (whole seconds, /proc/stat btime) plus the process's
  // start in ticks after boot; on a VM whose clock was stepped or slewed since boot it drifts from
  // the wall clock by seconds (measured: 2 s on a CI VM up 20 h).
  EXPECT_LE(start, now + 60) << page;
  EXPECT_GT(start, now - 3600) << page;  // this test process started within the hour
  EXPECT_EQ(sample(page, std::string{"laneq_build_info{version=\""} + version_string + "\"}"), 1)
      << page;
}

TEST_F(metrics, a_scrape_counts_itself_and_reports_how_long_the_last_one_took) {
  auto first = scrape();
  EXPECT_EQ(sample(first, "laneq_metrics_scrapes_total"), 1) << first;
  auto second = scrape();
  EXPECT_EQ(sample(second, "laneq_metrics_scrapes_total"), 2) << second;
  auto took = sample(second, "laneq_metrics_last_scrape_duration_seconds");
  EXPECT_GT(took, 0) << second;
  EXPECT_LT(took, 30) << second;
  // The scrape's own connection is open while its page is rendered.
  EXPECT_GE(sample(second, "laneq_http_connections"), 1) << second;
}

TEST_F(metrics, the_store_series_are_present_for_the_memory_store_too) {
  auto page = scrape();
  for (const std::string series :
       {"laneq_store_live_data_bytes", "laneq_store_pending_compaction_bytes",
        "laneq_store_write_stopped", "laneq_store_delayed_write_rate_bytes",
        "laneq_store_write_stalls_total{kind=\"stop\"}",
        "laneq_store_write_stalls_total{kind=\"slowdown\"}"})
    EXPECT_EQ(sample(page, series), 0) << series << "\n" << page;
}

}  // namespace
}  // namespace laneq::server::test
