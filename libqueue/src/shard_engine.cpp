// The shard engine's requests and its contract with the store and the clock
// (libqueue/include/laneq/shard_engine.hpp). Admission, groups, deliveries and recovery each have
// their own file (shard_admission.cpp, shard_groups.cpp, shard_delivery.cpp, shard_recovery.cpp).
#include <algorithm>
#include <unordered_set>

#include "laneq/message_checks.hpp"
#include "laneq/sharding.hpp"
#include "shard_parts.hpp"

namespace laneq {

namespace {

error lease_missing(const lease_token& l) {
  return error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"};
}

/// Answers `r` with the write's outcome: `ok` once durable, else the store's error.
template <class T>
std::function<void(std::optional<error>)> answer_with(
    std::function<void(request_id, engine_answer)> reply, request_id r, T ok, std::string queue) {
  return [reply = std::move(reply), r, ok = std::move(ok),
          queue = std::move(queue)](std::optional<error> e) mutable {
    if (e)
      reply(r, storage_failure(queue, std::move(*e)));
    else
      reply(r, std::move(ok));
  };
}

}  // namespace

shard_engine::shard_engine(shard_config cfg)
    : cfg_(std::move(cfg)),
      durable_(cfg_.spec.delivery_mode() == delivery_durability::durable),
      writes_(cfg_.sync, cfg_.store_retry),
      sched_(cfg_.spec.throttles()),
      dedupe_(cfg_.dedupe_entries_max) {
  // Group ids of different broker runs never meet: a token from before a restart cannot name a
  // group of this run by accident.
  next_group_ = (cfg_.epoch << 32) + 1;
  // Message ids carry the shard's index in their high 16 bits.
  next_id_ = first_id_of_shard(cfg_.shard);
}

shard_engine::~shard_engine() = default;

void shard_engine::reply(request_id r, engine_answer a) {
  fx_.replies.push_back(engine_reply{r, std::move(a)});
}

void shard_engine::read(read_slot slot, std::string from, std::string to, std::uint32_t max) {
  auto id = next_read_++;
  reads_.emplace(id, slot);
  fx_.reads.push_back(engine_read{id, std::move(from), std::move(to), max});
}

void shard_engine::hold(request_id r, std::function<void()> f) {
  held_.push_back(held_request{r, std::move(f)});
}

void shard_engine::release_held() {
  while (!held_.empty() && !recovery_) {
    auto f = std::move(held_.front().run);
    held_.pop_front();
    f();
  }
}

std::optional<error> shard_engine::original_failed(const admitted& a) const {
  for (const auto& key : a.waits_on)
    if (auto hit = dedupe_.find(key, last_now_); !hit || !hit->confirmed)
      return error{errc::storage_failed,
                   "queue '" + cfg_.spec.name() +
                       "': the enqueue of a message this batch repeats failed; send it again"};
  return std::nullopt;
}

// -- requests ------------------------------------------------------------------------------------

void shard_engine::enqueue(request_id r, std::vector<outgoing_message> batch, timestamp now) {
  catch_up(now);
  if (recovery_)
    return hold(r, [this, r, batch = std::move(batch)]() mutable {
      enqueue(r, std::move(batch), last_now_);
    });
  auto adm = admit(batch, last_now_, nullptr);
  if (!adm) {
    counters_.rejected += batch.size();
    reply(r, adm.err());
    return;
  }
  auto a = std::make_shared<admitted>(std::move(adm).value());
  if (a->batch.empty() && a->ops.empty()) {
    // Only duplicates: answered at once, or once their originals' writes are durable (in order).
    writes_.add_durable(
        [this, r, a] {
          if (auto failed = original_failed(*a)) return reply(r, std::move(*failed));
          counters_.deduplicated += a->duplicates;
          reply(r, std::move(a->ids));
        },
        last_now_);
    return;
  }
  write_request w;
  w.admits = true;
  w.counters = true;
  w.ops = std::move(a->ops);
  w.ops.reserve(w.ops.size() + a->batch.size());
  for (const auto& p : a->batch) {
#if LANEQ_CANARY_LOST
    // Canary build (tests/sim): an enqueue's unordered messages are answered but never stored,
    // so a crash loses them (breaks G1/G2).
    if (!p.where.ordered) continue;
#endif
    w.ops.push_back(put_message(cfg_.uid, p.lane, p.msg));
  }
  w.answer = [this, r](std::optional<error> e) {
    if (e) reply(r, storage_failure(cfg_.spec.name(), std::move(*e)));
  };
  w.settle = [this, r, a](bool durable) {
    settle_dedupe(*a, durable);
    admitted_settled(*a, durable);
    if (!durable) return;  // answered with the error
    counters_.enqueued += a->batch.size();
    counters_.deduplicated += a->duplicates;
    // Routed before the answer: a receive sent after it finds the messages.
    route(std::move(a->batch), last_now_);
    if (auto failed = original_failed(*a)) return reply(r, std::move(*failed));
    reply(r, std::move(a->ids));
  };
  writes_.add(std::move(w));
}

void shard_engine::receive(request_id r, const receive_request& req, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, req] { receive(r, req, last_now_); });
  if (auto err =
          check_receive(req.max, req.lease_us, req.wait_us, cfg_.spec.lease_duration(), req.batch))
    return reply(r, std::move(*err));
  auto t = last_now_;
  auto lease = req.lease_us == 0 ? cfg_.spec.lease_duration() : duration{req.lease_us};
  bool waits = false;
  auto out = take(req.max, req.batch, lease, t, waits);
  reading_receive rr{r, req.max, req.batch, lease, t + duration{req.wait_us}, std::move(out)};
  if (waits && rr.out.size() < rr.max)
    wait_for_read(std::move(rr), t);  // takes on once its class is read back
  else
    finish_receive(std::move(rr), t);
}

