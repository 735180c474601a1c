// The in-memory store: the store interface's reference implementation. It keeps the same
// commit-window shape the RocksDB persistence actor will have (ARCHITECTURE.md §4): writes that
// arrive before the window closes are answered together when it closes.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "laneq/actors/protocol.hpp"

namespace laneq {

class memory_store_impl : public store_actor::base {
 public:
  explicit memory_store_impl(caf::actor_config& cfg);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.memory_store"; }

 private:
  struct queue_data {
    std::unordered_map<message_id, message> live;
    std::unordered_map<message_id, dead_letter> dead;
  };
  /// Joins the open commit window; the promise is answered when the window closes.
  caf::result<caf::ok_atom> join_window();

  std::unordered_map<std::string, queue_data> queues_;
  std::unordered_set<std::string> dropped_;  ///< deleted queue incarnations: late writes refused
  std::vector<caf::typed_response_promise<caf::ok_atom>> window_;
  std::uint64_t commits_ = 0;
  std::uint64_t records_ = 0;
};

}  // namespace laneq
