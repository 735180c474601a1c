// JSON form of queue specs (libqueue/include/laneq/spec_json.hpp).
#include "laneq/spec_json.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace laneq {

namespace json = boost::json;

namespace {

// Collects errors while reading, each prefixed with the queue and the field path.
class reader {
 public:
  explicit reader(std::string_view queue) : queue_(queue) {}

  void fail(const std::string& field, const std::string& what) {
    errors_.push_back(
        error{errc::invalid_spec, "queue '" + std::string{queue_} + "': " + field + ": " + what});
  }

  const json::object* object(const std::string& field, const json::value& v) {
    if (const auto* o = v.if_object()) return o;
    fail(field, "must be an object");
    return nullptr;
  }

  /// Fails for every key of `o` that is not in `known`.
  void only(const std::string& field, const json::object& o,
            std::initializer_list<std::string_view> known) {
    for (const auto& kv : o) {
      bool ok = false;
      for (auto k : known) ok = ok || kv.key() == k;
      if (!ok) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string{k};
        fail(field.empty() ? std::string{kv.key()} : field + "." + std::string{kv.key()},
             "unknown field (known: " + list + ")");
      }
    }
  }

  std::optional<std::string> string(const std::string& field, const json::value& v) {
    if (const auto* s = v.if_string()) return std::string{s->data(), s->size()};
    fail(field, "must be a string");
    return std::nullopt;
  }

  std::optional<std::int64_t> integer(const std::string& field, const json::value& v,
                                      std::int64_t lo, std::int64_t hi) {
    std::optional<std::int64_t> x;
    if (const auto* i = v.if_int64()) {
      x = *i;
    } else if (const auto* u = v.if_uint64()) {
      // Beyond int64: out of every range we accept.
      x = *u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
              ? static_cast<std::int64_t>(*u)
              : std::numeric_limits<std::int64_t>::max();
    } else if (const auto* d = v.if_double()) {
      if (std::trunc(*d) == *d && std::fabs(*d) < 9.0e18) x = static_cast<std::int64_t>(*d);
    }
    if (!x) {
      fail(field, "must be an integer");
      return std::nullopt;
    }
    if (*x < lo || *x > hi) {
      fail(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
      return std::nullopt;
    }
    return x;
  }

  std::optional<double> number(const std::string& field, const json::value& v) {
    if (v.is_number()) return v.to_number<double>();
    fail(field, "must be a number");
    return std::nullopt;
  }

  std::optional<bool> boolean(const std::string& field, const json::value& v) {
    if (const auto* b = v.if_bool()) return *b;
    fail(field, "must be true or false");
    return std::nullopt;
  }

  /// A key: an array of components, each an object with exactly one known field.
  std::vector<key_component> components(const std::string& field, const json::value& v) {
    std::vector<key_component> out;
    const auto* arr = v.if_array();
    if (!arr) {
      fail(field, "must be an array of key components");
      return out;
    }
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto f = field + "[" + std::to_string(i) + "]";
      const auto* o = object(f, (*arr)[i]);
      if (!o) continue;
      if (o->size() != 1) {
        fail(f, "must have exactly one of fairness_key, header, attribute, json");
        continue;
      }
      const auto& kv = *o->begin();
      auto kf = f + "." + std::string{kv.key()};
      if (kv.key() == "fairness_key") {
        if (auto b = boolean(kf, kv.value())) {
          if (*b)
            out.push_back(key::fairness_key());
          else
            fail(kf, "must be true (omit the component instead)");
        }
      } else if (kv.key() == "header") {
        if (auto s = string(kf, kv.value())) out.push_back(key::header(*s));
      } else if (kv.key() == "attribute") {
        if (auto s = string(kf, kv.value())) out.push_back(key::attribute(*s));
      } else if (kv.key() == "json") {
        if (auto s = string(kf, kv.value())) out.push_back(key::json(*s));
      } else if (kv.key() == "function") {
        fail(kf,
             "a function key component is available only in the in-process C++ API "
             "(key::function); the JSON form (HTTP API, daemon config) cannot carry one");
      } else {
        fail(kf, "unknown key component (known: fairness_key, header, attribute, json)");
      }
    }
    return out;
  }

  std::vector<error> take() { return std::move(errors_); }

 private:
  std::string_view queue_;
  std::vector<error> errors_;
};

