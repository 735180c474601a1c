// A shard's writes in order (libqueue/include/laneq/write_log.hpp).
#include "laneq/write_log.hpp"

#include <algorithm>
#include <utility>

#include "laneq/assert.hpp"

namespace laneq {

namespace {

error parked_error() {
  return error{errc::storage_failed, "the store failed an earlier write, which is retried"};
}

}  // namespace

void write_log::add(write_request w) {
  if (parked_ && w.admits) {
    // Nothing depends on it yet: refused now rather than held behind a failing store.
    if (w.answer) w.answer(parked_error());
    if (w.settle) w.settle(false);
    return;
  }
  entries_.push_back(entry{next_id_++, std::move(w)});
  auto& e = entries_.back();
  keep_ops(e);
  if (parked_) {
    answer(e, parked_error());  // sent with the retry
    return;
  }
  if (!held_) queue(e);
}

void write_log::add_durable(std::function<void()> settle, timestamp now) {
  write_request w;
  w.settle = [f = std::move(settle)](bool) { f(); };
  auto& e = entries_.emplace_back(entry{next_id_++, std::move(w)});
  e.st = state::durable;
  e.answered = true;
  e.external = true;
  settle_front(now);
}

std::uint64_t write_log::reserve() {
  auto& e = entries_.emplace_back(entry{next_id_++, {}});
  e.st = state::reserved;
  return e.id;
}

void write_log::fill(std::uint64_t id, std::optional<write_request> w, timestamp now) {
  auto* e = find(id);
  LANEQ_ASSERT(e && e->st == state::reserved, "a reserved place is filled once");
  if (!w) {
    e->st = state::durable;  // nothing to write: it settles in its turn
    e->answered = true;
    e->external = true;
    settle_front(now);
    return;
  }
  if (parked_ && w->admits) {
    // Refused like any write that admits while the log is parked; its place settles.
    if (w->answer) w->answer(parked_error());
    if (w->settle) w->settle(false);
    return fill(id, std::nullopt, now);
  }
  e->w = std::move(*w);
  e->st = state::waiting;
  keep_ops(*e);
  if (parked_) return answer(*e, parked_error());  // sent with the retry
  if (!held_) queue(*e);
}

void write_log::keep_ops(entry& e) {
  e.ops = std::make_shared<const std::vector<store_op>>(std::move(e.w.ops));
  e.w.ops.clear();
}

void write_log::queue(entry& e) {
  e.queued = true;
  outbox_.push_back(e.id);
}

write_log::entry* write_log::find(std::uint64_t id) {
  // Ids increase from the front but need not be consecutive: a resend drops the failed writes
  // that admit from anywhere in the log. (Found by the engine simulation: a lookup by offset from
  // the front named the wrong write after such a gap, so the writes after it were never sent
  // again and never settled.)
  auto it = std::lower_bound(entries_.begin(), entries_.end(), id,
                             [](const entry& e, std::uint64_t x) { return e.id < x; });
  return it != entries_.end() && it->id == id ? &*it : nullptr;
}

void write_log::answer(entry& e, std::optional<error> failure) {
  if (e.answered || (failure && e.w.patient && !e.w.admits)) return;
  e.answered = true;
  if (e.w.answer) e.w.answer(std::move(failure));
}

void write_log::on_answer(std::uint64_t id, std::optional<error> failure, timestamp now) {
  auto* e = find(id);
  LANEQ_ASSERT(e && e->st == state::sent, "the store answers a write that was sent");
  --in_flight_;
  if (e->bundle == 0) {
    record(*e, failure);
  } else {
    // A replay: one answer for every write in it.
    for (auto& x : entries_)
      if (x.bundle == id && x.st == state::sent) record(x, failure);
  }
  settle_front(now);
}

void write_log::record(entry& e, const std::optional<error>& failure) {
  e.bundle = 0;
  if (failure) {
    e.st = state::failed;
    // A write that admits and was committed once is in the store whatever this send did: it is
    // never dropped, and its client hears only once it settles (found by the engine simulation:
    // such an enqueue was answered storage_failed, and its messages came back after a restart).
    if (!e.committed_once) answer(e, failure);
  } else {
    e.st = state::durable;
    e.committed_once = true;
  }
}

void write_log::settle_front(timestamp now) {
  while (!entries_.empty()) {
    auto& e = entries_.front();
    if (e.st == state::durable) {
      answer(e, std::nullopt);
      auto settle = std::move(e.w.settle);
      entries_.pop_front();
      if (settle) settle(true);  // may add writes: `e` is gone by then
      continue;
    }
    if (e.st == state::failed && droppable(e)) {
      auto settle = std::move(e.w.settle);
      entries_.pop_front();
      if (settle) settle(false);
      continue;
    }
    break;
  }
  if (!entries_.empty() && entries_.front().st == state::failed && !parked_) {
    parked_ = true;
    for (auto& e : entries_)  // writes not sent yet wait for the retry; their clients hear now
      if (e.st == state::waiting) answer(e, parked_error());
    outbox_.clear();
  }
  // Once every write sent before the failure has its answer, the retry is scheduled.
  if (parked_ && in_flight_ == 0 && !retry_at_) retry_at_ = now + retry_;
}

void write_log::on_tick(timestamp now) {
  if (!retry_at_ || *retry_at_ > now) return;
  retry_at_.reset();
  resend();
}

void write_log::resend() {
  parked_ = false;
  // The failed writes that admit are dropped; every other write goes again, in order.
  std::deque<entry> kept;
  std::vector<std::function<void(bool)>> dropped;
  for (auto& e : entries_) {
    if (e.st == state::failed && droppable(e)) {
      dropped.push_back(std::move(e.w.settle));
      continue;
    }
    if (!e.external && e.st != state::reserved) e.st = state::waiting;
    e.queued = false;
    kept.push_back(std::move(e));
  }
  entries_ = std::move(kept);
  outbox_.clear();
  replay_ = true;
  if (!held_)
    for (auto& e : entries_)
      if (e.st == state::waiting) queue(e);
  for (auto& settle : dropped)
    if (settle) settle(false);
}

std::vector<outgoing_write> write_log::take_outgoing(const std::function<store_op()>& counters) {
  if (held_ && outbox_.empty()) return {};
  if (!held_ && !parked_)
    for (auto& e : entries_)  // writes held for a topic go now
      if (e.st == state::waiting && !e.queued) queue(e);
  std::vector<outgoing_write> out;
  if (std::exchange(replay_, false)) {
    if (auto w = replay(counters)) out.push_back(std::move(*w));
    return out;
  }
  out.reserve(outbox_.size());
  for (auto id : outbox_) {
    auto* e = find(id);
    if (!e || e->st != state::waiting) continue;
    e->st = state::sent;
    e->queued = false;
    ++in_flight_;
    store_write w{{}, sync_, e->w.admits, {e->ops}};
    if (e->w.counters) w.ops.push_back(counters());
    out.push_back(outgoing_write{id, std::move(w)});
  }
  outbox_.clear();
  return out;
}

std::optional<outgoing_write> write_log::replay(const std::function<store_op()>& counters) {
  // Every write queued again goes in one write, in order: the store commits it whole or not at
  // all. It only puts back what the engine had already decided, so it never counts as admitting
  // (a store low on space takes it).
  std::optional<outgoing_write> out;
  bool with_counters = false;
  for (auto id : outbox_) {
    auto* e = find(id);
    if (!e || e->st != state::waiting) continue;
    if (!out) {
      out.emplace(outgoing_write{id, store_write{{}, sync_, false}});
      ++in_flight_;
    }
    e->st = state::sent;
    e->queued = false;
    e->bundle = out->id;
    out->write.shared.push_back(e->ops);
    with_counters = with_counters || e->w.counters;
  }
  outbox_.clear();
  if (out && with_counters) out->write.ops.push_back(counters());
  return out;
}

void write_log::abandon(const error& why) {
  for (auto& e : entries_) {
    e.w.patient = false;  // nothing will be retried: everyone hears now
    answer(e, why);
  }
  entries_.clear();
  outbox_.clear();
  retry_at_.reset();
}

void write_log::check_invariants() const {
  std::size_t sent = 0;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    if (i > 0) LANEQ_ASSERT(e.id > entries_[i - 1].id, "ids increase from the front");
    if (e.st == state::sent && (e.bundle == 0 || e.bundle == e.id)) ++sent;
    if (e.bundle != 0) LANEQ_ASSERT(e.st == state::sent, "only a write in flight is in a replay");
  }
  LANEQ_ASSERT(sent == in_flight_, "every sent write is in flight until answered");
  LANEQ_ASSERT(!retry_at_ || parked_, "only a parked log retries");
  if (!entries_.empty() && !parked_)
    LANEQ_ASSERT(entries_.front().st != state::durable, "durable writes at the front settle");
}

}  // namespace laneq
