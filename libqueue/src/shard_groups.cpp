// The shard's ordering groups (docs/design/ordering.md O3-O7): each a lightweight actor, a
// `group_state` that handles one event at a time, and the shard's bookkeeping around it: where
// its messages are stored, which writes its next head waits for (persistence.md P10), the
// reclaim grace after a restart (recovery.md R6), reading its window back from the store.
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

using namespace std::chrono_literals;

namespace {

/// How long a group waits before it reads its window back again after a failed read.
constexpr duration fetch_retry = 200ms;

}  // namespace

shard_engine::group_slot& shard_engine::group_for(const placement& where,
                                                  const codec::lane_id& lane, group_id id) {
  if (auto it = group_by_key_.find(where.group_key); it != group_by_key_.end()) {
    revive(*it->second);
    return *it->second;
  }
  if (auto same = group_by_lane_.find(lane.bytes); same != group_by_lane_.end()) {
    // Two keys with one lane id (a SHA-256 prefix collision, or a stored lane named by a key no
    // placement produces) are one group: their messages share a store lane, so they merge,
    // never split (lanes.md L6).
    auto& g = *same;
    revive(g);
    more_keys_[g.state.id()].push_back(where.group_key);
    group_by_key_.emplace(where.group_key, &g);
    return g;
  }
  if (!id) id = group_id{next_group_++};
  auto slot = std::make_unique<group_slot>(id, cfg_);
  slot->lane = lane;
  slot->key = &group_by_key_.emplace(where.group_key, slot.get()).first->first;
  slot->set_label(where.ordering_key);
  group_by_lane_.insert(*slot);
  auto [it, fresh] = groups_.insert(std::move(slot));
  LANEQ_ASSERT(fresh, "a new group has an id of its own");
  return **it;
}

shard_engine::group_slot* shard_engine::find_group(group_id id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->get();
}

shard_engine::group_slot* shard_engine::owner_of(const lease_token& l) {
  if (auto* g = find_group(l.group)) return g;
  // Fast delivery after a restart: the token names a group of the previous run; its head
  // waits for it during the reclaim grace, and its reclaimed lease runs on after it.
  if (auto it = reclaimable_.find(l.msg); it != reclaimable_.end()) return find_group(it->second);
  return nullptr;
}

bool shard_engine::may_grow() const {
  return window_bytes_ < cfg_.window_budget_bytes;
}

bool shard_engine::window_for(group_slot& g) {
  bool grow = may_grow();
  bool share = !grow && cfg_.window_budget_bytes > 0;
  g.state.set_window(share ? std::min(budget_share(g), cfg_.window) : cfg_.window);
  return grow;
}

std::size_t shard_engine::budget_share(const group_slot& g) const {
  // In messages of the group's own average size (a group with none in memory: the size of an
  // empty message). set_window keeps it at 2 at least.
  auto held = g.state.in_memory();
  auto each = held > 0 ? g.state.memory_bytes() / held : sizeof(message);
  return budget_share_bytes() / std::max<std::size_t>(each, 1);
}

std::size_t shard_engine::budget_share_bytes() const {
  return cfg_.window_budget_bytes / std::max<std::size_t>(live_groups() + classes_.size(), 1);
}

void shard_engine::route(std::vector<placed> batch, timestamp t) {
  // Consecutive messages of one group go in together (one event for the group): runs of
  // `ordered`, each starting at `first` (two allocations per batch, none per message).
  std::vector<message> ordered;
  std::vector<std::pair<group_slot*, std::size_t>> runs;
  ordered.reserve(batch.size());
  for (auto& p : batch) {
    if (!p.where.ordered) {
      arrive_unordered(std::move(p.msg), t);
      continue;
    }
    // The group it had when admitted, while it lives (a key keeps its group while it lives);
    // otherwise found or made by its key.
    auto* known = p.group ? find_group(p.group) : nullptr;
    if (known) revive(*known);
    auto& g = known ? *known : group_for(p.where, p.lane);
    if (runs.empty() || runs.back().first != &g) runs.emplace_back(&g, ordered.size());
    ordered.push_back(std::move(p.msg));
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    // A group listed twice (its messages interleaved with another's) takes each run in order.
    auto [g, first] = runs[i];
    auto end = i + 1 < runs.size() ? runs[i + 1].second : ordered.size();
    auto msgs = std::span<message>{ordered}.subspan(first, end - first);
    write_for(*g, apply(*g, g->state.on_arrivals(msgs, t, window_for(*g))), nullptr, t);
  }
  serve_pending(t);
}

shard_engine::group_write shard_engine::apply(group_slot& g, group_effects&& fx) {
  group_write w;
  apply(g, std::move(fx), w);
  return w;
}