template <class Enum, std::size_t N>
std::optional<Enum> enum_value(reader& r, const std::string& field, const json::value& v,
                               const Enum (&all)[N]) {
  auto s = r.string(field, v);
  if (!s) return std::nullopt;
  std::string list;
  for (auto e : all) {
    if (*s == to_string(e)) return e;
    list += (list.empty() ? "" : ", ") + std::string{to_string(e)};
  }
  r.fail(field, "'" + *s + "' is not one of " + list);
  return std::nullopt;
}

void read_ordering(reader& r, const json::value& v, queue_spec& spec) {
  const auto* o = r.object("ordering", v);
  if (!o) return;
  r.only("ordering", *o, {"mode", "key", "when_key_missing"});
  std::optional<ordering_mode> mode = ordering_mode::none;
  if (const auto* m = o->if_contains("mode")) {
    const ordering_mode all[] = {ordering_mode::none, ordering_mode::queue, ordering_mode::key};
    mode = enum_value(r, "ordering.mode", *m, all);
  }
  const auto* k = o->if_contains("key");
  if (mode == ordering_mode::key) {
    spec.ordered_by(k ? r.components("ordering.key", *k) : std::vector<key_component>{});
  } else if (mode) {
    if (*mode == ordering_mode::queue) spec.ordered();
    if (k) r.fail("ordering.key", "applies only to ordering mode 'key'");
  }
  if (const auto* w = o->if_contains("when_key_missing")) {
    const missing_ordering_key all[] = {missing_ordering_key::reject,
                                        missing_ordering_key::unordered,
                                        missing_ordering_key::keyless_lane};
    if (auto policy = enum_value(r, "ordering.when_key_missing", *w, all))
      spec.when_ordering_key_missing(*policy);
  }
}

void read_throttles(reader& r, const json::value& v, queue_spec& spec) {
  const auto* arr = v.if_array();
  if (!arr) {
    r.fail("throttles", "must be an array");
    return;
  }
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto f = "throttles[" + std::to_string(i) + "]";
    const auto* o = r.object(f, (*arr)[i]);
    if (!o) continue;
    r.only(f, *o, {"key", "rate_per_s", "burst"});
    std::vector<key_component> key;
    if (const auto* k = o->if_contains("key")) key = r.components(f + ".key", *k);
    std::optional<double> rate;
    if (const auto* x = o->if_contains("rate_per_s"))
      rate = r.number(f + ".rate_per_s", *x);
    else
      r.fail(f + ".rate_per_s", "is required");
    std::optional<std::int64_t> burst = 1;
    if (const auto* x = o->if_contains("burst"))
      burst = r.integer(f + ".burst", *x, 1, limits::throttle_burst_max);
    if (rate && burst) spec.throttle(std::move(key), *rate, static_cast<std::uint32_t>(*burst));
  }
}

void read_store_headers(reader& r, const json::value& v, queue_spec& spec) {
  if (const auto* s = v.if_string()) {
    if (*s != "all")
      r.fail("store_headers", "must be \"all\", {\"allow\": [...]} or {\"deny\": [...]}");
    return;
  }
  const auto* o = r.object("store_headers", v);
  if (!o) return;
  r.only("store_headers", *o, {"allow", "deny"});
  if (o->size() != 1) {
    r.fail("store_headers", "must have exactly one of allow, deny");
    return;
  }
  const auto& kv = *o->begin();
  auto f = "store_headers." + std::string{kv.key()};
  const auto* arr = kv.value().if_array();
  if (!arr) {
    r.fail(f, "must be an array of header names");
    return;
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < arr->size(); ++i)
    if (auto n = r.string(f + "[" + std::to_string(i) + "]", (*arr)[i])) names.push_back(*n);
  if (kv.key() == "allow")
    spec.store_headers_allow(std::move(names));
  else if (kv.key() == "deny")
    spec.store_headers_deny(std::move(names));
}

void read_dedupe(reader& r, const json::value& v, queue_spec& spec) {
  const auto* o = r.object("dedupe", v);
  if (!o) return;
  r.only("dedupe", *o, {"key", "window_ms"});
  std::vector<key_component> key;
  if (const auto* k = o->if_contains("key"))
    key = r.components("dedupe.key", *k);
  else
    r.fail("dedupe.key", "is required");
  std::optional<std::int64_t> ms;
  if (const auto* w = o->if_contains("window_ms")) {
    auto lo =
        std::chrono::duration_cast<std::chrono::milliseconds>(limits::dedupe_window_min).count();
    auto hi =
        std::chrono::duration_cast<std::chrono::milliseconds>(limits::dedupe_window_max).count();
    ms = r.integer("dedupe.window_ms", *w, lo, hi);
  } else {
    r.fail("dedupe.window_ms", "is required");
  }
  if (ms) spec.dedupe(std::move(key), std::chrono::milliseconds{*ms});
}

