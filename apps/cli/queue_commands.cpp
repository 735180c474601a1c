// The queue and topic commands, and the queue spec `queue create` builds from its options (see
// cli.hpp).
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>

#include "laneq/limits.hpp"

#include "cli.hpp"

namespace laneq::cli {

namespace json = boost::json;

int cmd_queue_create(command_context& c) {
  auto spec = spec_from_options(c.args);
  if (auto* e = std::get_if<usage_error>(&spec)) return usage(c, *e);
  const auto& name = c.args.args[0];
  json::value body = std::move(std::get<json::object>(spec));
  auto r = c.client.create_queue(name, body);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value().first);
  } else if (r.value().second) {
    c.out << "created queue " << name << "\n";
  } else {
    c.out << "queue " << name << " already exists with this spec (nothing changed)\n";
  }
  return exit_ok;
}

int cmd_queue_get(command_context& c) {
  auto r = c.client.get_queue(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_tree(r.value());
  return exit_ok;
}

int cmd_queue_list(command_context& c) {
  auto r = c.client.list_queues();
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_queue_list(r.value());
  return exit_ok;
}

int cmd_queue_update(command_context& c) {
  auto patch = patch_from_options(c.args);
  if (auto* e = std::get_if<usage_error>(&patch)) return usage(c, *e);
  const auto& name = c.args.args[0];
  auto r = c.client.update_queue(name, json::value(std::move(std::get<json::object>(patch))));
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "updated queue " << name << "\n" << render_tree(r.value());
  return exit_ok;
}

int cmd_queue_delete(command_context& c) {
  auto r = c.client.delete_queue(c.args.args[0], c.args.flag("force"));
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "deleted queue " << c.args.args[0] << "\n";
  return exit_ok;
}

int cmd_queue_purge(command_context& c) {
  const auto& name = c.args.args[0];
  auto group = c.args.value("group");
  auto r = c.client.purge(name, group);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value());
    return exit_ok;
  }
  c.out << "purged " << field_text(r.value(), "purged", "0") << " waiting message(s) of " << name;
  if (group) c.out << ", group " << *group;
  c.out << "\n";
  return exit_ok;
}

int cmd_peek(command_context& c) {
  auto limit = c.args.number("limit").value_or(limits::peek_default);
  auto r = c.client.peek(c.args.args[0], static_cast<std::uint32_t>(limit), c.args.value("group"));
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_messages(r.value());
  return exit_ok;
}

// -- topics (docs/api.md "Topics") --------------------------------------------------------------

namespace {

/// `payments: by-customer, by-account` per topic of a topics listing (or of one topic's answer).
std::string render_topics(const json::value& answer) {
  std::vector<const json::object*> topics;
  if (const auto* list = find_array(answer, "topics")) {
    for (const auto& t : *list)
      if (t.is_object()) topics.push_back(&t.as_object());
  } else if (const auto* one = answer.if_object()) {
    topics.push_back(one);
  }
  if (topics.empty()) return "no topics\n";
  std::string out;
  for (const auto* t : topics) {
    out += field(*t, "name") + ":";
    const json::array* queues = nullptr;
    if (const auto* spec = t->if_contains("spec"); spec && spec->is_object())
      queues = find_array(*spec, "queues");
    for (std::size_t i = 0; queues && i < queues->size(); ++i)
      out += (i ? ", " : " ") + text_of((*queues)[i]);
    out += "\n";
  }
  return out;
}

}  // namespace

int cmd_topic_create(command_context& c) {
  const auto& name = c.args.args[0];
  std::vector<std::string> queues(c.args.args.begin() + 1, c.args.args.end());
  auto r = c.client.create_topic(name, queues);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value().first);
  else if (r.value().second)
    c.out << "created topic " << name << "\n";
  else
    c.out << "topic " << name << " already exists with these queues (nothing changed)\n";
  return exit_ok;
}