void shard_engine::apply(group_slot& g, group_effects&& fx, group_write& w) {
  if (fx.offer) {
    // The head (the group holds it) is offered once its writes are durable (offer_when_settled),
    // or once the reclaim grace is over while it is held.
    if (!g.held) g.next = true;
  }
  for (auto seq : fx.removed) w.ops.push_back(erase_message(cfg_.uid, g.lane, seq));
  counters_.acked += fx.removed.size();
  release_bytes(fx.removed_bytes);
  if (fx.updated) w.ops.push_back(put_message(cfg_.uid, g.lane, *fx.updated));
  if (!fx.dead_letters.empty()) {
    for (auto& op : move_dead(std::move(fx.dead_letters), g.lane)) w.ops.push_back(std::move(op));
    w.counters = true;
    w.moves = true;
  }
  if (fx.fetch) fetch(g, *fx.fetch);
  auto held = g.state.memory_bytes();
  window_bytes_ = window_bytes_ + held - g.charged;
  g.charged = held;
}

void shard_engine::write_for(group_slot& g, group_write w,
                             std::function<void(std::optional<error>)> answer, timestamp t) {
  if (w.ops.empty()) {
    if (answer) answer(std::nullopt);
    offer_when_settled(g, t);
    return;
  }
  ++g.unsettled;
  write_request req;
  req.ops = std::move(w.ops);
  req.counters = w.counters;
  req.patient = w.moves;
  req.answer = std::move(answer);
  req.settle = [this, id = g.state.id()](bool) {
    if (auto* s = find_group(id)) {
      --s->unsettled;
      offer_when_settled(*s, last_now_);
    }
  };
  writes_.add(std::move(req));
  offer_when_settled(g, t);
}

void shard_engine::offer_when_settled(group_slot& g, timestamp t) {
  if (g.unsettled == 0 && g.next) {
    g.next = false;
    LANEQ_ASSERT(!g.scheduled, "at most one item per ordering group is in the scheduler");
    g.scheduled = true;
    sched_.on_head(*g.state.head(), g.state.id(), t);
    schedule_expiry(g);
  }
  keep_if_idle(g);
}

void shard_engine::keep_if_idle(group_slot& g) {
  const auto& s = g.state;
  if (g.kept || s.current_phase() != group_state::phase::empty || s.backlog() > 0 ||
      g.unsettled > 0 || g.held || g.next)
    return;
  auto id = s.id();
  if (!reclaims_.empty()) {
    if (auto it = reclaims_.find(id); it != reclaims_.end()) {
      reclaimable_.erase(it->second.head);
      reclaims_.erase(it);
    }
  }
  holds_.erase(id);
  fetch_retries_.erase(id);
  group_leases_.erase(id);
  if (!expiries_.empty()) expiries_.erase(id);
  window_bytes_ -= g.charged;
  g.charged = 0;
  g.state.release_memory();
  g.kept = true;
  ++kept_count_;
  kept_groups_.emplace_back(id, s.since());
}

void shard_engine::revive(group_slot& g) {
  if (!g.kept) return;
  g.kept = false;
  --kept_count_;
}

void shard_engine::drop_kept(timestamp now) {
  while (!kept_groups_.empty() && (kept_groups_.size() > limits::kept_groups_max ||
                                   kept_groups_.front().second + limits::kept_group_for <= now)) {
    auto [id, since] = kept_groups_.front();
    kept_groups_.pop_front();
    auto* g = find_group(id);
    if (g && g->kept && g->state.since() == since) drop(*g);
  }
}

void shard_engine::drop(group_slot& g) {
  LANEQ_ASSERT(g.kept, "only a kept group is dropped");
  auto id = g.state.id();
  --kept_count_;
  group_by_key_.erase(group_by_key_.find(*g.key));
  if (!more_keys_.empty()) {
    if (auto it = more_keys_.find(id); it != more_keys_.end()) {
      for (const auto& key : it->second) group_by_key_.erase(key);
      more_keys_.erase(it);
    }
  }
  group_by_lane_.erase(group_by_lane_.iterator_to(g));
  groups_.erase(groups_.find(id));  // `g` is gone
}

std::vector<store_op> shard_engine::end_attempt(const lease_token& lease, std::vector<store_op> ops,
                                                bool recorded) {
  // The attempt is over, and its committed lease goes with it (durable delivery; a batch acked in
  // part).
  if (recorded) ops.push_back(erase_lease(cfg_.uid, lease.msg));
  return ops;
}

bool shard_engine::lease_recorded(const group_slot& g) const {
  return g.state.lease() && (durable() || g.state.batch_acked() > 0);
}

codec::lease_record shard_engine::record_of(const group_slot& g) const {
  LANEQ_ASSERT(g.state.lease() && g.state.head(), "a lease's record names its messages");
  codec::lease_record rec;
  rec.lease = *g.state.lease();
  rec.deadline = g.state.lease_deadline();
  rec.seq = g.state.head()->seq;
  rec.count = g.state.batch_left();
  rec.acked = g.state.batch_acked();
  rec.epoch = cfg_.epoch;
  return rec;
}

void shard_engine::expire_if_due(group_slot& g, timestamp t) {
  if (g.state.current_phase() != group_state::phase::in_flight || g.state.lease_deadline() > t)
    return;
  ++counters_.lease_expired;
  auto lease = *g.state.lease();
  bool recorded = lease_recorded(g);
  group_leases_.erase(g.state.id());
  auto w = apply(g, g.state.on_lease_timer(t, nullptr, window_for(g)));
  w.ops = end_attempt(lease, std::move(w.ops), recorded);
  // Never empty (the head's update or its dead-letter move), so `g` outlives write_for.
  write_for(g, std::move(w), nullptr, t);
}

