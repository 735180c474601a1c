// The in-memory store: the store interface's reference implementation, for tests and for a
// broker without a data directory. An ordered table (memory_table.hpp, kept apart by lane as
// the RocksDB store's memtable) with the same group-commit shape as the RocksDB persistence
// actor (docs/design/persistence.md): writes that arrive before a batch closes are applied and
// answered together when it closes. It survives its brokers: the simulation's crash steps stop
// every other actor and recover a new broker from it.
#pragma once

#include <vector>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/memory_table.hpp"
#include "laneq/actors/protocol.hpp"

namespace laneq {

class memory_store_impl : public actor_base<store_actor> {
 public:
  explicit memory_store_impl(caf::actor_config& cfg);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.memory_store"; }
  /// Commits the open batch on a clean stop; a kill (a crash) drops it unanswered. Either way
  /// no response promise outlives the actor (each holds its requester alive).
  void on_exit() override;

 private:
  struct pending {
    store_write write;
    caf::typed_response_promise<caf::ok_atom> promise;
  };
  void commit();
  void apply(const store_op& op);

  memory_table data_;
  std::vector<pending> batch_;
  std::uint64_t generation_ = 0;
  store_stats stats_;
};

}  // namespace laneq
