// Queue spec builder, validation and placement (libqueue/include/laneq/queue_spec.hpp).
#include "laneq/queue_spec.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "laneq/header_name.hpp"

namespace laneq {

std::string_view to_string(ordering_mode x) {
  switch (x) {
    case ordering_mode::none: return "none";
    case ordering_mode::queue: return "queue";
    case ordering_mode::key: return "key";
  }
  return "?";
}

std::string_view to_string(missing_ordering_key x) {
  switch (x) {
    case missing_ordering_key::reject: return "reject";
    case missing_ordering_key::unordered: return "unordered";
    case missing_ordering_key::keyless_lane: return "keyless_lane";
  }
  return "?";
}

std::string_view to_string(header_storage x) {
  switch (x) {
    case header_storage::all: return "all";
    case header_storage::allow: return "allow";
    case header_storage::deny: return "deny";
  }
  return "?";
}

std::string_view to_string(delivery_durability x) {
  switch (x) {
    case delivery_durability::fast: return "fast";
    case delivery_durability::durable: return "durable";
  }
  return "?";
}

queue_spec& queue_spec::ordered() {
  ordering_ = ordering_mode::queue;
  key_.clear();
  return *this;
}

queue_spec& queue_spec::ordered_by(std::vector<key_component> components) {
  ordering_ = ordering_mode::key;
  key_ = std::move(components);
  return *this;
}

queue_spec& queue_spec::when_ordering_key_missing(missing_ordering_key policy) {
  missing_ = policy;
  missing_set_ = true;
  return *this;
}

queue_spec& queue_spec::lease(duration d) {
  lease_ = d;
  return *this;
}

queue_spec& queue_spec::max_attempts(std::uint32_t n) {
  max_attempts_ = n;
  return *this;
}

queue_spec& queue_spec::throttle(std::vector<key_component> key, double rate_per_s,
                                 std::uint32_t burst) {
  throttles_.push_back(throttle_spec{std::move(key), rate_per_s, burst});
  return *this;
}

queue_spec& queue_spec::on_enqueue(enqueue_hook hook) {
  hook_ = std::move(hook);
  return *this;
}

queue_spec& queue_spec::delivery(delivery_durability d) {
  delivery_ = d;
  return *this;
}

queue_spec& queue_spec::sync_writes(bool on) {
  sync_ = on;
  return *this;
}

queue_spec& queue_spec::store_headers_allow(std::vector<std::string> names) {
  header_policy_ = header_storage::allow;
  header_list_ = std::move(names);
  return *this;
}

queue_spec& queue_spec::store_headers_deny(std::vector<std::string> names) {
  header_policy_ = header_storage::deny;
  header_list_ = std::move(names);
  return *this;
}

queue_spec& queue_spec::dedupe(std::vector<key_component> key, duration window) {
  dedupe_ = dedupe_spec{std::move(key), window};
  return *this;
}

queue_spec& queue_spec::sharded(std::uint32_t n, std::vector<key_component> key) {
  shards_ = n;
  shard_key_ = std::move(key);
  return *this;
}

std::string_view to_string(expiry_action x) {
  return x == expiry_action::drop ? "drop" : "dead_letter";
}

queue_spec& queue_spec::retention(std::optional<duration> max_age, expiry_action on_expiry,
                                  std::optional<duration> dead_letter_max_age) {
  retention_ = retention_rules{max_age, on_expiry, dead_letter_max_age};
  return *this;
}

queue_spec& queue_spec::max_depth(std::optional<std::uint64_t> messages,
                                  std::optional<std::uint64_t> bytes) {
  depth_max_ = depth_bounds{messages, bytes};
  return *this;
}

bool queue_spec::stores_header(std::string_view name) const {
  bool listed = false;
  for (const auto& n : header_list_)
    if (iequals(n, name)) {
      listed = true;
      break;
    }
  switch (header_policy_) {
    case header_storage::all: return true;
    case header_storage::allow: return listed;
    case header_storage::deny: return !listed;
  }
  return true;
}

std::vector<header_field> queue_spec::stored_headers(std::vector<header_field> headers) const {
  if (header_policy_ == header_storage::all) return headers;
  std::erase_if(headers, [this](const header_field& h) { return !stores_header(h.name); });
  return headers;
}

namespace {

template <class F>
void each_component(const queue_spec& s, F f) {
  for (const auto& c : s.ordering_key()) f(c);
  for (const auto& t : s.throttles())
    for (const auto& c : t.key) f(c);
  if (s.dedupe_rule())
    for (const auto& c : s.dedupe_rule()->key) f(c);
  for (const auto& c : s.shard_key()) f(c);
}

template <class F>
void each_component_mut(std::vector<key_component>& key, std::vector<throttle_spec>& throttles,
                        std::optional<dedupe_spec>& dedupe, std::vector<key_component>& shard_key,
                        F f) {
  for (auto& c : key) f(c);
  for (auto& t : throttles)
    for (auto& c : t.key) f(c);
  if (dedupe)
    for (auto& c : dedupe->key) f(c);
  for (auto& c : shard_key) f(c);
}

}  // namespace

bool queue_spec::functions_missing() const {
  bool out = false;
  each_component(*this, [&out](const key_component& c) { out = out || c.function_missing(); });
  return out;
}

bool queue_spec::has_functions() const {
  bool out = false;
  each_component(*this, [&out](const key_component& c) {
    out = out || c.which() == key_component::kind::function;
  });
  return out;
}

bool queue_spec::reads_json() const {
  bool out = false;
  each_component(*this, [&out](const key_component& c) {
    out = out || c.which() == key_component::kind::json;
  });
  return out;
}

bool queue_spec::restore_functions(const queue_spec& from) {
  std::vector<const key_component*> given;
  each_component(from, [&given](const key_component& c) {
    if (c.which() == key_component::kind::function && c.function()) given.push_back(&c);
  });
  bool complete = true;
  each_component_mut(key_, throttles_, dedupe_, shard_key_, [&](key_component& c) {
    if (c.which() != key_component::kind::function) return;
    for (const auto* g : given)
      if (g->name() == c.name()) {
        c.set_function(*g->function());
        return;
      }
    complete = false;
  });
  return complete;
}

namespace {

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

class rule_checker {
 public:
  explicit rule_checker(const std::string& queue) : queue_(queue) {}