void shard_engine::restore_lease(group_slot& g, const lease_token& lease, timestamp deadline,
                                 timestamp t, std::size_t count, std::uint32_t acked) {
  g.held = false;
  if (auto* rc = reclaim_of(g)) rc->record.reset();
  holds_.erase(g.state.id());
  g.state.on_restored_lease(lease, deadline, t, count, acked);
  group_leases_.set(g.state.id(), deadline);
}

void shard_engine::reclaim(group_slot& g, const lease_token& lease, timestamp t) {
  const auto* head = g.state.head();
  if (!g.held || g.state.lease() || !head) return;
  auto deadline = t + cfg_.spec.lease_duration();
  // The old holder is back: its lease runs on as if there had been no restart.
  if (auto* rc = reclaim_of(g); rc && rc->record) {
    // The rest of a batch acked in part: its record names the token that may take it back,
    // for as many runs after the one that wrote it as a token's nonce is checked for.
    auto rec = *rc->record;
    if (lease == rec.lease && cfg_.epoch > rec.epoch && cfg_.epoch - rec.epoch <= reclaim_epochs &&
        g.state.restorable(rec.count, rec.acked))
      restore_lease(g, rec.lease, deadline, t, rec.count, rec.acked);
    return;
  }
  // A batch whose messages a restart with a smaller window left in the store, or with a message
  // that failed an attempt since (group_state::restorable), is not taken back (its holder's calls
  // fail; fast delivery may then deliver them twice, recovery.md R6).
  if (issued_before_restart(cfg_.nonces, cfg_.uid, cfg_.epoch, lease, head->id, head->seq,
                            head->attempts) &&
      g.state.restorable(lease.batch, 0))
    restore_lease(g, lease, deadline, t, lease.batch, 0);
}

void shard_engine::release_hold(group_slot& g, timestamp t) {
  g.held = false;
  g.next = true;
  auto* rc = reclaim_of(g);
  if (!rc || !rc->record) return offer_when_settled(g, t);
  // Nobody took the rest of the batch back: its record goes before anybody else gets it.
  group_write w;
  w.ops.push_back(erase_lease(cfg_.uid, rc->record->lease.msg));
  rc->record.reset();
  write_for(g, std::move(w), nullptr, t);
}

shard_engine::reclaim_entry* shard_engine::reclaim_of(const group_slot& g) {
  auto it = reclaims_.find(g.state.id());
  return it == reclaims_.end() ? nullptr : &it->second;
}

void shard_engine::fetch(group_slot& g, const fetch_request& req) {
  auto [from, to] = codec::lane_range(cfg_.uid, g.lane, req.after);
  auto max = static_cast<std::uint32_t>(std::min<std::size_t>(req.max, limits::store_scan_max));
  read(read_slot{read_kind::fetch, g.state.id()}, std::move(from), std::move(to), max);
}

void shard_engine::on_fetched(group_id id, result<std::vector<store_entry>> page, timestamp t) {
  auto* g = find_group(id);
  if (!g) return;
  if (!page) {
    // The store is degraded: try again shortly (it reopens itself).
    g->state.on_fetch_failed();
    fetch_retries_.set(id, t + fetch_retry);
    return;
  }
  ++counters_.window_reads;
  counters_.window_read_messages += page.value().size();
  std::vector<message> msgs;
  msgs.reserve(page.value().size());
  for (auto& e : page.value()) {
    auto m = codec::decode_message(e.value);
    if (!m) {
      // A record the store kept but cannot be trusted: the group stops there rather than skip it
      // and deliver out of order (fail-stop, docs/design/recovery.md).
      ++counters_.corrupt_records;
      auto reason =
          "corrupt record: " + codec::describe_message_key(e.key) + ": " + m.err().message;
      fx_.log.push_back("queue '" + cfg_.spec.name() + "', group '" + std::string{g->label()} +
                        "' stops at a " + reason);
      write_for(
          *g, apply(*g, g->state.on_corrupt(std::move(msgs), std::move(reason), t, window_for(*g))),
          nullptr, t);
      serve_pending(t);
      return;
    }
    msgs.push_back(std::move(m).value());
  }
  auto fx = g->state.on_fetched(std::move(msgs), t, window_for(*g));
  bool new_head = fx.offer != nullptr;
  auto w = apply(*g, std::move(fx));
  if (new_head && expiry_cutoff(t)) {
    // A head read back past its retention goes now (retention.md RT7), before it is offered.
    g->next = false;
    write_for(*g, std::move(w), nullptr, t);
    if (!expire_fetched_head(*g, t)) {
      g->next = true;
      offer_when_settled(*g, t);
    }
  } else {
    write_for(*g, std::move(w), nullptr, t);
  }
  serve_pending(t);
}

}  // namespace laneq