void shard_engine::ack(request_id r, const std::vector<lease_token>& leases, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, leases] { ack(r, leases, last_now_); });
  if (leases.empty() || leases.size() > limits::ack_batch_max) {
    reply(r, error{errc::invalid_argument, "ack: a batch holds 1 to " +
                                               std::to_string(limits::ack_batch_max) +
                                               " leases, got " + std::to_string(leases.size())});
    return;
  }
  auto t = last_now_;
  std::vector<store_op> ops;
  std::vector<lease_outcome> failed;
  std::vector<group_id> touched;
  ops.reserve(leases.size());
  touched.reserve(leases.size());
  for (const auto& l : leases) ack_one(l, t, ops, failed, touched);
  if (ops.empty()) {
    reply(r, std::move(failed));
    serve_pending(t);
    return;
  }
  // One write for the batch; each group it ended offers its next head once it is durable.
  for (auto id : touched) ++find_group(id)->unsettled;
  write_request w;
  w.ops = std::move(ops);
  w.answer = answer_with([this](request_id to, engine_answer a) { reply(to, std::move(a)); }, r,
                         std::move(failed), cfg_.spec.name());
  w.settle = [this, touched = std::move(touched)](bool) {
    for (auto id : touched)
      if (auto* g = find_group(id)) {
        --g->unsettled;
        offer_when_settled(*g, last_now_);
      }
  };
  writes_.add(std::move(w));
  serve_pending(t);
}