  void fail(const std::string& field, const std::string& what) {
    errors_.push_back(error{errc::invalid_spec, "queue '" + queue_ + "': " + field + ": " + what});
  }

  void check_components(const std::string& field, const std::vector<key_component>& cs,
                        bool has_hook) {
    if (cs.size() > limits::key_components_max)
      fail(field, "has " + std::to_string(cs.size()) + " components, at most " +
                      std::to_string(limits::key_components_max) + " allowed");
    for (std::size_t i = 0; i < cs.size(); ++i) {
      auto f = field + "[" + std::to_string(i) + "]";
      const auto& c = cs[i];
      for (std::size_t j = 0; j < i; ++j)
        if (cs[j] == c) fail(f, c.describe() + " repeats component " + std::to_string(j));
      switch (c.which()) {
        case key_component::kind::fairness_key: break;
        case key_component::kind::header:
          if (c.name().empty()) {
            fail(f, "header name is empty");
          } else if (c.name().size() > limits::header_name_bytes_max) {
            fail(f, "header name is longer than " + std::to_string(limits::header_name_bytes_max) +
                        " bytes");
          } else if (!is_header_name(c.name())) {
            fail(f, "header name '" + c.name() + "' has a character not allowed in a header");
          }
          break;
        case key_component::kind::json:
          if (c.name().empty())
            fail(f, "JSON path is empty");
          else if (!valid_json_path(c.name()))
            fail(f, "JSON path '" + c.name() + "' has an empty segment");
          else if (c.name().size() > limits::key_component_name_bytes_max)
            fail(f, "JSON path is longer than " +
                        std::to_string(limits::key_component_name_bytes_max) + " bytes");
          break;
        case key_component::kind::function:
          if (c.name().empty()) fail(f, "function label is empty");
          if (c.name().size() > limits::key_component_name_bytes_max)
            fail(f, "function label is longer than " +
                        std::to_string(limits::key_component_name_bytes_max) + " bytes");
          break;
        case key_component::kind::attribute:
          if (c.name().empty())
            fail(f, "attribute name is empty");
          else if (c.name().size() > limits::key_component_name_bytes_max)
            fail(f, "attribute name is longer than " +
                        std::to_string(limits::key_component_name_bytes_max) + " bytes");
          if (!has_hook) fail(f, "attribute '" + c.name() + "' needs an on_enqueue hook to set it");
          break;
      }
    }
  }

