// What the kill -9 test (RELIABILITY.md T3) and the laneqd it kills agree on: the queues (laneqd's
// config file, made here) and the message body format.
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "laneq/queue_spec.hpp"
#include "laneq/spec_json.hpp"

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

/// laneqd's config file for the test: the queues of `spec_of`, the reclaim grace, loopback only.
/// The ports come from the command line (`--http-port 0 --caf-port any`: the OS picks them).
inline std::string make_config(std::int64_t reclaim_grace_ms) {
  boost::json::object queues;
  for (std::size_t i = 0; i < queue_count; ++i)
    queues[queue_names[i]] = queue_spec_to_json(spec_of(i));
  boost::json::object config{{"http", {{"host", "127.0.0.1"}}},
                             {"caf", {{"host", "127.0.0.1"}}},
                             {"reclaim_grace_ms", reclaim_grace_ms},
                             {"queues", std::move(queues)}};
  return boost::json::serialize(config);
}

}  // namespace laneq::kill9
