// The queue actor (actors/include/laneq/actors/queue_actor.hpp).
#include "laneq/actors/queue_actor.hpp"

#include <functional>
#include <string>
#include <tuple>

#include "laneq/actors/fairness_actor.hpp"
#include "laneq/actors/group_actor.hpp"
#include "laneq/message_checks.hpp"

namespace laneq {

namespace {

error limit(const std::string& what) {
  return error{errc::limit_exceeded, what};
}

/// A stored message record that failed to decode, named by its key (queue, lane, seq).
error named(error e, std::string_view key) {
  e.message = codec::describe_message_key(key) + ": " + e.message;
  return e;
}

}  // namespace

// Handles to peers are strong references: drop them so no cycle outlives the actor.
void queue_actor_impl::on_exit() {
  // Batches still being routed were stored: their answers need not wait for the groups.
  auto routing = std::move(routing_);
  for (auto& [batch, routed] : routing) routed();
  auto stopped = stopped_queue_error(fail_state(), qc_.spec.name());
  if (fairness_stopped_) *fairness_stopped_ = stopped;
  auto answer = to_caf(stopped);
  for (auto& [batch, g] : acking_) g->promise.deliver(answer);
  acking_.clear();
  // Held work and failed moves keep response promises (strong references to this actor).
  auto held = std::move(held_);
  for (auto& h : held) h.drop(stopped);
  for (auto& m : failed_moves_) m.promise.deliver(answer);
  failed_moves_.clear();
  fairness_ = nullptr;
  offers_.release();
  // Groups are monitored, not linked (spawn_group): they go down with the queue by this exit.
  auto reason = fail_state() ? fail_state() : caf::make_error(caf::exit_reason::user_shutdown);
  for (auto& [id, entry] : groups_) send_exit(entry.handle, reason);
  groups_.clear();
  group_by_key_.clear();
  group_by_lane_.clear();
  qc_.store = nullptr;
}

queue_actor_impl::queue_actor_impl(caf::actor_config& cfg, queue_actor_config qc)
    : actor_base<queue_actor>(cfg), qc_(std::move(qc)) {
  // Group ids of different broker runs never meet: a token from before a restart cannot name a
  // group of this run by accident.
  next_group_ = (qc_.storage->epoch << 32) + 1;
}

// -- recovery (docs/design/recovery.md) ----------------------------------------------------------

struct queue_actor_impl::recovery {
  struct lane_state {
    std::vector<message> window;  // the first messages, payloads decoded
    std::uint64_t beyond = 0;     // the rest: counted, left in the store
  };
  std::function<void(std::optional<error>)> done;
  std::map<std::array<std::uint8_t, 16>, lane_state> lanes;
  std::vector<message> unordered;
  std::unordered_map<message_id, codec::lease_record> leases;
  std::uint64_t messages = 0;
};

template <class Each, class Done>
void queue_actor_impl::scan_all(std::string from, std::string to, Each each, Done finished) {
  request(qc_.store, caf::infinite, scan_atom_v, from, to, limits::store_scan_max)
      .then(
          [this, to, each, finished](std::vector<store_entry>& page) mutable {
            for (auto& e : page)
              if (auto err = each(e)) {
                finished(std::move(err));
                return;
              }
            if (page.size() < limits::store_scan_max) {
              finished(std::optional<error>{});
              return;
            }
            auto next = std::move(page.back().key);
            next.push_back('\0');  // the smallest key after the last one read
            scan_all(std::move(next), std::move(to), std::move(each), std::move(finished));
          },
          [this, finished](caf::error& e) mutable {
            finished(std::optional<error>{storage_error(qc_.spec.name(), e)});
          });
}

void queue_actor_impl::recover(std::shared_ptr<recovery> r) {
  const auto uid = qc_.storage->uid;
  auto fail = [this, r](error err) {
    err.message = "recovering queue '" + qc_.spec.name() + "': " + err.message;
    r->done(std::move(err));
  };
  // Counters, then leases, dead letters and messages; each step starts when the last is done.
  // Plain variables, not structured bindings: the lambdas below capture them, which clang 14
  // (the fuzz preset's compiler) does not support for bindings.
  std::string cfrom, cto, lfrom, lto, dfrom, dto, mfrom, mto, ufrom, uto;
  std::tie(cfrom, cto) = codec::queue_range(codec::tag::counters, uid);
  std::tie(lfrom, lto) = codec::queue_range(codec::tag::lease, uid);
  std::tie(dfrom, dto) = codec::queue_range(codec::tag::dead, uid);
  std::tie(mfrom, mto) = codec::queue_range(codec::tag::message, uid);
  std::tie(ufrom, uto) = codec::queue_range(codec::tag::dedupe, uid);
  auto expired = std::make_shared<std::vector<store_op>>();
  auto on_dedupe = [this, expired, t = now()](const store_entry& e) -> std::optional<error> {
    auto d = codec::decode_dedupe(e.value);
    if (!d) return d.err();
    if (d.value().expires <= t) {
      expired->push_back(store_op{store_op::kind::erase, e.key, {}});
      return std::nullopt;
    }
    auto k = codec::parse_dedupe_key(e.key);
    if (!k) return k.err();
    dedupe_expiry_.emplace_back(d.value().expires, k.value());
    dedupe_.emplace(std::move(k).value(), dedupe_entry{d.value().id, d.value().expires, true});
    return std::nullopt;
  };
  auto on_message = [this, r](const store_entry& e) -> std::optional<error> {
    auto key = codec::parse_message_key(e.key);
    if (!key) return key.err();
    ++r->messages;
    if (key.value().lane.unordered()) {
      auto m = codec::decode_message(e.value);
      if (!m) return named(m.err(), e.key);
      r->unordered.push_back(std::move(m).value());
      return std::nullopt;
    }
    auto& lane = r->lanes[key.value().lane.bytes];
    if (lane.beyond > 0 || lane.window.size() >= qc_.storage->window) {
      ++lane.beyond;  // memory follows live groups: the payload stays in the store
      return std::nullopt;
    }
    auto m = codec::decode_message(e.value);
    if (!m) return named(m.err(), e.key);
    lane.window.push_back(std::move(m).value());
    return std::nullopt;
  };
  auto on_dead = [this](const store_entry& e) -> std::optional<error> {
    auto d = codec::decode_dead_letter(e.value);
    if (!d) return d.err();
    auto order = codec::parse_dead_order(e.key);
    if (!order) return order.err();
    dead_letter_order_[d.value().msg.id] = order.value();
    dead_letters_.emplace(order.value(), std::move(d).value());
    return std::nullopt;
  };
  auto on_lease = [r](const store_entry& e) -> std::optional<error> {
    auto l = codec::decode_lease(e.value);
    if (!l) return l.err();
    r->leases.emplace(l.value().lease.msg, std::move(l).value());
    return std::nullopt;
  };
  auto on_counters = [this](const store_entry& e) -> std::optional<error> {
    auto c = codec::decode_counters(e.value);
    if (!c) return c.err();
    next_id_ = c.value().next_id;
    next_seq_ = c.value().next_seq;
    next_dead_letter_ = c.value().next_dead;
    return std::nullopt;
  };
  auto messages = [=, this](std::optional<error> err) {
    if (err) return fail(*err);
    scan_all(mfrom, mto, on_message, [=, this](std::optional<error> err2) {
      if (err2) return fail(*err2);
      scan_all(ufrom, uto, on_dedupe, [=, this](std::optional<error> err3) {
        if (err3) return fail(*err3);
        std::sort(dedupe_expiry_.begin(), dedupe_expiry_.end());
        if (!expired->empty())
          caf::anon_send(qc_.store, write_atom_v, qc_.storage->write(std::move(*expired)));
        finish_recovery(*r);
        r->done(std::nullopt);
      });
    });
  };
  auto dead = [=, this](std::optional<error> err) {
    if (err) return fail(*err);
    scan_all(dfrom, dto, on_dead, messages);
  };
  auto leases = [=, this](std::optional<error> err) {
    if (err) return fail(*err);
    scan_all(lfrom, lto, on_lease, dead);
  };
  scan_all(cfrom, cto, on_counters, leases);
}

void queue_actor_impl::finish_recovery(recovery& r) {
  const auto& st = *qc_.storage;
  auto t = now();
  queue_metrics::add(qc_.metrics->recovered, r.messages);
  bool hold = !st.durable && st.reclaim_grace > duration{0};
  for (auto& [bytes, lane] : r.lanes) {
    // The lane's messages become one group under the lane they were stored under; the head
    // names its key (lanes.md L7).
    auto& head = lane.window.front();
    codec::lane_id stored{bytes};
    auto where = stored_placement(head, stored);
    group_recovery gr;
    group_id id{};
    if (auto it = r.leases.find(head.id); it != r.leases.end() && it->second.seq == head.seq) {
      gr.lease.push_back(it->second.lease);
      gr.lease_deadline = it->second.deadline;
      id = it->second.lease.group;  // the token keeps naming its group after the restart
    }
    if (hold) gr.hold_until = t + st.reclaim_grace;
    auto& g = group_for(where.group_key, where.ordering_key, stored, id);
    if (hold) {
      reclaimable_.emplace(head.id, g.id);
      g.reclaim_head = head.id;
    }
    gr.beyond = lane.beyond;
    g.routed = lane.window.size() + lane.beyond;
    gr.window = std::move(lane.window);
    send(g.handle, recover_atom_v, std::move(gr));
  }
  std::vector<message> ready;
  std::vector<delivery> leased;
  for (auto& m : r.unordered) {
    auto it = r.leases.find(m.id);
    if (it != r.leases.end() && it->second.seq == m.seq) {
      m.attempts = it->second.lease.attempt;
      leased.push_back(delivery{std::move(m), it->second.lease, it->second.deadline, {}});
    } else {
      ready.push_back(std::move(m));
    }
  }
  if (!ready.empty() || !leased.empty())
    send(fairness_, recover_atom_v, std::move(ready), std::move(leased));
}

result<queue_actor_impl::admitted> queue_actor_impl::admit(std::vector<outgoing_message>& batch,
                                                           timestamp t,
                                                           const std::vector<shared_json>* parsed) {
  const auto& spec = qc_.spec;
  if (auto err = check_batch(batch)) return *err;
  if (qc_.hook_missing)
    return error{errc::enqueue_rejected,
                 "queue '" + spec.name() +
                     "' was recovered without its on_enqueue hook; create it again with the hook "
                     "before enqueueing"};
  if (spec.functions_missing())
    return error{errc::enqueue_rejected,
                 "queue '" + spec.name() +
                     "' was recovered without its key functions; create it again with them "
                     "before enqueueing"};
  // The window: entries past their expiry go (their records too, with this batch's write).
  admitted out;
  while (!dedupe_expiry_.empty() && dedupe_expiry_.front().first <= t) {
    auto& [expires, key] = dedupe_expiry_.front();
    if (auto it = dedupe_.find(key); it != dedupe_.end() && it->second.expires == expires) {
      if (it->second.confirmed)
        out.ops.push_back(
            store_op{store_op::kind::erase, codec::dedupe_key(qc_.storage->uid, key), {}});
      dedupe_.erase(it);
    }
    dedupe_expiry_.pop_front();
  }
  const auto& rule = spec.dedupe_rule();
  bool dedupe_after_hook = false;
  if (rule)
    for (const auto& c : rule->key)
      dedupe_after_hook = dedupe_after_hook || c.which() == key_component::kind::attribute;
  out.batch.reserve(batch.size());
  out.ids.reserve(batch.size());
  std::uint64_t missing_total = 0;
  std::uint64_t stored = 0;
  auto fail = [&](error err) -> result<admitted> {
    for (const auto& k : out.new_keys) dedupe_.erase(k);  // the window forgets this batch
    queue_metrics::add(qc_.metrics->key_missing, missing_total);
    return err;
  };
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& in = batch[i];
    message m;
    m.body = std::move(in.body);
    m.headers = std::move(in.headers);
    m.fairness_key = std::move(in.fairness_key);
    m.enqueued_at = t;
    m.delay_until = t + in.delay;
    m.not_before = m.delay_until;
    // The hook sees the id and seq the message gets if the batch is accepted (queue_spec.hpp);
    // they are committed below only then, so a rejected batch leaves no gap.
    m.id = message_id{next_id_ + stored};
    m.seq = message_seq{next_seq_ + stored};
    // Every key of this queue reads one source: the body is parsed once (lanes.md L2).
    key_source src = parsed ? key_source{m, (*parsed)[i]} : key_source{m};
    std::optional<std::string> dkey;
    auto duplicate = [&]() {
      if (!rule) return false;
      dkey = dedupe_key(spec, src);
      if (!dkey) return false;
      auto it = dedupe_.find(*dkey);
      if (it == dedupe_.end() || it->second.expires <= t) return false;
      out.ids.push_back(it->second.id);
      out.waits_for_original = out.waits_for_original || !it->second.confirmed;
      ++out.duplicates;
      return true;
    };
    if (!dedupe_after_hook && duplicate()) continue;
    if (spec.hook()) {
      auto attrs = spec.hook()(m);
      if (!attrs)
        return fail(
            error{errc::enqueue_rejected, "queue '" + spec.name() + "': " + message_field(i, "") +
                                              " rejected by on_enqueue: " + attrs.err().message});
      if (attrs.value().size() > limits::attributes_max)
        return fail(limit("queue '" + spec.name() + "': on_enqueue returned more than " +
                          std::to_string(limits::attributes_max) + " attributes"));
      for (const auto& a : attrs.value())
        if (a.name.size() > limits::key_component_name_bytes_max ||
            a.value.size() > limits::header_value_bytes_max)
          return fail(limit("queue '" + spec.name() + "': on_enqueue returned attribute '" +
                            a.name.substr(0, 64) + "' longer than allowed (name at most " +
                            std::to_string(limits::key_component_name_bytes_max) +
                            " bytes, value at most " +
                            std::to_string(limits::header_value_bytes_max) + ")"));
      m.attributes = std::move(attrs).value();
    }
    if (dedupe_after_hook && duplicate()) continue;
    bool missing = false;
    auto where = place(spec, src, &missing);
    if (missing) ++missing_total;
    if (!where) {
      auto err = where.err();
      err.message = message_field(i, "") + ": " + err.message;
      return fail(std::move(err));
    }
    // The lane is fixed; only the headers the queue stores reach the store (lanes.md L7).
    m.headers = spec.stored_headers(std::move(m.headers));
    if (dkey) {
      auto expires = t + rule->window;
      dedupe_[*dkey] = dedupe_entry{m.id, expires, false};
      dedupe_expiry_.emplace_back(expires, *dkey);
      out.ops.push_back(store_op{store_op::kind::put, codec::dedupe_key(qc_.storage->uid, *dkey),
                                 codec::encode_dedupe(codec::dedupe_record{m.id, expires})});
      out.new_keys.push_back(std::move(*dkey));
    }
    out.ids.push_back(m.id);
    out.batch.push_back(placed_at(std::move(m), std::move(where).value()));
    ++stored;
  }
  queue_metrics::add(qc_.metrics->key_missing, missing_total);
  // Ids and seqs only once the whole batch is accepted: a rejected batch leaves no gap.
  next_id_ += stored;
  next_seq_ += stored;
  return out;
}