json::array components_to_json(const std::vector<key_component>& cs) {
  json::array out;
  for (const auto& c : cs) {
    switch (c.which()) {
      case key_component::kind::fairness_key:
        out.push_back(json::object{{"fairness_key", true}});
        break;
      case key_component::kind::header: out.push_back(json::object{{"header", c.name()}}); break;
      case key_component::kind::attribute:
        out.push_back(json::object{{"attribute", c.name()}});
        break;
      case key_component::kind::json: out.push_back(json::object{{"json", c.name()}}); break;
      case key_component::kind::function:
        // Shown, not read back: queue_spec_from_json refuses function components.
        out.push_back(json::object{{"function", c.name()}});
        break;
    }
  }
  return out;
}

/// `max_depth` (docs/api.md "Backpressure"): `{"messages": n, "bytes": b}`, either optional.
void read_max_depth(reader& r, const json::value& v, queue_spec& spec) {
  const auto* o = r.object("max_depth", v);
  if (!o) return;
  r.only("max_depth", *o, {"messages", "bytes"});
  std::optional<std::uint64_t> messages;
  std::optional<std::uint64_t> bytes;
  if (const auto* x = o->if_contains("messages"))
    if (auto n = r.integer("max_depth.messages", *x, 1,
                           static_cast<std::int64_t>(limits::max_depth_messages_max)))
      messages = static_cast<std::uint64_t>(*n);
  if (const auto* x = o->if_contains("bytes"))
    if (auto n = r.integer("max_depth.bytes", *x, 1,
                           static_cast<std::int64_t>(limits::max_depth_bytes_max)))
      bytes = static_cast<std::uint64_t>(*n);
  spec.max_depth(messages, bytes);
}

/// `retention_ms`, `on_expiry` and `dead_letter_retention_ms` (docs/api.md "Retention").
void read_retention(reader& r, const json::object& o, queue_spec& spec) {
  auto lo = std::chrono::duration_cast<std::chrono::milliseconds>(limits::retention_min).count();
  auto hi = std::chrono::duration_cast<std::chrono::milliseconds>(limits::retention_max).count();
  auto period = [&](const char* field) -> std::optional<duration> {
    const auto* x = o.if_contains(field);
    if (x == nullptr) return std::nullopt;
    if (auto ms = r.integer(field, *x, lo, hi)) return std::chrono::milliseconds{*ms};
    return std::nullopt;
  };
  auto max_age = period("retention_ms");
  auto dead_letter_max_age = period("dead_letter_retention_ms");
  auto on_expiry = expiry_action::dead_letter;
  if (const auto* x = o.if_contains("on_expiry")) {
    const expiry_action all[] = {expiry_action::dead_letter, expiry_action::drop};
    if (auto a = enum_value(r, "on_expiry", *x, all)) on_expiry = *a;
  }
  spec.retention(max_age, on_expiry, dead_letter_max_age);
}

/// `shards` and `shard_key` (docs/design/sharding.md).
void read_shards(reader& r, const json::object& o, queue_spec& spec) {
  std::uint32_t shards = 1;
  if (const auto* x = o.if_contains("shards"))
    if (auto n = r.integer("shards", *x, 1, limits::queue_shards_max))
      shards = static_cast<std::uint32_t>(*n);
  std::vector<key_component> key;
  if (const auto* x = o.if_contains("shard_key")) key = r.components("shard_key", *x);
  spec.sharded(shards, std::move(key));
}

}  // namespace

