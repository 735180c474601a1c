// The fairness actor (actors/include/laneq/actors/fairness_actor.hpp).
#include "laneq/actors/fairness_actor.hpp"

#include <algorithm>

namespace laneq {

fairness_actor_impl::fairness_actor_impl(caf::actor_config& cfg, fairness_actor_config fc)
    : actor_base<fairness_actor>(cfg), fc_(std::move(fc)), sched_(fc_.throttles) {}

// Handles to peers are strong references: drop them so no cycle outlives the actor.
void fairness_actor_impl::on_exit() {
  auto answer = to_caf(fc_.stopped->value_or(stopped_queue_error(fail_state(), fc_.queue_name)));
  for (auto& p : pending_) p.promise.deliver(answer);
  pending_.clear();
  pending_deadlines_.clear();
  fc_.metrics->waiting_receives.store(pending_.size(), std::memory_order_relaxed);
  offered_.clear();
  watches_.clear();
  fc_.offers.take();  // the offers left hold group handles
  fc_.offers.release();
  fc_.queue = nullptr;
  fc_.store = nullptr;
}

void fairness_actor_impl::check() {
#ifndef NDEBUG
  sched_.check_invariants();
  leases_.check_invariants();
  watches_.check_invariants();
#endif
}

std::vector<delivery> fairness_actor_impl::take(std::uint32_t max, duration lease, timestamp t) {
  std::vector<delivery> out;
  while (out.size() < max) {
    auto picked = sched_.pick(t);
    if (!picked) break;
    auto& item = picked->item;
    auto attempt = item.msg.attempts + 1;
    lease_token token{item.group, item.msg.id, attempt, fc_.storage->nonce(item.msg, attempt)};
    item.msg.attempts = token.attempt;
    if (token.attempt == 1) fc_.metrics->observe_first_delivery(t - item.msg.enqueued_at);
    auto deadline = t + lease;
    std::string label;
    if (item.group) {
      auto it = offered_.find(item.group);
      LANEQ_ASSERT(it != offered_.end(), "a group's head is delivered only after its offer");
      it->second.slot.post(delivery_slot::posted{token, deadline, t});
      watch(it->second.handle, token, deadline);
      label = std::move(it->second.label);
      offered_.erase(it);
    } else {
      leases_.grant(token, item.msg, deadline, t);
    }
    out.push_back(delivery{std::move(item.msg), token, deadline, std::move(label)});
#if LANEQ_CANARY_TWO_IN_FLIGHT
    // Canary build (tests/sim): a group's head is handed out twice in one answer, under two
    // leases, so its group has two in flight (breaks G4).
    if (item.group && out.size() < max) {
      auto again = out.back();
      ++again.lease.attempt;
      out.push_back(std::move(again));
    }
#endif
  }
  if (!out.empty()) {
    queue_metrics::add(fc_.metrics->delivered, out.size());
    fc_.metrics->in_flight.fetch_add(static_cast<std::int64_t>(out.size()),
                                     std::memory_order_relaxed);
  }
  return out;
}

void fairness_actor_impl::write(std::vector<store_op> ops) {
  if (ops.empty()) return;
  caf::anon_send(fc_.store, write_atom_v, fc_.storage->write(std::move(ops)));
}

template <class T>
caf::result<T> fairness_actor_impl::write_then(std::vector<store_op> ops, T answer) {
  if (ops.empty()) return answer;
  auto promise = make_response_promise<T>();
  answer_when_durable(this, fc_.store, *fc_.storage, std::move(ops), promise, std::move(answer),
                      [] {});
  return promise;
}

std::vector<store_op> fairness_actor_impl::end_attempt(const lease_token& lease,
                                                       std::vector<store_op> ops) const {
  if (fc_.storage->durable) ops.push_back(fc_.storage->erase_lease(lease.msg));
  return ops;
}

void fairness_actor_impl::hand_out(caf::typed_response_promise<std::vector<delivery>> promise,
                                   std::vector<delivery> out) {
  if (!fc_.storage->durable || out.empty()) {
    promise.deliver(std::move(out));
    return;
  }
  // Durable delivery: no message leaves before its lease is committed, so after a restart
  // the lease is honoured until its deadline and nobody else gets the message early.
  std::vector<store_op> ops;
  ops.reserve(out.size());
  for (const auto& d : out)
    ops.push_back(fc_.storage->put_lease(codec::lease_record{d.lease, d.deadline, d.msg.seq}));
#if LANEQ_CANARY_EARLY_LEASE
  // Canary build (tests/sim): the answer goes before the leases are committed, so a crash that
  // loses them redelivers a message whose lease a consumer holds (breaks G4, R7). Only the
  // overlapping simulation, whose crashes find writes uncommitted, can see it.
  promise.deliver(out);
  write(std::move(ops));
  return;
#endif
  // On a storage error the leases stay granted in memory and expire: nothing is lost.
  answer_when_durable(this, fc_.store, *fc_.storage, std::move(ops), std::move(promise),
                      std::move(out), [] {});
}

void fairness_actor_impl::serve_pending(timestamp t) {
  while (!pending_.empty() && sched_.ready_size() > 0) {
    auto& p = pending_.front();
    auto out = take(p.max, p.lease, t);
    if (out.empty()) break;  // everything ready was throttled
    hand_out(p.promise, std::move(out));
    pending_deadlines_.erase(pending_deadlines_.find(p.deadline));
    pending_.pop_front();
    fc_.metrics->waiting_receives.store(pending_.size(), std::memory_order_relaxed);
  }
}

std::vector<store_op> fairness_actor_impl::retry_or_dead_letter(
    message m, duration retry_after, bool force_dead, timestamp t,
    std::optional<move_promise>* moved) {
  if (force_dead || m.attempts >= fc_.max_attempts) {
    auto reason = force_dead ? dead_letter_reason::requested : dead_letter_reason::max_attempts;
    queue_metrics::add(fc_.metrics->dead_lettered);
    std::vector<dead_letter> dl{dead_letter{std::move(m), reason, t}};
    dl.front().keep_lane(codec::lane_id{}.bytes);  // stored unordered (lanes.md L7)
    if (!moved) {
      caf::anon_send(fc_.queue, dead_atom_v, std::move(dl));  // the queue actor records the move
      return {};
    }
    // A client waits: it is answered once the move is durable, so a confirmed dead letter never
    // comes back as live after a power loss.
    auto promise = make_response_promise<caf::ok_atom>();
    *moved = promise;
    request(fc_.queue, caf::infinite, dead_atom_v, std::move(dl))
        .then([promise](caf::ok_atom) mutable { promise.deliver(caf::ok_atom_v); },
              [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
    return {};
  }
  m.not_before = t + retry_after;
  std::vector<store_op> ops{fc_.storage->put_message(codec::lane_id{}, m)};
  sched_.on_ready(ready_item{std::move(m), group_id{}}, t);
  return ops;
}

void fairness_actor_impl::rearm(timestamp t) {
  std::optional<timestamp> next = sched_.next_wakeup();
  auto consider = [&next](std::optional<timestamp> x) {
    if (x && (!next || *x < *next)) next = x;
  };
  consider(leases_.next_deadline());
  consider(watches_.next());
  if (!pending_deadlines_.empty()) consider(*pending_deadlines_.begin());
  if (next) timer_.arm(this, tick_atom_v, *next, t);
}

void fairness_actor_impl::watch(const group_actor& g, const lease_token& lease,
                                timestamp deadline) {
  watches_.set(lease.group, deadline, lease_watch{lease, caf::actor_cast<caf::weak_actor_ptr>(g)});
}

void fairness_actor_impl::expire_leases(timestamp t) {
  // Group heads: tell each live group that its lease deadline has come; it decides (it may have
  // been acked or extended meanwhile).
  watches_.pop_due(t, [this](group_id, lease_watch w) {
    if (auto strong = w.group.lock())
      send(caf::actor_cast<group_actor>(strong), tick_atom_v, w.lease);
  });
  std::vector<store_op> ops;
  for (auto& m : leases_.expire_due(t)) {
    queue_metrics::add(fc_.metrics->lease_expired);
    fc_.metrics->in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (fc_.storage->durable) ops.push_back(fc_.storage->erase_lease(m.id));
    for (auto& op : retry_or_dead_letter(std::move(m), duration{0}, false, t))
      ops.push_back(std::move(op));
  }
  write(std::move(ops));
}

void fairness_actor_impl::catch_up(timestamp t) {
  expire_leases(t);
  sched_.on_tick(t);
  serve_pending(t);
}

fairness_actor_impl::behavior_type fairness_actor_impl::make_behavior() {
  return {
      [this](offer_atom) {
        auto offers = fc_.offers.take();
        if (offers.empty()) return;  // taken in with an earlier wake-up's offers
        auto t = now();
        for (auto& o : offers) {
          // An offer comes only once the group's last lease has ended.
          watches_.erase(o.group);
          offered_.emplace(
              o.group, offered_group{std::move(o.handle), std::move(o.label), std::move(o.slot)});
          sched_.on_ready(ready_item{std::move(o.head), o.group}, t);
        }
        serve_pending(t);
        rearm(t);
        check();
      },
      [this](enqueue_atom, std::vector<message>& msgs) {
        auto t = now();
        for (auto& m : msgs) sched_.on_ready(ready_item{std::move(m), group_id{}}, t);
        serve_pending(t);
        rearm(t);
        check();
      },
      [this](receive_atom, const receive_request& req) -> caf::result<std::vector<delivery>> {
        if (req.max < 1 || req.max > limits::receive_batch_max)
          return to_caf(error{
              errc::invalid_argument,
              "receive: max must be between 1 and " + std::to_string(limits::receive_batch_max)});
        auto lease = req.lease_us == 0 ? fc_.lease_default : duration{req.lease_us};
        if (lease < limits::lease_min || lease > limits::lease_max)
          return to_caf(error{errc::invalid_argument,
                              "receive: lease_ms must be between " +
                                  std::to_string(limits::lease_min.count() / 1000) + " and " +
                                  std::to_string(limits::lease_max.count() / 1000)});
        if (req.wait_us < 0 || duration{req.wait_us} > limits::receive_wait_max)
          return to_caf(error{errc::invalid_argument,
                              "receive: wait_ms must be between 0 and " +
                                  std::to_string(limits::receive_wait_max.count() / 1000)});
        auto t = now();
        catch_up(t);
        auto out = take(req.max, lease, t);
        if (!out.empty() || req.wait_us == 0) {
          rearm(t);
          check();
          auto promise = make_response_promise<std::vector<delivery>>();
          hand_out(promise, std::move(out));
          return promise;
        }
        if (pending_.size() >= limits::pending_receives_max)
          return to_caf(error{errc::limit_exceeded,
                              "receive: more than " + std::to_string(limits::pending_receives_max) +
                                  " receives are already waiting on queue '" + fc_.queue_name +
                                  "'"});
        auto promise = make_response_promise<std::vector<delivery>>();
        pending_.push_back(pending_receive{promise, req.max, lease, t + duration{req.wait_us}});
        pending_deadlines_.insert(pending_.back().deadline);
        fc_.metrics->waiting_receives.store(pending_.size(), std::memory_order_relaxed);
        rearm(t);
        return promise;
      },
      [this](ack_atom, const std::vector<lease_token>& leases)
          -> caf::result<std::vector<lease_outcome>, std::vector<store_op>> {
        auto t = now();
        catch_up(t);
        std::vector<lease_outcome> failed;
        std::vector<store_op> ops;
        std::size_t removed = 0;
        for (const auto& l : leases) {
          auto m = leases_.release(l);
          if (!m) {
            failed.push_back(lease_outcome{l, m.err()});
            continue;
          }
          ++removed;
          ops.push_back(fc_.storage->erase_message(codec::lane_id{}, m.value().seq));
          ops = end_attempt(l, std::move(ops));
        }
        if (removed > 0) {
          queue_metrics::add(fc_.metrics->acked, removed);
          fc_.metrics->in_flight.fetch_sub(static_cast<std::int64_t>(removed),
                                           std::memory_order_relaxed);
        }
        serve_pending(t);  // expired leases may have made items ready
        rearm(t);
        check();
        // The queue actor writes the erases with the rest of the ack batch and confirms the
        // acks once they are durable.
        return {std::move(failed), std::move(ops)};
      },
      [this](nack_atom, const lease_token& l,
             const nack_request& req) -> caf::result<caf::ok_atom> {
        auto t = now();
        catch_up(t);
        auto m = leases_.release(l);
        if (!m) {
          rearm(t);  // catch_up may have returned expired leases to the scheduler
          return to_caf(m.err());
        }
        queue_metrics::add(fc_.metrics->nacked);
        fc_.metrics->in_flight.fetch_sub(1, std::memory_order_relaxed);
        std::optional<move_promise> moved;
        auto ops =
            end_attempt(l, retry_or_dead_letter(std::move(m).value(), duration{req.retry_after_us},
                                                req.kind == nack_kind::dead_letter, t, &moved));
        // The nack's writes go to the store before a waiting receive takes the message again
        // (serve_pending): its new durable lease, written after, must not meet the nack's erase
        // of the old one (both are keyed by the message).
        std::optional<caf::result<caf::ok_atom>> answer;
        if (moved)
          write(std::move(ops));
        else
          answer.emplace(write_then(std::move(ops), caf::ok_atom_v));
        serve_pending(t);
        rearm(t);
        check();
        if (answer) return std::move(*answer);
        return *moved;
      },
      [this](extend_atom, const lease_token& l, std::int64_t by_us) -> caf::result<timestamp> {
        auto t = now();
        catch_up(t);
        auto deadline = leases_.extend(l, duration{by_us}, t);
        rearm(t);
        check();
        if (!deadline) return to_caf(deadline.err());
        if (!fc_.storage->durable) return deadline.value();
        // Durable delivery: the new deadline is committed before it is promised.
        const auto* m = leases_.leased(l);
        std::vector<store_op> ops{
            fc_.storage->put_lease(codec::lease_record{l, deadline.value(), m->seq})};
        return write_then(std::move(ops), deadline.value());
      },
      [this](recover_atom, std::vector<message>& ready, std::vector<delivery>& leased) {
        auto t = now();
        for (auto& m : ready) sched_.on_ready(ready_item{std::move(m), group_id{}}, t);
        for (auto& d : leased) leases_.grant(d.lease, std::move(d.msg), d.deadline, t);
        fc_.metrics->in_flight.fetch_add(static_cast<std::int64_t>(leased.size()),
                                         std::memory_order_relaxed);
        catch_up(t);  // leases that ran out while the broker was down expire now
        rearm(t);
        check();
      },
      [this](waiting_atom, const std::vector<group_id>& groups) {
        return sched_.waiting(std::unordered_set<group_id>(groups.begin(), groups.end()));
      },
      [this](stats_atom) {
        // The largest backlogs by name, the rest summed: a bounded number of metric series.
        auto by_key = sched_.backlog_by_fairness_key();
        std::vector<fairness_backlog> all;
        all.reserve(by_key.size());
        for (auto& [k, n] : by_key) all.push_back(fairness_backlog{k, n, false});
        std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
          return a.backlog != b.backlog ? a.backlog > b.backlog : a.key < b.key;
        });
        queue_stats s;
        if (all.size() > limits::fairness_backlog_keys_max) {
          fairness_backlog rest{{}, 0, true};
          for (auto i = limits::fairness_backlog_keys_max; i < all.size(); ++i)
            rest.backlog += all[i].backlog;
          all.resize(limits::fairness_backlog_keys_max);
          all.push_back(std::move(rest));
        }
        s.fairness = std::move(all);
        return s;
      },
      [this](extend_atom, const group_actor& g, const lease_token& lease, timestamp deadline) {
        watch(g, lease, deadline);
        rearm(now());
      },
      [this](tick_atom, std::uint64_t generation) {
        if (!timer_.fire(generation)) return;
        auto t = now();
        catch_up(t);
        // Long polls that waited their full time get an empty answer.
        auto expired =
            std::stable_partition(pending_.begin(), pending_.end(),
                                  [t](const pending_receive& p) { return p.deadline > t; });
        for (auto it = expired; it != pending_.end(); ++it) {
          it->promise.deliver(std::vector<delivery>{});
          pending_deadlines_.erase(pending_deadlines_.find(it->deadline));
        }
        pending_.erase(expired, pending_.end());
        fc_.metrics->waiting_receives.store(pending_.size(), std::memory_order_relaxed);
        rearm(t);
        check();
      },
  };
}

}  // namespace laneq