void shard_engine::nack(request_id r, const lease_token& l, const nack_request& req,
                        timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, l, req] { nack(r, l, req, last_now_); });
  if (req.kind != nack_kind::retry && req.kind != nack_kind::dead_letter)
    return reply(r, error{errc::invalid_argument, "nack: kind must be retry or dead_letter"});
  if (req.retry_after_us < 0 || duration{req.retry_after_us} > limits::retry_after_max)
    return reply(r, error{errc::invalid_argument,
                          "nack: retry_after_ms must be between 0 and " +
                              std::to_string(limits::retry_after_max.count() / 1000)});
  auto t = last_now_;
  auto answer = answer_with([this](request_id to, engine_answer a) { reply(to, std::move(a)); }, r,
                            ok_t{}, cfg_.spec.name());
  bool dead = req.kind == nack_kind::dead_letter;
  std::optional<std::uint32_t> from;
  if (req.from != nack_request::first_unacked) from = req.from;
  if (!l.group) {
    if (from && *from != 0)
      return reply(r, error{errc::invalid_argument,
                            "nack: from " + std::to_string(*from) + " is out of range for lease " +
                                to_string(l) + ", a single message (batch_index 0)"});
    auto m = leases_.release(l);
    if (!m) return reply(r, m.err());
    ++counters_.nacked;
    bool moved = false;
    write_request w;
    w.ops = end_attempt(
        l, retry_or_dead_letter(std::move(m).value(), duration{req.retry_after_us}, dead, t, moved),
        durable());
    w.counters = moved;
    w.patient = moved;
    w.answer = std::move(answer);
    // Written before a waiting receive takes the message again (serve_pending): its new durable
    // lease must not meet this nack's erase of the old one (both are keyed by the message).
    writes_.add(std::move(w));
    serve_pending(t);
    return;
  }
  auto* g = owner_of(l);
  if (!g) return reply(r, lease_missing(l));
  reclaim(*g, l, t);
  expire_if_due(*g, t);
  bool recorded = lease_recorded(*g);
  auto fx = g->state.on_nack(l, req.kind, duration{req.retry_after_us}, t, window_for(*g), from);
  if (!fx) return reply(r, fx.err());
  ++counters_.nacked;
  group_leases_.erase(g->state.id());
  auto w = apply(*g, std::move(fx).value());
  w.ops = end_attempt(l, std::move(w.ops), recorded);
  write_for(*g, std::move(w), std::move(answer), t);
  serve_pending(t);
}

void shard_engine::ack(request_id r, const lease_token& l, std::uint32_t count, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, l, count] { ack(r, l, count, last_now_); });
  auto t = last_now_;
  if (!l.group) {
    // A single message: count 1 is its ack.
    if (count != 1)
      return reply(r, error{errc::invalid_argument,
                            "ack: count " + std::to_string(count) + " is out of range for lease " +
                                to_string(l) + ", a single message, so it must be 1"});
    auto ops = ack_unordered(l, t);
    if (!ops) return reply(r, ops.err());
    write_request w;
    w.ops = std::move(ops).value();
    w.answer = answer_with([this](request_id to, engine_answer a) { reply(to, std::move(a)); }, r,
                           std::uint64_t{1}, cfg_.spec.name());
    writes_.add(std::move(w));
    return serve_pending(t);
  }
  auto* g = owner_of(l);
  if (!g) return reply(r, lease_missing(l));
  reclaim(*g, l, t);
  expire_if_due(*g, t);
  bool recorded = lease_recorded(*g);
  auto leased_at = g->state.since();
  auto fx = g->state.on_ack(l, t, window_for(*g), count);
  if (!fx) return reply(r, fx.err());
  auto rest = fx.value().batch_rest;
  auto acked = static_cast<std::uint64_t>(fx.value().removed.size());
  count_ack(leased_at, t, acked);
  if (!rest) group_leases_.erase(g->state.id());
  auto w = apply(*g, std::move(fx).value());
  // The rest of the batch stays leased: its record says so, also in fast delivery, where the
  // token no longer names the group's head (a restart reads it back, recovery.md R6, R7).
  if (rest)
    w.ops.push_back(put_lease(cfg_.uid, record_of(*g)));
  else
    w.ops = end_attempt(l, std::move(w.ops), recorded);
  write_for(*g, std::move(w),
            answer_with([this](request_id to, engine_answer a) { reply(to, std::move(a)); }, r,
                        acked, cfg_.spec.name()),
            t);
  serve_pending(t);
}