void queue_actor_impl::settle_dedupe(const admitted& a, bool committed) {
  for (std::size_t i = 0; i < a.new_keys.size(); ++i) {
    auto it = dedupe_.find(a.new_keys[i]);
    if (it == dedupe_.end()) continue;
    if (committed)
      it->second.confirmed = true;
    else
      dedupe_.erase(it);  // nothing was stored: a retry is a new message
  }
}

void queue_actor_impl::run_or_hold(std::function<void()> f,
                                   std::function<void(const error&)> drop) {
  if (topic_batch_ || recovering_ || recovery_deferred_) {
    held_.push_back(held_work{std::move(f), std::move(drop)});
    return;
  }
  f();
}

void queue_actor_impl::release_held() {
  while (!held_.empty() && !topic_batch_ && !recovering_ && !recovery_deferred_) {
    auto f = std::move(held_.front().run);
    held_.pop_front();
    f();
  }
}

void queue_actor_impl::move_dead(std::vector<store_op> ops, move_promise promise) {
  if (!failed_moves_.empty()) {
    // A failed move waits for its retry: this one goes with it, in order.
    failed_moves_.push_back(failed_move{std::move(ops), std::move(promise)});
    return;
  }
  auto write = ops;
  // Counters as of the write, so a held or retried write never stores older ones.
  for (auto& op : counters_op()) write.push_back(std::move(op));
  request(qc_.store, caf::infinite, write_atom_v, qc_.storage->write(std::move(write)))
      .then([promise](caf::ok_atom) mutable { promise.deliver(caf::ok_atom_v); },
            [this, ops = std::move(ops), promise](caf::error&) mutable {
              if (failed_moves_.empty())
                delayed_send(caf::actor_cast<queue_actor>(this), qc_.storage->store_retry,
                             write_atom_v);
              failed_moves_.push_back(failed_move{std::move(ops), std::move(promise)});
            });
}

