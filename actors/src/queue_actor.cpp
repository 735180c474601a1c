// The queue actor (actors/include/laneq/actors/queue_actor.hpp).
#include "laneq/actors/queue_actor.hpp"

#include "laneq/actors/fairness_actor.hpp"
#include "laneq/actors/group_actor.hpp"

namespace laneq {

namespace {

error limit(const std::string& what) {
  return error{errc::limit_exceeded, what};
}

/// `messages[i]`, or `messages[i].name` when a field is named.
std::string field(std::size_t i, const char* name) {
  std::string out = "messages[" + std::to_string(i) + "]";
  if (*name != '\0') out += std::string{"."} + name;
  return out;
}

/// Checks one outgoing message against the limits header.
std::optional<error> check_message(const outgoing_message& m, std::size_t i) {
  if (m.body.size() > limits::body_bytes_max)
    return limit(field(i, "body") + " is " + std::to_string(m.body.size()) + " bytes, at most " +
                 std::to_string(limits::body_bytes_max) + " allowed");
  if (m.headers.size() > limits::headers_max)
    return limit(field(i, "headers") + " has " + std::to_string(m.headers.size()) +
                 " entries, at most " + std::to_string(limits::headers_max) + " allowed");
  for (const auto& h : m.headers) {
    if (h.name.empty())
      return error{errc::invalid_argument, field(i, "headers") + " has an empty header name"};
    if (h.name.size() > limits::header_name_bytes_max ||
        h.value.size() > limits::header_value_bytes_max)
      return limit(field(i, "headers") + " '" + h.name.substr(0, 64) +
                   "' is too long (name at most " + std::to_string(limits::header_name_bytes_max) +
                   " bytes, value at most " + std::to_string(limits::header_value_bytes_max) + ")");
  }
  if (m.fairness_key.size() > limits::fairness_key_bytes_max)
    return limit(field(i, "fairness_key") + " is longer than " +
                 std::to_string(limits::fairness_key_bytes_max) + " bytes");
  if (m.delay < duration{0} || m.delay > limits::delay_max)
    return error{errc::invalid_argument, field(i, "delay_ms") + " must be between 0 and " +
                                             std::to_string(limits::delay_max.count() / 1000)};
  return std::nullopt;
}

}  // namespace

// Handles to peers are strong references: drop them so no cycle outlives the actor.
void queue_actor_impl::on_exit() {
  fairness_ = nullptr;
  groups_.clear();
  group_by_key_.clear();
  qc_.store = nullptr;
}

queue_actor_impl::queue_actor_impl(caf::actor_config& cfg, queue_actor_config qc)
    : queue_actor::base(cfg), qc_(std::move(qc)) {}

result<std::vector<queue_actor_impl::placed>> queue_actor_impl::admit(
    std::vector<outgoing_message>& batch, timestamp t) {
  const auto& spec = qc_.spec;
  if (batch.empty() || batch.size() > limits::enqueue_batch_max)
    return error{errc::invalid_argument, "enqueue: a batch holds 1 to " +
                                             std::to_string(limits::enqueue_batch_max) +
                                             " messages, got " + std::to_string(batch.size())};
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (auto err = check_message(batch[i], i)) return *err;
  std::vector<placed> out;
  out.reserve(batch.size());
  std::uint64_t missing_total = 0;
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
    m.id = message_id{next_id_ + i};
    m.seq = message_seq{next_seq_ + i};
    if (spec.hook()) {
      auto attrs = spec.hook()(m);
      if (!attrs)
        return error{errc::enqueue_rejected, "queue '" + spec.name() + "': " + field(i, "") +
                                                 " rejected by on_enqueue: " + attrs.err().message};
      if (attrs.value().size() > limits::attributes_max)
        return limit("queue '" + spec.name() + "': on_enqueue returned more than " +
                     std::to_string(limits::attributes_max) + " attributes");
      for (const auto& a : attrs.value())
        if (a.name.size() > limits::key_component_name_bytes_max ||
            a.value.size() > limits::header_value_bytes_max)
          return limit("queue '" + spec.name() + "': on_enqueue returned attribute '" +
                       a.name.substr(0, 64) + "' longer than allowed (name at most " +
                       std::to_string(limits::key_component_name_bytes_max) +
                       " bytes, value at most " + std::to_string(limits::header_value_bytes_max) +
                       ")");
      m.attributes = std::move(attrs).value();
    }
    bool missing = false;
    auto where = place(spec, m, &missing);
    if (missing) ++missing_total;
    if (!where) {
      queue_metrics::add(qc_.metrics->key_missing, missing_total);
      auto err = where.err();
      err.message = field(i, "") + ": " + err.message;
      return err;
    }
    out.push_back(placed{std::move(m), std::move(where).value()});
  }
  queue_metrics::add(qc_.metrics->key_missing, missing_total);
  // Ids and seqs only once the whole batch is accepted: a rejected batch leaves no gap.
  next_id_ += out.size();
  next_seq_ += out.size();
  return out;
}

