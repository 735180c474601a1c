// The queue actor: one per queue, the entry point for producers and consumers. It validates and
// places each enqueued message (ordering key, missing-key policy, on_enqueue hook), assigns its
// id and arrival seq, has the store make it durable, then routes it to its group actor (spawned on
// the group's first message) or, unordered, straight to the fairness actor. It routes acks, nacks
// and extends by the group named in the lease, keeps the dead-letter list, and answers stats and
// per-group introspection.
#pragma once

#include <map>
#include <string>
#include <unordered_map>

#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/queue_spec.hpp"

namespace laneq {

struct queue_actor_config {
  context_ptr ctx;
  metrics_ptr metrics;
  queue_spec spec;
  store_actor store;
  /// This incarnation's key in the store ("<name>#<uid>"): a queue deleted and created again
  /// under the same name never sees a late write of its predecessor.
  std::string store_key;
};

class queue_actor_impl : public queue_actor::base {
 public:
  queue_actor_impl(caf::actor_config& cfg, queue_actor_config qc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.queue"; }
  void on_exit() override;

 private:
  struct group_entry {
    group_id id;
    group_actor handle;
    std::string key;
    std::uint64_t routed = 0;  // messages sent to this incarnation
  };
  struct placed {
    message msg;
    placement where;
  };

  timestamp now() const { return qc_.ctx->time.now(clock()); }
  /// Validates a batch and turns it into placed messages, or the first error.
  result<std::vector<placed>> admit(std::vector<outgoing_message>& batch, timestamp t);
  /// Makes `batch` durable, then routes it; `done` runs after routing (or with the error).
  template <class Done>
  void persist_and_route(std::vector<placed> batch, Done finish);
  void route(std::vector<placed> batch);
  group_entry& group_for(const std::string& key, const std::string& label);
  group_entry* find_group(group_id id);
  caf::result<std::vector<group_info>> describe_groups(bool blocked_only);
  queue_stats stats() const;

  queue_actor_config qc_;
  fairness_actor fairness_;
  std::uint64_t next_id_ = 1;
  std::uint64_t next_seq_ = 1;
  std::uint64_t next_group_ = 1;
  std::unordered_map<std::string, group_id> group_by_key_;
  std::unordered_map<group_id, group_entry> groups_;
  std::map<std::uint64_t, dead_letter> dead_letters_;  // by dead-letter order
  std::unordered_map<message_id, std::uint64_t> dead_letter_order_;
  std::uint64_t next_dead_letter_ = 1;
};

}  // namespace laneq
