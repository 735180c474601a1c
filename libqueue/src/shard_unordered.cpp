// Unordered messages by class (docs/design/persistence.md P12): memory follows what can be
// delivered, not the backlog. A class holds the unordered messages the scheduler treats alike (one
// fairness key, one set of throttle buckets: fair_scheduler::class_of), stored in one lane of its
// own in arrival order. Up to its window of ready ones wait in memory, with those delayed or in
// flight; once a class has messages left in the store, every later arrival stays there too, so
// the lane past `loaded` holds exactly those, and they are read back in order as the ready ones
// drain to half the window. A receive that empties a class whose read is under way waits for it
// and takes on, so a short answer still means nothing else could go (fairness.md F1, F2).
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

using namespace std::chrono_literals;

namespace {

/// How long a class waits before it reads back again after a failed read.
constexpr duration class_read_retry = 200ms;

/// A held group lease's deadline in its group (no timer watches it): past any time a shard sees.
constexpr duration held_lease = std::chrono::hours{24 * 365 * 100};

}  // namespace

bool shard_engine::of_last_class(const message& m) const {
  // Most unordered queues have one class, or a few: the last one used is found without building
  // a key when the queue has no throttles (a class is then its fairness key alone).
  return last_class_ && cfg_.spec.throttles().empty() &&
         last_class_->fairness_key == m.fairness_key;
}

shard_engine::unordered_class& shard_engine::class_for(const message& m) {
  if (of_last_class(m)) return *last_class_;
  auto key = sched_.class_of(m);
  if (auto it = classes_.find(key); it != classes_.end()) return *(last_class_ = it->second.get());
  auto c = std::make_unique<unordered_class>();
  c->id = next_class_++;
  c->lane = class_lane(key);
  c->fairness_key = m.fairness_key;
  c->key = key;
  class_by_id_.emplace(c->id, c.get());
  last_class_ = c.get();
  return *classes_.emplace(std::move(key), std::move(c)).first->second;
}

shard_engine::unordered_class* shard_engine::find_class(std::uint64_t id) {
  auto it = class_by_id_.find(id);
  return it == class_by_id_.end() ? nullptr : it->second;
}

codec::lane_id shard_engine::class_lane_of(const message& m) const {
  return of_last_class(m) ? last_class_->lane : class_lane(sched_.class_of(m));
}

codec::lane_id shard_engine::class_lane(const std::string& key) const {
  if (auto it = classes_.find(key); it != classes_.end()) return it->second->lane;
  if (auto it = class_lanes_.find(key); it != class_lanes_.end()) return it->second;
  // A group's key is an encoded key (its first byte a length's) or one of two one-byte keys
  // (queue_spec.hpp): "\xFD" starts none of them, so a class never shares a group's lane.
  auto lane = codec::make_lane_id(cfg_.spec.name(), "\xFD" + key);
  if (class_lanes_.size() >= limits::class_lanes_cached) class_lanes_.clear();
  class_lanes_.emplace(key, lane);
  return lane;
}

bool shard_engine::is_class_lane(const message& m, const codec::lane_id& lane) const {
  auto where = place(cfg_.spec, m);
  return where && !where.value().ordered && class_lane_of(m) == lane;
}

std::size_t shard_engine::class_window(const unordered_class& c) const {
  // As a group's: the larger window while the budget has room, its share once it is used up.
  if (may_grow() || cfg_.window_budget_bytes == 0) return cfg_.window_max;
  auto each = c.queued > 0 ? c.bytes / c.queued : sizeof(message);
  auto share = budget_share_bytes() / std::max<std::size_t>(each, 1);
  return std::clamp<std::size_t>(share, 2, cfg_.window);
}

void shard_engine::arrive_unordered(message m, timestamp t) {
  auto& c = class_for(m);
  bool delayed = m.not_before > t;
  // Delayed ones wait in memory while nothing of the class is left in the store (they take no
  // place in the window: ready ones behind them are not held back).
  if (c.stored_only > 0 || (!delayed && c.ready() >= class_window(c))) {
    ++c.stored_only;  // read back in its turn
    c.told = std::max(c.told, m.seq);
    return;
  }
  c.loaded = std::max(c.loaded, m.seq);
  queue_unordered(c, std::move(m), t);
}

void shard_engine::queue_unordered(unordered_class& c, message m, timestamp t) {
  ++c.queued;
  if (m.not_before > t) {
    ++c.delayed;
    delayed_.emplace(m.not_before, c.id);
  }
  auto bytes = memory_footprint(m);
  c.bytes += bytes;
  window_bytes_ += bytes;
  note_unordered_expiry(m);
  sched_.on_ready(ready_item{std::move(m), group_id{}}, t);
}

