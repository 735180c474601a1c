// Checking the Grafana dashboard against laneqd's /metrics (dashboard_check.hpp).
#include "dashboard_check.hpp"

#include <cctype>
#include <sstream>

namespace laneq::server::test::dashboard {

namespace {

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':';
}
bool ident_char(char c) {
  return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0;
}

const std::set<std::string, std::less<>> keywords{
    "by",  "without", "on",     "ignoring", "bool", "offset", "group_left", "group_right",
    "and", "or",      "unless", "atan2",    "Inf",  "NaN",    "inf",        "nan"};
const std::set<std::string, std::less<>> label_lists{"by",       "without",    "on",
                                                     "ignoring", "group_left", "group_right"};

/// The index after the string literal that starts at `i` (a quote or backtick).
std::size_t skip_string(std::string_view s, std::size_t i) {
  char quote = s[i];
  for (++i; i < s.size() && s[i] != quote; ++i)
    if (s[i] == '\\' && quote != '`') ++i;
  return i + 1;
}

/// The index after the bracketed part that starts at `i` (`{...}`, `[...]` or `(...)`), strings
/// inside it skipped.
std::size_t skip_group(std::string_view s, std::size_t i, char open, char close) {
  int depth = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '"' || s[i] == '\'' || s[i] == '`') {
      i = skip_string(s, i) - 1;
    } else if (s[i] == open) {
      ++depth;
    } else if (s[i] == close && --depth == 0) {
      return i + 1;
    }
  }
  return i;
}

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  return i;
}

void collect(const json::value& v, std::vector<std::string>& out);

void collect_target(const json::object& t, std::vector<std::string>& out) {
  if (const auto* e = t.if_contains("expr"); e != nullptr && e->is_string())
    out.emplace_back(e->as_string());
}

}  // namespace

std::set<std::string> metric_names(std::string_view s) {
  std::set<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_string(s, i);
    } else if (c == '{') {
      i = skip_group(s, i, '{', '}');  // label matchers
    } else if (c == '[') {
      i = skip_group(s, i, '[', ']');  // a range or subquery
    } else if (c == '$') {
      ++i;  // a Grafana variable: $name or ${name}
      if (i < s.size() && s[i] == '{')
        i = skip_group(s, i, '{', '}');
      else
        while (i < s.size() && ident_char(s[i])) ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.') {
      while (i < s.size() && (ident_char(s[i]) || s[i] == '.')) ++i;  // 0.99, 1e3, 5m
    } else if (ident_start(c)) {
      auto start = i;
      while (i < s.size() && ident_char(s[i])) ++i;
      std::string word{s.substr(start, i - start)};
      auto next = skip_space(s, i);
      if (label_lists.contains(word)) {
        if (next < s.size() && s[next] == '(') i = skip_group(s, next, '(', ')');
      } else if (next < s.size() && s[next] == '(') {
        // a function or aggregation: its arguments are read on
      } else if (s.substr(next, 2) == "by" || s.substr(next, 7) == "without") {
        // an aggregation with its grouping first: `sum by (queue) (...)`
      } else if (!keywords.contains(word)) {
        out.insert(std::move(word));
      }
    } else {
      ++i;
    }
  }
  return out;
}

namespace {

void collect(const json::value& v, std::vector<std::string>& out) {
  if (!v.is_object()) return;
  const auto& o = v.as_object();
  if (const auto* ts = o.if_contains("targets"); ts != nullptr && ts->is_array())
    for (const auto& t : ts->as_array())
      if (t.is_object()) collect_target(t.as_object(), out);
  if (const auto* ps = o.if_contains("panels"); ps != nullptr && ps->is_array())
    for (const auto& p : ps->as_array()) collect(p, out);
}

}  // namespace

std::vector<std::string> expressions(const json::value& dashboard) {
  std::vector<std::string> out;
  collect(dashboard, out);
  const auto* templating = dashboard.as_object().if_contains("templating");
  if (templating == nullptr || !templating->is_object()) return out;
  const auto* list = templating->as_object().if_contains("list");
  if (list == nullptr || !list->is_array()) return out;
  for (const auto& var : list->as_array()) {
    if (!var.is_object() || var.as_object().if_contains("type") == nullptr ||
        var.as_object().at("type") != "query")
      continue;
    const auto* q = var.as_object().if_contains("query");
    if (q != nullptr && q->is_object()) q = q->as_object().if_contains("query");
    if (q == nullptr || !q->is_string()) continue;
    // `label_values(metric, label)` selects `metric`; `label_values(label)` none.
    std::string_view text = q->as_string();
    constexpr std::string_view label_values = "label_values(";
    if (text.rfind(label_values, 0) == 0) {
      auto comma = text.rfind(',');
      if (comma != std::string_view::npos)
        out.emplace_back(text.substr(label_values.size(), comma - label_values.size()));
    } else {
      out.emplace_back(text);
    }
  }
  return out;
}

std::set<std::string> exposed_names(std::string_view page) {
  std::set<std::string> out;
  std::istringstream in{std::string{page}};
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words{line.substr(7)};
      std::string name;
      std::string type;
      words >> name >> type;
      if (type == "histogram" || type == "summary")
        for (const char* suffix : {"_bucket", "_sum", "_count"}) out.insert(name + suffix);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    auto end = line.find_first_of("{ ");
    out.insert(line.substr(0, end));
  }
  return out;
}

std::vector<std::string> missing_names(const json::value& dashboard,
                                       const std::set<std::string>& exposed) {
  std::vector<std::string> out;
  for (const auto& e : expressions(dashboard))
    for (const auto& name : metric_names(e))
      if (!exposed.contains(name)) out.push_back(name + " in: " + e);
  return out;
}

}  // namespace laneq::server::test::dashboard