void shard_engine::extend(request_id r, const lease_token& l, std::int64_t by_us, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, l, by_us] { extend(r, l, by_us, last_now_); });
  if (duration{by_us} < limits::lease_min || duration{by_us} > limits::lease_max)
    return reply(r, error{errc::invalid_argument,
                          "extend: lease_ms must be between " +
                              std::to_string(limits::lease_min.count() / 1000) + " and " +
                              std::to_string(limits::lease_max.count() / 1000)});
  auto t = last_now_;
  if (!l.group) {
    auto deadline = leases_.extend(l, duration{by_us}, t);
    if (!deadline) return reply(r, deadline.err());
    if (!durable()) return reply(r, deadline.value());
    // Durable delivery: the new deadline is committed before it is promised.
    write_request w;
    w.ops.push_back(
        put_lease(cfg_.uid, codec::lease_record{l, deadline.value(), leases_.leased(l)->seq}));
    w.answer = answer_with([this](request_id to, engine_answer a) { reply(to, std::move(a)); }, r,
                           deadline.value(), cfg_.spec.name());
    writes_.add(std::move(w));
    return;
  }
  auto* g = owner_of(l);
  if (!g) return reply(r, lease_missing(l));
  reclaim(*g, l, t);
  expire_if_due(*g, t);
  auto deadline = g->state.on_extend(l, duration{by_us}, t);
  if (!deadline) return reply(r, deadline.err());
  group_leases_.set(g->state.id(), deadline.value());
  if (!durable()) return reply(r, deadline.value());
  group_write w;
  w.ops.push_back(put_lease(cfg_.uid, record_of(*g)));
  write_for(*g, std::move(w),
            answer_with([this](request_id to, engine_answer a) { reply(to, std::move(a)); }, r,
                        deadline.value(), cfg_.spec.name()),
            t);
}

void shard_engine::watch(request_id r, timestamp deadline, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, deadline] { watch(r, deadline, last_now_); });
  if (watchers_.size() >= limits::pending_receives_max)
    return reply(r, error{errc::limit_exceeded,
                          "receive: more than " + std::to_string(limits::pending_receives_max) +
                              " receives are already waiting on queue '" + cfg_.spec.name() + "'"});
  watchers_.push_back(watcher{r, deadline});
  notify_watchers(last_now_);
}

// -- topics (docs/design/lanes.md L10) -----------------------------------------------------------

result<topic_prepared> shard_engine::prepare(std::vector<outgoing_message> batch,
                                             const std::vector<shared_json>& parsed,
                                             timestamp now) {
  catch_up(now);
  if (topic_batch_ || recovery_ || batch.size() != parsed.size())
    return error{errc::unavailable,
                 "queue '" + cfg_.spec.name() + "' is busy with another topic enqueue"};
  auto adm = admit(batch, last_now_, &parsed);
  if (!adm) {
    counters_.rejected += batch.size();
    return adm.err();
  }
  auto& a = adm.value();
  topic_prepared out{a.ids, a.ops, cfg_.sync};
  for (const auto& p : a.batch) out.ops.push_back(put_message(cfg_.uid, p.lane, p.msg));
  out.ops.push_back(counters_op());
  // Every other write of this shard waits for the topic's (seq and counter order).
  topic_batch_ = std::move(adm).value();
  writes_.hold();
  return out;
}

void shard_engine::settle(request_id r, bool committed, timestamp now) {
  catch_up(now);
  if (!topic_batch_) return reply(r, ok_t{});
  auto a = std::make_shared<admitted>(std::move(*topic_batch_));
  topic_batch_.reset();
  writes_.release();
  if (!committed) {
    settle_dedupe(*a, false);
    admitted_settled(*a, false);
    return reply(r, ok_t{});
  }
  // Durable already; routed in order after this shard's earlier writes.
  writes_.add_durable(
      [this, r, a] {
        settle_dedupe(*a, true);
        admitted_settled(*a, true);
        counters_.enqueued += a->batch.size();
        counters_.deduplicated += a->duplicates;
        route(std::move(a->batch), last_now_);
        reply(r, ok_t{});
      },
      last_now_);
}

// -- the store and time --------------------------------------------------------------------------

void shard_engine::on_written(std::uint64_t write, std::optional<error> failure, timestamp now) {
  last_now_ = std::max(last_now_, now);
  writes_.on_answer(write, std::move(failure), last_now_);
  catch_up(now);
}

