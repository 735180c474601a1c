// A message as the engine sees it: the envelope a producer sent plus what the queue added.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "laneq/ids.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// A message header. Names compare case-insensitively (see `header_value`).
struct header_field {
  std::string name;
  std::string value;
  friend bool operator==(const header_field&, const header_field&) = default;
};

/// An attribute returned by the queue's on_enqueue hook; usable as an ordering key component.
struct attribute {
  std::string name;
  std::string value;
  friend bool operator==(const attribute&, const attribute&) = default;
};

/// What a producer hands to `enqueue`.
struct outgoing_message {
  std::string body;
  std::vector<header_field> headers;
  std::string fairness_key;
  duration delay{0};
  friend bool operator==(const outgoing_message&, const outgoing_message&) = default;
};

/// A stored message.
struct message {
  message_id id;    ///< stable identity (kept by redrive)
  message_seq seq;  ///< arrival position (new on redrive)
  std::string body;
  std::vector<header_field> headers;
  std::string fairness_key;
  std::vector<attribute> attributes;  ///< from on_enqueue
  timestamp enqueued_at;       ///< first enqueue; delays count from here, also after a redrive
  timestamp delay_until;       ///< end of the enqueue delay (enqueued_at + delay); kept by redrive
  timestamp not_before;        ///< not delivered before this (enqueue delay or retry_after)
  std::uint32_t attempts = 0;  ///< deliveries so far
  /// Whole seconds from `enqueued_at` to its last redrive (0: never redriven). Retention counts
  /// from there: a redrive restarts the clock (docs/design/retention.md).
  std::uint32_t redriven_after_s = 0;
  /// When it last entered the queue: its enqueue, or its last redrive (to the second after it).
  timestamp entered_at() const { return enqueued_at + std::chrono::seconds{redriven_after_s}; }
  friend bool operator==(const message&, const message&) = default;
};

/// The seconds from `enqueued_at` to `t` as `message::redriven_after_s` keeps them: rounded down
/// (a redriven message is never kept past its retention; it may expire up to a second early),
/// 0 if `t` is not after `enqueued_at`.
std::uint32_t seconds_after(timestamp enqueued_at, timestamp t);

/// The memory a message holds: its struct and the bytes of its strings (the window budget's unit;
/// an estimate, which does not count allocator rounding).
std::size_t memory_footprint(const message& m);

/// The first header named `name` (ASCII case-insensitive), or nullptr.
const std::string* header_value(const std::vector<header_field>& headers, std::string_view name);

/// The attribute named `name` (exact match), or nullptr.
const std::string* attribute_value(const std::vector<attribute>& attributes, std::string_view name);

/// True if `a` and `b` are equal ignoring ASCII case.
bool iequals(std::string_view a, std::string_view b);

template <class Inspector>
auto inspect(Inspector& f, header_field& x) {
  return f(x.name, x.value);
}
template <class Inspector>
auto inspect(Inspector& f, attribute& x) {
  return f(x.name, x.value);
}
template <class Inspector>
auto inspect(Inspector& f, message& x) {
  return f(x.id, x.seq, x.body, x.headers, x.fairness_key, x.attributes, x.enqueued_at,
           x.delay_until, x.not_before, x.attempts, x.redriven_after_s);
}

}  // namespace laneq
