// Broker context construction (actors/include/laneq/actors/context.hpp).
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

}  // namespace laneq