void shard_engine::on_read(std::uint64_t read, result<std::vector<store_entry>> page,
                           timestamp now) {
  catch_up(now);
  auto it = reads_.find(read);
  LANEQ_ASSERT(it != reads_.end(), "the store answers a read that was asked for");
  auto slot = it->second;
  reads_.erase(it);
  switch (slot.kind) {
    case read_kind::fetch: return on_fetched(slot.group, std::move(page), last_now_);
    case read_kind::dead_list: return on_dead_list(slot.request, std::move(page));
    case read_kind::redrive_index:
      return on_redrive_index(slot.request, slot.index, std::move(page));
    case read_kind::redrive_dead: return on_redrive_dead(slot.request, std::move(page));
    case read_kind::unordered: return on_class_fetched(slot.index, std::move(page), last_now_);
    case read_kind::peek: return on_peek(slot.request, std::move(page));
    case read_kind::discarded: return;  // a purge made it moot
    case read_kind::recovery: break;
  }
  if (!page) {
    auto e = page.err();
    if (e.code == errc::unavailable) e.code = errc::storage_failed;
    return fail_recovery(std::move(e));
  }
  on_recovery_page(std::move(page).value(), last_now_);
}

void shard_engine::tick(timestamp now) {
  catch_up(now);
}

void shard_engine::stop(const error& why) {
  if (stopped_) return;
  stopped_ = true;
  for (auto& p : pending_) reply(p.r, why);
  pending_.clear();
  for (auto& rr : reading_) reply(rr.r, why);
  reading_.clear();
  pending_deadlines_.clear();
  for (auto& h : held_) reply(h.r, why);
  held_.clear();
  for (auto& w : watchers_) reply(w.r, why);
  watchers_.clear();
  for (auto& [r, op] : dead_ops_) reply(r, why);
  dead_ops_.clear();
  if (recover_request_) reply(*recover_request_, why);
  recover_request_.reset();
  writes_.abandon(why);
}

engine_effects shard_engine::take_effects() {
  notify_watchers(last_now_);
  drop_kept(last_now_);
  for (auto& w : writes_.take_outgoing([this] { return counters_op(); }))
    fx_.writes.push_back(std::move(w));
  std::optional<timestamp> next;
  auto consider = [&next](std::optional<timestamp> x) {
    if (x && (!next || *x < *next)) next = x;
  };
  if (!stopped_) {
    consider(writes_.next_wakeup());
    consider(sched_.next_wakeup());
    consider(leases_.next_deadline());
    consider(group_leases_.next());
    consider(holds_.next());
    consider(fetch_retries_.next());
    consider(class_retries_.next());
    consider(next_expiry());
    if (!kept_groups_.empty()) consider(kept_groups_.front().second + limits::kept_group_for);
    if (!pending_deadlines_.empty()) consider(*pending_deadlines_.begin());
    for (const auto& w : watchers_) consider(w.deadline);
  }
  fx_.wake = next;
  return std::exchange(fx_, engine_effects{});
}

// -- introspection -------------------------------------------------------------------------------

void shard_engine::measure(queue_stats& s, timestamp now) const {
  s.groups_by_state.assign(group_status_count, 0);
  std::unordered_set<group_id> throttled;
  for (const auto& w : sched_.waiting())
    if (w.throttled && w.group) throttled.insert(w.group);
  for (const auto& g : groups_) {
    if (g->kept) continue;
    auto state = g->state.describe(now).state;
    if (throttled.contains(g->state.id())) state = group_status::throttled;
    if (g->held) state = group_status::reclaim_grace;
    ++s.groups_by_state[static_cast<std::size_t>(state)];
  }
  // Unordered messages whose not-before time lies ahead (those due are moved at the next pick).
  auto unordered = std::distance(delayed_.upper_bound(now), delayed_.end());
  s.delayed = static_cast<std::uint64_t>(unordered) +
              s.groups_by_state[static_cast<std::size_t>(group_status::delayed)] +
              s.groups_by_state[static_cast<std::size_t>(group_status::retry_wait)];
  auto age = [now](timestamp since) { return std::max<std::int64_t>(0, (now - since).count()); };
  if (auto since = sched_.oldest_deliverable_since()) s.oldest_waiting_us = age(*since);
  if (dead_count_ > 0 && oldest_dead_at_) s.oldest_dead_letter_us = age(*oldest_dead_at_);
}

