// Ordering, throttle and dedupe keys: which message properties form a key, how a key is encoded,
// and how it is hashed. Implements docs/design/ordering.md (O1-O3) and docs/design/lanes.md
// (L1-L6): header, attribute, fairness-key, JSON-path and function components.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boost::json {
class value;
}

#include "laneq/limits.hpp"
#include "laneq/message.hpp"

namespace laneq {

/// A custom key component: reads the envelope and returns the key bytes, or nothing (missing).
/// A callable that throws counts as missing too. In-process only: it is not stored, so a queue
/// recovered after a restart needs it given again (docs/design/lanes.md L3).
using key_function = std::function<std::optional<std::string>(const message&)>;

/// A body parsed as JSON, shared read-only; nullptr when the body is not JSON or is over 1 MiB.
using shared_json = std::shared_ptr<const boost::json::value>;

/// Parses a body for keys: nullptr when it is not JSON or is over 1 MiB.
shared_json parse_body_json(std::string_view body);

/// The envelope a key is read from, with its body parsed as JSON at most once, on first use.
/// One key_source serves every key component and dedupe rule of every queue a message lands in
/// (a topic's queues), so a body is parsed once per enqueue (lanes.md L2).
class key_source {
 public:
  explicit key_source(const message& m);
  /// A source whose body was parsed already (a topic parses once for all its queues).
  key_source(const message& m, shared_json parsed);
  ~key_source();
  key_source(const key_source&) = delete;
  key_source& operator=(const key_source&) = delete;

  const message& msg() const { return *m_; }
  /// The body as JSON, or nullptr when it is not JSON or is over 1 MiB. Parsed on first call.
  const boost::json::value* json() const;
  /// How often the body was parsed (0 or 1); tests check the one-parse rule with it.
  std::uint32_t parses() const { return parses_; }

 private:
  const message* m_;
  mutable shared_json json_;
  mutable bool tried_ = false;
  mutable std::uint32_t parses_ = 0;
};

/// One property of a message that contributes to a key.
class key_component {
 public:
  enum class kind : std::uint8_t {
    fairness_key = 1,
    header = 2,
    attribute = 3,
    json = 4,      ///< a dot path into the JSON body (name: the path)
    function = 5,  ///< a key_function (name: its label, used in errors and to compare specs)
  };

  key_component() = default;
  key_component(kind k, std::string name) : kind_(k), name_(std::move(name)) {}
  key_component(std::string label, key_function f);

  kind which() const { return kind_; }
  /// Header name (as given; compared case-insensitively), attribute name, JSON path or function
  /// label; empty for the fairness key.
  const std::string& name() const { return name_; }
  /// A function component whose callable is not here (recovered from the store).
  bool function_missing() const { return kind_ == kind::function && !fn_; }
  /// Gives a function component its callable back (recovery); ignored for other kinds.
  void set_function(key_function f);
  const std::shared_ptr<const key_function>& function() const { return fn_; }

  /// The component's value in the envelope, or nullopt when it lacks one. A value longer than
  /// 128 bytes comes back as `sha256:` and 64 lowercase hex digits (lanes.md L4).
  std::optional<std::string> value_in(const key_source& src) const;
  std::optional<std::string> value_in(const message& m) const { return value_in(key_source{m}); }
  /// The same value, without a copy where the envelope holds it: a view into the message or
  /// into `src`'s parsed body (valid while they live), or, for a function's result and a value
  /// that had to be hashed, a view of `owned`, which then holds it.
  std::optional<std::string_view> view_in(const key_source& src, std::string& owned) const;

  /// Human-readable form: `fairness_key`, `header:account`, `attribute:region`, `json:a.b`,
  /// `function:customer_of`.
  std::string describe() const;

  friend bool operator==(const key_component& a, const key_component& b);

  template <class Inspector>
  friend auto inspect(Inspector& f, key_component& x) {
    return f(x.kind_, x.name_);
  }

 private:
  kind kind_ = kind::fairness_key;
  std::string name_;
  std::shared_ptr<const key_function> fn_;
};

/// Builders that read like the seed: `key::fairness_key()`, `key::header("account")`,
/// `key::json("data.object.customer")`, `key::function("customer_of", f)`.
namespace key {
key_component fairness_key();
key_component header(std::string name);
key_component attribute(std::string name);
key_component json(std::string path);
key_component function(std::string label, key_function f);
}  // namespace key

/// Keys longer than this become `sha256:` + 64 lowercase hex digits (the SQS group id bound).
inline constexpr std::size_t key_bytes_max = 128;

/// `s` itself when at most key_bytes_max bytes, else `sha256:` + the lowercase hex SHA-256 of it.
std::string bound_key(std::string s);

/// The JSON body's string at a dot path, or nullopt (not JSON, over 1 MiB, no such path, not a
/// string, empty path).
std::optional<std::string> json_string_at(const key_source& src, std::string_view path);

/// True when `path` is a dot path with no empty segment.
bool valid_json_path(std::string_view path);

/// A key's components resolved against one message.
struct key_values {
  /// One entry per component; nullopt where the message lacks the value.
  std::vector<std::optional<std::string>> values;
  /// Index of the first missing component, if any.
  std::optional<std::size_t> first_missing() const;
};

key_values resolve(const std::vector<key_component>& components, const key_source& src);
key_values resolve(const std::vector<key_component>& components, const message& m);

/// A key's components resolved against one message, each value viewed where it lives (see
/// `key_component::view_in`) instead of copied: placing a message takes no allocation for the
/// values themselves. It must not outlive the message and the key_source it was resolved from;
/// it is neither copied nor moved (its views may point into itself).
class key_view {
 public:
  key_view(const std::vector<key_component>& components, const key_source& src);
  key_view(const key_view&) = delete;
  key_view& operator=(const key_view&) = delete;

  std::size_t size() const { return size_; }
  /// The i-th component's value; nullopt where the message lacks it.
  const std::optional<std::string_view>& operator[](std::size_t i) const { return values_[i]; }
  /// Index of the first missing component, if any.
  std::optional<std::size_t> first_missing() const;
  /// The same bytes as `encode_key` of `resolve` for these components and message.
  std::string encoded() const;
  /// The same bytes as `delivered_key` of `resolve` for these components and message.
  std::string delivered() const;

 private:
  /// Each entry empty until set.
  std::array<std::optional<std::string_view>, limits::key_components_max> inline_;
  /// Holds the views instead of `inline_` for more components than a valid spec has.
  std::vector<std::optional<std::string_view>> spill_;
  /// Values made rather than found (function results, hashed values); reserved once, before
  /// the first, so the views into it stay put.
  std::vector<std::string> owned_;
  std::optional<std::string_view>* values_ = nullptr;
  std::size_t size_ = 0;
};

/// Encodes values with a 4-byte big-endian length prefix per component (absent: 0xFFFFFFFF), so
/// no value can forge a delimiter and distinct tuples never share an encoding.
std::string encode_key(const key_values& v);

/// The ordering key a consumer receives for a complete key: the value of a one-component key;
/// for several components each value as `<decimal length>:<bytes>` one after the other (no
/// delimiter can be forged); bounded by `bound_key`.
std::string delivered_key(const key_values& v);

/// Printable form of a key: `fairness_key=t1 header:account=A` (absent values shown as `-`).
std::string describe_key(const std::vector<key_component>& components, const key_values& v);

}  // namespace laneq
