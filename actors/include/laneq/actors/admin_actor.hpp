// The admin actor: the broker's registry of queues. Creates a queue (idempotent for the same
// spec, an error for a different one), finds, lists, describes and deletes queues.
#pragma once

#include <map>
#include <string>

#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"

namespace laneq {

struct admin_actor_config {
  context_ptr ctx;
  store_actor store;
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
    std::string store_key;
  };
  caf::result<queue_api> find(const std::string& name);

  admin_actor_config ac_;
  std::map<std::string, entry> queues_;
  std::uint64_t next_uid_ = 1;  ///< numbers queue incarnations (store keys)
};

}  // namespace laneq
