// The in-process C++ API: a broker (store + admin actor) on an actor system, and blocking
// clients for code outside actors.
//
// Async form: the typed handles themselves. From any actor:
//   self->request(admin, 5s, create_atom_v, queue_spec("audit").ordered())
//       .then([=](queue_api q, bool created) { ... }, [=](caf::error& e) { ... });
//   self->request(q, 5s, enqueue_atom_v, std::vector<outgoing_message>{...}).then(...);
// Blocking form: `blocking_admin` and `blocking_queue` below.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"

namespace laneq {

/// Registers laneq's message types with a CAF config (call before creating the actor system).
void add_message_types(caf::actor_system_config& cfg);

/// An in-process broker. Owns its actors: they stop when the broker is destroyed.
class broker {
 public:
  /// Production time base (wall clock) and a random nonce seed.
  explicit broker(caf::actor_system& sys);
  /// A given context (tests pass a fixed epoch and seed).
  broker(caf::actor_system& sys, context_ptr ctx);
  /// A given context and store (tests inject a store that fails on demand).
  broker(caf::actor_system& sys, context_ptr ctx, store_actor store);
  ~broker();
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;

  admin_actor admin() const { return admin_; }
  store_actor store() const { return store_; }
  const context_ptr& context() const { return ctx_; }

 private:
  context_ptr ctx_;
  store_actor store_;
  admin_actor admin_;
};

/// Default time a blocking call waits for the broker.
inline constexpr std::chrono::seconds blocking_timeout_default{30};

/// Blocking admin calls. Not for use inside an actor (it would block a scheduler thread).
class blocking_admin {
 public:
  blocking_admin(caf::actor_system& sys, admin_actor admin,
                 caf::timespan timeout = blocking_timeout_default);

  /// Creates the queue; the same spec again returns the existing queue.
  result<queue_api> create_queue(queue_spec spec);
  result<queue_api> lookup(const std::string& name);
  result<std::vector<std::string>> list_queues();
  result<queue_description> describe(const std::string& name);
  status delete_queue(const std::string& name);

 private:
  caf::actor_system& sys_;
  admin_actor admin_;
  caf::timespan timeout_;
};

/// Blocking queue calls. Not for use inside an actor.
class blocking_queue {
 public:
  blocking_queue(caf::actor_system& sys, queue_api q,
                 caf::timespan timeout = blocking_timeout_default);

  result<std::vector<message_id>> enqueue(std::vector<outgoing_message> batch);
  result<message_id> enqueue(outgoing_message m);
  /// Waits up to `req.wait_us` for the first message (long poll).
  result<std::vector<delivery>> receive(receive_request req);
  status ack(const lease_token& lease);
  /// Acks a batch; returns the leases that failed, with why.
  result<std::vector<lease_outcome>> ack(std::vector<lease_token> leases);
  status nack(const lease_token& lease, duration retry_after = duration{0});
  status dead_letter(const lease_token& lease);
  result<timestamp> extend(const lease_token& lease, duration by);
  result<std::vector<laneq::dead_letter>> dead_letters(std::uint32_t max = 1000);
  /// Redrives the given dead letters (all of them when `ids` is empty); returns how many.
  result<std::uint64_t> redrive(std::vector<message_id> ids = {});
  result<queue_stats> stats();
  result<std::vector<group_info>> groups(bool blocked_only = false);

  const queue_api& handle() const { return q_; }

 private:
  caf::actor_system& sys_;
  queue_api q_;
  caf::timespan timeout_;
};

}  // namespace laneq