  /// A header component is read again from the stored message (redrive, recovery, throttles):
  /// its header must be one the queue stores.
  void check_stored(const std::string& field, const std::vector<key_component>& cs,
                    const queue_spec& s) {
    for (std::size_t i = 0; i < cs.size(); ++i)
      if (cs[i].which() == key_component::kind::header && !cs[i].name().empty() &&
          !s.stores_header(cs[i].name()))
        fail(field + "[" + std::to_string(i) + "]",
             "header '" + cs[i].name() +
                 "' is a key component but the queue does not store it (store_headers " +
                 std::string{to_string(s.header_policy())} +
                 "); a redrive could not resolve the same lane");
  }

  std::vector<error> take() { return std::move(errors_); }

 private:
  const std::string& queue_;
  std::vector<error> errors_;
};

}  // namespace

namespace {
std::string describe_components(const std::vector<key_component>& cs);

/// The rules of sharding (docs/design/sharding.md).
void check_shards(const queue_spec& s, rule_checker& r) {
  const auto shards = s.shard_count();
  const auto& shard_key = s.shard_key();
  const auto& key = s.ordering_key();
  if (shards < 1 || shards > limits::queue_shards_max)
    r.fail("shards", "must be between 1 and " + std::to_string(limits::queue_shards_max));
  if (shards > 1 && s.ordering() == ordering_mode::queue)
    r.fail("shards", "an ordered() queue is one ordering group, which one shard holds");
  if (shards > 1 && shard_key.empty())
    for (std::size_t i = 0; i < key.size(); ++i)
      if (key[i].which() == key_component::kind::attribute)
        r.fail("shard_key", "the ordering key's " + key[i].describe() +
                                " is set by on_enqueue, after the shard is chosen: name a "
                                "shard_key without it");
  if (shard_key.empty()) return;
  if (shards == 1) r.fail("shard_key", "applies only to a queue of more than one shard");
  if (s.ordering() != ordering_mode::key) {
    r.fail("shard_key", "applies only to ordered_by(); an unordered queue spreads its messages");
    return;
  }
  for (std::size_t i = 0; i < shard_key.size(); ++i) {
    const auto& c = shard_key[i];
    auto f = "shard_key[" + std::to_string(i) + "]";
    if (c.which() == key_component::kind::attribute)
      r.fail(f, c.describe() + ": an attribute is set by on_enqueue, after the shard is chosen");
    else if (std::find(key.begin(), key.end(), c) == key.end())
      r.fail(f, c.describe() + " is not a component of the ordering key " +
                    describe_components(key) +
                    ": a group must never span shards (ordering.md, \"Ordering and sharding\")");
  }
}

/// A queue's name: 1 to queue_name_bytes_max bytes of name characters, with at most one '/'
/// between a tenant and its queue.
void check_name(const std::string& name, rule_checker& r) {
  if (name.empty()) r.fail("name", "is empty");
  if (name.size() > limits::queue_name_bytes_max)
    r.fail("name", "is longer than " + std::to_string(limits::queue_name_bytes_max) + " bytes");
  for (char c : name)
    if (!valid_name_char(c) && c != '/') {
      r.fail("name", "may hold only letters, digits, '-', '_', '.' and one '/' after the tenant");
      break;
    }
  if (auto slash = name.find('/'); slash != std::string::npos) {
    if (slash == 0 || slash + 1 == name.size())
      r.fail("name", "'tenant/queue' needs a non-empty tenant and queue");
    else if (name.find('/', slash + 1) != std::string::npos)
      r.fail("name", "may hold at most one '/' (between tenant and queue)");
  }
}

/// Throttles: their number, rates and bursts within limits.hpp, keys read from the stored
/// message at delivery (no JSON path, no function).
void check_throttles(const queue_spec& s, rule_checker& r) {
  const auto& throttles = s.throttles();
  bool has_hook = static_cast<bool>(s.hook());
  if (throttles.size() > limits::throttles_max)
    r.fail("throttles", "at most " + std::to_string(limits::throttles_max) + " allowed");
  for (std::size_t i = 0; i < throttles.size(); ++i) {
    const auto& t = throttles[i];
    auto f = "throttles[" + std::to_string(i) + "]";
    if (!(t.rate_per_s >= limits::throttle_rate_per_s_min &&
          t.rate_per_s <= limits::throttle_rate_per_s_max)) {
      std::ostringstream os;
      os << std::setprecision(10) << "must be between " << limits::throttle_rate_per_s_min
         << " and " << limits::throttle_rate_per_s_max;
      r.fail(f + ".rate_per_s", os.str());
    }
    if (t.burst < 1 || t.burst > limits::throttle_burst_max)
      r.fail(f + ".burst", "must be between 1 and " + std::to_string(limits::throttle_burst_max));
    r.check_components(f + ".key", t.key, has_hook);
    r.check_stored(f + ".key", t.key, s);
    for (std::size_t k = 0; k < t.key.size(); ++k)
      if (t.key[k].which() == key_component::kind::json ||
          t.key[k].which() == key_component::kind::function)
        r.fail(f + ".key[" + std::to_string(k) + "]",
               t.key[k].describe() +
                   ": a throttle key is read at delivery from the stored message; use "
                   "fairness_key, header or attribute");
  }
}

/// A retention period is 1 ms to 366 days (limits.hpp); `on_expiry` alone is accepted (it means
/// nothing until `retention_ms` is set).
void check_retention(const retention_rules& x, rule_checker& r) {
  auto check = [&r](const char* field, const std::optional<duration>& d) {
    if (d && (*d < limits::retention_min || *d > limits::retention_max))
      r.fail(field, "must be between " + std::to_string(limits::retention_min.count() / 1000) +
                        " and " + std::to_string(limits::retention_max.count() / 1000) + " ms");
  };
  check("retention_ms", x.max_age);
  check("dead_letter_retention_ms", x.dead_letter_max_age);
}

}  // namespace

std::vector<error> queue_spec::validate() const {
  rule_checker r{name_};
  check_name(name_, r);
  bool has_hook = static_cast<bool>(hook_);
  if (ordering_ == ordering_mode::key) {
    if (key_.empty()) r.fail("ordering.key", "ordered_by() needs at least one component");
    r.check_components("ordering.key", key_, has_hook);
  } else if (missing_set_) {
    r.fail("ordering.when_key_missing",
           "applies only to ordered_by(); this queue is ordering mode '" +
               std::string{to_string(ordering_)} + "'");
  }
  if (lease_ < limits::lease_min || lease_ > limits::lease_max)
    r.fail("lease_ms", "must be between " + std::to_string(limits::lease_min.count() / 1000) +
                           " and " + std::to_string(limits::lease_max.count() / 1000) + " ms");
  if (max_attempts_ < 1 || max_attempts_ > limits::max_attempts_max)
    r.fail("max_attempts", "must be between 1 and " + std::to_string(limits::max_attempts_max));
  check_throttles(*this, r);
  if (ordering_ == ordering_mode::key) r.check_stored("ordering.key", key_, *this);
  if (header_policy_ != header_storage::all) {
    auto f = std::string{"store_headers."} + std::string{to_string(header_policy_)};
    if (header_list_.size() > limits::stored_header_names_max)
      r.fail(f, "at most " + std::to_string(limits::stored_header_names_max) + " names allowed");
    for (std::size_t i = 0; i < header_list_.size(); ++i) {
      const auto& n = header_list_[i];
      if (n.size() > limits::header_name_bytes_max || !is_header_name(n))
        r.fail(f + "[" + std::to_string(i) + "]",
               "'" + n.substr(0, 64) + "' is not a header name (1 to " +
                   std::to_string(limits::header_name_bytes_max) + " token characters)");
    }
  }
  if (dedupe_) {
    if (dedupe_->key.empty()) r.fail("dedupe.key", "needs at least one component");
    r.check_components("dedupe.key", dedupe_->key, has_hook);
    if (dedupe_->window < limits::dedupe_window_min || dedupe_->window > limits::dedupe_window_max)
      r.fail("dedupe.window_ms",
             "must be between " + std::to_string(limits::dedupe_window_min.count() / 1000) +
                 " and " + std::to_string(limits::dedupe_window_max.count() / 1000) + " ms");
  }
  check_shards(*this, r);
  if (depth_max_.messages &&
      (*depth_max_.messages < 1 || *depth_max_.messages > limits::max_depth_messages_max))
    r.fail("max_depth.messages",
           "must be between 1 and " + std::to_string(limits::max_depth_messages_max));
  if (depth_max_.bytes &&
      (*depth_max_.bytes < 1 || *depth_max_.bytes > limits::max_depth_bytes_max))
    r.fail("max_depth.bytes",
           "must be between 1 and " + std::to_string(limits::max_depth_bytes_max));
  check_retention(retention_, r);
  return r.take();
}

namespace {
bool same_names(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!iequals(a[i], b[i])) return false;
  return true;
}
}  // namespace