void shard_engine::unqueue_unordered(unordered_class& c, const message& m, timestamp t) {
  LANEQ_ASSERT(c.queued > 0, "a message taken out of the scheduler was queued in its class");
  --c.queued;
  if (m.not_before > t) {
    // Still delayed (those due left `delayed_` as the scheduler moved them).
    auto [lo, hi] = delayed_.equal_range(m.not_before);
    auto it = std::find_if(lo, hi, [&c](const auto& e) { return e.second == c.id; });
    LANEQ_ASSERT(it != hi && c.delayed > 0, "a delayed unordered message counts in its class");
    delayed_.erase(it);
    --c.delayed;
  }
  auto bytes = memory_footprint(m);
  c.bytes -= bytes;
  window_bytes_ -= bytes;
}

void shard_engine::picked_unordered(unordered_class& c, const message& m) {
  LANEQ_ASSERT(c.ready() > 0, "a picked unordered message was ready in its class");
  unqueue_unordered(c, m, m.not_before);  // picked: due, so not among the delayed
  ++c.in_flight;
  fetch_class(c);
}

void shard_engine::left_unordered(unordered_class& c) {
  LANEQ_ASSERT(c.in_flight > 0, "a message in flight left its class");
  --c.in_flight;
  maybe_drop_class(c);
}

void shard_engine::ready_delayed(timestamp t) {
  while (!delayed_.empty() && delayed_.begin()->first <= t) {
    auto* c = find_class(delayed_.begin()->second);
    LANEQ_ASSERT(c && c->delayed > 0, "a delayed unordered message counts in its class");
    --c->delayed;
    delayed_.erase(delayed_.begin());
  }
}

void shard_engine::fetch_class(unordered_class& c) {
  auto window = class_window(c);
  if (c.fetching || c.corrupt || c.stored_only == 0 || c.ready() > window / 2 ||
      class_retries_.deadline(c.id))
    return;
  c.fetching = true;
  fetching_.insert(c.id);
  c.fetch_max = std::min({c.stored_only, std::max<std::size_t>(window - c.ready(), 1),
                          static_cast<std::size_t>(limits::store_scan_max)});
  auto [from, to] = codec::lane_range(cfg_.uid, c.lane, c.loaded);
  read(read_slot{read_kind::unordered, group_id{}, 0, c.id}, std::move(from), std::move(to),
       static_cast<std::uint32_t>(c.fetch_max));
}

void shard_engine::on_class_fetched(std::uint64_t id, result<std::vector<store_entry>> page,
                                    timestamp t) {
  auto* c = find_class(id);
  LANEQ_ASSERT(c && c->fetching, "a class lives while its read is under way");
  c->fetching = false;
  fetching_.erase(id);
  if (!page) {
    class_retries_.set(id, t + class_read_retry);  // the store is degraded: again shortly
    return resume_reading(t);
  }
  ++counters_.window_reads;
  ++counters_.class_reads;
  counters_.window_read_messages += page.value().size();
  bool cut = false;
  auto cutoff = expiry_cutoff(t);
  std::vector<message> expired;  // read back past their retention: they go now (RT7)
  for (auto& e : page.value()) {
    auto m = codec::decode_message(e.value);
    if (!m) {
      // Fail-stop, as a group at a corrupt record: the class reads no further (recovery.md).
      ++counters_.corrupt_records;
      c->corrupt = true;
      fx_.log.push_back("queue '" + cfg_.spec.name() +
                        "', unordered messages of a class stop at a corrupt record: " +
                        codec::describe_message_key(e.key) + ": " + m.err().message);
      cut = true;
      break;
    }
    auto msg = std::move(m).value();
    if (msg.seq > c->told) {
      cut = true;  // a later arrival: its routing counts it
      break;
    }
    c->loaded = msg.seq;
    if (c->ahead.erase(msg.seq) > 0) continue;  // in memory since the restart
    --c->stored_only;
    if (cutoff && msg.entered_at() <= *cutoff)
      expired.push_back(std::move(msg));
    else
      queue_unordered(*c, std::move(msg), t);
  }
  // Fewer in the lane than counted: its records were deleted under it (the queue was dropped).
  if (!cut && page.value().size() < c->fetch_max) c->stored_only = 0;
  c->ahead.erase(c->ahead.begin(), c->ahead.upper_bound(c->loaded));
  if (expired.empty()) {
    fetch_class(*c);
    maybe_drop_class(*c);
  } else {
    expire_messages(std::move(expired), t, false);  // reads on, or drops `c`
  }
  // The receives that waited for it take on first: they took their share before the messages
  // that came meanwhile.
  resume_reading(t);
  serve_pending(t);
  notify_watchers(t);
}

void shard_engine::maybe_drop_class(unordered_class& c) {
  if (c.live()) return;
  class_retries_.erase(c.id);
  class_by_id_.erase(c.id);
  if (last_class_ == &c) last_class_ = nullptr;
  classes_.erase(classes_.find(c.key));  // `c` is gone
}

