// SHA-256 through OpenSSL's EVP interface (sha256.hpp).
#include "sha256.hpp"

#include <openssl/evp.h>

#include "laneq/assert.hpp"

namespace laneq::detail {

std::array<std::uint8_t, 32> sha256(std::string_view bytes) {
  // Fetched once and kept for the process (OpenSSL's fetched algorithms are shareable).
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  LANEQ_ASSERT(md != nullptr, "OpenSSL provides SHA-256");
  std::array<std::uint8_t, 32> out{};
  unsigned int len = 0;
  auto ok = EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, md, nullptr);
  LANEQ_ASSERT(ok == 1 && len == out.size(), "SHA-256 of a byte string succeeds");
  return out;
}

}  // namespace laneq::detail
