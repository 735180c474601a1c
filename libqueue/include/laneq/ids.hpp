// Domain identifiers as distinct types, so a sequence number can never be passed as an id.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace laneq {

/// A 64-bit identifier tagged with what it identifies.
template <class Tag>
struct strong_id {
  std::uint64_t value = 0;

  friend constexpr auto operator<=>(strong_id, strong_id) = default;
  constexpr explicit operator bool() const { return value != 0; }
};

template <class Inspector, class Tag>
auto inspect(Inspector& f, strong_id<Tag>& x) {
  return f(x.value);
}

/// Stable identity of a message, assigned at its first enqueue and kept across redrives.
using message_id = strong_id<struct message_id_tag>;
/// Arrival position of a message within its queue; a redrive assigns a new one.
using message_seq = strong_id<struct message_seq_tag>;
/// A live ordering group. The shard engine gives each group it makes a new id (a recovered
/// group keeps the one its durable lease names). 0 means "no group" (unordered).
using group_id = strong_id<struct group_id_tag>;

}  // namespace laneq

template <class Tag>
struct std::hash<laneq::strong_id<Tag>> {
  std::size_t operator()(laneq::strong_id<Tag> x) const noexcept {
    return std::hash<std::uint64_t>{}(x.value);
  }
};