void queue_actor_impl::retry_moves() {
  auto moves = std::move(failed_moves_);
  failed_moves_.clear();
  for (auto& m : moves) move_dead(std::move(m.ops), std::move(m.promise));
}

void queue_actor_impl::enqueue_batch(std::vector<outgoing_message> batch, ids_promise promise) {
  auto adm = admit(batch, now());
  if (!adm) {
    queue_metrics::add(qc_.metrics->rejected, batch.size());
    promise.deliver(to_caf(adm.err()));
    return;
  }
  auto a = std::make_shared<admitted>(std::move(adm).value());
  if (a->batch.empty() && !a->waits_for_original && a->ops.empty()) {
    queue_metrics::add(qc_.metrics->deduplicated, a->duplicates);
    promise.deliver(std::move(a->ids));
    return;
  }
  auto n = a->batch.size();
  persist_and_route(std::move(a->batch), std::move(a->ops),
                    [this, promise, a, n](std::optional<error> err) mutable {
                      settle_dedupe(*a, !err);
                      if (err) {
                        promise.deliver(to_caf(*err));
                        return;
                      }
                      queue_metrics::add(qc_.metrics->enqueued, n);
                      queue_metrics::add(qc_.metrics->deduplicated, a->duplicates);
                      promise.deliver(std::move(a->ids));
                    });
}

void queue_actor_impl::ack_gather::add(std::vector<store_op>& more,
                                       std::vector<lease_outcome>& more_failed) {
  for (auto& op : more) ops.push_back(std::move(op));
  for (auto& f : more_failed) failed.push_back(std::move(f));
}