int cmd_topic_list(command_context& c) {
  auto r = c.args.args.empty() ? c.client.list_topics() : c.client.get_topic(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_topics(r.value());
  return exit_ok;
}

int cmd_topic_delete(command_context& c) {
  auto r = c.client.delete_topic(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "deleted topic " << c.args.args[0] << " (its queues and their messages stay)\n";
  return exit_ok;
}

std::variant<json::object, usage_error> parse_key_component(std::string_view text) {
  if (text == "fairness_key" || text == "fairness-key") return json::object{{"fairness_key", true}};
  auto colon = text.find(':');
  if (colon != std::string_view::npos && colon + 1 < text.size()) {
    auto kind = text.substr(0, colon);
    auto name = text.substr(colon + 1);
    if (kind == "header" || kind == "attribute" || kind == "json")
      return json::object{{kind, name}};
  }
  return usage_error{"bad key component \"" + std::string(text) +
                     "\": use fairness_key, header:NAME, attribute:NAME or json:PATH"};
}

namespace {

/// Appends key component `text` to `key`, or says why it is not one.
std::optional<usage_error> add_key_component(std::string_view text, json::array& key) {
  auto c = parse_key_component(text);
  if (auto* e = std::get_if<usage_error>(&c)) return *e;
  key.emplace_back(std::move(std::get<json::object>(c)));
  return std::nullopt;
}

/// The JSON object given whole with --OPTION or --OPTION-file (a spec, a patch), or an empty
/// object when neither is given.
std::variant<json::object, usage_error> base_object(const parsed& p, const std::string& option) {
  json::object obj;
  auto base_text = p.value(option);
  if (auto file = p.value(option + "-file")) {
    if (base_text) return usage_error{"give --" + option + " or --" + option + "-file, not both"};
    std::ifstream f(*file);
    if (!f) return usage_error{"--" + option + "-file: cannot read \"" + *file + "\""};
    base_text = std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  if (base_text) {
    json::error_code ec;
    auto v = json::parse(*base_text, ec);
    if (ec) return usage_error{"the " + option + " is not valid JSON (" + ec.message() + ")"};
    if (!v.is_object()) return usage_error{"the " + option + " must be a JSON object"};
    obj = std::move(v.as_object());
  }
  return obj;
}

/// Checks --ordering, --key and --when-key-missing and merges them into the spec's "ordering".
std::optional<usage_error> add_ordering(const parsed& p, json::object& spec) {
  auto keys = p.all("key");
  auto mode = p.value("ordering");
  if (mode && *mode != "none" && *mode != "queue" && *mode != "key")
    return usage_error{"--ordering wants none, queue or key, got \"" + *mode + "\""};
  if (!keys.empty() && mode && *mode != "key")
    return usage_error{"--key needs --ordering key (got --ordering " + *mode + ")"};
  if (mode && *mode == "key" && keys.empty() && !spec.contains("ordering"))
    return usage_error{"--ordering key needs at least one --key"};
  auto missing = p.value("when-key-missing");
  if (missing && *missing != "reject" && *missing != "unordered" && *missing != "keyless_lane")
    return usage_error{"--when-key-missing wants reject, unordered or keyless_lane, got \"" +
                       *missing + "\""};
  if (!mode && keys.empty() && !missing) return std::nullopt;
  json::object ordering;
  if (auto* o = spec.if_contains("ordering"); o && o->is_object()) ordering = o->as_object();
  if (mode)
    ordering["mode"] = *mode;
  else if (!keys.empty())
    ordering["mode"] = "key";
  if (!keys.empty()) {
    json::array key;
    for (const auto& k : keys)
      if (auto e = add_key_component(k, key)) return *e;
    ordering["key"] = std::move(key);
  }
  if (missing) ordering["when_key_missing"] = *missing;
  spec["ordering"] = std::move(ordering);
  return std::nullopt;
}

/// A throttle's RATE: deliveries per second, a decimal within the server's bounds.
std::variant<double, usage_error> parse_rate(std::string_view text) {
  std::ostringstream range;
  range << std::setprecision(10) << limits::throttle_rate_per_s_min << " to "
        << limits::throttle_rate_per_s_max;
  std::string s(text);
  double rate = 0;
  std::size_t used = 0;
  try {
    rate = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || !(rate >= limits::throttle_rate_per_s_min) ||
      !(rate <= limits::throttle_rate_per_s_max))
    return usage_error{"--throttle rate wants a number from " + range.str() + ", got \"" + s +
                       "\""};
  return rate;
}

/// One --throttle value, RATE[/BURST][@KEY,KEY...], as a spec throttle object.
std::variant<json::object, usage_error> parse_throttle(std::string_view text) {
  auto at = text.find('@');
  auto rate_part = text.substr(0, at);
  auto slash = rate_part.find('/');
  auto rate = parse_rate(rate_part.substr(0, slash));
  if (auto* e = std::get_if<usage_error>(&rate)) return *e;
  json::object th;
  json::array key;
  if (at != std::string_view::npos) {
    auto rest = text.substr(at + 1);
    while (!rest.empty()) {
      auto comma = rest.find(',');
      if (auto e = add_key_component(rest.substr(0, comma), key)) return *e;
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  th["key"] = std::move(key);
  auto r = std::get<double>(rate);
  if (r == static_cast<double>(static_cast<std::int64_t>(r)))
    th["rate_per_s"] = static_cast<std::int64_t>(r);  // a whole number stays one in the JSON
  else
    th["rate_per_s"] = r;
  if (slash != std::string_view::npos) {
    auto burst =
        parse_int("--throttle burst", rate_part.substr(slash + 1), 1, limits::throttle_burst_max);
    if (auto* e = std::get_if<usage_error>(&burst)) return *e;
    th["burst"] = std::get<std::int64_t>(burst);
  }
  return th;
}

/// Sets spec["throttles"] from the --throttle options when any is given.
std::optional<usage_error> add_throttles(const parsed& p, json::object& spec) {
  auto throttles = p.all("throttle");
  if (throttles.empty()) return std::nullopt;
  json::array arr;
  for (const auto& t : throttles) {
    auto th = parse_throttle(t);
    if (auto* e = std::get_if<usage_error>(&th)) return *e;
    arr.emplace_back(std::move(std::get<json::object>(th)));
  }
  spec["throttles"] = std::move(arr);
  return std::nullopt;
}

}  // namespace

namespace {

/// Sets the settings a queue may also change in place (lease, max attempts, throttles, delivery
/// durability, max depth, retention) from their options; ranges were checked while parsing.
std::optional<usage_error> add_settings(const parsed& p, json::object& spec) {
  if (auto n = p.number("lease-ms")) spec["lease_ms"] = *n;
  if (auto n = p.number("max-attempts")) spec["max_attempts"] = *n;
  if (auto e = add_throttles(p, spec)) return *e;
  if (auto v = p.value("durability")) {
    if (*v != "fast" && *v != "durable")
      return usage_error{"--durability wants fast or durable, got \"" + *v + "\""};
    spec["delivery_durability"] = *v;
  }
  auto messages = p.number("max-depth-messages");
  auto bytes = p.number("max-depth-bytes");
  if (messages || bytes) {
    json::object depth;
    if (auto* d = spec.if_contains("max_depth"); d && d->is_object()) depth = d->as_object();
    if (messages) depth["messages"] = *messages;
    if (bytes) depth["bytes"] = *bytes;
    spec["max_depth"] = std::move(depth);
  }
  if (auto n = p.number("retention-ms")) spec["retention_ms"] = *n;
  if (auto v = p.value("on-expiry")) {
    if (*v != "dead_letter" && *v != "drop")
      return usage_error{"--on-expiry wants dead_letter or drop, got \"" + *v + "\""};
    spec["on_expiry"] = *v;
  }
  if (auto n = p.number("dead-letter-retention-ms")) spec["dead_letter_retention_ms"] = *n;
  return std::nullopt;
}

}  // namespace

std::variant<json::object, usage_error> spec_from_options(const parsed& p) {
  auto base = base_object(p, "spec");
  if (auto* e = std::get_if<usage_error>(&base)) return *e;
  json::object spec = std::move(std::get<json::object>(base));
  if (auto e = add_ordering(p, spec)) return *e;
  if (auto e = add_settings(p, spec)) return *e;
  return spec;
}

std::variant<json::object, usage_error> patch_from_options(const parsed& p) {
  auto base = base_object(p, "patch");
  if (auto* e = std::get_if<usage_error>(&base)) return *e;
  json::object patch = std::move(std::get<json::object>(base));
  if (auto e = add_settings(p, patch)) return *e;
  if (patch.empty()) return usage_error{"nothing to change: give a setting or --patch"};
  return patch;
}

}  // namespace laneq::cli
