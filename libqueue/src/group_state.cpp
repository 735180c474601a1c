// The ordering group state machine (libqueue/include/laneq/group_state.hpp).
#include "laneq/group_state.hpp"

#include <algorithm>

namespace laneq {

std::string_view to_string(dead_letter_reason x) {
  switch (x) {
    case dead_letter_reason::max_attempts: return "max_attempts";
    case dead_letter_reason::requested: return "requested";
    case dead_letter_reason::expired: return "expired";
  }
  return "?";
}

std::string_view to_string(group_status x) {
  switch (x) {
    case group_status::ready: return "ready";
    case group_status::in_flight: return "in_flight";
    case group_status::retry_wait: return "retry_wait";
    case group_status::delayed: return "delayed";
    case group_status::throttled: return "throttled";
    case group_status::idle: return "idle";
    case group_status::corrupt: return "corrupt";
    case group_status::reclaim_grace: return "reclaim_grace";
  }
  return "?";
}

group_effects group_state::on_arrivals(std::span<message> msgs, timestamp now, bool grow) {
  group_effects fx;
  const auto room = grow ? window_max_ : window_;
  for (auto& m : msgs) {
    LANEQ_ASSERT(loaded_ < m.seq, "messages enter a group in arrival order");
    ++received_;
    if (stored_only_ > 0 || messages_.size() >= room) {
      ++stored_only_;  // the store has it; it is read back in order when the window drains
      told_ = m.seq;
      continue;
    }
    push(std::move(m));
  }
  if (phase_ == phase::empty && !messages_.empty()) {
    since_ = now;
    offer_head(fx);
  }
  return fx;
}

group_effects group_state::on_stored_beyond(std::size_t count, timestamp now, bool grow) {
  stored_only_ += count;
  received_ += count;
  told_ = message_seq{~std::uint64_t{0}};  // a recovered lane: the count bounds the fetch
  group_effects fx;
  if (phase_ == phase::empty) since_ = now;
  maybe_fetch(fx, grow);
  return fx;
}

group_effects group_state::on_fetched(std::vector<message> msgs, timestamp now, bool grow) {
  const bool short_answer = msgs.size() < fetch_max_;
  const bool ran_past = !msgs.empty() && msgs.back().seq > told_;
  take_fetched(std::move(msgs));
  if (stored_only_ > 0 && (short_answer || ran_past)) {
    // The store holds fewer messages than the group counted: they were deleted under it (the
    // queue was dropped). Nothing more can arrive from the store.
    stored_only_ = 0;
  }
  return after_fetch(now, grow);
}

group_effects group_state::on_corrupt(std::vector<message> before, std::string reason,
                                      timestamp now, bool grow) {
  corrupt_ = std::make_unique<const std::string>(std::move(reason));
  take_fetched(std::move(before));
  return after_fetch(now, grow);  // not idle: the bad record and what follows stay counted
}

void group_state::take_fetched(std::vector<message> msgs) {
  fetching_ = false;
  for (auto& m : msgs) {
    // Later arrivals the group has not been told about yet come with their own enqueue.
    if (stored_only_ == 0 || m.seq > told_) break;
    if (m.seq <= loaded_) continue;
    --stored_only_;
    push(std::move(m));
  }
}

group_effects group_state::after_fetch(timestamp now, bool grow) {
  group_effects fx;
  if (phase_ == phase::empty) {
    since_ = now;
    if (messages_.empty()) {
      fx.idle = stored_only_ == 0;
    } else {
      offer_head(fx);
    }
  }
  maybe_fetch(fx, grow);
  return fx;
}

group_effects group_state::retry_fetch(bool grow) {
  group_effects fx;
  maybe_fetch(fx, grow);
  return fx;
}

void group_state::maybe_fetch(group_effects& fx, bool grow) {
  if (fetching_ || corrupt_ || stored_only_ == 0 || messages_.size() > window_ / 2) return;
  fetching_ = true;
  // No more than one store scan returns: a scan capped below the ask would look like a short
  // answer, and the group would take the rest of its stored messages for deleted.
  const auto room = grow ? window_max_ : window_;
  fetch_max_ = static_cast<std::uint32_t>(std::min(
      {stored_only_, room - messages_.size(), static_cast<std::size_t>(limits::store_scan_max)}));
  fx.fetch = fetch_request{loaded_, fetch_max_};
}

void group_state::push(message m) {
  loaded_ = m.seq;
  messages_.push_back(held_message{std::move(m)});
  memory_bytes_ += messages_.back().footprint();
}

void group_state::pop_head() {
  memory_bytes_ -= messages_.front().footprint();
  messages_.pop_front();
}

void group_state::on_restored_lease(const lease_token& lease, timestamp deadline, timestamp now,
                                    std::size_t count, std::uint32_t acked) {
  LANEQ_ASSERT(phase_ == phase::offered && count >= 1 && messages_.size() >= count,
               "a restored lease is on the offered head and the messages behind it in memory");
  LANEQ_ASSERT(acked > 0 || messages_.front().id == lease.msg,
               "a restored lease is on the offered head, unless a part of its batch was acked");
  LANEQ_ASSERT(count + acked == lease.batch, "a restored batch is what its lease covered");
  LANEQ_ASSERT(restorable(count, acked), "a restored batch has no attempt after its lease");
  // Only the batch's first message may have failed attempts before; the others were delivered
  // once, in this batch.
  messages_.front().attempts = acked == 0 ? lease.attempt : 1;
  for (std::size_t i = 1; i < count; ++i) messages_[i].attempts = 1;
  start_lease(lease, deadline, now, count, acked);
}

bool group_state::restorable(std::size_t count, std::uint32_t acked) const {
  if (count == 0 || messages_.size() < count) return false;
  for (std::size_t i = acked == 0 ? 1 : 0; i < count; ++i)
    if (messages_[i].attempts > 0) return false;
  return true;
}

void group_state::start_lease(const lease_token& lease, timestamp deadline, timestamp now,
                              std::size_t count, std::uint32_t acked) {
  phase_ = phase::in_flight;
  if (!lease_) lease_ = std::make_unique<lease_state>();
  lease_->current = lease;
  lease_->deadline = deadline;
  since_ = now;
  lease_->batch = static_cast<std::uint32_t>(count);
  lease_->acked = acked;
}

std::size_t group_state::batchable(std::size_t max, timestamp now, timestamp expired_by) const {
  LANEQ_ASSERT(phase_ == phase::offered && !messages_.empty(), "a batch starts at an offered head");
  std::size_t n = 1;
  // Behind the head, in memory and in arrival order, within the group's window (what a restart
  // reads back, so a reclaimed batch is whole in memory); a message whose not-before time lies
  // ahead holds back everything behind it (O10). A message with failed attempts ends the batch
  // before it: after a restart one can sit behind the head (its failed attempt's write committed,
  // the earlier ack of the head lost with the crash, persistence.md P11), and only a batch's first
  // message may have been attempted before.
  max = std::min<std::size_t>(max, window_);
  while (n < max && n < messages_.size() && messages_[n].not_before <= now &&
         messages_[n].entered_at() > expired_by && messages_[n].attempts == 0)
    ++n;
  return n;
}

void group_state::offer_head(group_effects& fx) {
  LANEQ_ASSERT(!messages_.empty(), "offer needs a head");
  LANEQ_ASSERT(!leased(), "no head is offered while one is in flight");
  phase_ = phase::offered;
  fx.offer = &messages_.front();
}

void group_state::on_delivered(const lease_token& lease, timestamp deadline, timestamp now,
                               std::size_t count) {
  LANEQ_ASSERT(phase_ == phase::offered, "only an offered head is delivered");
  LANEQ_ASSERT(!messages_.empty() && lease.msg == messages_.front().id,
               "the delivered message is the group's head");
  LANEQ_ASSERT(count >= 1 && count <= messages_.size() && lease.batch == count,
               "a batch is the head and messages behind it in memory, and its lease says how many");
  auto& head = messages_.front();
  LANEQ_ASSERT(lease.attempt == head.attempts + 1, "a delivery is the head's next attempt");
  head.attempts = lease.attempt;
  for (std::size_t i = 1; i < count; ++i) {
    LANEQ_ASSERT(messages_[i].attempts == 0 && messages_[i].not_before <= now,
                 "a batch takes messages behind the head that are due and were never attempted");
    messages_[i].attempts = 1;
  }
  start_lease(lease, deadline, now, count, 0);
}

result<ok_t> group_state::check_lease(const lease_token& lease) const {
  const auto* held = lease_.get();
  if (held && held->current == lease) return ok_t{};
#ifdef LANEQ_CANARY_STALE_LEASE
  // Canary build (tests/sim): the previous attempt's lease still works once the head is in
  // flight again, so a stale lease is accepted (breaks O5).
  if (held && held->last == lease && phase_ == phase::in_flight) return ok_t{};
#endif
  if (held && held->last == lease && !messages_.empty() &&
      messages_.front().id == held->failed_head)
    return error{errc::lease_expired,
                 "lease " + to_string(lease) + " expired; the message went back to its group"};
  return error{errc::lease_not_found, "no lease " + to_string(lease) + " is in flight"};
}

namespace {

/// A `count` or `from` outside the batch's messages not acked yet (O12): it must be `lo` to
/// `hi`.
error out_of_batch(const char* what, std::uint32_t value, std::uint32_t lo, std::uint32_t hi,
                   std::uint32_t acked, const lease_token& lease) {
  auto text = std::string{what} + " " + std::to_string(value) + " is out of range for lease " +
              to_string(lease) + ": it counts from the batch's first message as delivered (" +
              "batch_index 0), ";
  if (acked > 0)
    text += "messages 0 to " + std::to_string(acked - 1) + " of its batch of " +
            std::to_string(lease.batch) + " are acked already, ";
  return error{errc::invalid_argument, text + "so it must be " + std::to_string(lo) +
                                           (lo == hi ? "" : " to " + std::to_string(hi))};
}

}  // namespace

void group_state::pop_acked(group_effects& fx, std::uint32_t upto) {
  for (; lease_->acked < upto; ++lease_->acked, --lease_->batch) {
    fx.removed.push_back(messages_.front().seq);
    fx.removed_bytes += messages_.front().body.size();
    pop_head();
  }
}

result<group_effects> group_state::on_ack(const lease_token& lease, timestamp now, bool grow,
                                          std::optional<std::uint32_t> count) {
  if (auto ok = check_lease(lease); !ok) return ok.err();
  auto& held = *lease_;
  auto end = held.acked + held.batch;
  auto upto = count.value_or(end);
  if (upto <= held.acked || upto > end)
    return out_of_batch("ack: count", upto, held.acked + 1, end, held.acked, lease);
  group_effects fx;
  pop_acked(fx, upto - 1);
  if (upto < end) {
    // A prefix: the lease goes on over the rest of the batch (O12).
    fx.removed.push_back(messages_.front().seq);
    fx.removed_bytes += messages_.front().body.size();
    pop_head();
    ++held.acked;
    --held.batch;
    fx.batch_rest = true;
    maybe_fetch(fx, grow);
    return fx;
  }
  fx.removed.push_back(messages_.front().seq);
  fx.removed_bytes += messages_.front().body.size();
  advance(fx, now, grow);
  return fx;
}

result<group_effects> group_state::on_nack(const lease_token& lease, nack_kind kind,
                                           duration retry_after, timestamp now, bool grow,
                                           std::optional<std::uint32_t> from) {
  if (auto ok = check_lease(lease); !ok) return ok.err();
  const auto& held = *lease_;
  auto at = from.value_or(held.acked);
  if (at < held.acked || at >= held.acked + held.batch)
    return out_of_batch("nack: from", at, held.acked, held.acked + held.batch - 1, held.acked,
                        lease);
  group_effects fx;
  pop_acked(fx, at);  // the messages before the one that failed are done
  if (kind == nack_kind::dead_letter)
    return fail_batch(std::move(fx), now, duration{0}, dead_letter_reason::requested, true, grow);
  return fail_batch(std::move(fx), now, retry_after, dead_letter_reason::max_attempts, false, grow);
}

result<timestamp> group_state::on_extend(const lease_token& lease, duration by, timestamp now) {
  if (auto ok = check_lease(lease); !ok) return ok.err();
  lease_->deadline = now + by;
  return lease_->deadline;
}

group_effects group_state::on_lease_timer(timestamp now, std::optional<timestamp>* rearm,
                                          bool grow) {
  if (phase_ != phase::in_flight) return {};
  if (lease_->deadline > now) {
    if (rearm) *rearm = lease_->deadline;
    return {};
  }
  // A failed attempt of the batch's first message not acked; the rest go back behind it (O12).
  return fail_batch({}, now, duration{0}, dead_letter_reason::max_attempts, false, grow);
}

void group_state::return_behind() {
  auto& batch = lease_->batch;
  for (std::uint32_t i = 1; i < batch; ++i) messages_[i].attempts = 0;
  batch = batch > 0 ? 1 : 0;
}

group_effects group_state::fail_batch(group_effects fx, timestamp now, duration retry_after,
                                      dead_letter_reason reason, bool force_dead_letter,
                                      bool grow) {
#ifdef LANEQ_CANARY_BATCH_SKIP
  bool returned = lease_->batch > 1;
#endif
  return_behind();
  fx = fail_head(std::move(fx), now, retry_after, reason, force_dead_letter, grow);
#ifdef LANEQ_CANARY_BATCH_SKIP
  // Canary build (tests/sim/engine): the message a batch returned behind a retried one goes
  // back ahead of it, so the group delivers out of order (breaks O12, G3). The places keep
  // their seq and attempts, so the window still looks in order to the group's own checks.
  if (returned && fx.dead_letters.empty() && messages_.size() > 1) {
    auto& head = messages_[0];
    auto& next = messages_[1];
    std::swap(head, next);
    std::swap(head.seq, next.seq);
    std::swap(head.attempts, next.attempts);
    fx.offer = &head;
  }
#endif
  return fx;
}

group_effects group_state::fail_head(group_effects fx, timestamp now, duration retry_after,
                                     dead_letter_reason reason, bool force_dead_letter, bool grow) {
  LANEQ_ASSERT(phase_ == phase::in_flight && leased() && lease_->batch == 1,
               "only an in-flight head, alone in flight, can fail");
  auto& head = messages_.front();
  if (force_dead_letter || head.attempts >= max_attempts_) {
    fx.dead_letters.push_back(dead_letter{head.unpack(), reason, now});
    advance(fx, now, grow);
    return fx;
  }
  // The lease ends; its token is remembered until the head leaves (lease_expired).
  lease_->last = lease_->current;
  lease_->failed_head = head.id;
  lease_->current.reset();
  lease_->batch = 0;
  lease_->acked = 0;
#ifdef LANEQ_CANARY
  // Canary build (tests/sim): a deliberately broken rule the simulation must catch. A retry
  // ignores retry_after, so the group's head comes back before its not-before time (breaks O6).
  retry_after = duration{0};
#endif
  head.not_before = now + retry_after;
  since_ = now;
  fx.updated = head.unpack();
#ifdef LANEQ_CANARY_REORDER
  // Canary build (tests/sim): a retried head swaps places with the message behind it, so the
  // group delivers out of order (breaks G3). The places keep their seq and attempts, so the
  // window still looks in order to the group's own checks. Only a next message that is ready
  // jumps ahead, so the first thing seen is the out-of-order delivery.
  if (messages_.size() > 1 && messages_[1].not_before <= now) {
    auto& next = messages_[1];
    std::swap(head, next);
    std::swap(head.seq, next.seq);
    std::swap(head.attempts, next.attempts);
  }
#endif
  offer_head(fx);
  return fx;
}

void group_state::advance(group_effects& fx, timestamp now, bool grow) {
  LANEQ_ASSERT(phase_ == phase::in_flight, "the head leaves only after it was delivered");
  pop_head();
  after_head(fx, now, grow);
}

void group_state::after_head(group_effects& fx, timestamp now, bool grow) {
  // The head is gone, and with it every lease it had. A group that goes on delivering keeps the
  // lease's room (one allocation less per delivery); an empty one frees it (ADR 0009).
  if (messages_.empty())
    lease_.reset();
  else if (lease_)
    *lease_ = lease_state{};
  since_ = now;
  if (messages_.empty()) {
    phase_ = phase::empty;
    fx.idle = stored_only_ == 0;  // otherwise the next head is being read back
  } else {
    offer_head(fx);
  }
  maybe_fetch(fx, grow);
}

group_effects group_state::on_expire(timestamp cutoff, bool drop, timestamp now, bool grow) {
  group_effects fx;
  if (leased()) return fx;
  bool gone = false;
  while (!messages_.empty() && messages_.front().entered_at() <= cutoff) {
    auto& head = messages_.front();
    memory_bytes_ -= head.footprint();
    if (drop) {
      fx.removed.push_back(head.seq);
      fx.removed_bytes += head.body.size();
    } else {
      fx.dead_letters.push_back(
          dead_letter{std::move(head).take(), dead_letter_reason::expired, now});
    }
    messages_.pop_front();
    gone = true;
  }
  if (gone) after_head(fx, now, grow);
  return fx;
}

std::uint64_t group_state::on_purge(std::size_t keep, timestamp now) {
  LANEQ_ASSERT(keep >= batch_left() && keep <= messages_.size(),
               "a purge keeps what is in flight, and only what memory holds");
  std::uint64_t gone = stored_only_ + (messages_.size() - keep);
  while (messages_.size() > keep) {
    memory_bytes_ -= messages_.back().footprint();
    messages_.pop_back();
  }
  stored_only_ = 0;
  fetching_ = false;  // the engine drops what a read under way returns
  corrupt_.reset();   // a corrupt record is erased with the rest
  if (!messages_.empty()) {
    loaded_ = messages_.back().seq;
    return gone;
  }
  phase_ = phase::empty;
  lease_.reset();  // a failed lease of the head goes with it
  since_ = now;
  return gone;
}

group_info group_state::describe(timestamp now) const {
  group_info info;
  info.backlog = backlog();
  info.since = since_;
  if (corrupt_) info.reason = *corrupt_;  // also while it still delivers the messages ahead of it
  if (messages_.empty()) {
    // Idle, or reading its next head back from the store, or stopped at a corrupt record.
    info.state = corrupt_ ? group_status::corrupt : group_status::idle;
    return info;
  }
  const auto& head = messages_.front();
  info.head = head.id;
  if (phase_ == phase::in_flight) {
    info.state = group_status::in_flight;
    info.until = lease_->deadline;
  } else if (head.not_before > now) {
    info.state = head.attempts > 0 ? group_status::retry_wait : group_status::delayed;
    info.until = head.not_before;
    if (info.state == group_status::delayed) info.since = head.enqueued_at;
  } else {
    info.state = group_status::ready;
  }
  return info;
}

void group_state::check_invariants() const {
  LANEQ_ASSERT((phase_ == phase::empty) == messages_.empty(), "empty phase iff no messages");
  const auto current = lease();
  const auto batch = batch_left();
  const auto acked = batch_acked();
  LANEQ_ASSERT((phase_ == phase::in_flight) == current.has_value(),
               "a lease exists iff the head is in flight");
  LANEQ_ASSERT(!lease_ || !messages_.empty(),
               "a group keeps a lease state only while it holds messages");
  LANEQ_ASSERT(current ? batch >= 1 && batch <= messages_.size() : batch == 0 && acked == 0,
               "a lease covers the head and messages behind it in memory; no lease, none");
  if (current) {
    LANEQ_ASSERT(batch + acked == current->batch, "a lease covers what its batch was");
    if (acked == 0) {
      LANEQ_ASSERT(current->msg == messages_.front().id, "the lease is on the head");
      LANEQ_ASSERT(current->attempt == messages_.front().attempts,
                   "the lease is the head's attempt");
    }
  }
  LANEQ_ASSERT(messages_.size() <= window_max_, "a group keeps at most window_max in memory");
  LANEQ_ASSERT(window_ >= 2 && window_ <= window_max_, "2 <= window <= window_max");
  if (!messages_.empty())
    LANEQ_ASSERT(messages_.back().seq == loaded_, "the last loaded message is the window's last");
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < messages_.size(); ++i) {
    bytes += messages_[i].footprint();
    if (i == 0) {
      LANEQ_ASSERT(acked == 0 || messages_[0].attempts == 1,
                   "a batch's message behind its first was delivered once");
      continue;
    }
    LANEQ_ASSERT(messages_[i - 1].seq < messages_[i].seq, "a group is in arrival order");
    // Behind the batch, a message may carry failed attempts only when a restart brought it back
    // so (see batchable); none is delivered until it is the head.
    if (i < batch)
      LANEQ_ASSERT(messages_[i].attempts == 1,
                   "a batch's messages behind its head were delivered once, in it");
  }
  LANEQ_ASSERT(bytes == memory_bytes_, "memory_bytes is the footprint of the messages held");
}

}  // namespace laneq
