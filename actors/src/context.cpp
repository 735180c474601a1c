// Broker context construction (actors/include/laneq/actors/context.hpp) and error conversion.
#include "laneq/actors/context.hpp"

#include <random>

#include "laneq/actors/protocol.hpp"

namespace laneq {

context_ptr make_context(caf::actor_system& sys) {
  auto wall =
      std::chrono::duration_cast<duration>(std::chrono::system_clock::now().time_since_epoch());
  std::random_device rd;
  auto draw = [&rd] { return (static_cast<std::uint64_t>(rd()) << 32) ^ rd(); };
  auto ctx = std::make_shared<broker_context>();
  ctx->time = time_base{timestamp{wall.count()}, sys.clock().now()};
  ctx->seed = draw();
  ctx->nonce_key = draw();
  return ctx;
}

context_ptr make_context(caf::actor_system& sys, timestamp epoch, std::uint64_t seed) {
  auto ctx = std::make_shared<broker_context>();
  ctx->time = time_base{epoch, sys.clock().now()};
  ctx->seed = seed;
  ctx->nonce_key = seed * 0x9e3779b97f4a7c15ULL + 1;
  return ctx;
}

caf::error to_caf(const error& e) {
  return caf::error{static_cast<std::uint8_t>(e.code), caf::atom("laneq"),
                    caf::make_message(e.message)};
}

error from_caf(const caf::error& e) {
  if (e.category() == caf::atom("laneq")) {
    std::string msg;
    if (e.context().match_elements<std::string>()) msg = e.context().get_as<std::string>(0);
    return error{static_cast<errc>(e.code()), std::move(msg)};
  }
  return error{errc::unavailable, "the broker did not answer: " + caf::to_string(e)};
}

}  // namespace laneq
