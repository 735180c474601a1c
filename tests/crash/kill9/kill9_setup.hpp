// What the kill -9 broker and its test driver agree on (RELIABILITY.md T3): the queues, the
// message body format and the "ready" line the broker prints once its queues are published.
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "laneq/queue_spec.hpp"

namespace laneq::kill9 {

/// The ordering-key header of the keyed queues.
inline constexpr std::string_view key_header = "k";

/// The queues under test, in the order of their ports.
inline constexpr std::size_t queue_count = 3;
inline constexpr std::array<std::string_view, queue_count> queue_names{"ordered", "durable",
                                                                       "plain"};

/// Deliveries before a message is dead-lettered: as many as allowed, so crashes and abandoned
/// leases never dead-letter a message during the run.
inline constexpr std::uint32_t attempts_max = limits::max_attempts_max;

/// The spec of queue `i` (see `queue_names`): ordered by header "k" with fast delivery, the
/// same with durable delivery, and unordered.
inline queue_spec spec_of(std::size_t i) {
  queue_spec spec{std::string{queue_names[i]}};
  spec.max_attempts(attempts_max);
  if (i == 0) spec.ordered_by({key::header(std::string{key_header})});
  if (i == 1)
    spec.ordered_by({key::header(std::string{key_header})}).delivery(delivery_durability::durable);
  return spec;
}

/// The body of message `n` of key `k`: "k=<k> n=<n>". Every body the driver sends is unique.
inline std::string make_body(std::string_view k, std::uint64_t n) {
  return "k=" + std::string{k} + " n=" + std::to_string(n);
}

/// A body split into its key and number.
struct parsed_body {
  std::string key;
  std::uint64_t n = 0;
};

/// Parses `make_body`'s output; nullopt for anything else.
inline std::optional<parsed_body> parse_body(std::string_view body) {
  if (!body.starts_with("k=")) return std::nullopt;
  auto sep = body.find(" n=");
  if (sep == std::string_view::npos || sep < 2) return std::nullopt;
  parsed_body out{std::string{body.substr(2, sep - 2)}, 0};
  auto digits = body.substr(sep + 3);
  if (digits.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out.n);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return out;
}

/// The broker's line once every queue is published: "ready <port> <port> <port>", one port per
/// queue in `queue_names` order.
inline std::string make_ready_line(const std::array<std::uint16_t, queue_count>& ports) {
  std::string out = "ready";
  for (auto p : ports) out += " " + std::to_string(p);
  return out;
}

/// Parses `make_ready_line`'s output (without the newline); nullopt for anything else.
inline std::optional<std::array<std::uint16_t, queue_count>> parse_ready_line(
    std::string_view line) {
  if (!line.starts_with("ready")) return std::nullopt;
  line.remove_prefix(5);
  std::array<std::uint16_t, queue_count> ports{};
  for (auto& p : ports) {
    if (!line.starts_with(" ")) return std::nullopt;
    line.remove_prefix(1);
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), p);
    if (ec != std::errc{} || p == 0) return std::nullopt;
    line.remove_prefix(static_cast<std::size_t>(end - line.data()));
  }
  if (!line.empty()) return std::nullopt;
  return ports;
}

}  // namespace laneq::kill9
