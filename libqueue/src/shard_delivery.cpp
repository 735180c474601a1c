// Deliveries and leases (docs/design/ordering.md O4-O6, fairness.md, throttling.md): what is
// ready goes out by the fair scheduler's order under a lease; a lease ends by ack, nack or its
// deadline; long polls wait for what becomes ready.
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

void shard_engine::catch_up(timestamp t) {
  last_now_ = std::max(last_now_, t);
  t = last_now_;
  writes_.on_tick(t);
  expire_leases(t);
  holds_.pop_due(t, [this, t](group_id id, std::monostate) {
    // The reclaim grace is over: the held head is offered to every consumer.
    if (auto* g = find_group(id); g && g->held) {
      g->held = false;
      g->next = true;
      offer_when_settled(*g, t);
    }
  });
  fetch_retries_.pop_due(t, [this, t](group_id id, std::monostate) {
    if (auto* g = find_group(id))
      write_for(*g, apply(*g, g->state.retry_fetch(may_grow())), nullptr, t);
  });
  sched_.on_tick(t);
  serve_pending(t);
  end_polls(t);
}

void shard_engine::notify_watchers(timestamp t) {
  if (watchers_.empty()) return;
  auto ready = static_cast<std::uint64_t>(sched_.ready_size());
  auto kept = std::remove_if(watchers_.begin(), watchers_.end(), [&](const watcher& w) {
    if (ready == 0 && w.deadline > t) return false;
    reply(w.r, ready);
    return true;
  });
  watchers_.erase(kept, watchers_.end());
}

void shard_engine::expire_leases(timestamp t) {
  // Group heads: each group decides (its lease may have been extended meanwhile).
  for (auto id : group_leases_.pop_due(t))
    if (auto* g = find_group(id)) expire_if_due(*g, t);
  std::vector<store_op> ops;
  bool moved = false;
  for (auto& m : leases_.expire_due(t)) {
    ++counters_.lease_expired;
    lease_token gone{group_id{}, m.id, m.attempts, 0};
    for (auto& op :
         end_attempt(gone, retry_or_dead_letter(std::move(m), duration{0}, false, t, moved)))
      ops.push_back(std::move(op));
  }
  if (ops.empty()) return;
  write_request w;
  w.ops = std::move(ops);
  w.counters = moved;
  writes_.add(std::move(w));
}

std::vector<store_op> shard_engine::retry_or_dead_letter(message m, duration retry_after,
                                                         bool force_dead, timestamp t,
                                                         bool& moved) {
  if (force_dead || m.attempts >= cfg_.spec.attempts_max()) {
    auto reason = force_dead ? dead_letter_reason::requested : dead_letter_reason::max_attempts;
    moved = true;
    std::vector<dead_letter> dl{dead_letter{std::move(m), reason, t}};
    return move_dead(std::move(dl), codec::lane_id{});  // stored unordered (lanes.md L7)
  }
  m.not_before = t + retry_after;
  std::vector<store_op> ops{put_message(cfg_.uid, codec::lane_id{}, m)};
  sched_.on_ready(ready_item{std::move(m), group_id{}}, t);
  return ops;
}

std::vector<delivery> shard_engine::take(std::uint32_t max, duration lease, timestamp t) {
  std::vector<delivery> out;
  while (out.size() < max) {
    auto picked = sched_.pick(t);
    if (!picked) break;
    auto& item = picked->item;
    group_slot* g = nullptr;
    if (item.group) {
      g = find_group(item.group);
      LANEQ_ASSERT(g && g->state.head(), "a group's head is delivered while its group lives");
      item.msg = *g->state.head();  // the scheduler kept only its id: the group has the message
    }
    auto attempt = item.msg.attempts + 1;
    auto nonce = cfg_.nonces.lease_nonce(
        lease_subject{cfg_.uid, item.msg.id, item.msg.seq, attempt, cfg_.epoch});
    lease_token token{item.group, item.msg.id, attempt, nonce};
    item.msg.attempts = attempt;
    if (attempt == 1) {
      auto d = t - item.msg.enqueued_at;
      ++counters_.first_delivery.at(latency_bucket(d));
      counters_.first_delivery_sum_us += d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0;
    }
    auto deadline = t + lease;
    std::string label;
    if (g) {
      g->state.on_delivered(token, deadline, t);
      group_leases_.set(item.group, deadline);
      label = g->label;
    } else {
      leases_.grant(token, item.msg, deadline, t);
    }
    out.push_back(delivery{std::move(item.msg), token, deadline, std::move(label)});
#if LANEQ_CANARY_TWO_IN_FLIGHT
    // Canary build (tests/sim, tests/sim/engine): a group's head is handed out twice in one
    // answer, under two leases, so its group has two in flight (breaks G4).
    if (item.group && out.size() < max) {
      auto again = out.back();
      ++again.lease.attempt;
      out.push_back(std::move(again));
    }
#endif
  }
  counters_.delivered += out.size();
  return out;
}

