// Deliveries and leases (docs/design/ordering.md O4-O6, O12, fairness.md, throttling.md): what
// is ready goes out by the fair scheduler's order under a lease, a group's head alone or with the
// messages behind it as an ordered batch; a lease ends by ack, nack or its deadline; long polls
// wait for what becomes ready.
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

void shard_engine::catch_up(timestamp t) {
  last_now_ = std::max(last_now_, t);
  t = last_now_;
  ready_delayed(t);
  writes_.on_tick(t);
  expire_leases(t);
  expire_due(t);
  holds_.pop_due(t, [this, t](group_id id, std::monostate) {
    // The reclaim grace is over: the held head is offered to every consumer.
    if (auto* g = find_group(id); g && g->held) release_hold(*g, t);
  });
  fetch_retries_.pop_due(t, [this, t](group_id id, std::monostate) {
    if (auto* g = find_group(id))
      write_for(*g, apply(*g, g->state.retry_fetch(window_for(*g))), nullptr, t);
  });
  class_retries_.pop_due(t, [this](std::uint64_t id, std::monostate) {
    if (auto* c = find_class(id)) fetch_class(*c);
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
    for (auto& op : end_attempt(
             gone, retry_or_dead_letter(std::move(m), duration{0}, false, t, moved), durable()))
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
  auto& c = class_for(m);
  --c.in_flight;
  if (force_dead || m.attempts >= cfg_.spec.attempts_max()) {
    auto reason = force_dead ? dead_letter_reason::requested : dead_letter_reason::max_attempts;
    moved = true;
    std::vector<dead_letter> dl{dead_letter{std::move(m), reason, t}};
    auto ops = move_dead(std::move(dl), c.lane);  // from its class's lane (lanes.md L7)
    maybe_drop_class(c);
    return ops;
  }
  // Back in memory, where it was (in flight), whatever the window: it keeps its seq (O1).
  m.not_before = t + retry_after;
  std::vector<store_op> ops{put_message(cfg_.uid, c.lane, m)};
  queue_unordered(c, std::move(m), t);
  return ops;
}

template <class M>
lease_token shard_engine::lease_for(group_id group, const M& m, std::uint32_t batch) const {
  auto attempt = m.attempts + 1;
  auto nonce =
      cfg_.nonces.lease_nonce(lease_subject{cfg_.uid, m.id, m.seq, attempt, cfg_.epoch, batch});
  return lease_token{group, m.id, attempt, nonce, batch};
}

void shard_engine::count_first_delivery(const message& m, timestamp t) {
  if (m.attempts != 1) return;
  auto d = t - m.enqueued_at;
  ++counters_.first_delivery.at(latency_bucket(d));
  counters_.first_delivery_sum_us += d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0;
}

std::vector<delivery> shard_engine::take(std::uint32_t max, std::uint32_t batch, duration lease,
                                         timestamp t, bool& waits) {
  std::vector<delivery> out;
  waits = false;
  ready_delayed(t);  // the scheduler moves what is due as it picks
  out.reserve(std::min<std::size_t>(max, sched_.ready_size()));
  while (out.size() < max) {
    auto picked = sched_.pick(t);
    if (!picked) break;
    auto& item = picked->item;
    if (item.group) {
      auto* g = find_group(item.group);
      LANEQ_ASSERT(g && g->state.head(), "a group's head is delivered while its group lives");
      g->scheduled = false;
      if (auto cutoff = expiry_cutoff(t); cutoff && g->state.head()->entered_at() <= *cutoff) {
        expire_head(*g, *cutoff, t);  // never delivered after its retention, whatever the sweeps
        continue;
      }
      // A batch is one turn of its fairness key (one pick) and counts toward `max` whole.
      auto room = std::min<std::size_t>(batch, max - out.size());
#if LANEQ_CANARY_TWO_IN_FLIGHT
      auto first = out.size();
#endif
      // The scheduler kept only the group's id: the group has its head.
      deliver_group(*g, room, lease, t, out);
#if LANEQ_CANARY_TWO_IN_FLIGHT
      // Canary build (tests/sim, tests/sim/engine): a group's head is handed out twice in one
      // answer, under two leases, so its group has two in flight (breaks G4).
      if (out.size() < max) {
        auto again = out[first];
        ++again.lease.attempt;
        again.lease.batch = 1;
        again.batch_index = 0;
        out.push_back(std::move(again));
      }
#endif
      continue;
    }
    // An unordered message is never batched: its own lease, batch_index 0.
    if (auto cutoff = expiry_cutoff(t); cutoff && item.msg.entered_at() <= *cutoff) {
      std::vector<message> gone;
      gone.push_back(std::move(item.msg));
      expire_messages(std::move(gone), t);
      continue;
    }
    auto& c = class_for(item.msg);
    picked_unordered(c, item.msg);
    auto token = lease_for(group_id{}, item.msg, 1);
    item.msg.attempts = token.attempt;
    count_first_delivery(item.msg, t);
    leases_.grant(token, item.msg, t + lease, t);
    out.push_back(delivery{std::move(item.msg), token, t + lease, {}, 0});
    // Its class's next ones are on their way from the store: the rotation waits for them, as
    // if they had been in memory (F1, F2).
    if (c.ready() == 0 && c.fetching) {
      waits = true;
      break;
    }
  }
  counters_.delivered += out.size();
  // Short: a class with nothing ready in memory whose read is under way may have the rest.
  if (!waits && out.size() < max)
    for (auto id : fetching_) waits = waits || find_class(id)->ready() == 0;
  return out;
}

void shard_engine::deliver_group(group_slot& g, std::size_t room, duration lease, timestamp t,
                                 std::vector<delivery>& out) {
  // The head, then the messages behind it that are due, each with a token of its throttles
  // (one per message; the batch ends at the first without one), within the group's window.
  auto n =
      room > 1 ? g.state.batchable(room, t, expiry_cutoff(t).value_or(timestamp{INT64_MIN})) : 1;
  std::size_t count = 1;
  while (count < n && sched_.try_charge(g.state.at(count), t)) ++count;
  auto token = lease_for(g.state.id(), *g.state.head(), static_cast<std::uint32_t>(count));
  auto deadline = t + lease;
  g.state.on_delivered(token, deadline, t, count);
  group_leases_.set(g.state.id(), deadline);
  // The group keeps its messages until they are acked: each delivery carries a copy, whole.
  for (std::size_t i = 0; i < count; ++i) {
    auto m = g.state.at(i).unpack();
    count_first_delivery(m, t);
    out.push_back(delivery{std::move(m), token, deadline, std::string{g.label()},
                           static_cast<std::uint32_t>(i)});
  }
}

void shard_engine::hand_out(request_id r, std::vector<delivery> out) {
  if (out.empty()) ++counters_.empty_receives;
  if (!durable() || out.empty()) {
    reply(r, std::move(out));
    return;
  }
  // Durable delivery: no message leaves before its lease is committed, so after a restart the
  // lease is honoured until its deadline and nobody else gets the message early. On a storage
  // error the leases stay granted in memory and expire: nothing is lost.
  write_request w;
  w.ops.reserve(out.size());
  // One record per lease: an ordered batch's covers its every message (O12).
  for (const auto& d : out)
    if (d.batch_index == 0)
      w.ops.push_back(put_lease(cfg_.uid, codec::lease_record{d.lease, d.deadline, d.msg.seq,
                                                              d.lease.batch, 0, cfg_.epoch}));
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
    bool waits = false;
    auto out = take(p.max, p.batch, p.lease, t, waits);
    if (out.empty() && !waits) break;  // everything ready was throttled
    reading_receive rr{p.r, p.max, p.batch, p.lease, p.deadline, std::move(out)};
    pending_deadlines_.erase(pending_deadlines_.find(p.deadline));
    pending_.pop_front();
    if (waits && rr.out.size() < rr.max)
      wait_for_read(std::move(rr), t);  // takes on once its class is read back
    else
      hand_out(rr.r, std::move(rr.out));
  }
}

void shard_engine::end_polls(timestamp t) {
  if (pending_deadlines_.empty() || *pending_deadlines_.begin() > t) return;
  // Long polls that waited their full time get an empty answer.
  auto expired = std::stable_partition(pending_.begin(), pending_.end(),
                                       [t](const pending_receive& p) { return p.deadline > t; });
  for (auto it = expired; it != pending_.end(); ++it) {
    ++counters_.empty_receives;
    reply(it->r, std::vector<delivery>{});
    pending_deadlines_.erase(pending_deadlines_.find(it->deadline));
  }
  pending_.erase(expired, pending_.end());
}

void shard_engine::count_ack(timestamp since, timestamp t, std::uint64_t messages) {
  auto d = std::max(t - since, duration{0});
  counters_.receive_to_ack.at(latency_bucket(d)) += messages;
  counters_.receive_to_ack_sum_us += messages * static_cast<std::uint64_t>(d.count());
}

result<std::vector<store_op>> shard_engine::ack_unordered(const lease_token& l, timestamp t) {
  auto window = leases_.window(l.msg);
  auto m = leases_.release(l);
  if (!m) return m.err();
  ++counters_.acked;
  release_bytes(m.value().body.size());
  if (window) count_ack(window->first, t, 1);
  auto& c = class_for(m.value());
  auto ops = end_attempt(l, {erase_message(cfg_.uid, c.lane, m.value().seq)}, durable());
  left_unordered(c);
  return ops;
}

void shard_engine::ack_one(const lease_token& l, timestamp t, std::vector<store_op>& ops,
                           std::vector<lease_outcome>& failed, std::vector<group_id>& touched) {
  if (!l.group) {
    auto done = ack_unordered(l, t);
    if (!done) return failed.push_back(lease_outcome{l, done.err()});
    for (auto& op : done.value()) ops.push_back(std::move(op));
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
  bool recorded = lease_recorded(*g);
  auto leased_at = g->state.since();
  auto fx = g->state.on_ack(l, t, window_for(*g));
  if (!fx) {
    failed.push_back(lease_outcome{l, fx.err()});
    return;
  }
  count_ack(leased_at, t, fx.value().removed.size());
  group_leases_.erase(g->state.id());
  group_write w{std::move(ops)};  // the batch's writes so far, added to in place
  apply(*g, std::move(fx).value(), w);
  ops = end_attempt(l, std::move(w.ops), recorded);
  // The group's next head waits for the batch's write (P10); `ack` counts it in.
  touched.push_back(g->state.id());
}

}  // namespace laneq
