// Rendering laneqd's answers for people: tables, trees, message blocks, times (see cli.hpp).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>

#include "cli.hpp"

namespace laneq::cli {

namespace json = boost::json;

void print_json(command_context& c, const json::value& v) {
  c.out << json::serialize(v) << "\n";
}

std::string text_of(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string().c_str(), v.as_string().size());
  if (v.is_null()) return "-";
  return json::serialize(v);
}

std::string field_text(const json::value& answer, std::string_view name, std::string fallback) {
  if (const auto* o = answer.if_object())
    if (const auto* v = o->if_contains(name)) return text_of(*v);
  return fallback;
}

/// The array under `key`, or the first array member of an object, or the value itself.
const json::array* find_array(const json::value& v, std::string_view key) {
  if (auto* a = v.if_array()) return a;
  if (auto* o = v.if_object()) {
    if (auto* p = o->if_contains(key); p && p->is_array()) return &p->as_array();
    for (const auto& kv : *o)
      if (kv.value().is_array()) return &kv.value().as_array();
  }
  return nullptr;
}

std::string field(const json::object& o, std::string_view key) {
  auto* p = o.if_contains(key);
  return p == nullptr ? std::string("-") : text_of(*p);
}

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A field's text for people: a point in time (is_time_field) as render_time shows it.
std::string shown(std::string_view key, const json::value& v) {
  if (is_time_field(key) && v.is_number())
    return render_time(v.to_number<std::int64_t>(), now_ms());
  return text_of(v);
}

/// A column's or a line's name: a point in time's without its `_ms`.
std::string label(std::string_view key) {
  return std::string(is_time_field(key) ? key.substr(0, key.size() - 3) : key);
}

/// A table: the columns that occur in the rows, in the preferred order, then any others.
std::string render_table(const json::array& rows, std::vector<std::string> preferred) {
  std::vector<std::string> cols;
  for (const auto& name : preferred) {
    bool present = std::any_of(rows.begin(), rows.end(), [&](const json::value& r) {
      return r.is_object() && r.as_object().contains(name);
    });
    if (present) cols.push_back(name);
  }
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    for (const auto& kv : r.as_object()) {
      std::string k(kv.key());
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
    }
  }
  std::vector<std::vector<std::string>> cells;
  cells.emplace_back();
  for (const auto& c : cols) {
    std::string h = label(c);
    std::transform(h.begin(), h.end(), h.begin(), [](char ch) {
      return ch >= 'a' && ch <= 'z' ? static_cast<char>(ch - 'a' + 'A') : ch;
    });
    cells.back().push_back(h);
  }
  for (const auto& r : rows) {
    cells.emplace_back();
    for (const auto& c : cols) {
      const auto* x = r.is_object() ? r.as_object().if_contains(c) : &r;
      std::string v = x == nullptr ? "-" : shown(c, *x);
      v = one_line(v);
      if (v.size() > 60) v = v.substr(0, 57) + "...";
      cells.back().push_back(std::move(v));
    }
  }
  std::vector<std::size_t> width(cols.size(), 0);
  for (const auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

void render_tree_into(const json::value& v, int depth, std::string& out) {
  std::string pad(static_cast<std::size_t>(depth) * 2, ' ');
  if (auto* o = v.if_object()) {
    for (const auto& kv : *o) {
      const auto& x = kv.value();
      bool nested = (x.is_object() && !x.as_object().empty()) ||
                    (x.is_array() && !x.as_array().empty() &&
                     (x.as_array().front().is_object() || x.as_array().front().is_array()));
      if (nested) {
        out += pad + std::string(kv.key()) + ":\n";
        render_tree_into(x, depth + 1, out);
      } else {
        out += pad + label(kv.key()) + ": " + one_line(shown(kv.key(), x)) + "\n";
      }
    }
  } else if (auto* a = v.if_array()) {
    std::size_t i = 0;
    for (const auto& x : *a) {
      if (x.is_object() || x.is_array()) {
        out += pad + "- [" + std::to_string(i) + "]\n";
        render_tree_into(x, depth + 1, out);
      } else {
        out += pad + "- " + one_line(text_of(x)) + "\n";
      }
      ++i;
    }
  } else {
    out += pad + one_line(text_of(v)) + "\n";
  }
}

}  // namespace

