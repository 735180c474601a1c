// The checks an enqueued message must pass before it is placed: sizes and counts against
// `limits.hpp`, header names that are HTTP tokens, delay ranges. Each error names the message
// and field (`messages[3].body`) and the bound.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laneq/error.hpp"
#include "laneq/message.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// The first rule `m` (the `i`-th message of its batch) breaks, or nothing.
std::optional<error> check_message(const outgoing_message& m, std::size_t i);

/// The first rule the batch breaks (its size, then each message), or nothing.
std::optional<error> check_batch(const std::vector<outgoing_message>& batch);

/// The first rule a receive breaks (max, lease, wait, batch), or nothing; `lease_default` stands
/// for a lease of 0.
std::optional<error> check_receive(std::uint32_t max, std::int64_t lease_us, std::int64_t wait_us,
                                   duration lease_default, std::uint32_t batch = 1);

/// `messages[i]`, or `messages[i].name` when a field is named.
std::string message_field(std::size_t i, const char* name);

/// `s` with bytes outside printable ASCII as `\xNN`, for an error message.
std::string printable(std::string_view s);

}  // namespace laneq