queue_stats shard_engine::stats(timestamp now) const {
  const auto& c = counters_;
  queue_stats s;
  s.name = cfg_.spec.name();
  s.enqueued = c.enqueued;
  s.delivered = c.delivered;
  s.acked = c.acked;
  s.nacked = c.nacked;
  s.lease_expired = c.lease_expired;
  s.dead_lettered = c.dead_lettered;
  s.redriven = c.redriven;
  s.purged = c.purged;
  s.dead_letters_deleted = c.dead_letters_deleted;
  s.expired_dead_lettered = c.expired_dead_lettered;
  s.expired_dropped = c.expired_dropped;
  s.dead_letters_expired = c.dead_letters_expired;
  s.key_missing = c.key_missing;
  s.rejected = c.rejected;
  s.recovered = c.recovered;
  s.deduplicated = c.deduplicated;
  s.refused_full = c.refused_full;
  s.backlog_bytes = depth_bytes_;
  s.dedupe_evictions = dedupe_.evictions();
  s.window_reads = c.window_reads;
  s.window_read_messages = c.window_read_messages;
  s.corrupt_records = c.corrupt_records;
  s.empty_receives = c.empty_receives;
  s.first_delivery = c.first_delivery;
  s.first_delivery_sum_us = c.first_delivery_sum_us;
  s.receive_to_ack = c.receive_to_ack;
  s.receive_to_ack_sum_us = c.receive_to_ack_sum_us;
  s.backlog = depth_messages();
  s.in_flight = leases_.size() + group_leases_.size();
  s.live_groups = live_groups();
  s.dead_letters = dead_count_;
  s.waiting_receives = waiting_receives();
  s.window_bytes = window_bytes_;
  measure(s, now);
  // The largest backlogs by name, the rest summed: a bounded number of metric series.
  std::vector<fairness_backlog> all;
  auto backlog = sched_.backlog_by_fairness_key();
  for (const auto& [key, cls] : classes_) backlog[cls->fairness_key] += cls->stored_only;
  for (auto& [k, n] : backlog) all.push_back(fairness_backlog{k, n, false});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.backlog != b.backlog ? a.backlog > b.backlog : a.key < b.key;
  });
  if (all.size() > limits::fairness_backlog_keys_max) {
    fairness_backlog rest{{}, 0, true};
    for (auto i = limits::fairness_backlog_keys_max; i < all.size(); ++i)
      rest.backlog += all[i].backlog;
    all.resize(limits::fairness_backlog_keys_max);
    all.push_back(std::move(rest));
  }
  s.fairness = std::move(all);
  return s;
}