template <class Done>
void queue_actor_impl::persist_and_route(std::vector<placed> batch, Done finish) {
  std::vector<message> records;
  records.reserve(batch.size());
  for (const auto& p : batch) records.push_back(p.msg);
  request(qc_.store, caf::infinite, append_atom_v, qc_.store_key, std::move(records))
      .then(
          [this, batch = std::move(batch), finish](caf::ok_atom) mutable {
            route(std::move(batch));
            finish(std::optional<error>{});
          },
          [this, finish](caf::error& e) mutable {
            auto err = from_caf(e);
            if (err.code == errc::unavailable) err.code = errc::storage_failed;
            err.message = "queue '" + qc_.spec.name() + "': " + err.message;
            finish(std::optional<error>{err});
          });
}

queue_actor_impl::group_entry& queue_actor_impl::group_for(const std::string& key,
                                                           const std::string& label) {
  auto it = group_by_key_.find(key);
  if (it != group_by_key_.end()) return groups_.at(it->second);
  group_id id{next_group_++};
  group_actor_config gc{qc_.ctx,       qc_.metrics,
                        qc_.store_key, id,
                        label,         qc_.spec.attempts_max(),
                        fairness_,     caf::actor_cast<queue_actor>(this),
                        qc_.store};
  auto handle = spawn<group_actor_impl, caf::linked>(std::move(gc));
  group_by_key_.emplace(key, id);
  return groups_.emplace(id, group_entry{id, std::move(handle), key, 0}).first->second;
}

queue_actor_impl::group_entry* queue_actor_impl::find_group(group_id id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second;
}

void queue_actor_impl::route(std::vector<placed> batch) {
  std::vector<message> unordered;
  // Consecutive messages of one group travel together; arrival order within a group is kept.
  std::unordered_map<group_id, std::vector<message>> by_group;
  std::vector<group_id> order;
  for (auto& p : batch) {
    if (!p.where.ordered) {
      unordered.push_back(std::move(p.msg));
      continue;
    }
    auto& g = group_for(p.where.group_key, p.where.group_label);
    ++g.routed;
    auto& slot = by_group[g.id];
    if (slot.empty()) order.push_back(g.id);
    slot.push_back(std::move(p.msg));
  }
  for (auto id : order) send(groups_.at(id).handle, enqueue_atom_v, std::move(by_group[id]));
  if (!unordered.empty()) send(fairness_, enqueue_atom_v, std::move(unordered));
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
  auto in = s.enqueued + s.redriven;
  auto out = s.acked + s.dead_lettered;
  s.backlog = in > out ? in - out : 0;
  auto inflight = m.in_flight.load(std::memory_order_relaxed);
  s.in_flight = inflight > 0 ? static_cast<std::uint64_t>(inflight) : 0;
  s.live_groups = groups_.size();
  s.dead_letters = dead_letters_.size();
  s.waiting_receives = queue_metrics::get(m.waiting_receives);
  return s;
}