void queue_actor_impl::ack_done(ack_gather& g) {
  if (--g.remaining > 0) return;
  if (g.ops.empty()) {
    g.promise.deliver(std::move(g.failed));
    return;
  }
  answer_when_durable(this, qc_.store, *qc_.storage, std::move(g.ops), g.promise,
                      std::move(g.failed), [] {});
}

std::pair<codec::lane_id, group_id> queue_actor_impl::lane_and_group(const placement& where) const {
  if (!where.ordered) return {codec::lane_id{}, group_id{}};
  if (auto it = group_by_key_.find(where.group_key); it != group_by_key_.end()) {
    // A live group knows its lane already; hashing once per group, not per message.
    return {groups_.at(it->second).lane, it->second};
  }
  return {codec::make_lane_id(qc_.spec.name(), where.group_key), group_id{}};
}

codec::lane_id queue_actor_impl::lane_of(const placement& where) const {
  return lane_and_group(where).first;
}

queue_actor_impl::placed queue_actor_impl::placed_at(message m, placement where) const {
  auto [lane, group] = lane_and_group(where);
  return placed{std::move(m), std::move(where), lane, group};
}

placement queue_actor_impl::stored_placement(const message& m, const codec::lane_id& lane) const {
  if (lane.unordered()) return placement{};
  auto where = place(qc_.spec, m);
  if (where && where.value().ordered && lane_of(where.value()) == lane)
    return std::move(where).value();
  // A key function that answers otherwise now, or read a header the queue does not store: the
  // message keeps its lane, named by a key no placement produces ("\xFE" + lane id).
  std::string key(1, '\xFE');
  key.append(lane.bytes.begin(), lane.bytes.end());
  auto label = where && where.value().ordered ? std::move(where.value().ordering_key)
                                              : tenant_queue(qc_.spec.name());
  return placement{true, std::move(key), std::move(label)};
}

queue_actor_impl::placed queue_actor_impl::placed_under(message m,
                                                        const codec::lane_id& lane) const {
  auto where = stored_placement(m, lane);
  auto it = group_by_lane_.find(lane.bytes);
  auto group = it == group_by_lane_.end() ? group_id{} : it->second;
  return placed{std::move(m), std::move(where), lane, group};
}

std::vector<store_op> queue_actor_impl::counters_op() const {
  codec::counters_record c{next_id_, next_seq_, next_dead_letter_};
  return {store_op{store_op::kind::put, codec::counters_key(qc_.storage->uid),
                   codec::encode_counters(c)}};
}

template <class Done>
void queue_actor_impl::persist_and_route(std::vector<placed> batch, std::vector<store_op> ops,
                                         Done finish) {
  if (topic_batch_ || recovering_ || recovery_deferred_) {
    // A topic's write is pending: this one goes after it, keeping seqs and counters in order.
    held_.push_back(
        held_work{[this, batch = std::move(batch), ops = std::move(ops), finish]() mutable {
                    persist_and_route(std::move(batch), std::move(ops), std::move(finish));
                  },
                  [finish](const error& e) mutable { finish(std::optional<error>{e}); }});
    return;
  }
  ops.reserve(ops.size() + batch.size() + 1);
  for (const auto& p : batch) {
#if LANEQ_CANARY_LOST
    // Canary build (tests/sim): an enqueue's unordered messages are answered but never stored,
    // so a crash loses them (breaks G1/G2).
    if (!p.where.ordered) continue;
#endif
    ops.push_back(qc_.storage->put_message(p.lane, p.msg));
  }
  for (auto& op : counters_op()) ops.push_back(std::move(op));
  auto w = qc_.storage->write(std::move(ops));
  w.admits = true;
  request(qc_.store, caf::infinite, write_atom_v, std::move(w))
      .then(
          [this, batch = std::move(batch), finish](caf::ok_atom) mutable {
            route(std::move(batch), [finish]() mutable { finish(std::optional<error>{}); });
          },
          [this, finish](caf::error& e) mutable {
            finish(std::optional<error>{storage_error(qc_.spec.name(), e)});
          });
}

queue_actor_impl::group_entry& queue_actor_impl::group_for(const std::string& key,
                                                           const std::string& label,
                                                           const codec::lane_id& lane,
                                                           group_id id) {
  auto it = group_by_key_.find(key);
  if (it != group_by_key_.end()) return groups_.at(it->second);
  if (auto same = group_by_lane_.find(lane.bytes); same != group_by_lane_.end()) {
    // Two keys with one lane id (a SHA-256 prefix collision, or a stored lane named by a key no
    // placement produces) are one group: their messages share a store lane, so they merge, never
    // split (lanes.md L6).
    auto& g = groups_.at(same->second);
    g.keys.push_back(key);
    group_by_key_.emplace(key, g.id);
    return g;
  }
  if (!id) id = group_id{next_group_++};
  group_actor_config gc{qc_.ctx,
                        qc_.metrics,
                        qc_.storage,
                        id,
                        lane,
                        label,
                        qc_.spec.attempts_max(),
                        fairness_,
                        caf::actor_cast<queue_actor>(this),
                        qc_.store,
                        arrival_inbox{},
                        offers_};
  auto inbox = gc.inbox;
  // Monitored, not linked: a link is an entry in this actor's attachables as well, and CAF
  // removes it on the group's exit by a linear search of that list, so with many live groups
  // every idle group's stop cost a scan over all of them (measured: benchmarks/README.md).
  auto handle = spawn<group_actor_impl, caf::monitored>(std::move(gc));
  group_by_key_.emplace(key, id);
  group_by_lane_.emplace(lane.bytes, id);
  return groups_
      .emplace(id, group_entry{id,
                               std::move(handle),
                               {key},
                               lane,
                               std::move(inbox),
                               false,
                               0,
                               std::nullopt,
                               std::nullopt})
      .first->second;
}

void queue_actor_impl::on_idle(group_id id, std::uint64_t received) {
  auto* entry = find_group(id);
  if (!entry || entry->routed != received) return;  // more messages are on their way
  auto t = now();
  if (!entry->idle_since) {
    if (lingering_ >= limits::lingering_groups_max) return stop_group(*entry);
    entry->idle_since = t;
    ++lingering_;
    // Checked again once the linger is over: the group stops then unless a message woke it
    // meanwhile (`routed` moved on) and it has not gone idle again since.
    linger_checks_.push_back(linger_check{t + limits::group_idle_linger, id, received});
    arm_linger_check(t);
    return;
  }
  if (t - *entry->idle_since >= limits::group_idle_linger) stop_group(*entry);
}

