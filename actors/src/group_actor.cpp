// The group actor (actors/include/laneq/actors/group_actor.hpp).
#include "laneq/actors/group_actor.hpp"

namespace laneq {

group_actor_impl::group_actor_impl(caf::actor_config& cfg, group_actor_config gc)
    : group_actor::base(cfg), gc_(std::move(gc)), state_(gc_.id, gc_.max_attempts) {}

// Handles to peers are strong references: drop them so no cycle outlives the actor.
void group_actor_impl::on_exit() {
  gc_.fairness = nullptr;
  gc_.queue = nullptr;
  gc_.store = nullptr;
}

void group_actor_impl::check() {
#ifndef NDEBUG
  state_.check_invariants();
#endif
}

void group_actor_impl::apply(group_effects fx) {
  auto& m = *gc_.metrics;
  if (fx.offer)
    send(gc_.fairness, offer_atom_v, gc_.id, caf::actor_cast<group_actor>(this), gc_.label,
         std::move(*fx.offer));
  if (!fx.removed.empty()) {
    queue_metrics::add(m.acked, fx.removed.size());
    caf::anon_send(gc_.store, remove_atom_v, gc_.store_key, std::move(fx.removed));
  }
  if (!fx.dead_letters.empty()) {
    queue_metrics::add(m.dead_lettered, fx.dead_letters.size());
    send(gc_.queue, dead_atom_v, std::move(fx.dead_letters));
  }
  if (fx.idle) send(gc_.queue, idle_atom_v, gc_.id, state_.received_total());
  check();
}

void group_actor_impl::expire_if_due(timestamp t) {
  if (state_.current_phase() != group_state::phase::in_flight || state_.lease_deadline() > t)
    return;
  queue_metrics::add(gc_.metrics->lease_expired);
  gc_.metrics->in_flight.fetch_sub(1, std::memory_order_relaxed);
  apply(state_.on_lease_timer(t));
}

group_actor_impl::behavior_type group_actor_impl::make_behavior() {
  return {
      [this](enqueue_atom, std::vector<message>& msgs) {
        apply(state_.on_enqueue(std::move(msgs), now()));
      },
      [this](delivered_atom, const lease_token& lease, timestamp deadline) {
        auto t = now();
        state_.on_delivered(lease, deadline, t);  // the fairness actor watches the deadline
        check();
      },
      [this](ack_atom, const lease_token& lease) -> caf::result<caf::ok_atom> {
        auto t = now();
        expire_if_due(t);
        auto fx = state_.on_ack(lease, t);
        if (!fx) return to_caf(fx.err());
        gc_.metrics->in_flight.fetch_sub(1, std::memory_order_relaxed);
        apply(std::move(fx).value());
        return caf::ok_atom_v;
      },
      [this](nack_atom, const lease_token& lease,
             const nack_request& req) -> caf::result<caf::ok_atom> {
        auto t = now();
        expire_if_due(t);
        auto fx = state_.on_nack(lease, req.kind, duration{req.retry_after_us}, t);
        if (!fx) return to_caf(fx.err());
        queue_metrics::add(gc_.metrics->nacked);
        gc_.metrics->in_flight.fetch_sub(1, std::memory_order_relaxed);
        apply(std::move(fx).value());
        return caf::ok_atom_v;
      },
      [this](extend_atom, const lease_token& lease, std::int64_t by_us) -> caf::result<timestamp> {
        auto t = now();
        expire_if_due(t);
        auto deadline = state_.on_extend(lease, duration{by_us}, t);
        if (!deadline) return to_caf(deadline.err());
        send(gc_.fairness, extend_atom_v, caf::actor_cast<group_actor>(this), lease,
             deadline.value());
        return deadline.value();
      },
      [this](describe_atom) -> group_info {
        auto info = state_.describe(now());
        info.key = gc_.label;
        return info;
      },
      [this](tick_atom, const lease_token& lease) {
        // A watch that fires for an earlier lease, or before an extended deadline, is stale.
        if (state_.lease() == lease) expire_if_due(now());
      },
      [this](stop_atom) { quit(); },
  };
}

}  // namespace laneq
