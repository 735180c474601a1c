// What a header name may be (RFC 9110 tokens): checked on enqueue and in queue specs, so a
// stored header can be written back as an HTTP field as it is (docs/api.md).
#pragma once

#include <string_view>

namespace laneq {

/// Whether `name` is a header name: 1 or more token characters (letters, digits and
/// ``!#$%&'*+-.^_`|~``).
bool is_header_name(std::string_view name);

}  // namespace laneq