void queue_actor_impl::end_lingers() {
  linger_armed_ = false;
  auto t = now();
  while (!linger_checks_.empty() && linger_checks_.front().due <= t) {
    auto c = linger_checks_.front();
    linger_checks_.pop_front();
    auto* entry = find_group(c.id);
    if (entry && entry->routed == c.received && entry->idle_since &&
        t - *entry->idle_since >= limits::group_idle_linger)
      stop_group(*entry);
  }
  arm_linger_check(t);
}

void queue_actor_impl::arm_linger_check(timestamp t) {
  if (linger_armed_ || linger_checks_.empty()) return;
  linger_armed_ = true;
  // Checks due close together are taken in one go, a tenth of a linger apart at most.
  auto wait = std::max(linger_checks_.front().due - t, limits::group_idle_linger / 10);
  delayed_send(caf::actor_cast<queue_actor>(this), wait, tick_atom_v);
}

void queue_actor_impl::stop_group(group_entry& entry) {
  wake(entry);
  send(entry.handle, stop_atom_v);
  // A token of the previous run that named this group's head names nothing any more.
  if (entry.reclaim_head) reclaimable_.erase(*entry.reclaim_head);
  for (const auto& key : entry.keys) group_by_key_.erase(key);
  group_by_lane_.erase(entry.lane.bytes);
  groups_.erase(entry.id);
}

void queue_actor_impl::wake(group_entry& entry) {
  if (!entry.idle_since) return;
  entry.idle_since.reset();
  --lingering_;
}

queue_actor_impl::group_entry* queue_actor_impl::owner_of(const lease_token& l) {
  if (auto* entry = find_group(l.group)) return entry;
  // Fast delivery after a restart: the token names a group of the previous run; its head
  // waits for it during the reclaim grace.
  if (auto it = reclaimable_.find(l.msg); it != reclaimable_.end()) return find_group(it->second);
  return nullptr;
}

queue_actor_impl::group_entry* queue_actor_impl::find_group(group_id id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second;
}

void queue_actor_impl::route(std::vector<placed> batch, std::function<void()> routed) {
  std::vector<message> unordered;
  // Each group's arrivals wait in its inbox, in order; only a group that is not busy (or whose
  // inbox is full) is woken, once per batch (arrival_inbox).
  std::vector<group_entry*> woken;  // entries of groups_ stay where they are
  for (auto& p : batch) {
    if (!p.where.ordered) {
      unordered.push_back(std::move(p.msg));
      continue;
    }
    // The group placed with the message, unless it stopped since (its key has a new one now).
    auto* live = p.group ? find_group(p.group) : nullptr;
    auto& g = live ? *live : group_for(p.where.group_key, p.where.ordering_key, p.lane);
    wake(g);
    ++g.routed;
    if (g.inbox.leave(std::move(p.msg)) && !g.wake_due) {
      g.wake_due = true;
      woken.push_back(&g);
    }
  }
  // Unordered messages reach the fairness actor before any receive this queue actor forwards
  // later; a woken group's head gets there by a second hop, so the answer waits for the
  // receipts. A busy group's arrivals are behind a head already offered.
  if (!unordered.empty()) send(fairness_, enqueue_atom_v, std::move(unordered));
  if (woken.empty()) {
    routed();
    return;
  }
  auto number = next_routing_++;
  routing_.emplace(number, std::move(routed));
  route_receipt receipt{caf::actor_cast<caf::strong_actor_ptr>(this), number};
  for (auto* g : woken) {
    g->wake_due = false;
    send(g->handle, enqueue_atom_v, receipt);
  }
}

queue_stats queue_actor_impl::stats() const {
  const auto& m = *qc_.metrics;
  queue_stats s;
  s.name = qc_.spec.name();
  s.enqueued = queue_metrics::get(m.enqueued);
  s.delivered = queue_metrics::get(m.delivered);
  s.acked = queue_metrics::get(m.acked);
  s.nacked = queue_metrics::get(m.nacked);
  s.lease_expired = queue_metrics::get(m.lease_expired);
  s.dead_lettered = queue_metrics::get(m.dead_lettered);
  s.redriven = queue_metrics::get(m.redriven);
  s.key_missing = queue_metrics::get(m.key_missing);
  s.rejected = queue_metrics::get(m.rejected);
  s.recovered = queue_metrics::get(m.recovered);
  s.deduplicated = queue_metrics::get(m.deduplicated);
  s.window_reads = queue_metrics::get(m.window_reads);
  s.window_read_messages = queue_metrics::get(m.window_read_messages);
  s.corrupt_records = queue_metrics::get(m.corrupt_records);
  s.first_delivery.reserve(m.first_delivery.size());
  for (const auto& b : m.first_delivery) s.first_delivery.push_back(queue_metrics::get(b));
  s.first_delivery_sum_us = queue_metrics::get(m.first_delivery_sum_us);
  auto in = s.recovered + s.enqueued + s.redriven;
  auto out = s.acked + s.dead_lettered;
  s.backlog = in > out ? in - out : 0;
  auto inflight = m.in_flight.load(std::memory_order_relaxed);
  s.in_flight = inflight > 0 ? static_cast<std::uint64_t>(inflight) : 0;
  auto window_bytes = m.window_bytes.load(std::memory_order_relaxed);
  s.window_bytes = window_bytes > 0 ? static_cast<std::uint64_t>(window_bytes) : 0;
  s.live_groups = groups_.size() - lingering_;  // a lingering actor is no group any more
  s.dead_letters = dead_letters_.size();
  s.waiting_receives = queue_metrics::get(m.waiting_receives);
  return s;
}

// -- introspection: pages of groups (docs/api.md "Groups") -------------------------------------

