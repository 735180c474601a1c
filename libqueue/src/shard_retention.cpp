// Retention (docs/design/retention.md): a message that has waited the queue's `retention_ms` since
// it entered the queue (its enqueue, or its last redrive) and is not in flight expires: it moves
// to the dead letters (reason expired) or is dropped, as the spec's `on_expiry` says. A dead
// letter is deleted `dead_letter_retention_ms` after it died.
//
// `take` never hands out an expired message: it checks every item it picks, and a batch stops
// before one. The rest is timely, not exact: sweeps, at most one per `sweep_interval`, take out
// what has expired since. An ordering group's messages expire from its head: each head offered to
// the scheduler notes its expiry in `expiries_` (offer_when_settled), and a sweep makes the groups
// that are due give up every message from the head on that has expired. Nothing of a group
// expires while it has a lease in flight: a failed attempt offers the head again, and it expires
// then. Unordered messages in memory expire by one pass over the scheduler at the earliest expiry
// any of them has (`unordered_expiry_`); those still in the store expire once read back. Dead
// letters are read back from the store in their order (the order they died in), the due ones
// deleted, as a deletion by an operator is.
#include <algorithm>
#include <unordered_set>

#include "shard_parts.hpp"

namespace laneq {

namespace {

/// How often sweeps may run for a retention of `age`: a tenth of it, from 1 ms to 1 s.
duration sweep_interval(duration age) {
#if LANEQ_CANARY_LATE_EXPIRY
  // Canary build (tests/unit/retention_property_test.cpp): sweeps come an hour apart, and
  // `expiry_cutoff` lets a pick take a message an hour past its retention (breaks RT6, G10).
  (void)age;
  return std::chrono::hours{1};
#endif
  return std::clamp<duration>(age / 10, std::chrono::milliseconds{1}, std::chrono::seconds{1});
}

}  // namespace

std::optional<timestamp> shard_engine::expiry_cutoff(timestamp t) const {
  const auto& age = cfg_.spec.retention_rule().max_age;
  if (!age) return std::nullopt;
#if LANEQ_CANARY_LATE_EXPIRY
  return t - *age - std::chrono::hours{1};
#endif
  return t - *age;
}

void shard_engine::schedule_expiry(const group_slot& g) {
  const auto& age = cfg_.spec.retention_rule().max_age;
  if (age) expiries_.set(g.state.id(), g.state.head()->entered_at() + *age);
}

void shard_engine::note_unordered_expiry(const message& m) {
  const auto& age = cfg_.spec.retention_rule().max_age;
  if (!age) return;
  auto at = m.entered_at() + *age;
  if (!unordered_expiry_ || at < *unordered_expiry_) unordered_expiry_ = at;
}

std::optional<timestamp> shard_engine::next_expiry() const {
  std::optional<timestamp> next;
  auto consider = [&next](std::optional<timestamp> x) {
    if (x && (!next || *x < *next)) next = x;
  };
  const auto& rule = cfg_.spec.retention_rule();
  if (rule.max_age) {
    consider(expiries_.next());
    consider(unordered_expiry_);
    if (next) next = std::max(*next, last_sweep_ + sweep_interval(*rule.max_age));
  }
  if (rule.dead_letter_max_age && dead_count_ > 0 && oldest_dead_at_ &&
      !dead_ops_.contains(retention_request))
    consider(std::max(*oldest_dead_at_ + *rule.dead_letter_max_age, dead_sweep_after_));
  return next;
}

void shard_engine::expire_due(timestamp t) {
  if (recovery_) return;
  const auto& rule = cfg_.spec.retention_rule();
  if (rule.dead_letter_max_age) expire_dead_letters(*rule.dead_letter_max_age, t);
  if (!rule.max_age) return;
  if (t < last_sweep_ + sweep_interval(*rule.max_age)) return;
  auto next = expiries_.next();
  bool groups_due = next && *next <= t;
  bool unordered_due = unordered_expiry_ && *unordered_expiry_ <= t;
  if (!groups_due && !unordered_due) return;
  last_sweep_ = t;
  auto cutoff = t - *rule.max_age;
  if (groups_due) expire_groups(cutoff, t);
  if (unordered_due) expire_unordered(cutoff, *rule.max_age, t);
}

void shard_engine::expire_groups(timestamp cutoff, timestamp t) {
  std::vector<group_id> due;
  std::unordered_set<group_id> scheduled;
  for (auto id : expiries_.pop_due(t)) {
    auto* g = find_group(id);
    if (!g || !g->state.head() || g->held || g->state.batch_left() > 0) continue;
    if (g->state.head()->entered_at() > cutoff) {
      // The retention grew since (an update): not due yet.
      if (g->scheduled) schedule_expiry(*g);
      continue;
    }
    due.push_back(id);
    if (g->scheduled) scheduled.insert(id);
  }
  // One pass over the scheduler takes every due group's head out.
  if (!scheduled.empty())
    sched_.remove_if([&scheduled](group_id g, message_seq) { return scheduled.contains(g); });
  for (auto id : due) {
    auto* g = find_group(id);
    g->scheduled = false;
    expire_head(*g, cutoff, t);
  }
  if (!due.empty()) notify_watchers(t);
}

void shard_engine::expire_head(group_slot& g, timestamp cutoff, timestamp t) {
  LANEQ_ASSERT(!g.scheduled, "an expiring head is out of the scheduler");
  bool drop = cfg_.spec.retention_rule().on_expiry == expiry_action::drop;
  g.next = false;  // the head goes; the group offers its next one
  auto fx = g.state.on_expire(cutoff, drop, t, window_for(g));
  std::vector<store_op> erases;
  if (drop) {
    for (auto seq : fx.removed) erases.push_back(erase_message(cfg_.uid, g.lane, seq));
    counters_.expired_dropped += fx.removed.size();
    release_bytes(fx.removed_bytes);
    fx.removed.clear();  // not acked: `apply` would count them so
    fx.removed_bytes = 0;
  } else {
    counters_.expired_dead_lettered += fx.dead_letters.size();
  }
  auto w = apply(g, std::move(fx));
  w.ops.insert(w.ops.end(), std::make_move_iterator(erases.begin()),
               std::make_move_iterator(erases.end()));
  write_for(g, std::move(w), nullptr, t);
}

void shard_engine::expire_unordered(timestamp cutoff, duration age, timestamp t) {
  // One pass: out with the expired ones, and the earliest expiry of the rest for the next sweep.
  std::optional<timestamp> next;
  auto gone = sched_.take_unordered_if([&](const message& m) {
    if (m.entered_at() <= cutoff) return true;
    auto at = m.entered_at() + age;
    if (!next || at < *next) next = at;
    return false;
  });
  unordered_expiry_ = next;
  expire_messages(std::move(gone), t);
}

bool shard_engine::expire_fetched_head(group_slot& g, timestamp t) {
  auto cutoff = expiry_cutoff(t);
  const auto* head = g.state.head();
  if (!cutoff || !head || g.scheduled || g.held || g.state.batch_left() > 0 ||
      head->entered_at() > *cutoff)
    return false;
  expire_head(g, *cutoff, t);
  return true;
}

void shard_engine::expire_messages(std::vector<message> gone, timestamp t, bool queued) {
  if (gone.empty()) return;
  bool drop = cfg_.spec.retention_rule().on_expiry == expiry_action::drop;
  write_request w;
  std::vector<std::uint64_t> classes;
  for (auto& m : gone) {
    auto& c = class_for(m);
    if (queued) unqueue_unordered(c, m, t);
    if (drop) {
      w.ops.push_back(erase_message(cfg_.uid, c.lane, m.seq));
      release_bytes(m.body.size());
      ++counters_.expired_dropped;
    } else {
      std::vector<dead_letter> dl{dead_letter{std::move(m), dead_letter_reason::expired, t}};
      for (auto& op : move_dead(std::move(dl), c.lane)) w.ops.push_back(std::move(op));
      ++counters_.expired_dead_lettered;
      w.counters = true;
    }
    classes.push_back(c.id);
  }
  writes_.add(std::move(w));
  for (auto id : classes) {
    if (auto* c = find_class(id)) {
      fetch_class(*c);  // its window has room again
      maybe_drop_class(*c);
    }
  }
  notify_watchers(t);
}

void shard_engine::expire_dead_letters(duration age, timestamp t) {
  if (dead_count_ == 0 || !oldest_dead_at_ || *oldest_dead_at_ + age > t) return;
  if (t < dead_sweep_after_ || dead_ops_.contains(retention_request)) return;
  dead_sweep_after_ = t + sweep_interval(age);
  auto s = std::make_unique<redrive_state>();
  s->what = redrive_state::op::expire;
  s->r = retention_request;
  start_dead_op(std::move(s));
}

void shard_engine::expire_dead_taken(redrive_state& s) {
  // The list in the order the dead letters died: the due ones are its first. The retention may
  // have been lifted meanwhile (an update).
  const auto& age = cfg_.spec.retention_rule().dead_letter_max_age;
  std::optional<timestamp> cutoff;
  if (age) cutoff = last_now_ - *age;
  if (s.taken.empty()) oldest_dead_at_.reset();  // none left to sweep (the count said otherwise)
  write_request w;
  std::uint64_t n = 0;
  for (const auto& [order, dl] : s.taken) {
    if (!cutoff || dl.at > *cutoff) {
      // The oldest left. (If every one read was due, the last one's time: the next sweep comes
      // at once for the rest.)
      oldest_dead_at_ = dl.at;
      break;
    }
    w.ops.push_back(erase_dead(codec::dead_key(cfg_.uid, order)));
    w.ops.push_back(erase_dead(codec::dead_index_key(cfg_.uid, dl.msg.id)));
    oldest_dead_at_ = dl.at;
    ++n;
  }
  if (n == 0) return end_redrive(s, std::nullopt, false);
  write_dead_deletes(s, std::move(w), n);
}

}  // namespace laneq
