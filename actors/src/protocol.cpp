// The protocol's out-of-line pieces (actors/include/laneq/actors/protocol.hpp): laneq <-> CAF
// error conversion, the errors of a queue that stopped or was deleted, and the scheduler
// settings. Its own target, laneq_protocol, so both laneq_actors and laneq_persistence
// can link it.
#include "laneq/actors/protocol.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "laneq/assert.hpp"

namespace laneq {

std::size_t default_scheduler_threads(unsigned cores) {
  return cores > 1 ? cores - 1 : 1;
}

void tune_scheduler(caf::actor_system_config& cfg, std::size_t threads) {
  if (threads == 0) threads = default_scheduler_threads(std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<caf::config_value::integer>(threads));
  cfg.set("work-stealing.moderate-poll-attempts", caf::config_value::integer{0});
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

error storage_error(const std::string& queue, const caf::error& e) {
  auto err = from_caf(e);
  if (err.code == errc::unavailable) err.code = errc::storage_failed;
  err.message = "queue '" + queue + "': " + err.message;
  return err;
}

caf::error queue_deleted_reason(const std::string& queue) {
  return to_caf(error{errc::queue_deleted, "queue '" + queue + "' was deleted"});
}

error stopped_queue_error(const caf::error& reason, const std::string& queue) {
  // An empty reason: the actor was destroyed without an exit (its last handle went away), and
  // CAF 0.17 must not be asked for an empty error's category.
  if (reason) {
    if (auto e = from_caf(reason); e.code == errc::queue_deleted) return e;
  }
  auto why = !reason || reason == caf::make_error(caf::exit_reason::user_shutdown)
                 ? std::string{"the broker is shutting down"}
                 : caf::to_string(reason);
  return error{errc::unavailable, "queue '" + queue + "' stopped before answering: " + why};
}

}  // namespace laneq