struct queue_actor_impl::groups_gather {
  struct candidate {
    std::array<std::uint8_t, 16> lane;
    group_id id;
    group_actor handle;
    std::optional<group_info> info;  ///< once described (none: it stopped meanwhile)
  };
  caf::typed_response_promise<groups_page> promise;
  groups_query query;
  std::vector<candidate> candidates;  ///< in lane order
  bool more = false;                  ///< groups follow the last one examined
  std::array<std::uint8_t, 16> last_examined{};
  std::unordered_map<group_id, waiting_item> waiting;
  std::size_t issued = 0;   ///< candidates asked so far
  std::size_t pending = 0;  ///< of them, not answered yet
  std::size_t matched = 0;  ///< answers that go on the page

  bool wanted(const group_info& info) const {
    return !query.blocked_only ||
           (info.state != group_status::ready && info.state != group_status::idle);
  }
  /// The page: the first `limit` wanted groups in lane order. Its cursor names the last group
  /// listed when the page is full, else the last group examined; none when no group follows.
  groups_page finish() {
    groups_page page;
    std::size_t i = 0;
    for (; i < issued && page.groups.size() < query.limit; ++i)
      if (auto& info = candidates[i].info; info && wanted(*info))
        page.groups.push_back(std::move(*info));
    bool full = page.groups.size() == query.limit;
    if (full && (i < candidates.size() || more))
      page.next.assign(candidates[i - 1].lane.begin(), candidates[i - 1].lane.end());
    else if (!full && more)
      page.next.assign(last_examined.begin(), last_examined.end());
    return page;
  }
};

namespace {

std::optional<error> check_groups_query(const groups_query& q) {
  if (q.limit == 0 || q.limit > limits::groups_page_max)
    return error{errc::invalid_argument,
                 "limit must be 1 to " + std::to_string(limits::groups_page_max)};
  if (!q.after.empty() && q.after.size() != 16)
    return error{errc::invalid_argument, "cursor is malformed"};
  return std::nullopt;
}

}  // namespace

caf::result<groups_page> queue_actor_impl::describe_groups(groups_query q) {
  if (auto err = check_groups_query(q)) return to_caf(*err);
  auto g = std::make_shared<groups_gather>();
  g->promise = make_response_promise<groups_page>();
  std::array<std::uint8_t, 16> after{};
  std::copy(q.after.begin(), q.after.end(), after.begin());
  auto it = q.after.empty() ? group_by_lane_.begin() : group_by_lane_.upper_bound(after);
  // Bounded by the page: a lingering group (gone idle) counts as examined but is not listed.
  std::size_t examined_max = std::size_t{q.limit} * limits::groups_page_scan_factor;
  std::size_t want = q.blocked_only ? examined_max : q.limit;
  std::vector<group_id> ids;
  for (std::size_t examined = 0;
       it != group_by_lane_.end() && examined < examined_max && g->candidates.size() < want;
       ++it, ++examined) {
    g->last_examined = it->first;
    const auto& entry = groups_.at(it->second);
    if (entry.idle_since) continue;
    g->candidates.push_back({it->first, entry.id, entry.handle, std::nullopt});
    ids.push_back(entry.id);
  }
  g->more = it != group_by_lane_.end();
  g->query = std::move(q);
  if (g->candidates.empty()) {
    g->promise.deliver(g->finish());  // none examined lives: an empty page, maybe a cursor
    return g->promise;
  }
  // A throttled head is known only to the fairness actor; its group reports it ready.
  request(fairness_, caf::infinite, waiting_atom_v, std::move(ids))
      .then(
          [this, g](std::vector<waiting_item>& ws) {
            for (auto& w : ws)
              if (w.throttled) g->waiting.emplace(w.group, w);
            describe_next(g);
          },
          [this, g](caf::error&) { describe_next(g); });
  return g->promise;
}

void queue_actor_impl::describe_next(const std::shared_ptr<groups_gather>& g) {
  while (g->pending < limits::groups_describe_window && g->issued < g->candidates.size() &&
         g->matched < g->query.limit) {
    auto i = g->issued++;
    ++g->pending;
    request(g->candidates[i].handle, caf::infinite, describe_atom_v)
        .then(
            [this, g, i](group_info& info) {
              auto& c = g->candidates[i];
              if (auto w = g->waiting.find(c.id); w != g->waiting.end()) {
                info.state = group_status::throttled;
                info.since = w->second.since;
                info.until = w->second.until;
              }
              if (g->wanted(info)) ++g->matched;
              c.info = std::move(info);
              --g->pending;
              describe_next(g);
            },
            [this, g](caf::error&) {  // the group stopped meanwhile: not listed
              --g->pending;
              describe_next(g);
            });
  }
  if (g->pending == 0) g->promise.deliver(g->finish());
}

