// The group actor: one per non-empty ordering group, a thin adapter over `group_state`
// (docs/design/ordering.md O3-O7). It holds the group's messages, offers its head to the
// fairness actor, and tells the queue actor when it has gone idle. Its lease deadline is watched
// by the fairness actor (one timer per queue, weak references), so a stopped group is freed at
// once instead of living on inside a pending CAF timer until its lease would have ended.
#pragma once

#include <string>

#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/group_state.hpp"

namespace laneq {

/// Everything a group actor needs at spawn.
struct group_actor_config {
  context_ptr ctx;
  metrics_ptr metrics;
  std::string store_key;  ///< the queue incarnation's key in the store
  group_id id;
  std::string label;  ///< printable ordering key
  std::uint32_t max_attempts = limits::max_attempts_default;
  fairness_actor fairness;
  queue_actor queue;
  store_actor store;
};

class group_actor_impl : public group_actor::base {
 public:
  group_actor_impl(caf::actor_config& cfg, group_actor_config gc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.group"; }
  void on_exit() override;

 private:
  timestamp now() const { return gc_.ctx->time.now(clock()); }
  void apply(group_effects fx);
  /// Ends the lease if its deadline has passed: a failed attempt (O5). Runs on the lease timer
  /// and before any ack, nack or extend, so no answer ever depends on timer latency.
  void expire_if_due(timestamp t);
  void check();

  group_actor_config gc_;
  group_state state_;
};

}  // namespace laneq
