// The group actor (actors/include/laneq/actors/group_actor.hpp).
#include "laneq/actors/group_actor.hpp"

#include <iostream>

namespace laneq {

using namespace std::chrono_literals;

group_actor_impl::group_actor_impl(caf::actor_config& cfg, group_actor_config gc)
    : actor_base<group_actor>(cfg),
      gc_(std::move(gc)),
      state_(gc_.id, gc_.max_attempts, gc_.storage->window, gc_.storage->window_max) {}

// Handles to peers are strong references: drop them so no cycle outlives the actor.
void group_actor_impl::on_exit() {
  charge(-static_cast<std::int64_t>(charged_));
  charged_ = 0;
  gc_.fairness = nullptr;
  gc_.queue = nullptr;
  gc_.store = nullptr;
  gc_.offers.release();
}

void group_actor_impl::check() {
#ifndef NDEBUG
  state_.check_invariants();
#endif
}

std::vector<store_op> group_actor_impl::apply(group_effects fx, write_done moved) {
  auto& m = *gc_.metrics;
  const auto& st = *gc_.storage;
  std::vector<store_op> ops;
  if (fx.offer) {
    if (held_) {
      held_ = std::move(fx.offer);  // still in the reclaim grace
    } else {
      next_ = std::move(fx.offer);  // offered once this change is durable (offer_when_settled)
    }
  }
  for (auto seq : fx.removed) ops.push_back(st.erase_message(gc_.lane, seq));
  if (!fx.removed.empty()) queue_metrics::add(m.acked, fx.removed.size());
  if (fx.updated) ops.push_back(st.put_message(gc_.lane, *fx.updated));
  if (!fx.dead_letters.empty()) {
    queue_metrics::add(m.dead_lettered, fx.dead_letters.size());
    for (auto& dl : fx.dead_letters) dl.keep_lane(gc_.lane.bytes);  // lanes.md L7
    // The next head waits for the move too: a move lost in a power loss would bring the message
    // back as live after its successor ran.
    ++moves_pending_;
    request(gc_.queue, caf::infinite, dead_atom_v, std::move(fx.dead_letters))
        .then(
            [this, moved](caf::ok_atom) {
              --moves_pending_;
              offer_when_settled();
              if (moved) moved(std::nullopt);
            },
            [this, moved](caf::error& e) {
              --moves_pending_;
              offer_when_settled();
              if (moved) moved(from_caf(e));
            });
  } else if (moved) {
    moved(std::nullopt);
  }
  if (fx.fetch) fetch(*fx.fetch);
  if (fx.idle) idle_due_ = true;
  auto held = state_.memory_bytes();
  charge(static_cast<std::int64_t>(held) - static_cast<std::int64_t>(charged_));
  charged_ = held;
  check();
  return ops;
}

void group_actor_impl::offer(message head) {
  gc_.offers.leave(offer_box::offer{gc_.id, caf::actor_cast<group_actor>(this), gc_.label,
                                    std::move(head), slot_});
}

timestamp group_actor_impl::catch_up() {
  if (auto d = slot_.take()) {
    state_.on_delivered(d->lease, d->deadline, d->at);  // the fairness actor watches the deadline
    check();
  }
  auto t = now();
  if (auto arrived = gc_.inbox.take(); !arrived.empty()) take_in(std::move(arrived), t);
  return t;
}

void group_actor_impl::settle() {
  // Busy: the head is offered or in flight, so a delivery, ack, nack, extend or lease tick is
  // sure to come, and arrivals only join the window until then.
  while (true) {
    auto arrived = gc_.inbox.settle(state_.current_phase() != group_state::phase::empty);
    if (arrived.empty()) return;
    take_in(std::move(arrived), now());
  }
}

void group_actor_impl::take_in(std::vector<message> arrived, timestamp t) {
  write(apply(state_.on_enqueue(std::move(arrived), t, may_grow())));
}

void group_actor_impl::charge(std::int64_t delta) {
  if (delta == 0) return;
  gc_.metrics->window_bytes.fetch_add(delta, std::memory_order_relaxed);
  if (gc_.storage->budget) gc_.storage->budget->charge(delta);
}

bool group_actor_impl::may_grow() const {
  return gc_.storage->budget && gc_.storage->budget->has_room();
}

void group_actor_impl::report_idle() {
  // Not while a client still waits for one of this group's writes: the queue actor stops an
  // idle group, and a stopped group could no longer answer.
  if (!idle_due_ || settling()) return;
  idle_due_ = false;
  if (state_.backlog() == 0 && state_.current_phase() == group_state::phase::empty)
    send(gc_.queue, idle_atom_v, gc_.id, state_.received_total());
}

void group_actor_impl::write(std::vector<store_op> ops, write_done answered) {
  if (ops.empty()) {
    if (answered) answered(std::nullopt);
    offer_when_settled();
    return;
  }
  if (!parked_.empty()) {
    // An earlier write failed and waits for its retry: this one goes with it, in order.
    for (auto& op : ops) parked_.push_back(std::move(op));
    if (answered)
      answered(error{errc::storage_failed,
                     "queue '" + gc_.storage->name +
                         "': the store failed an earlier write, which is retried"});
    return;
  }
  auto n = first_unsettled_ + unsettled_.size();
  unsettled_.push_back(unsettled_write{ops});
  request(gc_.store, caf::infinite, write_atom_v, gc_.storage->write(std::move(ops)))
      .then(
          // The next head is offered before the answer goes, so a receive sent after the
          // answer finds it.
          [this, n, answered](caf::ok_atom) {
            on_written(n, true);
            if (answered) answered(std::nullopt);
          },
          [this, n, answered](caf::error& e) {
            on_written(n, false);
            if (answered) answered(storage_error(gc_.storage->name, e));
          });
}

void group_actor_impl::on_written(std::uint64_t n, bool ok) {
  auto& w = unsettled_.at(n - first_unsettled_);
  w.answered = true;
  w.ok = ok;
  while (!unsettled_.empty() && unsettled_.front().answered && unsettled_.front().ok) {
    unsettled_.pop_front();
    ++first_unsettled_;
  }
  for (const auto& u : unsettled_)
    if (!u.answered) return;  // a retry waits for every write sent before it
  if (!unsettled_.empty()) {
    // The first failed: it goes again with everything after it, in order (a later write that
    // succeeded is applied again after it, so the store ends as the group left it).
    for (auto& u : unsettled_)
      for (auto& op : u.ops) parked_.push_back(std::move(op));
    first_unsettled_ += unsettled_.size();
    unsettled_.clear();
    delayed_send(caf::actor_cast<group_actor>(this), gc_.storage->store_retry, write_atom_v);
  }
  offer_when_settled();
}

void group_actor_impl::retry_writes() {
  auto ops = std::move(parked_);
  parked_.clear();
  write(std::move(ops));
}

void group_actor_impl::offer_when_settled() {
  if (!settling() && next_) {
    auto head = std::move(*next_);
    next_.reset();
    offer(std::move(head));
  }
  report_idle();
}

template <class T>
caf::result<T> group_actor_impl::write_then(std::vector<store_op> ops, T answer) {
  if (ops.empty()) {
    offer_when_settled();
    return answer;
  }
  auto promise = make_response_promise<T>();
  write(std::move(ops), [promise, answer](std::optional<error> e) mutable {
    if (e)
      promise.deliver(to_caf(*e));
    else
      promise.deliver(answer);
  });
  return promise;
}

void group_actor_impl::fetch(const fetch_request& req) {
  auto [from, to] = codec::lane_range(gc_.storage->uid, gc_.lane, req.after);
  auto max = static_cast<std::uint32_t>(std::min<std::size_t>(req.max, limits::store_scan_max));
  request(gc_.store, caf::infinite, scan_atom_v, std::move(from), std::move(to), max)
      .then(
          [this](std::vector<store_entry>& page) {
            const turn now{*this};
            queue_metrics::add(gc_.metrics->window_reads);
            queue_metrics::add(gc_.metrics->window_read_messages, page.size());
            std::vector<message> msgs;
            msgs.reserve(page.size());
            for (auto& e : page) {
              auto m = codec::decode_message(e.value);
              if (!m) {
                // A record the store kept but cannot be trusted: the group stops there rather
                // than skip it and deliver out of order (fail-stop, docs/design/recovery.md).
                stop_at_corrupt(std::move(msgs), e.key, m.err(), now.at);
                return;
              }
              msgs.push_back(std::move(m).value());
            }
            write(apply(state_.on_fetched(std::move(msgs), now.at, may_grow())));
          },
          [this](caf::error&) {
            const turn now{*this};
            // The store is degraded: try again shortly (it reopens itself).
            state_.on_fetch_failed();
            delayed_send(caf::actor_cast<group_actor>(this), 200ms, fetch_atom_v);
          });
}

void group_actor_impl::stop_at_corrupt(std::vector<message> before, const std::string& key,
                                       const error& e, timestamp t) {
  queue_metrics::add(gc_.metrics->corrupt_records);
  auto reason = "corrupt record: " + codec::describe_message_key(key) + ": " + e.message;
  std::cerr << "laneq.group: queue '" << gc_.storage->name << "', group '" << gc_.label
            << "' stops at a " << reason << "\n";
  write(apply(state_.on_corrupt(std::move(before), std::move(reason), t, may_grow())));
}

std::vector<store_op> group_actor_impl::end_attempt(const lease_token& lease,
                                                    std::vector<store_op> ops) {
  gc_.metrics->in_flight.fetch_sub(1, std::memory_order_relaxed);
  // Durable delivery: the attempt is over, and its committed lease goes with it.
  if (gc_.storage->durable) ops.push_back(gc_.storage->erase_lease(lease.msg));
  return ops;
}

void group_actor_impl::expire_if_due(timestamp t) {
  if (state_.current_phase() != group_state::phase::in_flight || state_.lease_deadline() > t)
    return;
  queue_metrics::add(gc_.metrics->lease_expired);
  auto lease = *state_.lease();
  write(end_attempt(lease, apply(state_.on_lease_timer(t, nullptr, may_grow()))));
}

void group_actor_impl::restore_lease(const lease_token& lease, timestamp deadline, timestamp t) {
  held_.reset();
  state_.on_restored_lease(lease, deadline, t);
  gc_.metrics->in_flight.fetch_add(1, std::memory_order_relaxed);
  send(gc_.fairness, extend_atom_v, caf::actor_cast<group_actor>(this), lease, deadline);
}

void group_actor_impl::reclaim(const lease_token& lease, timestamp t) {
  const auto* head = state_.head();
  if (!held_ || state_.lease() || !head || !gc_.storage->issued_before_restart(lease, *head))
    return;
  // The old holder is back: its lease runs on as if there had been no restart.
  restore_lease(lease, t + gc_.storage->lease_default, t);
}

group_actor_impl::behavior_type group_actor_impl::make_behavior() {
  return {
      [this](enqueue_atom, const route_receipt&) {
        // The arrivals are taken in as the turn starts; the receipt goes with this message,
        // after the offer that `apply` sends.
        const turn now{*this};
      },
      [this](recover_atom, group_recovery& gr) {
        // The recovered window goes in before any arrival, so this handler takes arrivals in
        // only as it ends: the queue actor routes the enqueues it held during recovery right
        // after sending this, before the group first runs.
        auto t = now();
        auto fx = state_.on_enqueue(std::move(gr.window), t);
        auto more = state_.on_stored_beyond(gr.beyond, t, may_grow());
        fx.fetch = std::move(more.fetch);
        if (!gr.lease.empty() && fx.offer) {
          // Durable delivery: the lease committed before the restart is honoured until its
          // deadline; the fairness actor watches it as usual.
          fx.offer.reset();
          restore_lease(gr.lease.front(), gr.lease_deadline, t);
          expire_if_due(t);
        } else if (gr.hold_until > t && fx.offer) {
          held_ = std::move(fx.offer);  // fast delivery: wait for the old lease holder
          fx.offer.reset();
          delayed_send(caf::actor_cast<group_actor>(this), gr.hold_until - t, release_atom_v);
        }
        write(apply(std::move(fx)));
        settle();
      },
      [this](release_atom) {
        const turn now{*this};
        if (!held_) return;
        next_ = std::move(*held_);
        held_.reset();
        offer_when_settled();
      },
      [this](fetch_atom) {
        const turn now{*this};
        write(apply(state_.retry_fetch(may_grow())));
      },
      [this](ack_atom, const lease_token& lease, const ack_receipt& receipt, std::uint32_t index) {
        const turn now{*this};
        auto t = now.at;
        reclaim(lease, t);
        expire_if_due(t);
        auto fx = state_.on_ack(lease, t, may_grow());
        if (!fx) {
          receipt.failed(index, fx.err());
          return;
        }
        // The group writes the erase and records the ack in the receipt once it is durable (the
        // queue actor then confirms it), so a confirmed ack is never followed by a redelivery
        // after a crash; the next head waits for it too (offer_when_settled).
        write(end_attempt(lease, apply(std::move(fx).value())),
              [receipt, index](std::optional<error> e) {
                if (e)
                  receipt.failed(index, std::move(*e));
                else
                  receipt.acked(index, {});
              });
      },
      [this](nack_atom, const lease_token& lease,
             const nack_request& req) -> caf::result<caf::ok_atom> {
        const turn now{*this};
        auto t = now.at;
        reclaim(lease, t);
        expire_if_due(t);
        auto fx = state_.on_nack(lease, req.kind, duration{req.retry_after_us}, t, may_grow());
        if (!fx) return to_caf(fx.err());
        queue_metrics::add(gc_.metrics->nacked);
        if (fx.value().dead_letters.empty())
          return write_then(end_attempt(lease, apply(std::move(fx).value())), caf::ok_atom_v);
        // A dead letter: the answer waits for the move (the queue actor writes it).
        auto promise = make_response_promise<caf::ok_atom>();
        auto moved = [promise](std::optional<error> e) mutable {
          if (e)
            promise.deliver(to_caf(*e));
          else
            promise.deliver(caf::ok_atom_v);
        };
        write(end_attempt(lease, apply(std::move(fx).value(), moved)));
        return promise;
      },
      [this](extend_atom, const lease_token& lease, std::int64_t by_us) -> caf::result<timestamp> {
        const turn now{*this};
        auto t = now.at;
        reclaim(lease, t);
        expire_if_due(t);
        auto deadline = state_.on_extend(lease, duration{by_us}, t);
        if (!deadline) return to_caf(deadline.err());
        send(gc_.fairness, extend_atom_v, caf::actor_cast<group_actor>(this), lease,
             deadline.value());
        if (!gc_.storage->durable) return deadline.value();
        // Durable delivery: the new deadline is committed before it is promised.
        codec::lease_record rec{lease, deadline.value(), state_.head()->seq};
        return write_then(std::vector<store_op>{gc_.storage->put_lease(rec)}, deadline.value());
      },
      [this](describe_atom) -> group_info {
        const turn now{*this};
        auto info = state_.describe(now.at);
        info.key = gc_.label;
        return info;
      },
      [this](tick_atom, const lease_token& lease) {
        // A watch that fires for an earlier lease, or before an extended deadline, is stale.
        const turn now{*this};
        if (state_.lease() == lease) expire_if_due(now.at);
      },
      [this](write_atom) {
        const turn now{*this};
        retry_writes();
      },
      [this](stop_atom) { quit(); },
  };
}

}  // namespace laneq
