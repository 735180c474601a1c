// The admin actor: the broker's registry of queues. Creates a queue (idempotent for the same
// spec, an error for a different one), finds, lists, describes and deletes queues, and at start
// rebuilds every queue from the store (docs/design/recovery.md). Queue specs are stored before a
// create is answered; a delete removes every record of the queue in one write.
#pragma once

#include <map>
#include <string>

#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/lease.hpp"

namespace laneq {

/// Broker-wide settings the admin actor hands to every queue.
struct admin_actor_config {
  context_ptr ctx;
  store_actor store;
  bool sync = true;  ///< false: no queue syncs its writes (survives a process crash only)
  duration reclaim_grace = limits::reclaim_grace_default;
  std::size_t group_window = limits::group_window_default;
};

class admin_actor_impl : public admin_actor::base {
 public:
  admin_actor_impl(caf::actor_config& cfg, admin_actor_config ac);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.admin"; }
  void on_exit() override;

 private:
  struct entry {
    queue_spec spec;
    queue_actor handle;
    std::uint64_t uid = 0;
    bool hook_missing = false;  ///< recovered; the spec had a hook nobody has given back yet
  };
  caf::result<queue_api> find(const std::string& name);
  /// Spawns the actor of a queue incarnation.
  queue_actor spawn_queue(const queue_spec& spec, std::uint64_t uid, bool hook_missing);
  caf::result<std::uint64_t> recover();
  void recover_queues(caf::typed_response_promise<std::uint64_t> promise);

  admin_actor_config ac_;
  std::map<std::string, entry> queues_;
  std::uint64_t next_uid_ = 1;  ///< numbers queue incarnations (store keys); never reused
  std::uint64_t epoch_ = 0;     ///< broker runs over this store (0: never recovered)
  nonce_source nonces_;         ///< the lease key (persisted with the store)
};

}  // namespace laneq