void shard_engine::hand_out(request_id r, std::vector<delivery> out) {
  if (cfg_.spec.delivery_mode() != delivery_durability::durable || out.empty()) {
    reply(r, std::move(out));
    return;
  }
  // Durable delivery: no message leaves before its lease is committed, so after a restart the
  // lease is honoured until its deadline and nobody else gets the message early. On a storage
  // error the leases stay granted in memory and expire: nothing is lost.
  write_request w;
  w.ops.reserve(out.size());
  for (const auto& d : out)
    w.ops.push_back(put_lease(cfg_.uid, codec::lease_record{d.lease, d.deadline, d.msg.seq}));
#if LANEQ_CANARY_EARLY_LEASE
  // Canary build (tests/sim, tests/sim/engine): durable delivery answers before its leases are
  // committed, so a crash that loses them redelivers a message whose lease a consumer holds
  // (breaks G4, R7). Only a simulation whose crashes find writes uncommitted can see it.
  reply(r, std::move(out));
  w.answer = [](std::optional<error>) {};
#else
  w.answer = [this, r, out = std::move(out)](std::optional<error> e) mutable {
    if (e)
      reply(r, storage_failure(cfg_.spec.name(), std::move(*e)));
    else
      reply(r, std::move(out));
  };
#endif
  writes_.add(std::move(w));
}

void shard_engine::serve_pending(timestamp t) {
  while (!pending_.empty() && sched_.ready_size() > 0) {
    auto& p = pending_.front();
    auto out = take(p.max, p.lease, t);
    if (out.empty()) break;  // everything ready was throttled
    auto r = p.r;
    pending_deadlines_.erase(pending_deadlines_.find(p.deadline));
    pending_.pop_front();
    hand_out(r, std::move(out));
  }
}

void shard_engine::end_polls(timestamp t) {
  if (pending_deadlines_.empty() || *pending_deadlines_.begin() > t) return;
  // Long polls that waited their full time get an empty answer.
  auto expired = std::stable_partition(pending_.begin(), pending_.end(),
                                       [t](const pending_receive& p) { return p.deadline > t; });
  for (auto it = expired; it != pending_.end(); ++it) {
    reply(it->r, std::vector<delivery>{});
    pending_deadlines_.erase(pending_deadlines_.find(it->deadline));
  }
  pending_.erase(expired, pending_.end());
}

void shard_engine::ack_one(const lease_token& l, timestamp t, std::vector<store_op>& ops,
                           std::vector<lease_outcome>& failed, std::vector<group_id>& touched) {
  if (!l.group) {
    auto m = leases_.release(l);
    if (!m) {
      failed.push_back(lease_outcome{l, m.err()});
      return;
    }
    ++counters_.acked;
    ops.push_back(erase_message(cfg_.uid, codec::lane_id{}, m.value().seq));
    if (cfg_.spec.delivery_mode() == delivery_durability::durable)
      ops.push_back(erase_lease(cfg_.uid, l.msg));
    return;
  }
  auto* g = owner_of(l);
  if (!g) {
    failed.push_back(lease_outcome{
        l, error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"}});
    return;
  }
  reclaim(*g, l, t);
  expire_if_due(*g, t);
  auto fx = g->state.on_ack(l, t, may_grow());
  if (!fx) {
    failed.push_back(lease_outcome{l, fx.err()});
    return;
  }
  group_leases_.erase(g->state.id());
  auto w = apply(*g, std::move(fx).value());
  for (auto& op : end_attempt(l, std::move(w.ops))) ops.push_back(std::move(op));
  // The group's next head waits for the batch's write (P10); `ack` counts it in.
  touched.push_back(g->state.id());
}

}  // namespace laneq