parsed_spec queue_spec_from_json(std::string_view name, const json::value& v) {
  parsed_spec out{queue_spec{std::string{name}}, {}};
  reader r{name};
  const auto* o = r.object("spec", v);
  if (!o) {
    out.errors = r.take();
    return out;
  }
  r.only("", *o,
         {"ordering", "lease_ms", "max_attempts", "throttles", "delivery_durability", "sync_writes",
          "store_headers", "dedupe", "shards", "shard_key", "max_depth", "retention_ms",
          "on_expiry", "dead_letter_retention_ms"});
  auto& spec = out.spec;
  if (const auto* x = o->if_contains("ordering")) read_ordering(r, *x, spec);
  if (const auto* x = o->if_contains("lease_ms")) {
    auto lo = std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_min).count();
    auto hi = std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_max).count();
    if (auto ms = r.integer("lease_ms", *x, lo, hi)) spec.lease(std::chrono::milliseconds{*ms});
  }
  if (const auto* x = o->if_contains("max_attempts"))
    if (auto n = r.integer("max_attempts", *x, 1, limits::max_attempts_max))
      spec.max_attempts(static_cast<std::uint32_t>(*n));
  if (const auto* x = o->if_contains("throttles")) read_throttles(r, *x, spec);
  if (const auto* x = o->if_contains("delivery_durability")) {
    const delivery_durability all[] = {delivery_durability::fast, delivery_durability::durable};
    if (auto d = enum_value(r, "delivery_durability", *x, all)) spec.delivery(*d);
  }
  if (const auto* x = o->if_contains("sync_writes"))
    if (auto b = r.boolean("sync_writes", *x)) spec.sync_writes(*b);
  if (const auto* x = o->if_contains("store_headers")) read_store_headers(r, *x, spec);
  if (const auto* x = o->if_contains("dedupe")) read_dedupe(r, *x, spec);
  if (const auto* x = o->if_contains("max_depth")) read_max_depth(r, *x, spec);
  read_retention(r, *o, spec);
  read_shards(r, *o, spec);
  out.errors = r.take();
  for (auto& e : spec.validate()) out.errors.push_back(std::move(e));
  return out;
}