result<groups_page> shard_engine::groups(const groups_query& q, timestamp now) const {
  if (q.limit == 0 || q.limit > limits::groups_page_max)
    return error{errc::invalid_argument,
                 "limit must be 1 to " + std::to_string(limits::groups_page_max)};
  if (!q.after.empty() && q.after.size() != 16)
    return error{errc::invalid_argument, "cursor is malformed"};
  std::array<std::uint8_t, 16> after{};
  std::copy(q.after.begin(), q.after.end(), after.begin());
  auto it = q.after.empty() ? group_by_lane_.begin() : group_by_lane_.upper_bound(after);
  // Bounded by the page: at most limit x groups_page_scan_factor groups examined.
  std::size_t examined_max = std::size_t{q.limit} * limits::groups_page_scan_factor;
  std::vector<const group_slot*> candidates;
  std::unordered_set<group_id> ids;
  for (std::size_t examined = 0; it != group_by_lane_.end() && examined < examined_max &&
                                 (q.blocked_only || candidates.size() < q.limit);
       ++it, ++examined) {
    const auto* g = &*it;
    if (g->kept) continue;
    candidates.push_back(g);
    ids.insert(g->state.id());
  }
  bool more = it != group_by_lane_.end();
  // A throttled head is known only to the scheduler; its group reports it ready.
  std::unordered_map<group_id, waiting_item> throttled;
  for (auto& w : sched_.waiting(ids))
    if (w.throttled) throttled.emplace(w.group, w);
  groups_page page;
  std::size_t i = 0;
  for (; i < candidates.size() && page.groups.size() < q.limit; ++i) {
    const auto* g = candidates[i];
    auto info = g->state.describe(now);
    info.key = g->label();
    if (auto w = throttled.find(g->state.id()); w != throttled.end()) {
      info.state = group_status::throttled;
      info.since = w->second.since;
      info.until = w->second.until;
    }
    // A recovered head held for its old lease holder (R6) is not offered until the grace ends.
    if (g->held) {
      info.state = group_status::reclaim_grace;
      info.until = holds_.deadline(g->state.id()).value_or(timestamp{});
    }
    if (q.blocked_only && (info.state == group_status::ready || info.state == group_status::idle))
      continue;
    page.groups.push_back(std::move(info));
  }
  // The cursor names the last group listed when the page is full, else the last one examined;
  // none when no group follows.
  bool full = page.groups.size() == q.limit;
  if (full && (i < candidates.size() || more)) {
    const auto& lane = candidates[i - 1]->lane.bytes;
    page.next.assign(lane.begin(), lane.end());
  } else if (!full && more && !candidates.empty()) {
    const auto& lane = candidates.back()->lane.bytes;
    page.next.assign(lane.begin(), lane.end());
  }
  return page;
}

void shard_engine::check_invariants() const {
  writes_.check_invariants();
  sched_.check_invariants();
  leases_.check_invariants();
  dedupe_.check_invariants();
  group_leases_.check_invariants();
  const auto scheduled = sched_.groups();
  std::unordered_set<group_id> held;  // heads taken by a receive that waits for a read-back
  for (const auto& rr : reading_)
    for (const auto& d : rr.out)
      if (d.lease.group) held.insert(d.lease.group);
  LANEQ_ASSERT(std::all_of(scheduled.begin(), scheduled.end(),
                           [this](group_id id) { return groups_.count(id) == 1; }),
               "the scheduler offers heads of live groups only");
  std::size_t kept = 0;
  std::size_t bytes = 0;
  for (const auto& g : groups_) {
    check_group_invariants(*g, scheduled, held);
    kept += g->kept ? 1u : 0u;
    bytes += g->charged;
  }
  bytes += check_class_invariants(scheduled.size());
  LANEQ_ASSERT(bytes == window_bytes_,
               "the window budget counts every group's and every class's memory");
  LANEQ_ASSERT(group_by_lane_.size() == groups_.size(), "one lane per group");
  LANEQ_ASSERT(kept == kept_count_, "the kept groups are counted");
  LANEQ_ASSERT(kept <= kept_groups_.size(), "every kept group has an entry");
  for (const auto& [key, g] : group_by_key_) {
    auto live = groups_.find(g->state.id());
    LANEQ_ASSERT(live != groups_.end() && live->get() == g, "every key names a live group");
  }
  LANEQ_ASSERT(pending_.size() == pending_deadlines_.size(), "each long poll has its deadline");
  for (const auto& [id, gid] : reclaimable_)
    LANEQ_ASSERT(groups_.count(gid) == 1, "reclaim names a live group");
  LANEQ_ASSERT(reclaims_.size() == reclaimable_.size(), "one reclaim entry per reclaimable head");
  for (const auto& [gid, rc] : reclaims_) {
    auto it = reclaimable_.find(rc.head);
    LANEQ_ASSERT(it != reclaimable_.end() && it->second == gid, "a reclaim entry names its head");
  }
}

