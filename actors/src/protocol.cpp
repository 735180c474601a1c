// The protocol's out-of-line pieces (actors/include/laneq/actors/protocol.hpp): laneq <-> CAF
// error conversion, the route receipt and the scheduler settings. Its own target, laneq_protocol,
// so both laneq_actors and laneq_persistence can link it.
#include "laneq/actors/protocol.hpp"

#include <algorithm>
#include <thread>

namespace laneq {

void tune_scheduler(caf::actor_system_config& cfg, std::size_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<caf::config_value::integer>(threads));
  cfg.set("work-stealing.moderate-poll-attempts", caf::config_value::integer{0});
}

route_receipt::route_receipt(const caf::strong_actor_ptr& queue, std::uint64_t batch)
    : notifier_(std::make_shared<notifier>(caf::actor_cast<caf::weak_actor_ptr>(queue), batch)) {}

route_receipt::notifier::~notifier() {
  if (auto q = queue.lock()) caf::anon_send(caf::actor_cast<queue_actor>(q), routed_atom_v, batch);
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
