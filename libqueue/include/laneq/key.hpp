// Ordering and throttle keys: which message properties form a key, and how a key is encoded.
// Implements docs/design/ordering.md (O1-O3). JSON paths, functions and lane-id hashing come with
// the lanes work and slot in as further `key_component::kind`s.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laneq/message.hpp"

namespace laneq {

/// One property of a message that contributes to a key.
class key_component {
 public:
  enum class kind : std::uint8_t { fairness_key = 1, header = 2, attribute = 3 };

  key_component() = default;
  key_component(kind k, std::string name) : kind_(k), name_(std::move(name)) {}

  kind which() const { return kind_; }
  /// Header name (as given; compared case-insensitively) or attribute name; empty for the
  /// fairness key.
  const std::string& name() const { return name_; }

  /// The component's value in `m`, or nullopt when the message lacks it.
  std::optional<std::string_view> value_in(const message& m) const;

  /// Human-readable form: `fairness_key`, `header:account`, `attribute:region`.
  std::string describe() const;

  friend bool operator==(const key_component& a, const key_component& b);

  template <class Inspector>
  friend auto inspect(Inspector& f, key_component& x) {
    return f(x.kind_, x.name_);
  }

 private:
  kind kind_ = kind::fairness_key;
  std::string name_;
};

/// Builders that read like the seed: `key::fairness_key()`, `key::header("account")`.
namespace key {
key_component fairness_key();
key_component header(std::string name);
key_component attribute(std::string name);
}  // namespace key

/// A key's components resolved against one message.
struct key_values {
  /// One entry per component; nullopt where the message lacks the value.
  std::vector<std::optional<std::string>> values;
  /// Index of the first missing component, if any.
  std::optional<std::size_t> first_missing() const;
};

key_values resolve(const std::vector<key_component>& components, const message& m);

/// Encodes values with a 4-byte big-endian length prefix per component (absent: 0xFFFFFFFF), so
/// no value can forge a delimiter and distinct tuples never share an encoding.
std::string encode_key(const key_values& v);

/// Printable form of a key: `fairness_key=t1 header:account=A` (absent values shown as `-`).
std::string describe_key(const std::vector<key_component>& components, const key_values& v);

}  // namespace laneq
