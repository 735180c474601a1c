// The protocol's out-of-line pieces (actors/include/laneq/actors/protocol.hpp): laneq <-> CAF
// error conversion, the route and ack receipts, the delivery slot, the arrival inbox and the
// scheduler settings. Its own target, laneq_protocol, so both laneq_actors and laneq_persistence
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

void tune_scheduler(caf::actor_system_config& cfg, std::size_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<caf::config_value::integer>(threads));
  cfg.set("work-stealing.moderate-poll-attempts", caf::config_value::integer{0});
}

route_receipt::route_receipt(const caf::strong_actor_ptr& queue, std::uint64_t batch)
    : notifier_(std::make_shared<notifier>(caf::actor_cast<caf::weak_actor_ptr>(queue), batch)) {}

route_receipt::notifier::~notifier() {
  if (auto q = queue.lock()) caf::anon_send(caf::actor_cast<queue_actor>(q), routed_atom_v, batch);
}

struct ack_receipt::gather {
  caf::weak_actor_ptr queue;
  std::uint64_t batch = 0;
  std::mutex mutex;  // the groups of one batch run on any worker
  std::vector<lease_token> leases;
  std::vector<bool> recorded;
  std::vector<store_op> ops;
  std::vector<lease_outcome> failed;

  void record(std::size_t index, std::vector<store_op> more, std::optional<error> why) {
    std::lock_guard<std::mutex> guard{mutex};
    if (index >= leases.size() || recorded[index]) return;
    recorded[index] = true;
    if (why) failed.push_back(lease_outcome{leases[index], std::move(*why)});
    for (auto& op : more) ops.push_back(std::move(op));
  }

  ~gather() {
    for (std::size_t i = 0; i < leases.size(); ++i)
      if (!recorded[i])
        failed.push_back(lease_outcome{
            leases[i], error{errc::lease_not_found, "no lease " + to_string(leases[i]) +
                                                        " is in flight (its group has stopped)"}});
    if (auto q = queue.lock())
      caf::anon_send(caf::actor_cast<queue_actor>(q), acked_atom_v, batch, std::move(ops),
                     std::move(failed));
  }
};

ack_receipt::ack_receipt(const caf::strong_actor_ptr& queue, std::uint64_t batch,
                         std::vector<lease_token> leases)
    : gather_(std::make_shared<gather>()) {
  gather_->queue = caf::actor_cast<caf::weak_actor_ptr>(queue);
  gather_->batch = batch;
  gather_->recorded.assign(leases.size(), false);
  gather_->leases = std::move(leases);
}

void ack_receipt::acked(std::size_t index, std::vector<store_op> ops) const {
  gather_->record(index, std::move(ops), std::nullopt);
}

void ack_receipt::failed(std::size_t index, error why) const {
  gather_->record(index, {}, std::move(why));
}

struct delivery_slot::state {
  std::mutex mutex;  // the fairness actor and the group run on any worker
  std::optional<posted> post;
  /// Whether `post` holds a delivery: most messages a group handles find the slot empty, and
  /// look without taking the mutex.
  std::atomic<bool> full{false};
};

delivery_slot::delivery_slot() : state_(std::make_shared<state>()) {}

void delivery_slot::post(const posted& p) const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  LANEQ_ASSERT(!state_->post, "a group offers again only after it took its last delivery");
  state_->post = p;
  state_->full.store(true, std::memory_order_release);
}

std::optional<delivery_slot::posted> delivery_slot::take() const {
  if (!state_->full.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->full.store(false, std::memory_order_relaxed);
  return std::exchange(state_->post, std::nullopt);
}

struct arrival_inbox::state {
  std::mutex mutex;  // the queue actor and the group run on any worker
  std::vector<message> pending;
  std::size_t pending_bytes = 0;
  bool busy = false;  ///< as the group last settled
  /// Whether `pending` holds messages: most messages a group handles find none, and look without
  /// taking the mutex.
  std::atomic<bool> any{false};
};

arrival_inbox::arrival_inbox() : state_(std::make_shared<state>()) {}

bool arrival_inbox::leave(message m) const {
  auto bytes = memory_footprint(m);
  std::lock_guard<std::mutex> guard{state_->mutex};
  auto& st = *state_;
  st.pending.push_back(std::move(m));
  st.pending_bytes += bytes;
  st.any.store(true, std::memory_order_release);
  return !st.busy || st.pending.size() >= limits::group_inbox_max ||
         st.pending_bytes >= limits::group_inbox_bytes_max;
}

std::vector<message> arrival_inbox::take() const {
  if (!state_->any.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->any.store(false, std::memory_order_relaxed);
  state_->pending_bytes = 0;
  return std::exchange(state_->pending, {});
}

std::vector<message> arrival_inbox::settle(bool busy) const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  auto& st = *state_;
  if (st.pending.empty()) {
    st.busy = busy;
    return {};
  }
  st.any.store(false, std::memory_order_relaxed);
  st.pending_bytes = 0;
  return std::exchange(st.pending, {});
}

struct offer_box::state {
  std::mutex mutex;  // the groups and the fairness actor run on any worker
  std::vector<offer> offers;
  caf::weak_actor_ptr fairness;
};

offer_box::offer_box() : state_(std::make_shared<state>()) {}

void offer_box::wake_up(const fairness_actor& fairness) const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->fairness = caf::actor_cast<caf::weak_actor_ptr>(fairness);
}

void offer_box::leave(offer o) const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  auto& st = *state_;
  st.offers.push_back(std::move(o));
  if (st.offers.size() > 1) return;  // a wake-up is on its way (sent under this lock)
  if (auto f = st.fairness.lock()) caf::anon_send(caf::actor_cast<fairness_actor>(f), offer_atom_v);
}

std::vector<offer_box::offer> offer_box::take() const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  return std::exchange(state_->offers, {});
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