void shard_engine::resume_reading(timestamp t) {
  // In the order they came; one that must wait again keeps its place.
  std::deque<reading_receive> still;
  while (!reading_.empty()) {
    auto rr = std::move(reading_.front());
    reading_.pop_front();
    bool waits = false;
    auto more =
        take(rr.max - static_cast<std::uint32_t>(rr.out.size()), rr.batch, rr.lease, t, waits);
    // What it took before may have come back meanwhile (a lease that ran out while it waited):
    // those deliveries go no further (their leases are no longer theirs to record or answer).
    std::erase_if(rr.out, [this](const delivery& d) { return !still_leased(d.lease); });
    for (auto& d : more) rr.out.push_back(std::move(d));
    if (waits && rr.out.size() < rr.max) {
      hold_leases(rr.out);
      still.push_back(std::move(rr));
    } else {
      start_leases(rr.out, rr.lease, t);  // the lease runs from the answer
      finish_receive(std::move(rr), t);
    }
  }
  reading_ = std::move(still);
}

void shard_engine::hold_leases(const std::vector<delivery>& out) {
  for (const auto& d : out) {
    if (d.batch_index != 0) continue;  // a batch has one lease, its first message's
    if (!d.lease.group) {
      leases_.hold(d.lease);
    } else if (auto* g = find_group(d.lease.group)) {
      (void)g->state.on_extend(d.lease, held_lease, last_now_);
      group_leases_.erase(g->state.id());  // no timer while held (check_invariants knows)
    }
  }
}

void shard_engine::start_leases(std::vector<delivery>& out, duration lease, timestamp t) {
  for (auto& d : out) {
    d.deadline = t + lease;
    if (d.batch_index != 0) continue;
    if (!d.lease.group) {
      (void)leases_.extend(d.lease, lease, t);
    } else if (auto* g = find_group(d.lease.group)) {
      if (g->state.on_extend(d.lease, lease, t)) group_leases_.set(g->state.id(), d.deadline);
    }
  }
}

void shard_engine::wait_for_read(reading_receive rr, timestamp t) {
  (void)t;
  hold_leases(rr.out);
  reading_.push_back(std::move(rr));
}

bool shard_engine::still_leased(const lease_token& l) {
  if (!l.group) return leases_.leased(l) != nullptr;
  auto* g = find_group(l.group);
  return g && g->state.lease() == l;
}

void shard_engine::finish_receive(reading_receive rr, timestamp t) {
  if (!rr.out.empty() || rr.deadline <= t) return hand_out(rr.r, std::move(rr.out));
  if (pending_.size() >= limits::pending_receives_max)
    return reply(rr.r,
                 error{errc::limit_exceeded,
                       "receive: more than " + std::to_string(limits::pending_receives_max) +
                           " receives are already waiting on queue '" + cfg_.spec.name() + "'"});
  pending_.push_back(pending_receive{rr.r, rr.max, rr.lease, rr.deadline, rr.batch});
  pending_deadlines_.insert(rr.deadline);
}

// -- recovery ------------------------------------------------------------------------------------

void shard_engine::recover_unordered(recovery& r, unordered_class& c, message m, timestamp t) {
  auto it = r.leases.find(m.seq.value);
  if (it == r.leases.end() || it->second.lease.msg != m.id)
    return queue_unordered(c, std::move(m), t);
  // In flight under its durable lease (durable delivery): honoured until its deadline.
  m.attempts = it->second.lease.attempt;
  leases_.grant(it->second.lease, std::move(m), it->second.deadline, t);
  ++c.in_flight;
  r.leases.erase(it);
}

void shard_engine::recover_class(recovery& r, const codec::lane_id& stored, recovered_lane& lane,
                                 timestamp t) {
  auto& c = class_for(lane.window.front());
  LANEQ_ASSERT(c.lane == stored, "a class lane holds its own class");
  for (auto& m : lane.window) {
    c.loaded = m.seq;
    recover_unordered(r, c, std::move(m), t);
  }
  for (auto& m : lane.ahead) {
    c.ahead.insert(m.seq);
    recover_unordered(r, c, std::move(m), t);
  }
  c.stored_only = lane.beyond;
  c.told = lane.last;
  fetch_class(c);
}

void shard_engine::recover_lane_zero(recovery& r, timestamp t) {
  // Each goes to its class's lane at its seq, in memory as before; one that a class's own lane
  // passes is marked ahead, so that no read takes it twice.
  for (auto& m : r.lane_zero) {
    auto& c = class_for(m);
    r.expired.push_back(put_message(cfg_.uid, c.lane, m));
    r.expired.push_back(erase_message(cfg_.uid, codec::lane_id{}, m.seq));
    if (c.stored_only > 0 && m.seq > c.loaded)
      c.ahead.insert(m.seq);
    else
      c.loaded = std::max(c.loaded, m.seq);
    recover_unordered(r, c, std::move(m), t);
  }
}

}  // namespace laneq
