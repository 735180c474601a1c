// The shard actor: one CAF actor per shard of a queue (docs/decisions/0009). It feeds its
// `shard_engine` (libqueue) every request with the time, and carries out the engine's effects:
// it sends writes and reads to the store and feeds their answers back, answers each request's
// response promise, arms one timer for the engine's next wake-up, and logs what the engine asks
// to. No policy lives here, and no memory is shared with any other actor: the store is reached
// by messages only. With one shard (the default) the shard actor is the queue's handle.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <variant>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/shard_engine.hpp"

namespace laneq {

struct shard_actor_config {
  context_ptr ctx;
  shard_config engine;
  store_actor store;
};

class shard_actor_impl : public actor_base<shard_actor> {
 public:
  shard_actor_impl(caf::actor_config& cfg, shard_actor_config sc);

  behavior_type make_behavior() override;
  const char* name() const override { return "laneq.shard"; }
  void on_exit() override;

 private:
  /// A request's response promise, of whichever type its request answers.
  using promise = std::variant<caf::typed_response_promise<std::vector<message_id>>,
                               caf::typed_response_promise<std::vector<delivery>>,
                               caf::typed_response_promise<std::vector<lease_outcome>>,
                               caf::typed_response_promise<caf::ok_atom>,
                               caf::typed_response_promise<timestamp>,
                               caf::typed_response_promise<std::uint64_t>,
                               caf::typed_response_promise<std::vector<dead_letter>>,
                               caf::typed_response_promise<std::vector<peeked_message>>>;

  timestamp now() const { return sc_.ctx->time.now(clock()); }
  /// A new request id with `p` to answer it.
  template <class T>
  std::pair<request_id, caf::typed_response_promise<T>> open();
  /// Carries out the engine's effects (after every input).
  void flush();
  void answer(engine_reply& r);
  void write(engine_write w);
  void read(engine_read r);

  shard_actor_config sc_;
  shard_engine engine_;
  std::unordered_map<request_id, promise> promises_;
  request_id next_request_ = 1;
  deadline_timer timer_;
};

}  // namespace laneq
