// Checking the Grafana dashboard (packaging/grafana/laneq-dashboard.json) against what laneqd
// exposes, for tests/server/dashboard_test.cpp: the metric names its PromQL expressions use, the
// names a /metrics page offers, and the names used but not offered.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

namespace laneq::server::test::dashboard {

namespace json = boost::json;

/// The metric names a PromQL expression selects: identifiers that are neither functions or
/// aggregations (followed by `(`), keywords, label names (inside `{}` or the label list of
/// `by`/`without`/`on`/`ignoring`/`group_left`/`group_right`), Grafana variables (`$x`, `${x}`),
/// strings, numbers nor range durations (`[5m]`).
std::set<std::string> metric_names(std::string_view expr);

/// Every PromQL expression of a dashboard: each panel's (rows' panels included) targets' `expr`,
/// and each query variable's query (`label_values(metric, label)` names `metric`).
std::vector<std::string> expressions(const json::value& dashboard);

/// The metric names a Prometheus text page offers: each sample's name, and for a histogram or
/// summary declared by `# TYPE` its `_bucket`, `_sum` and `_count` series.
std::set<std::string> exposed_names(std::string_view page);

/// The names the dashboard's expressions use that `exposed` lacks, each with the expression that
/// uses it ("name in: expr"); empty when every name is offered.
std::vector<std::string> missing_names(const json::value& dashboard,
                                       const std::set<std::string>& exposed);

}  // namespace laneq::server::test::dashboard
