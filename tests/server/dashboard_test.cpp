// The Grafana dashboard (packaging/grafana/laneq-dashboard.json, docs/operations.md "Metrics")
// uses only metrics laneqd exposes: a laneqd process is given a queue with traffic, its /metrics
// scraped, and every metric name of the dashboard's expressions looked up in the page. With a
// canary: a dashboard naming an invented metric must be reported. Also run as
// docs.grafana_dashboard (label docs).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "dashboard_check.hpp"
#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

namespace dash = dashboard;

json::value load_dashboard() {
  std::ifstream in{std::string{LANEQ_SOURCE_DIR} + "/packaging/grafana/laneq-dashboard.json"};
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

TEST(grafana_dashboard, expressions_name_the_metrics_they_select_and_nothing_else) {
  EXPECT_EQ(dash::metric_names(R"(histogram_quantile(0.99, sum by (queue, le) )"
                               R"((rate(laneq_receive_to_ack_seconds_bucket{queue=~"$queue",)"
                               R"(le!="x"}[$__rate_interval]))))"),
            (std::set<std::string>{"laneq_receive_to_ack_seconds_bucket"}));
  EXPECT_EQ(dash::metric_names("rate(process_cpu_seconds_total{instance=~\"${instance}\"}[5m]) "
                               "and on (instance) laneq_build_info"),
            (std::set<std::string>{"process_cpu_seconds_total", "laneq_build_info"}));
  EXPECT_EQ(dash::metric_names("sum(rate(a_total[1m])) by (route) / ignoring(x) b > bool 0.5"),
            (std::set<std::string>{"a_total", "b"}));
}

TEST(grafana_dashboard, a_page_offers_its_samples_and_the_series_of_its_histograms) {
  auto names = dash::exposed_names(
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 0\n# TYPE g gauge\ng{queue=\"q\"} 1\n"
      "plain 2\n");
  EXPECT_EQ(names, (std::set<std::string>{"h_bucket", "h_sum", "h_count", "g", "plain"}));
}

// The canary: the checker must catch a name laneqd does not expose, in a panel nested in a row
// and in a variable's label_values query.
TEST(grafana_dashboard, canary_an_invented_metric_is_reported) {
  auto d = json::parse(R"js({
    "panels": [{"type": "row", "panels": [{"targets": [
      {"expr": "sum by (queue) (rate(laneq_invented_total{queue=~\"$queue\"}[5m]))"},
      {"expr": "laneq_backlog"}]}]}],
    "templating": {"list": [{"type": "query", "name": "queue",
      "query": {"query": "label_values(laneq_made_up{instance=~\"$instance\"}, queue)"}}]}})js");
  auto missing = dash::missing_names(d, {"laneq_backlog"});
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0].rfind("laneq_invented_total in: ", 0), 0u) << missing[0];
  EXPECT_EQ(missing[1].rfind("laneq_made_up in: ", 0), 0u) << missing[1];
}

class grafana_dashboard_daemon : public daemon_test {
 protected:
  grafana_dashboard_daemon() : daemon_test("dashboard") {}
};

TEST_F(grafana_dashboard_daemon, every_metric_the_dashboard_uses_is_exposed_by_laneqd) {
  auto d = load_dashboard();
  ASSERT_TRUE(d.is_object());
  // Per-queue series appear once a queue exists; give it an ack, a nack and a dead letter.
  ASSERT_EQ(put(port_, "/v1/queues/q", "{}").status, 201u);
  ASSERT_EQ(post(port_, "/v1/queues/q/messages", R"({"messages": [{"body": "1"}, {"body": "2"}]})")
                .status,
            200u);
  auto r = post(port_, "/v1/queues/q/receive", R"({"max": 2})");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto& msgs = r.obj().at("messages").as_array();
  ASSERT_EQ(msgs.size(), 2u);
  auto lease = [&msgs](std::size_t i) {
    return std::string{msgs[i].as_object().at("lease").as_string()};
  };
  EXPECT_EQ(post(port_, "/v1/queues/q/ack", R"({"lease": ")" + lease(0) + R"("})").status, 200u);
  EXPECT_EQ(
      post(port_, "/v1/queues/q/nack", R"({"lease": ")" + lease(1) + R"(", "dead_letter": true})")
          .status,
      200u);
  auto page = get(port_, "/metrics");
  ASSERT_EQ(page.status, 200u) << page.body;
  auto missing = dash::missing_names(d, dash::exposed_names(page.body));
  for (const auto& m : missing) ADD_FAILURE() << "not exposed by laneqd: " << m;
  // The dashboard is not empty, and checks what it should: queues, process, store.
  auto used = std::set<std::string>{};
  for (const auto& e : dash::expressions(d))
    for (const auto& n : dash::metric_names(e)) used.insert(n);
  for (const char* name :
       {"laneq_enqueued_total", "laneq_delivered_total", "laneq_acked_total", "laneq_backlog",
        "laneq_oldest_waiting_message_age_seconds", "laneq_dead_letters", "laneq_groups",
        "laneq_receive_to_ack_seconds_bucket", "laneq_http_connections",
        "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
        "laneq_store_write_stalls_total", "laneq_store_pending_compaction_bytes"})
    EXPECT_TRUE(used.contains(name)) << name;
}

TEST_F(grafana_dashboard_daemon, laneqd_exposes_rocksdb_figures_of_its_store) {
  ASSERT_EQ(put(port_, "/v1/queues/q", "{}").status, 201u);
  ASSERT_EQ(post(port_, "/v1/queues/q/messages", R"({"body": "x"})").status, 200u);
  auto page = get(port_, "/metrics").body;
  for (const std::string series :
       {"\nlaneq_store_live_data_bytes ", "\nlaneq_store_pending_compaction_bytes ",
        "\nlaneq_store_delayed_write_rate_bytes ", "\nlaneq_store_write_stopped 0\n",
        "\nlaneq_store_write_stalls_total{kind=\"stop\"} 0\n",
        "\nlaneq_store_write_stalls_total{kind=\"slowdown\"} 0\n"})
    EXPECT_NE(page.find(series), std::string::npos) << series << "\n" << page;
}

}  // namespace
}  // namespace laneq::server::test
