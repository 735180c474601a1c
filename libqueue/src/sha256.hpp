// SHA-256 for lane ids and long keys (codec.cpp, key.cpp; docs/design/lanes.md L3, L4).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace laneq::detail {

/// The SHA-256 digest of `bytes`. OpenSSL's implementation is looked up once: `EVP_sha256()` in
/// each call made OpenSSL 3 fetch it from its provider table again, under a lock, per digest.
std::array<std::uint8_t, 32> sha256(std::string_view bytes);

}  // namespace laneq::detail