std::string_view tenant_of(std::string_view queue_name) {
  auto slash = queue_name.find('/');
  return slash == std::string_view::npos ? default_tenant : queue_name.substr(0, slash);
}

std::string_view queue_spec::tenant() const {
  return tenant_of(name_);
}

bool queue_spec::same_ordering(const queue_spec& other) const {
  return ordering_ == other.ordering_ && key_ == other.key_ && missing_ == other.missing_;
}

bool queue_spec::same_definition(const queue_spec& other) const {
  return name_ == other.name_ && differences(other).empty();
}

namespace {
std::string describe_components(const std::vector<key_component>& cs) {
  std::string out = "[";
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (i > 0) out += ", ";
    out += cs[i].describe();
  }
  return out + "]";
}

/// Adds `field (existing a, requested b)` to `out` when the values differ.
template <class T>
void compare(std::vector<std::string>& out, const char* field, const T& a, const T& b) {
  if (a == b) return;
  auto text = [](const T& x) {
    if constexpr (std::is_arithmetic_v<T>)
      return std::to_string(x);
    else
      return std::string{x};
  };
  out.push_back(std::string{field} + " (existing " + text(a) + ", requested " + text(b) + ")");
}
}  // namespace

namespace {
std::string describe_throttles(const std::vector<throttle_spec>& ts) {
  std::string out = "[";
  for (std::size_t i = 0; i < ts.size(); ++i) {
    std::ostringstream rate;
    rate << std::setprecision(10) << ts[i].rate_per_s;
    out += (i > 0 ? ", " : "") + describe_components(ts[i].key) + " " + rate.str() + "/s burst " +
           std::to_string(ts[i].burst);
  }
  return out + "]";
}

std::string describe_headers(header_storage policy, const std::vector<std::string>& names) {
  if (policy == header_storage::all) return "all";
  std::string out = std::string{to_string(policy)} + " [";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i > 0 ? ", " : "") + names[i];
  return out + "]";
}