void shard_engine::check_group_invariants(const group_slot& g,
                                          const std::unordered_set<group_id>& scheduled,
                                          const std::unordered_set<group_id>& held) const {
  const auto& s = g.state;
  const auto id = s.id();
  s.check_invariants();
  if (g.kept) {
    LANEQ_ASSERT(s.current_phase() == group_state::phase::empty && s.backlog() == 0 &&
                     g.unsettled == 0 && !g.held && !g.next && !g.scheduled,
                 "a kept group is empty and nothing waits on it");
    LANEQ_ASSERT(!group_leases_.deadline(id) && !holds_.deadline(id) && !reclaims_.count(id),
                 "a kept group has no lease, hold or reclaim");
  }
  auto filed = group_by_lane_.find(g.lane.bytes);
  LANEQ_ASSERT(filed != group_by_lane_.end() && &*filed == &g, "a group is filed under its lane");
  LANEQ_ASSERT(group_by_key_.at(*g.key) == &g, "a group is filed under its key");
  if (auto more = more_keys_.find(id); more != more_keys_.end())
    for (const auto& key : more->second)
      LANEQ_ASSERT(group_by_key_.at(key) == &g, "a group is filed under each of its keys");
  LANEQ_ASSERT(g.charged == s.memory_bytes(), "a group's memory is counted as it is");
  // The head is in exactly one place: offered to the scheduler, waiting for its writes or its
  // reclaim grace, or in flight (O3, O4).
  LANEQ_ASSERT(g.scheduled == (scheduled.count(id) == 1),
               "a group knows whether its head is in the scheduler");
  auto places = (g.scheduled ? 1 : 0) + (g.next ? 1 : 0) + (g.held ? 1 : 0);
  switch (s.current_phase()) {
    case group_state::phase::empty:
      LANEQ_ASSERT(places == 0, "an empty group offers nothing");
      LANEQ_ASSERT(!group_leases_.deadline(id), "an empty group holds no lease");
      break;
    case group_state::phase::offered:
      LANEQ_ASSERT(places == 1, "an offered head is in one place");
      LANEQ_ASSERT(!group_leases_.deadline(id), "an offered head holds no lease");
      break;
    case group_state::phase::in_flight:
      LANEQ_ASSERT(places == 0, "a head in flight is offered nowhere");
      LANEQ_ASSERT(held.count(id) == 1 ? !group_leases_.deadline(id)
                                       : group_leases_.deadline(id) == s.lease_deadline(),
                   "a head in flight has its deadline watched, unless a receive holds it");
      break;
  }
}

std::size_t shard_engine::check_class_invariants(std::size_t scheduled_groups) const {
  std::size_t queued = 0;
  std::size_t in_flight = 0;
  std::size_t delayed = 0;
  std::size_t bytes = 0;
  for (const auto& [key, c] : classes_) {
    LANEQ_ASSERT(c->live(), "a class lives while it has messages");
    LANEQ_ASSERT(c->key == key && class_by_id_.at(c->id) == c.get(), "a class is filed as it is");
    LANEQ_ASSERT(c->delayed <= c->queued, "a class's delayed messages are queued");
    LANEQ_ASSERT(c->stored_only == 0 || c->told > c->loaded,
                 "a class's messages in the store come after those in memory");
    queued += c->queued;
    in_flight += c->in_flight;
    delayed += c->delayed;
    bytes += c->bytes;
  }
  LANEQ_ASSERT(class_by_id_.size() == classes_.size(), "one id per class");
  for (auto id : fetching_)
    LANEQ_ASSERT(class_by_id_.count(id) == 1 && class_by_id_.at(id)->fetching,
                 "the classes whose read is under way are listed");
  LANEQ_ASSERT(queued == sched_.size() - scheduled_groups,
               "every unordered message in the scheduler counts in its class");
  LANEQ_ASSERT(in_flight == leases_.size(),
               "every unordered message in flight counts in its class");
  LANEQ_ASSERT(delayed == delayed_.size(), "every delayed unordered message is watched");
  return bytes;
}

}  // namespace laneq
