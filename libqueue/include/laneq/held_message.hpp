// held_message: a message as an ordering group's window holds it in memory (ADR 0009, "Memory
// follows live groups, not backlog"). The fields the group state machine and the scheduler read
// on every step stay fields; the headers, the fairness key and the attributes are packed into
// one string, which keeps short ones inside itself and takes one allocation for longer ones
// (not a vector of headers and a string per long name or value). A live idle group's message
// takes 112 bytes this way where a `message` and its one header took 224.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "laneq/ids.hpp"
#include "laneq/message.hpp"
#include "laneq/time.hpp"

namespace laneq {

struct held_message {
  message_id id;
  message_seq seq;
  std::string body;
  timestamp enqueued_at;
  timestamp delay_until;
  timestamp not_before;
  std::uint32_t attempts = 0;
  std::uint32_t redriven_after_s =
      0;  ///< message::redriven_after_s (in the padding after attempts)

  held_message() = default;
  /// Packs `m` (its body and strings are moved, not copied).
  explicit held_message(message m);

  /// The whole message, as it was packed (with the fields' current values).
  message unpack() const;
  /// The same, moving the body out: for a message that leaves the window.
  message take() &&;

  /// When it last entered the queue (message::entered_at).
  timestamp entered_at() const { return enqueued_at + std::chrono::seconds{redriven_after_s}; }
  /// Its fairness key, read from the packed part without unpacking the rest.
  std::string_view fairness_key() const;
  /// What it takes in memory: the struct and the bytes its strings hold (the window budget's
  /// measure, as `memory_footprint(const message&)` is a whole message's).
  std::size_t footprint() const;

  friend bool operator==(const held_message&, const held_message&) = default;

 private:
  /// Fills in the packed fields of `m` (fairness key, headers, attributes), empty before.
  void unpack_into(message& m) const;

  /// The fairness key, then the headers, then the attributes, each string after its length (a
  /// LEB128 varint) and each list after its count (held_message.cpp).
  std::string packed_;
};

}  // namespace laneq