queue_actor_impl::behavior_type queue_actor_impl::make_behavior() {
  fairness_actor_config fc{qc_.ctx,
                           qc_.metrics,
                           qc_.spec.name(),
                           qc_.storage,
                           qc_.spec.throttles(),
                           qc_.spec.lease_duration(),
                           qc_.spec.attempts_max(),
                           caf::actor_cast<queue_actor>(this),
                           qc_.store,
                           offers_};
  fairness_stopped_ = fc.stopped;
  fairness_ = spawn<fairness_actor_impl, caf::linked>(std::move(fc));
  offers_.wake_up(fairness_);
  // A group that stops on its own was removed when it reported idle; one that fails takes the
  // queue down with it, as a link would.
  set_down_handler([this](caf::down_msg& dm) {
    if (dm.reason && dm.reason != caf::exit_reason::normal) quit(std::move(dm.reason));
  });
  return {
      [this](enqueue_atom,
             std::vector<outgoing_message>& batch) -> caf::result<std::vector<message_id>> {
        auto promise = make_response_promise<std::vector<message_id>>();
        if (recovering_) {
          // Numbering continues from the store: wait for the (deferred) recovery to finish.
          held_.push_back(
              held_work{[this, promise, batch = std::move(batch)]() mutable {
                          enqueue_batch(std::move(batch), promise);
                        },
                        [promise](const error& e) mutable { promise.deliver(to_caf(e)); }});
          return promise;
        }
        enqueue_batch(std::move(batch), promise);
        return promise;
      },
      [this](receive_atom, const receive_request& req) {
        return delegate(fairness_, receive_atom_v, req);
      },
      [this](ack_atom,
             std::vector<lease_token>& leases) -> caf::result<std::vector<lease_outcome>> {
        if (leases.empty() || leases.size() > limits::ack_batch_max)
          return to_caf(error{errc::invalid_argument,
                              "ack: a batch holds 1 to " + std::to_string(limits::ack_batch_max) +
                                  " leases, got " + std::to_string(leases.size())});
        // The groups (through an ack_receipt) and the fairness actor report the store
        // operations of their acks; they are written as one write, and the acks are confirmed
        // once it is durable.
        auto g = std::make_shared<ack_gather>();
        g->promise = make_response_promise<std::vector<lease_outcome>>();
        std::vector<lease_token> unordered;
        std::vector<std::pair<group_actor, lease_token>> grouped;
        for (const auto& l : leases) {
          if (!l.group) {
            unordered.push_back(l);
          } else if (auto* entry = owner_of(l)) {
            grouped.emplace_back(entry->handle, l);
          } else {
            g->failed.push_back(lease_outcome{
                l, error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"}});
          }
        }
        g->remaining = std::size_t{1} + (grouped.empty() ? 0u : 1u) + (unordered.empty() ? 0u : 1u);
        if (!grouped.empty()) {
          auto number = next_ack_++;
          acking_.emplace(number, g);
          std::vector<lease_token> tokens;
          tokens.reserve(grouped.size());
          for (const auto& each : grouped) tokens.push_back(each.second);
          ack_receipt receipt{caf::actor_cast<caf::strong_actor_ptr>(this), number,
                              std::move(tokens)};
          for (std::uint32_t i = 0; i < grouped.size(); ++i)
            send(grouped[i].first, ack_atom_v, grouped[i].second, receipt, i);
        }
        if (!unordered.empty()) {
          request(fairness_, caf::infinite, ack_atom_v, std::move(unordered))
              .then(
                  [this, g](std::vector<lease_outcome>& failed, std::vector<store_op>& ops) {
                    g->add(ops, failed);
                    ack_done(*g);
                  },
                  [this, g](caf::error& e) {
                    g->failed.push_back(lease_outcome{lease_token{}, from_caf(e)});
                    ack_done(*g);
                  });
        }
        ack_done(*g);  // the reference held by this handler
        return g->promise;
      },
      [this](acked_atom, std::uint64_t batch, std::vector<store_op>& ops,
             std::vector<lease_outcome>& failed) {
        auto it = acking_.find(batch);
        if (it == acking_.end()) return;
        auto g = std::move(it->second);
        acking_.erase(it);
        g->add(ops, failed);
        ack_done(*g);
      },
      [this](nack_atom, const lease_token& l,
             const nack_request& req) -> caf::result<caf::ok_atom> {
        if (req.kind != nack_kind::retry && req.kind != nack_kind::dead_letter)
          return to_caf(error{errc::invalid_argument, "nack: kind must be retry or dead_letter"});
        if (req.retry_after_us < 0 || duration{req.retry_after_us} > limits::retry_after_max)
          return to_caf(error{errc::invalid_argument,
                              "nack: retry_after_ms must be between 0 and " +
                                  std::to_string(limits::retry_after_max.count() / 1000)});
        if (!l.group) return delegate(fairness_, nack_atom_v, l, req);
        if (auto* entry = owner_of(l)) return delegate(entry->handle, nack_atom_v, l, req);
        return to_caf(error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"});
      },
      [this](extend_atom, const lease_token& l, std::int64_t by_us) -> caf::result<timestamp> {
        if (duration{by_us} < limits::lease_min || duration{by_us} > limits::lease_max)
          return to_caf(error{errc::invalid_argument,
                              "extend: lease_ms must be between " +
                                  std::to_string(limits::lease_min.count() / 1000) + " and " +
                                  std::to_string(limits::lease_max.count() / 1000)});
        if (!l.group) return delegate(fairness_, extend_atom_v, l, by_us);
        if (auto* entry = owner_of(l)) return delegate(entry->handle, extend_atom_v, l, by_us);
        return to_caf(error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"});
      },
      [this](dlq_atom, std::uint32_t max) {
        std::vector<dead_letter> out;
        for (const auto& [order, dl] : dead_letters_) {
          if (out.size() >= max) break;
          out.push_back(dl);
        }
        return out;
      },
      [this](redrive_atom, std::vector<message_id>& ids) -> caf::result<std::uint64_t> {
        if (ids.size() > limits::redrive_batch_max)
          return to_caf(limit("redrive: at most " + std::to_string(limits::redrive_batch_max) +
                              " ids at once"));
        std::vector<std::uint64_t> orders;
        if (ids.empty()) {
          for (const auto& [order, dl] : dead_letters_) {
            if (orders.size() >= limits::redrive_batch_max) break;
            orders.push_back(order);
          }
        } else {
          for (auto id : ids) {
            auto it = dead_letter_order_.find(id);
            if (it == dead_letter_order_.end())
              return to_caf(error{errc::dead_letter_not_found,
                                  "queue '" + qc_.spec.name() + "': message " +
                                      std::to_string(id.value) + " is not a dead letter"});
            orders.push_back(it->second);
          }
        }
        // A redriven message is a new arrival: a new seq, after everything that arrived
        // meanwhile; its id, enqueued_at and not-before time stay (O7, O9).
        std::vector<placed> batch;
        std::vector<store_op> erase_dead;
        std::vector<std::pair<std::uint64_t, dead_letter>> taken;  // restored if the store fails
        for (auto order : orders) {
          auto node = dead_letters_.extract(order);
          if (node.empty()) continue;  // listed twice
          taken.emplace_back(order, node.mapped());
          erase_dead.push_back(
              store_op{store_op::kind::erase, codec::dead_key(qc_.storage->uid, order), {}});
          auto m = std::move(node.mapped().msg);
          dead_letter_order_.erase(m.id);
          m.seq = message_seq{next_seq_++};
          m.attempts = 0;
          m.not_before = m.delay_until;
          // Back to the lane it was stored under (lanes.md L7). A dead letter stored before
          // records kept their lane: the lane again from the stored envelope.
          codec::lane_id lane{taken.back().second.lane};
          if (!taken.back().second.lane_known) {
            auto where = place(qc_.spec, m);
            if (!where) {
              // A key function that no longer finds the key: nothing is redriven.
              for (auto& [o, dl] : taken) {
                dead_letter_order_[dl.msg.id] = o;
                dead_letters_.emplace(o, std::move(dl));
              }
              auto err = where.err();
              err.message = "redrive of message " + std::to_string(m.id.value) + ": " + err.message;
              return to_caf(err);
            }
            lane = lane_of(where.value());
          }
          batch.push_back(placed_under(std::move(m), lane));
        }
        auto n = static_cast<std::uint64_t>(batch.size());
        if (n == 0) return std::uint64_t{0};
        auto promise = make_response_promise<std::uint64_t>();
        persist_and_route(
            std::move(batch), std::move(erase_dead),
            [this, promise, n, taken = std::move(taken)](std::optional<error> err) mutable {
              if (err) {
                for (auto& [order, dl] : taken) {  // nothing was redriven: they stay dead letters
                  dead_letter_order_[dl.msg.id] = order;
                  dead_letters_.emplace(order, std::move(dl));
                }
                promise.deliver(to_caf(*err));
                return;
              }
              queue_metrics::add(qc_.metrics->redriven, n);
              promise.deliver(n);
            });
        return promise;
      },
      [this](stats_atom) -> caf::result<queue_stats> {
        // The per-fairness-key backlog lives in the fairness actor; the rest is read here.
        auto promise = make_response_promise<queue_stats>();
        request(fairness_, caf::infinite, stats_atom_v)
            .then(
                [this, promise](queue_stats& f) mutable {
                  auto s = stats();
                  s.fairness = std::move(f.fairness);
                  promise.deliver(std::move(s));
                },
                [this, promise](caf::error&) mutable { promise.deliver(stats()); });
        return promise;
      },
      [this](groups_atom, groups_query& q) { return describe_groups(std::move(q)); },
      [this](dead_atom, std::vector<dead_letter>& dls) -> caf::result<caf::ok_atom> {
        // Answered once the move is durable: the group holds its next head until then, so a move
        // lost in a power loss never brings the message back after its successor ran. If the
        // move fails, the message is still stored as live and comes back after a restart (at
        // least once), never lost.
        std::vector<store_op> ops;
        for (auto& dl : dls) {
          auto order = next_dead_letter_++;
          // The live record goes from the lane it was stored under (lanes.md L7).
          LANEQ_ASSERT(dl.lane_known, "a group or the fairness actor names a dead letter's lane");
          ops.push_back(qc_.storage->erase_message(codec::lane_id{dl.lane}, dl.msg.seq));
          ops.push_back(store_op{store_op::kind::put, codec::dead_key(qc_.storage->uid, order),
                                 codec::encode_dead_letter(dl)});
          dead_letter_order_[dl.msg.id] = order;
          dead_letters_.emplace(order, std::move(dl));
        }
        auto promise = make_response_promise<caf::ok_atom>();
        run_or_hold(
            [this, promise, ops = std::move(ops)]() mutable { move_dead(std::move(ops), promise); },
            [promise](const error& e) mutable { promise.deliver(to_caf(e)); });
        return promise;
      },
      [this](write_atom) { run_or_hold([this] { retry_moves(); }, [](const error&) {}); },
      [this](idle_atom, group_id id, std::uint64_t received) { on_idle(id, received); },
      [this](tick_atom) { end_lingers(); },
      [this](recover_atom) -> caf::result<caf::ok_atom> {
        if (qc_.spec.functions_missing()) {
          // The lanes of stored messages need the key functions: recovery waits for a create
          // that brings them back (lanes.md L3); until then enqueues are rejected.
          recovery_deferred_ = true;
          return caf::ok_atom_v;
        }
        auto r = std::make_shared<recovery>();
        auto promise = make_response_promise<caf::ok_atom>();
        r->done = [promise](std::optional<error> err) mutable {
          if (err)
            promise.deliver(to_caf(*err));
          else
            promise.deliver(caf::ok_atom_v);
        };
        recover(r);
        return promise;
      },
      [this](create_atom, queue_spec& spec) {
        // The same queue created again after a restart brings back its hook and key functions.
        qc_.spec = std::move(spec);
        qc_.hook_missing = false;
        if (recovery_deferred_ && !qc_.spec.functions_missing()) {
          recovery_deferred_ = false;
          recovering_ = true;
          auto r = std::make_shared<recovery>();
          r->done = [this](std::optional<error> err) {
            if (err) {
              // The queue cannot serve without its stored messages.
              quit(to_caf(*err));
              return;
            }
            recovering_ = false;
            release_held();
          };
          recover(r);
        }
      },
      [this](prepare_atom, std::vector<outgoing_message>& batch,
             std::vector<shared_json>& parsed) -> caf::result<topic_prepared> {
        if (topic_batch_ || recovering_ || batch.size() != parsed.size())
          return to_caf(error{errc::unavailable, "queue '" + qc_.spec.name() +
                                                     "' is busy with another topic enqueue"});
        auto adm = admit(batch, now(), &parsed);
        if (!adm) {
          queue_metrics::add(qc_.metrics->rejected, batch.size());
          return to_caf(adm.err());
        }
        auto& a = adm.value();
        topic_prepared out{a.ids, std::move(a.ops), qc_.storage->sync};
        for (const auto& p : a.batch) out.ops.push_back(qc_.storage->put_message(p.lane, p.msg));
        for (auto& op : counters_op()) out.ops.push_back(std::move(op));
        // Every other write of this queue waits for the topic's (seq and counter order).
        topic_batch_ = std::move(adm).value();
        return out;
      },
      [this](settle_atom, bool committed) -> caf::result<caf::ok_atom> {
        if (!topic_batch_) return caf::ok_atom_v;
        auto a = std::move(*topic_batch_);
        topic_batch_.reset();
        settle_dedupe(a, committed);
        auto promise = make_response_promise<caf::ok_atom>();
        if (committed) {
          queue_metrics::add(qc_.metrics->enqueued, a.batch.size());
          queue_metrics::add(qc_.metrics->deduplicated, a.duplicates);
          route(std::move(a.batch), [promise]() mutable { promise.deliver(caf::ok_atom_v); });
        } else {
          promise.deliver(caf::ok_atom_v);
        }
        release_held();
        return promise;
      },
      [this](routed_atom, std::uint64_t batch) {
        auto it = routing_.find(batch);
        if (it == routing_.end()) return;
        auto routed = std::move(it->second);
        routing_.erase(it);
        routed();
      },

  };
}

}  // namespace laneq
