// Fuzz target: the JSON form of queue specs (libqueue/spec_json.hpp), RELIABILITY.md G8/T6.
// Any input either parses to a spec that validates and round-trips through its JSON form, or
// yields numbered invalid_spec errors naming the queue. Nothing may crash, hang or assert.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <boost/json/parse.hpp>

#include "laneq/spec_json.hpp"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_spec_json: property violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  boost::json::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec) return 0;
  auto parsed = laneq::queue_spec_from_json("fuzz/q", v);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) {
      require(e.code == laneq::errc::invalid_spec, "an error that is not invalid_spec");
      require(e.message.rfind("queue 'fuzz/q': ", 0) == 0, "an error not naming the queue");
    }
    return 0;
  }
  require(parsed.spec.validate().empty(), "an accepted spec that does not validate");
  auto back = laneq::queue_spec_from_json("fuzz/q", laneq::queue_spec_to_json(parsed.spec));
  require(back.ok(), "the JSON form of an accepted spec is rejected");
  require(back.spec.same_definition(parsed.spec), "the JSON form changes the spec");
  return 0;
}