std::string describe_dedupe(const std::optional<dedupe_spec>& d) {
  if (!d) return "none";
  return describe_components(d->key) + " window_ms " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d->window).count());
}
}  // namespace

std::vector<std::string> queue_spec::differences(const queue_spec& requested) const {
  const auto& r = requested;
  std::vector<std::string> out;
  compare(out, "ordering.mode", to_string(ordering_), to_string(r.ordering_));
  if (!(key_ == r.key_))
    compare(out, "ordering.key", describe_components(key_), describe_components(r.key_));
  compare(out, "ordering.when_key_missing", to_string(missing_), to_string(r.missing_));
  compare(out, "lease_ms", lease_.count() / 1000, r.lease_.count() / 1000);
  compare(out, "max_attempts", max_attempts_, r.max_attempts_);
  if (!(throttles_ == r.throttles_))
    compare(out, "throttles", describe_throttles(throttles_), describe_throttles(r.throttles_));
  compare(out, "delivery_durability", to_string(delivery_), to_string(r.delivery_));
  compare(out, "sync_writes", std::string_view{sync_ ? "true" : "false"},
          std::string_view{r.sync_ ? "true" : "false"});
  if (header_policy_ != r.header_policy_ || !same_names(header_list_, r.header_list_))
    compare(out, "store_headers", describe_headers(header_policy_, header_list_),
            describe_headers(r.header_policy_, r.header_list_));
  if (!(dedupe_ == r.dedupe_))
    compare(out, "dedupe", describe_dedupe(dedupe_), describe_dedupe(r.dedupe_));
  auto bound = [](const std::optional<std::uint64_t>& x) {
    return x ? std::to_string(*x) : std::string{"none"};
  };
  compare(out, "max_depth.messages", bound(depth_max_.messages), bound(r.depth_max_.messages));
  compare(out, "max_depth.bytes", bound(depth_max_.bytes), bound(r.depth_max_.bytes));
  auto period = [](const std::optional<duration>& x) {
    return x ? std::to_string(x->count() / 1000) : std::string{"none"};
  };
  compare(out, "retention_ms", period(retention_.max_age), period(r.retention_.max_age));
  compare(out, "on_expiry", to_string(retention_.on_expiry), to_string(r.retention_.on_expiry));
  compare(out, "dead_letter_retention_ms", period(retention_.dead_letter_max_age),
          period(r.retention_.dead_letter_max_age));
  compare(out, "shards", shards_, r.shards_);
  if (!(shard_key_ == r.shard_key_))
    compare(out, "shard_key", describe_components(shard_key_), describe_components(r.shard_key_));
  compare(out, "on_enqueue hook", std::string_view{hook_ ? "set" : "none"},
          std::string_view{r.hook_ ? "set" : "none"});
  return out;
}

