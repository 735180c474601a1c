// Recovery (docs/design/recovery.md R1-R8): the shard reads its records back, range by range
// (counters, leases, the dead-letter index and the dead letters, messages, dedupe entries),
// and rebuilds its groups, its unordered messages, its leases and its count of dead letters
// (which stay in the store). A record that fails its checks stops
// the shard (fail-stop): it never starts with fewer messages than were stored.
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

namespace {

using phase = recovery_phase;

codec::tag tag_of(phase p) {
  switch (p) {
    case phase::counters: return codec::tag::counters;
    case phase::leases: return codec::tag::lease;
    case phase::dead_index: return codec::tag::dead_index;
    case phase::dead: return codec::tag::dead;
    case phase::messages: return codec::tag::message;
    case phase::dedupe: return codec::tag::dedupe;
  }
  return codec::tag::counters;
}

/// A stored message record that failed to decode, named by its key (queue, lane, seq).
error named(error e, std::string_view key) {
  e.message = codec::describe_message_key(key) + ": " + e.message;
  return e;
}

}  // namespace

void shard_engine::recover(request_id r, timestamp now) {
  catch_up(now);
  if (cfg_.spec.functions_missing()) {
    // The lanes of stored messages need the key functions: recovery waits for a create that
    // brings them back (lanes.md L3); until then enqueues are refused.
    recovery_deferred_ = true;
    return reply(r, ok_t{});
  }
  recover_request_ = r;
  start_recovery(last_now_);
}

void shard_engine::adopt(queue_spec spec, timestamp now) {
  catch_up(now);
  // The same queue created again after a restart brings back its hook and key functions.
  cfg_.spec = std::move(spec);
  cfg_.hook_missing = false;
  if (recovery_deferred_ && !cfg_.spec.functions_missing()) {
    recovery_deferred_ = false;
    start_recovery(last_now_);
  }
}

void shard_engine::update(queue_spec spec, timestamp now) {
  catch_up(now);
  LANEQ_ASSERT(spec.same_ordering(cfg_.spec) && spec.shard_count() == cfg_.spec.shard_count(),
               "an update keeps the queue's fixed fields");
  sched_.set_throttles(spec.throttles(), last_now_);
  bool retention_changed = spec.retention_rule() != cfg_.spec.retention_rule();
  cfg_.spec = std::move(spec);
  if (retention_changed) {
    // Every offered head, and the unordered messages at the next sweep, by the new retention.
    expiries_.clear();
    for (const auto& g : group_by_lane_)
      if (g.scheduled) schedule_expiry(g);
    unordered_expiry_ = last_now_;
    dead_sweep_after_ = last_now_;
  }
  // A faster throttle may let a waiter go now; the next wake-up is computed with the effects.
  sched_.on_tick(last_now_);
  serve_pending(last_now_);
}

void shard_engine::start_recovery(timestamp t) {
  (void)t;
  recovery_ = std::make_unique<recovery>();
  auto [from, to] = codec::queue_range(tag_of(recovery_->at), cfg_.uid);
  recovery_->to = to;
  read(read_slot{read_kind::recovery}, std::move(from), std::move(to), limits::store_scan_max);
}

void shard_engine::fail_recovery(error e) {
  e.message = "recovering queue '" + cfg_.spec.name() + "': " + e.message;
  recovery_.reset();
  if (recover_request_) reply(*recover_request_, e);
  recover_request_.reset();
  fx_.failed = std::move(e);
}

void shard_engine::on_recovery_page(std::vector<store_entry> page, timestamp t) {
  auto& r = *recovery_;
  for (auto& e : page)
    if (auto err = take_record(r, e, t)) return fail_recovery(std::move(*err));
  if (page.size() >= limits::store_scan_max) {
    auto next = std::move(page.back().key);
    next.push_back('\0');  // the smallest key after the last one read
    read(read_slot{read_kind::recovery}, std::move(next), r.to, limits::store_scan_max);
    return;
  }
  if (r.at == phase::dedupe) return finish_recovery(t);
  r.at = static_cast<phase>(static_cast<int>(r.at) + 1);
  auto [from, to] = codec::queue_range(tag_of(r.at), cfg_.uid);
  r.to = to;
  read(read_slot{read_kind::recovery}, std::move(from), std::move(to), limits::store_scan_max);
}

