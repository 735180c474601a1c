// Fuzz target: laneqd's config file (apps/server/config.hpp), RELIABILITY.md G8/T6.
// Any input is either a valid config or a list of numbered errors, each naming a field; nothing
// may crash, hang or assert.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "laneq/server/config.hpp"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_config: property violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  auto parsed = laneq::server::parse_config(text);
  for (const auto& e : parsed.errors) {
    require(e.code == laneq::errc::invalid_argument || e.code == laneq::errc::invalid_spec,
            "a config error that is neither invalid_argument nor invalid_spec");
    require(!e.message.empty(), "a config error without a message");
  }
  if (parsed.errors.empty())
    for (const auto& q : parsed.config.queues)
      require(q.validate().empty(), "an accepted config with an invalid queue");
  return 0;
}