namespace {
/// The fields `updated` refuses to change, of the differences `differences` lists.
bool fixed_field(std::string_view d) {
  for (std::string_view f : {"ordering.", "shards ", "shard_key ", "sync_writes "})
    if (d.starts_with(f)) return true;
  return false;
}
}  // namespace

result<queue_spec> queue_spec::updated(const queue_spec& requested) const {
  const auto& r = requested;
  std::vector<error> errors;
  auto refuse = [&](const std::string& field, const std::string& why) {
    errors.push_back(error{errc::invalid_spec, "queue '" + name_ + "': " + field + ": " + why});
  };
  const std::string fixed =
      "is fixed once the queue exists (it decides where messages are "
      "stored or how they are keyed); create another queue to change it";
  for (const auto& d : differences(r))
    if (fixed_field(d)) refuse(d.substr(0, d.find(' ')), fixed + " " + d.substr(d.find(' ') + 1));
  if (throttles_.size() != r.throttles_.size())
    refuse("throttles", "has " + std::to_string(throttles_.size()) + " throttles, the request " +
                            std::to_string(r.throttles_.size()) + ": the number of throttles " +
                            fixed);
  else
    for (std::size_t i = 0; i < throttles_.size(); ++i)
      if (!(throttles_[i].key == r.throttles_[i].key))
        refuse("throttles[" + std::to_string(i) + "].key",
               fixed + " (existing " + describe_components(throttles_[i].key) + ", requested " +
                   describe_components(r.throttles_[i].key) + "); rate_per_s and burst may change");
  if (dedupe_.has_value() != r.dedupe_.has_value())
    refuse("dedupe", std::string{dedupe_ ? "the queue has a dedupe rule, the request none"
                                         : "the queue has no dedupe rule, the request one"} +
                         ": whether a queue dedupes " + fixed);
  else if (dedupe_ && !(dedupe_->key == r.dedupe_->key))
    refuse("dedupe.key", fixed + " (existing " + describe_components(dedupe_->key) +
                             ", requested " + describe_components(r.dedupe_->key) +
                             "); window_ms may change");
  if (!errors.empty()) return combine(errors);
  queue_spec out = *this;
  out.lease_ = r.lease_;
  out.max_attempts_ = r.max_attempts_;
  for (std::size_t i = 0; i < throttles_.size(); ++i) {
    out.throttles_[i].rate_per_s = r.throttles_[i].rate_per_s;
    out.throttles_[i].burst = r.throttles_[i].burst;
  }
  out.delivery_ = r.delivery_;
  out.header_policy_ = r.header_policy_;
  out.header_list_ = r.header_list_;
  if (dedupe_) out.dedupe_->window = r.dedupe_->window;
  out.depth_max_ = r.depth_max_;
  out.retention_ = r.retention_;
  if (auto invalid = out.validate(); !invalid.empty()) return combine(invalid);
  return out;
}

