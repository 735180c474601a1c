// The gateway of a sharded queue (docs/design/sharding.md): the queue's handle when it has more
// than one shard. It holds no queue state; it routes each request to the shards it concerns and
// merges their answers:
// - an enqueue batch is split by shard (sharding.hpp), one request per shard, and answered with
//   the ids in batch order;
// - an ack batch, a nack, an extend or a redrive goes to the shard its message id names;
// - a receive asks the shards in rotation (starting one further each time) for what is still
//   missing; a long poll that found nothing watches every shard and receives from the first that
//   has a message ready, until its wait is over;
// - dead letters, stats and pages of groups are gathered from every shard; a purge and a peek
//   go to every shard (a peek answers shard 0's messages first, then shard 1's, ...); dead
//   letters named by id go to the shards the ids name.
// Each shard is a shard actor with its own engine and store records; a queue of one shard has no
// gateway (its shard actor is its handle).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/queue_spec.hpp"

namespace laneq {

struct gateway_actor_config {
  context_ptr ctx;
  queue_spec spec;
  std::vector<shard_actor> shards;  ///< index = shard index
};

class gateway_actor_impl : public actor_base<queue_control> {
 public:
  gateway_actor_impl(caf::actor_config& cfg, gateway_actor_config gc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.gateway"; }
  void on_exit() override;

 private:
  struct receive_state;
  timestamp now() const { return gc_.ctx->time.now(clock()); }
  std::uint32_t shard_count() const { return static_cast<std::uint32_t>(gc_.shards.size()); }
  /// The shard that gave out `id`, if it is one of this queue's.
  const shard_actor* shard_of(message_id id) const;
  /// A batch split by shard: each shard's messages (and parsed bodies) and their indexes.
  struct split_batch {
    std::vector<std::vector<outgoing_message>> parts;
    std::vector<std::vector<shared_json>> jsons;
    std::vector<std::vector<std::size_t>> where;
  };
  split_batch split_by_shard(std::vector<outgoing_message>& batch,
                             const std::vector<shared_json>* parsed);
  caf::result<std::vector<message_id>> enqueue_batch(std::vector<outgoing_message>& batch);
  caf::result<std::vector<lease_outcome>> ack(const std::vector<lease_token>& leases);
  caf::result<std::uint64_t> redrive(const std::vector<message_id>& ids);
  caf::result<std::vector<dead_letter>> dead_letters(std::uint32_t max);
  /// `ids` by the shard each names; an id of no shard of this queue is dead_letter_not_found.
  std::optional<caf::error> split_ids(const std::vector<message_id>& ids,
                                      std::vector<std::vector<message_id>>& parts);
  caf::result<std::vector<dead_letter>> dead_letters_by_id(const std::vector<message_id>& ids);
  caf::result<std::uint64_t> delete_dead_letters(const std::vector<message_id>& ids);
  caf::result<std::uint64_t> purge(const group_filter& which);
  caf::result<std::vector<peeked_message>> peek(const peek_request& req);
  caf::result<queue_stats> stats();
  caf::result<groups_page> groups(const groups_query& q);
  void groups_from(std::shared_ptr<struct groups_gather> g, std::uint32_t shard, std::string after);
  caf::result<std::vector<delivery>> receive(const receive_request& req);
  void ask_next(std::shared_ptr<receive_state> s);
  void watch_all(std::shared_ptr<receive_state> s);
  void finish(std::shared_ptr<receive_state> s);
  caf::result<topic_prepared> prepare(std::vector<outgoing_message>& batch,
                                      std::vector<shared_json>& parsed);
  caf::result<caf::ok_atom> settle(bool committed);
  /// Sends `msg...` to every shard and answers ok once all did (or the first error).
  template <class... Ts>
  caf::result<caf::ok_atom> to_all(Ts... xs);

  gateway_actor_config gc_;
  std::uint32_t next_receive_ = 0;       ///< where the next receive starts its rotation
  std::uint64_t next_unordered_ = 0;     ///< spreads unordered messages without a dedupe key
  std::uint64_t empty_receives_ = 0;     ///< receives answered with no message (queue_stats)
  std::vector<std::uint32_t> prepared_;  ///< shards holding a topic's prepared batch
};

}  // namespace laneq
