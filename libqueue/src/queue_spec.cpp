// Queue spec builder, validation and placement (libqueue/include/laneq/queue_spec.hpp).
#include "laneq/queue_spec.hpp"

#include <iomanip>
#include <sstream>

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

namespace {

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// RFC 9110 token characters, the only ones a header name may hold.
bool valid_header_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view{"!#$%&'*+-.^_`|~"}.find(c) != std::string_view::npos;
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
          } else {
            for (char ch : c.name())
              if (!valid_header_char(ch)) {
                fail(f, "header name '" + c.name() + "' has a character not allowed in a header");
                break;
              }
          }
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

  std::vector<error> take() { return std::move(errors_); }

 private:
  const std::string& queue_;
  std::vector<error> errors_;
};

}  // namespace

std::vector<error> queue_spec::validate() const {
  rule_checker r{name_};
  if (name_.empty()) r.fail("name", "is empty");
  if (name_.size() > limits::queue_name_bytes_max)
    r.fail("name", "is longer than " + std::to_string(limits::queue_name_bytes_max) + " bytes");
  for (char c : name_)
    if (!valid_name_char(c) && c != '/') {
      r.fail("name", "may hold only letters, digits, '-', '_', '.' and one '/' after the tenant");
      break;
    }
  if (auto slash = name_.find('/'); slash != std::string::npos) {
    if (slash == 0 || slash + 1 == name_.size())
      r.fail("name", "'tenant/queue' needs a non-empty tenant and queue");
    else if (name_.find('/', slash + 1) != std::string::npos)
      r.fail("name", "may hold at most one '/' (between tenant and queue)");
  }
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
  if (throttles_.size() > limits::throttles_max)
    r.fail("throttles", "at most " + std::to_string(limits::throttles_max) + " allowed");
  for (std::size_t i = 0; i < throttles_.size(); ++i) {
    const auto& t = throttles_[i];
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
  }
  return r.take();
}

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
  return name_ == other.name_ && same_ordering(other) && lease_ == other.lease_ &&
         max_attempts_ == other.max_attempts_ && throttles_ == other.throttles_ &&
         delivery_ == other.delivery_ && sync_ == other.sync_ &&
         static_cast<bool>(hook_) == static_cast<bool>(other.hook_);
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
  return out;
}

result<placement> place(const queue_spec& spec, const message& m, bool* missing) {
  if (missing) *missing = false;
  switch (spec.ordering()) {
    case ordering_mode::none: return placement{};
    case ordering_mode::queue:
      return placement{true, std::string{whole_queue_group_key}, "whole queue"};
    case ordering_mode::key: break;
  }
  auto values = resolve(spec.ordering_key(), m);
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
        return placement{true, std::string{keyless_group_key}, "keyless lane"};
    }
  }
  return placement{true, encode_key(values), describe_key(spec.ordering_key(), values)};
}

}  // namespace laneq