std::string queue_spec::describe() const {
  std::string out = "queue '" + name_ + "' ordering=" + std::string{to_string(ordering_)};
  if (ordering_ == ordering_mode::key) {
    out += " key=[";
    for (std::size_t i = 0; i < key_.size(); ++i) {
      if (i > 0) out += ", ";
      out += key_[i].describe();
    }
    out += "] when_key_missing=" + std::string{to_string(missing_)};
  }
  if (delivery_ != delivery_durability::fast)
    out += " delivery=" + std::string{to_string(delivery_)};
  if (!sync_) out += " sync=false";
  if (header_policy_ != header_storage::all) {
    out += " store_headers=" + std::string{to_string(header_policy_)} + ":[";
    for (std::size_t i = 0; i < header_list_.size(); ++i) {
      if (i > 0) out += ", ";
      out += header_list_[i];
    }
    out += "]";
  }
  if (dedupe_) {
    out += " dedupe=[";
    for (std::size_t i = 0; i < dedupe_->key.size(); ++i) {
      if (i > 0) out += ", ";
      out += dedupe_->key[i].describe();
    }
    out += "] window_ms=" + std::to_string(dedupe_->window.count() / 1000);
  }
  if (depth_max_.messages) out += " max_depth.messages=" + std::to_string(*depth_max_.messages);
  if (depth_max_.bytes) out += " max_depth.bytes=" + std::to_string(*depth_max_.bytes);
  if (retention_.max_age)
    out += " retention_ms=" + std::to_string(retention_.max_age->count() / 1000) +
           " on_expiry=" + std::string{to_string(retention_.on_expiry)};
  if (retention_.dead_letter_max_age)
    out += " dead_letter_retention_ms=" +
           std::to_string(retention_.dead_letter_max_age->count() / 1000);
  if (shards_ > 1) {
    out += " shards=" + std::to_string(shards_);
    if (!shard_key_.empty()) out += " shard_key=" + describe_components(shard_key_);
  }
  return out;
}

std::string tenant_queue(std::string_view queue_name) {
  if (queue_name.find('/') != std::string_view::npos) return std::string{queue_name};
  return std::string{default_tenant} + "/" + std::string{queue_name};
}

result<placement> place(const queue_spec& spec, const key_source& src, bool* missing) {
  if (missing) *missing = false;
  switch (spec.ordering()) {
    case ordering_mode::none: return placement{};
    case ordering_mode::queue:
      return placement{true, std::string{whole_queue_group_key}, tenant_queue(spec.name())};
    case ordering_mode::key: break;
  }
  // Viewed, not copied: the key's values go straight into the group key and the delivered key.
  const key_view values{spec.ordering_key(), src};
  if (auto idx = values.first_missing()) {
    if (missing) *missing = true;
    switch (spec.missing_key_policy()) {
      case missing_ordering_key::reject:
        return error{errc::ordering_key_missing,
                     "queue '" + spec.name() + "': the message has no " +
                         spec.ordering_key()[*idx].describe() + " (ordering key component " +
                         std::to_string(*idx) +
                         "); the queue rejects messages without an ordering key"};
      case missing_ordering_key::unordered: return placement{};
      case missing_ordering_key::keyless_lane:
        return placement{true, std::string{keyless_group_key}, tenant_queue(spec.name())};
    }
  }
  return placement{true, values.encoded(), values.delivered()};
}

result<placement> place(const queue_spec& spec, const message& m, bool* missing) {
  return place(spec, key_source{m}, missing);
}

std::optional<std::string> dedupe_key(const queue_spec& spec, const key_source& src) {
  if (!spec.dedupe_rule()) return std::nullopt;
  auto values = resolve(spec.dedupe_rule()->key, src);
  if (values.first_missing()) return std::nullopt;
  return encode_key(values);
}

}  // namespace laneq