caf::result<std::vector<group_info>> queue_actor_impl::describe_groups(bool blocked_only) {
  struct gather {
    caf::typed_response_promise<std::vector<group_info>> promise;
    std::unordered_map<group_id, group_info> infos;
    std::vector<waiting_item> waiting;
    std::size_t remaining = 0;
    bool blocked_only = false;
    void finish() {
      for (const auto& w : waiting) {
        auto it = infos.find(w.group);
        if (!w.throttled || it == infos.end()) continue;
        it->second.state = group_status::throttled;
        it->second.since = w.since;
        it->second.until = w.until;
      }
      std::vector<group_info> out;
      for (auto& [id, info] : infos) {
        if (blocked_only && (info.state == group_status::ready || info.state == group_status::idle))
          continue;
        out.push_back(std::move(info));
      }
      std::sort(out.begin(), out.end(),
                [](const group_info& a, const group_info& b) { return a.head < b.head; });
      promise.deliver(std::move(out));
    }
    void done() {
      if (--remaining == 0) finish();
    }
  };
  auto g = std::make_shared<gather>();
  g->promise = make_response_promise<std::vector<group_info>>();
  g->blocked_only = blocked_only;
  g->remaining = groups_.size() + 1;
  for (auto& [id, entry] : groups_) {
    auto gid = id;
    request(entry.handle, caf::infinite, describe_atom_v)
        .then(
            [g, gid](group_info& info) {
              g->infos.emplace(gid, std::move(info));
              g->done();
            },
            [g](caf::error&) { g->done(); });
  }
  request(fairness_, caf::infinite, waiting_atom_v)
      .then(
          [g](std::vector<waiting_item>& w) {
            g->waiting = std::move(w);
            g->done();
          },
          [g](caf::error&) { g->done(); });
  return g->promise;
}