// -- rendering ----------------------------------------------------------------------------------

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          static constexpr char hex[] = "0123456789abcdef";
          out += "\\x";
          out += hex[(ch >> 4) & 15];
          out += hex[ch & 15];
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string render_messages(const json::value& answer) {
  const json::array* msgs = find_array(answer, "messages");
  if (msgs == nullptr || msgs->empty()) return "no messages\n";
  std::map<std::string, int> per_lease;  // a lease held by several messages is an ordered batch's
  for (const auto& m : *msgs)
    if (m.is_object()) ++per_lease[field(m.as_object(), "lease")];
  std::string out;
  for (const auto& m : *msgs) {
    if (!m.is_object()) continue;
    const auto& o = m.as_object();
    out += "message " + field(o, "id") + "  attempt " + field(o, "attempt");
    if (o.contains("batch_index") &&
        (per_lease[field(o, "lease")] > 1 || field(o, "batch_index") != "0"))
      out += "  batch_index " + field(o, "batch_index");
    if (auto* k = o.if_contains("ordering_key"); k && k->is_string() && !k->as_string().empty())
      out += "  key " + one_line(text_of(*k));
    if (auto* f = o.if_contains("fairness_key"); f && f->is_string() && !f->as_string().empty())
      out += "  fairness " + one_line(text_of(*f));
    if (auto* f = o.if_contains("in_flight"); f && f->is_bool() && f->as_bool())
      out += "  in flight";  // a peek's message under a consumer's lease
    out += o.contains("lease") ? "\n  lease: " + field(o, "lease") + "\n" : "\n";
    if (auto* b = o.if_contains("body"))
      out += "  body: " + one_line(text_of(*b)) + "\n";
    else if (auto* b64 = o.if_contains("body_base64"))
      out += "  body (base64): " + text_of(*b64) + "\n";
    if (auto* h = o.if_contains("headers"); h && h->is_object() && !h->as_object().empty()) {
      out += "  headers:";
      for (const auto& kv : h->as_object())
        out += " " + std::string(kv.key()) + "=" + one_line(text_of(kv.value()));
      out += "\n";
    }
  }
  return out;
}

std::string render_messages_quiet(const json::value& answer) {
  const json::array* msgs = find_array(answer, "messages");
  std::string out;
  if (msgs == nullptr) return out;
  for (const auto& m : *msgs) {
    if (!m.is_object()) continue;
    const auto& o = m.as_object();
    std::string body;
    if (auto* b = o.if_contains("body"))
      body = text_of(*b);
    else if (auto* b64 = o.if_contains("body_base64"))
      body = text_of(*b64);
    std::string key;
    if (auto* k = o.if_contains("ordering_key"); k && k->is_string()) key = text_of(*k);
    out +=
        field(o, "lease") + "\t" + one_line(key.empty() ? "-" : key) + "\t" + one_line(body) + "\n";
  }
  return out;
}

std::string render_groups(const json::value& answer) {
  const json::array* groups = find_array(answer, "groups");
  std::string out =
      groups == nullptr || groups->empty()
          ? "no groups\n"
          : render_table(*groups, {"key", "state", "backlog", "head", "since", "until"});
  if (const auto* o = answer.if_object())
    if (const auto* next = o->if_contains("next_cursor"))
      out += "more groups: --cursor " + text_of(*next) + "\n";
  return out;
}

std::string render_dead_letters(const json::value& answer) {
  const json::array* dl = find_array(answer, "dead_letters");
  if (dl == nullptr || dl->empty()) return "no dead letters\n";
  return render_table(*dl, {"id", "reason", "attempts", "attempt", "ordering_key", "body"});
}

std::string render_tree(const json::value& v) {
  std::string out;
  render_tree_into(v, 0, out);
  return out;
}

bool is_time_field(std::string_view key) {
  return key.ends_with("_at_ms") || key.ends_with("_deadline_ms") || key == "at_ms" ||
         key == "since_ms" || key == "until_ms";
}

std::string render_time(std::int64_t unix_ms, std::int64_t now) {
  if (unix_ms <= 0) return "-";
  auto secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char text[40];
  auto n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(unix_ms % 1000));
  auto delta = unix_ms - now;
  auto away = delta < 0 ? -delta : delta;
  if (away < 1000) return std::string(text) + " (now)";
  struct unit {
    std::int64_t ms;
    const char* name;
  };
  static constexpr unit units[] = {{86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}};
  std::string amount;
  for (const auto& u : units)
    if (away >= u.ms || u.ms == 1000) {
      amount = std::to_string(away / u.ms) + u.name;
      break;
    }
  return std::string(text) + (delta > 0 ? " (in " + amount + ")" : " (" + amount + " ago)");
}

std::string render_stats(const json::object& by_queue, bool wide) {
  static const std::vector<std::string> main = {
      "queue",          "backlog",       "in_flight",     "dead_letters",
      "live_groups",    "enqueued",      "delivered",     "acked",
      "nacked",         "lease_expired", "dead_lettered", "expired_dead_lettered",
      "expired_dropped"};
  json::array rows;
  for (const auto& [name, stats] : by_queue) {
    json::object row{{"queue", name}};
    if (const auto* o = stats.if_object())
      for (const auto& [key, value] : *o) {
        bool keep = wide ? !value.is_array() && !value.is_object()
                         : std::find(main.begin(), main.end(), key) != main.end();
        if (keep) row[key] = value;
      }
    rows.push_back(std::move(row));
  }
  return render_table(rows, main);
}

std::string render_queue_list(const json::value& answer) {
  const json::array* qs = find_array(answer, "queues");
  if (qs == nullptr || qs->empty()) return "no queues\n";
  std::string out;
  for (const auto& q : *qs) {
    if (q.is_object() && q.as_object().contains("name"))
      out += text_of(q.as_object().at("name")) + "\n";
    else
      out += text_of(q) + "\n";
  }
  return out;
}

}  // namespace laneq::cli