std::optional<error> shard_engine::take_record(recovery& r, const store_entry& e, timestamp t) {
  switch (r.at) {
    case phase::counters: {
      auto c = codec::decode_counters(e.value);
      if (!c) return c.err();
      next_id_ = c.value().next_id;
      next_seq_ = c.value().next_seq;
      next_dead_ = c.value().next_dead;
      return std::nullopt;
    }
    case phase::leases: {
      auto l = codec::decode_lease(e.value);
      if (!l) return l.err();
      r.leases.emplace(l.value().seq.value, std::move(l).value());
      return std::nullopt;
    }
    case phase::dead_index: {
      auto id = codec::parse_dead_index_key(e.key);
      if (!id) return id.err();
      r.indexed.insert(id.value());
      return std::nullopt;
    }
    case phase::dead: {
      auto d = codec::decode_dead_letter(e.value);
      if (!d) return d.err();
      auto order = codec::parse_dead_order(e.key);
      if (!order) return order.err();
      ++dead_count_;
      if (!oldest_dead_at_ || d.value().at < *oldest_dead_at_) oldest_dead_at_ = d.value().at;
      // A dead letter stored before the index existed gets its index record now.
      if (!r.indexed.contains(d.value().msg.id))
        r.expired.push_back(store_op{store_op::kind::put,
                                     codec::dead_index_key(cfg_.uid, d.value().msg.id),
                                     codec::encode_u64(order.value())});
      return std::nullopt;
    }
    case phase::messages: return take_message(r, e);
    case phase::dedupe: {
      auto d = codec::decode_dedupe(e.value);
      if (!d) return d.err();
      if (d.value().expires <= t) {
        r.expired.push_back(store_op{store_op::kind::erase, e.key, {}});
        return std::nullopt;
      }
      auto k = codec::parse_dedupe_key(e.key);
      if (!k) return k.err();
      r.dedupe.push_back(
          recovery::dedupe_entry{d.value().expires, std::move(k).value(), d.value().id});
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<error> shard_engine::take_message(recovery& r, const store_entry& e) {
  auto key = codec::parse_message_key(e.key);
  if (!key) return key.err();
  ++r.messages;
  auto seq = key.value().seq;
  if (key.value().lane.unordered()) {
    // Stored before classes of unordered messages had lanes: each moves to its class's lane.
    auto m = codec::decode_message(e.value);
    if (!m) return named(m.err(), e.key);
    depth_bytes_ += m.value().body.size();
    r.lane_zero.push_back(std::move(m).value());
    return std::nullopt;
  }
  auto& lane = r.lanes[key.value().lane.bytes];
  auto lease = r.leases.find(seq.value);
  bool head = lane.window.empty() && lane.beyond == 0;
  bool room = lane.beyond == 0 && lane.window.size() < lane.room;
  // Memory follows live groups and classes: past the window the payload stays in the store,
  // but for a class's message under a lease (it is in flight).
  if (!head && !room && !(lane.unordered && lease != r.leases.end())) {
    // Left in the store, but counted in the queue's depth in bytes. A record that fails its
    // check counts nothing: recovery does not stop on it, its group does when it reads it back
    // (persistence.md, "Corrupt records").
    if (auto body = codec::message_body_bytes(e.value)) depth_bytes_ += body.value();
    ++lane.beyond;
    lane.last = seq;
    return std::nullopt;
  }
  auto m = codec::decode_message(e.value);
  if (!m) return named(m.err(), e.key);
  depth_bytes_ += m.value().body.size();
  lane.last = seq;
  if (head) {
    // The head says what the lane is, and so how much to decode: a group's window (once the
    // window budget is used up, a head and one behind it: persistence.md) or the whole ordered
    // batch a lease of it covers (O12); a class's window.
    bool spare = cfg_.window_budget_bytes == 0 || r.decoded_bytes < cfg_.window_budget_bytes;
    lane.unordered = is_class_lane(m.value(), key.value().lane);
    lane.room = lane.unordered ? (spare ? cfg_.window_max : 2)
                               : group_state::window_of(spare ? cfg_.window : 2);
    if (!lane.unordered && lease != r.leases.end())
      lane.room = std::max<std::size_t>(lane.room, lease->second.count);
  } else if (!room) {
    if (lease->second.lease.msg == m.value().id)
      lane.ahead.push_back(std::move(m).value());
    else
      ++lane.beyond;  // a stale lease record
    return std::nullopt;
  }
  r.decoded_bytes += memory_footprint(m.value());
  lane.window.push_back(std::move(m).value());
  return std::nullopt;
}

void shard_engine::finish_recovery(timestamp t) {
  auto r = std::move(recovery_);
  counters_.recovered += r->messages;
  for (auto& [bytes, lane] : r->lanes) {
    if (lane.unordered)
      recover_class(*r, codec::lane_id{bytes}, lane, t);
    else
      recover_group(*r, codec::lane_id{bytes}, lane, t);
  }
  recover_lane_zero(*r, t);
  // Records no message took up are stale (the rest of a batch nobody took back before a
  // crash): they go.
  for (const auto& [seq, rec] : r->leases)
    r->expired.push_back(erase_lease(cfg_.uid, rec.lease.msg));
  std::sort(r->dedupe.begin(), r->dedupe.end(),
            [](const auto& a, const auto& b) { return a.expires < b.expires; });
  for (auto& d : r->dedupe) dedupe_.restore(d.key, d.id, d.expires);
  auto erasures = dedupe_.take_erasures();  // past the entry bound
  for (auto& key : erasures)
    r->expired.push_back(store_op{store_op::kind::erase, codec::dedupe_key(cfg_.uid, key), {}});
  if (!r->expired.empty()) {
    write_request w;
    w.ops = std::move(r->expired);
    writes_.add(std::move(w));
  }
  if (recover_request_) reply(*recover_request_, ok_t{});
  recover_request_.reset();
  catch_up(t);  // leases that ran out while the broker was down expire now
  release_held();
}

void shard_engine::recover_group(recovery& r, const codec::lane_id& stored, recovered_lane& lane,
                                 timestamp t) {
  // The lane's messages become one group under the lane they were stored under; the head
  // names its key (lanes.md L7).
  const auto& head = lane.window.front();
  auto where = stored_placement(head, stored);
  std::optional<codec::lease_record> lease;
  if (auto it = r.leases.find(head.seq.value); it != r.leases.end()) {
    lease = it->second;  // the token keeps naming its group after the restart
    r.leases.erase(it);
  }
  auto& g = group_for(where, stored, lease ? lease->lease.group : group_id{});
  if (lease) g.state.widen(lease->count);  // a batch delivered with a larger window
  auto head_id = head.id;
  auto fx = g.state.on_enqueue(std::move(lane.window), t);
  fx.fetch = g.state.on_stored_beyond(lane.beyond, t, window_for(g)).fetch;
  if (lease && durable() && fx.offer) {
    // Durable delivery: the lease committed before the restart is honoured until its deadline.
    fx.offer = nullptr;
    restore_lease(g, lease->lease, lease->deadline, t, lease->count, lease->acked);
  } else if (!durable() && cfg_.reclaim_grace > duration{0} && fx.offer) {
    // Fast delivery: the head waits for its old lease holder (R6); the rest of a batch acked in
    // part, for the holder its record names (O12).
    g.held = true;
    fx.offer = nullptr;
    holds_.set(g.state.id(), t + cfg_.reclaim_grace);
    auto head_of_lease = lease ? lease->lease.msg : head_id;
    reclaimable_.emplace(head_of_lease, g.state.id());
    reclaims_.insert_or_assign(g.state.id(), reclaim_entry{head_of_lease, lease});
  } else if (lease) {
    r.expired.push_back(erase_lease(cfg_.uid, lease->lease.msg));  // fast, and no grace to wait
  }
  write_for(g, apply(g, std::move(fx)), nullptr, t);
}

}  // namespace laneq