queue_actor_impl::behavior_type queue_actor_impl::make_behavior() {
  fairness_actor_config fc{qc_.ctx,
                           qc_.metrics,
                           qc_.spec.name(),
                           qc_.store_key,
                           qc_.spec.throttles(),
                           qc_.spec.lease_duration(),
                           qc_.spec.attempts_max(),
                           caf::actor_cast<queue_actor>(this),
                           qc_.store};
  fairness_ = spawn<fairness_actor_impl, caf::linked>(std::move(fc));
  return {
      [this](enqueue_atom,
             std::vector<outgoing_message>& batch) -> caf::result<std::vector<message_id>> {
        auto placed_batch = admit(batch, now());
        if (!placed_batch) {
          queue_metrics::add(qc_.metrics->rejected, batch.size());
          return to_caf(placed_batch.err());
        }
        std::vector<message_id> ids;
        ids.reserve(placed_batch.value().size());
        for (const auto& p : placed_batch.value()) ids.push_back(p.msg.id);
        auto n = ids.size();
        auto promise = make_response_promise<std::vector<message_id>>();
        persist_and_route(std::move(placed_batch).value(), [this, promise, ids = std::move(ids),
                                                            n](std::optional<error> err) mutable {
          if (err) {
            promise.deliver(to_caf(*err));
            return;
          }
          queue_metrics::add(qc_.metrics->enqueued, n);
          promise.deliver(std::move(ids));
        });
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
        struct gather {
          caf::typed_response_promise<std::vector<lease_outcome>> promise;
          std::vector<lease_outcome> failed;
          std::size_t remaining = 0;
          void done() {
            if (--remaining == 0) promise.deliver(std::move(failed));
          }
        };
        auto g = std::make_shared<gather>();
        g->promise = make_response_promise<std::vector<lease_outcome>>();
        std::vector<lease_token> unordered;
        std::vector<std::pair<group_actor, lease_token>> grouped;
        for (const auto& l : leases) {
          if (!l.group) {
            unordered.push_back(l);
          } else if (auto* entry = find_group(l.group)) {
            grouped.emplace_back(entry->handle, l);
          } else {
            g->failed.push_back(lease_outcome{
                l, error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"}});
          }
        }
        g->remaining = grouped.size() + (unordered.empty() ? 0 : 1) + 1;
        for (auto& [handle, l] : grouped) {
          request(handle, caf::infinite, ack_atom_v, l)
              .then([g](caf::ok_atom) { g->done(); },
                    [g, l = l](caf::error& e) {
                      g->failed.push_back(lease_outcome{l, from_caf(e)});
                      g->done();
                    });
        }
        if (!unordered.empty()) {
          request(fairness_, caf::infinite, ack_atom_v, std::move(unordered))
              .then(
                  [g](std::vector<lease_outcome>& failed) {
                    for (auto& f : failed) g->failed.push_back(std::move(f));
                    g->done();
                  },
                  [g](caf::error& e) {
                    g->failed.push_back(lease_outcome{lease_token{}, from_caf(e)});
                    g->done();
                  });
        }
        g->done();  // the reference held by this handler
        return g->promise;
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
        if (auto* entry = find_group(l.group)) return delegate(entry->handle, nack_atom_v, l, req);
        return to_caf(error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"});
      },
      [this](extend_atom, const lease_token& l, std::int64_t by_us) -> caf::result<timestamp> {
        if (duration{by_us} < limits::lease_min || duration{by_us} > limits::lease_max)
          return to_caf(error{errc::invalid_argument,
                              "extend: lease_ms must be between " +
                                  std::to_string(limits::lease_min.count() / 1000) + " and " +
                                  std::to_string(limits::lease_max.count() / 1000)});
        if (!l.group) return delegate(fairness_, extend_atom_v, l, by_us);
        if (auto* entry = find_group(l.group))
          return delegate(entry->handle, extend_atom_v, l, by_us);
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
        std::vector<std::pair<std::uint64_t, dead_letter>> taken;  // restored if the store fails
        for (auto order : orders) {
          auto node = dead_letters_.extract(order);
          if (node.empty()) continue;  // listed twice
          taken.emplace_back(order, node.mapped());
          auto m = std::move(node.mapped().msg);
          dead_letter_order_.erase(m.id);
          m.seq = message_seq{next_seq_++};
          m.attempts = 0;
          m.not_before = m.delay_until;
          auto where = place(qc_.spec, m);
          LANEQ_ASSERT(where.ok(), "a message that was placed once is placed again");
          batch.push_back(placed{std::move(m), std::move(where).value()});
        }
        auto n = static_cast<std::uint64_t>(batch.size());
        if (n == 0) return std::uint64_t{0};
        auto promise = make_response_promise<std::uint64_t>();
        persist_and_route(std::move(batch), [this, promise, n, taken = std::move(taken)](
                                                std::optional<error> err) mutable {
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
      [this](stats_atom) { return stats(); },
      [this](groups_atom, bool blocked_only) { return describe_groups(blocked_only); },
      [this](dead_atom, std::vector<dead_letter>& dls) {
        // The dead-letter move is recorded by the store (fire and forget in memory).
        caf::anon_send(qc_.store, dead_atom_v, qc_.store_key, dls);
        for (auto& dl : dls) {
          auto order = next_dead_letter_++;
          dead_letter_order_[dl.msg.id] = order;
          dead_letters_.emplace(order, std::move(dl));
        }
      },
      [this](idle_atom, group_id id, std::uint64_t received) {
        auto* entry = find_group(id);
        if (!entry || entry->routed != received) return;  // more messages are on their way
        send(entry->handle, stop_atom_v);
        group_by_key_.erase(entry->key);
        groups_.erase(id);
      },
  };
}

}  // namespace laneq