json::object queue_spec_to_json(const queue_spec& s) {
  json::object ordering{{"mode", to_string(s.ordering())}};
  if (s.ordered_by_key()) {
    ordering["key"] = components_to_json(s.ordering_key());
    ordering["when_key_missing"] = to_string(s.missing_key_policy());
  }
  json::array throttles;
  for (const auto& t : s.throttles())
    throttles.push_back(json::object{
        {"key", components_to_json(t.key)}, {"rate_per_s", t.rate_per_s}, {"burst", t.burst}});
  json::value store_headers = "all";
  if (s.header_policy() != header_storage::all) {
    json::array names;
    for (const auto& n : s.header_list()) names.push_back(json::string{n});
    store_headers = json::object{{to_string(s.header_policy()), std::move(names)}};
  }
  json::object out{
      {"ordering", std::move(ordering)},
      {"lease_ms",
       std::chrono::duration_cast<std::chrono::milliseconds>(s.lease_duration()).count()},
      {"max_attempts", s.attempts_max()},
      {"throttles", std::move(throttles)},
      {"delivery_durability", to_string(s.delivery_mode())},
      {"sync_writes", s.syncs_writes()},
      {"store_headers", std::move(store_headers)},
  };
  if (const auto& d = s.dedupe_rule())
    out["dedupe"] = json::object{
        {"key", components_to_json(d->key)},
        {"window_ms", std::chrono::duration_cast<std::chrono::milliseconds>(d->window).count()}};
  if (const auto& d = s.depth_max(); d.any()) {
    json::object depth;
    if (d.messages) depth["messages"] = *d.messages;
    if (d.bytes) depth["bytes"] = *d.bytes;
    out["max_depth"] = std::move(depth);
  }
  // on_expiry is shown with the retention it acts on, or when it is not the default.
  const auto& keep = s.retention_rule();
  auto ms = [](duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  if (keep.max_age) out["retention_ms"] = ms(*keep.max_age);
  if (keep.max_age || keep.on_expiry != expiry_action::dead_letter)
    out["on_expiry"] = to_string(keep.on_expiry);
  if (keep.dead_letter_max_age) out["dead_letter_retention_ms"] = ms(*keep.dead_letter_max_age);
  out["shards"] = s.shard_count();
  if (!s.shard_key().empty()) out["shard_key"] = components_to_json(s.shard_key());
  return out;
}

namespace {

/// RFC 7386: `patch` applied to `target`.
json::value merge_patch(json::value target, const json::value& patch) {
  const auto* p = patch.if_object();
  if (p == nullptr) return patch;
  if (!target.is_object()) target = json::object{};
  auto& t = target.as_object();
  for (const auto& kv : *p) {
    if (kv.value().is_null())
      t.erase(kv.key());
    else if (auto* have = t.if_contains(kv.key()))
      *have = merge_patch(std::move(*have), kv.value());
    else
      t[kv.key()] = merge_patch(json::value{}, kv.value());
  }
  return target;
}

/// Adds an error for each fixed field (docs/api.md "PATCH /v1/queues/{name}") whose value in
/// `merged` is not the one in `have`; `ordering` is compared field by field.
void fixed_changes(std::string_view queue, const json::object& have, const json::object& merged,
                   std::vector<error>& errors) {
  auto text = [](const json::value* v) { return v ? json::serialize(*v) : std::string{"none"}; };
  auto check = [&](const std::string& field, const json::value* a, const json::value* b) {
    if ((a == nullptr && b == nullptr) || (a && b && *a == *b)) return;
    errors.push_back(error{errc::invalid_spec,
                           "queue '" + std::string{queue} + "': " + field +
                               ": is fixed once the queue exists (it decides where messages are "
                               "stored or how they are keyed); create another queue to change it "
                               "(existing " +
                               text(a) + ", requested " + text(b) + ")"});
  };
  const auto* a = have.if_contains("ordering");
  const auto* b = merged.if_contains("ordering");
  if (a && b && a->is_object() && b->is_object()) {
    for (const char* f : {"mode", "key", "when_key_missing"})
      check(std::string{"ordering."} + f, a->as_object().if_contains(f),
            b->as_object().if_contains(f));
    for (const auto& kv : b->as_object())
      if (kv.key() != "mode" && kv.key() != "key" && kv.key() != "when_key_missing")
        check("ordering." + std::string{kv.key()}, nullptr, &kv.value());
  } else {
    check("ordering", a, b);
  }
  for (const char* f : {"shards", "shard_key", "sync_writes"})
    check(f, have.if_contains(f), merged.if_contains(f));
}

}  // namespace

parsed_spec queue_spec_patched(const queue_spec& current, const json::value& patch) {
  parsed_spec out{current, {}};
  const auto& name = current.name();
  auto fail = [&](const std::string& what) {
    out.errors.push_back(error{errc::invalid_spec, "queue '" + name + "': " + what});
    return out;
  };
  if (!patch.is_object()) return fail("the settings to change must be a JSON object");
  if (current.has_functions())
    return fail(
        "a key of this queue has a function component, which the JSON form cannot "
        "carry: change its settings through the in-process API (update_queue)");
  auto have = json::value(queue_spec_to_json(current));
  auto merged = merge_patch(have, patch);
  // The fixed fields first (queue_spec::updated): a change there is named as such, before the
  // merged spec is read (where it could show only as a rule it breaks).
  fixed_changes(name, have.as_object(), merged.as_object(), out.errors);
  if (!out.errors.empty()) return out;
  auto parsed = queue_spec_from_json(name, merged);
  if (!parsed.ok()) {
    out.errors = std::move(parsed.errors);
    return out;
  }
  auto updated = current.updated(parsed.spec);
  if (!updated) {
    out.errors.push_back(updated.err());
    return out;
  }
  out.spec = std::move(updated).value();
  return out;
}

parsed_topic topic_spec_from_json(std::string_view name, const json::value& v) {
  parsed_topic out{topic_spec{std::string{name}}, {}};
  auto fail = [&](const std::string& field, const std::string& what) {
    out.errors.push_back(
        error{errc::invalid_spec, "topic '" + std::string{name} + "': " + field + ": " + what});
  };
  const auto* o = v.if_object();
  if (!o) {
    fail("spec", "must be an object");
    return out;
  }
  for (const auto& kv : *o)
    if (kv.key() != "queues") fail(std::string{kv.key()}, "unknown field (known: queues)");
  const auto* q = o->if_contains("queues");
  if (!q) {
    fail("queues", "is required");
  } else if (const auto* arr = q->if_array()) {
    std::vector<std::string> queues;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      if (const auto* s = (*arr)[i].if_string())
        queues.emplace_back(s->data(), s->size());
      else
        fail("queues[" + std::to_string(i) + "]", "must be a string");
    }
    out.spec.fan_out(std::move(queues));
  } else {
    fail("queues", "must be an array of queue names");
  }
  if (out.errors.empty())
    for (auto& e : out.spec.validate()) out.errors.push_back(std::move(e));
  return out;
}

json::object topic_spec_to_json(const topic_spec& t) {
  json::array queues;
  for (const auto& q : t.queues()) queues.push_back(json::string{q});
  return json::object{{"queues", std::move(queues)}};
}

}  // namespace laneq
