// The gateway of a sharded queue (actors/include/laneq/actors/gateway_actor.hpp).
#include "laneq/actors/gateway_actor.hpp"

#include <algorithm>
#include <memory>

#include "laneq/message_checks.hpp"
#include "laneq/sharding.hpp"

namespace laneq {

namespace {

/// An error a shard gave about the j-th message of its part of a batch, renamed for the i-th of
/// the whole batch (`messages[j]` -> `messages[i]`).
caf::error renamed(const caf::error& e, std::size_t j, std::size_t i) {
  auto err = from_caf(e);
  auto from = message_field(j, "");
  if (auto at = err.message.find(from); at != std::string::npos)
    err.message.replace(at, from.size(), message_field(i, ""));
  return to_caf(err);
}

/// One request's answers from several shards, gathered: `remaining` counts the shards still to
/// answer; the first error wins.
template <class T>
struct gather {
  caf::typed_response_promise<T> promise;
  T value{};
  std::size_t remaining = 0;
  std::optional<caf::error> failed;
  /// Applied to the gathered value before it is answered, if set.
  std::function<void(T&)> shape;
  /// One shard is done; after the last, answers.
  void done() {
    if (--remaining > 0) return;
    if (failed) {
      promise.deliver(*failed);
      return;
    }
    if (shape) shape(value);
    promise.deliver(std::move(value));
  }
};

/// Sends `parts[s]` to each shard `s` whose part is not empty (every shard with `all`) as
/// `(atoms..., part)` and gathers the answers into `g` with `add`; the first error wins. `g`
/// answers once every shard has (the caller's own share is released here, at the end).
template <class Reply, class T, class Self, class Part, class Add, class... Atoms>
void scatter(Self* self, const std::vector<shard_actor>& shards, std::shared_ptr<gather<T>> g,
             std::vector<Part>& parts, bool all, Add add, Atoms... atoms) {
  g->remaining = 1;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    if (!all && parts[s].empty()) continue;
    ++g->remaining;
    self->request(shards[s], caf::infinite, atoms..., std::move(parts[s]))
        .then(
            [g, add](Reply& r) {
              add(g->value, r);
              g->done();
            },
            [g](caf::error& e) {
              if (!g->failed) g->failed = e;
              g->done();
            });
  }
  g->done();
}

/// `scatter`'s `add` for answers that are lists: appended.
constexpr auto append = [](auto& to, auto& from) {
  for (auto& x : from) to.push_back(std::move(x));
};
/// `scatter`'s `add` for answers that are counts: summed.
constexpr auto add_up = [](std::uint64_t& to, std::uint64_t from) { to += from; };

void add_stats(queue_stats& sum, const queue_stats& s) {
  for (auto [to, from] : {std::pair{&sum.enqueued, s.enqueued},
                          {&sum.delivered, s.delivered},
                          {&sum.acked, s.acked},
                          {&sum.nacked, s.nacked},
                          {&sum.lease_expired, s.lease_expired},
                          {&sum.dead_lettered, s.dead_lettered},
                          {&sum.redriven, s.redriven},
                          {&sum.purged, s.purged},
                          {&sum.dead_letters_deleted, s.dead_letters_deleted},
                          {&sum.expired_dead_lettered, s.expired_dead_lettered},
                          {&sum.expired_dropped, s.expired_dropped},
                          {&sum.dead_letters_expired, s.dead_letters_expired},
                          {&sum.key_missing, s.key_missing},
                          {&sum.rejected, s.rejected},
                          {&sum.recovered, s.recovered},
                          {&sum.deduplicated, s.deduplicated},
                          {&sum.refused_full, s.refused_full},
                          {&sum.backlog_bytes, s.backlog_bytes},
                          {&sum.dedupe_evictions, s.dedupe_evictions},
                          {&sum.window_reads, s.window_reads},
                          {&sum.window_read_messages, s.window_read_messages},
                          {&sum.corrupt_records, s.corrupt_records},
                          {&sum.backlog, s.backlog},
                          {&sum.in_flight, s.in_flight},
                          {&sum.live_groups, s.live_groups},
                          {&sum.dead_letters, s.dead_letters},
                          {&sum.waiting_receives, s.waiting_receives},
                          {&sum.window_bytes, s.window_bytes},
                          {&sum.first_delivery_sum_us, s.first_delivery_sum_us},
                          {&sum.delayed, s.delayed},
                          {&sum.receive_to_ack_sum_us, s.receive_to_ack_sum_us}})
    *to += from;
  // Ages: the queue's oldest is its oldest shard's.
  sum.oldest_waiting_us = std::max(sum.oldest_waiting_us, s.oldest_waiting_us);
  sum.oldest_dead_letter_us = std::max(sum.oldest_dead_letter_us, s.oldest_dead_letter_us);
  for (auto [to, from] : {std::pair{&sum.first_delivery, &s.first_delivery},
                          {&sum.receive_to_ack, &s.receive_to_ack},
                          {&sum.groups_by_state, &s.groups_by_state}}) {
    to->resize(std::max(to->size(), from->size()));
    for (std::size_t i = 0; i < from->size(); ++i) (*to)[i] += (*from)[i];
  }
  for (const auto& f : s.fairness) {
    auto it = std::find_if(sum.fairness.begin(), sum.fairness.end(),
                           [&f](const auto& x) { return x.key == f.key && x.other == f.other; });
    if (it == sum.fairness.end())
      sum.fairness.push_back(f);
    else
      it->backlog += f.backlog;
  }
}

}  // namespace

gateway_actor_impl::gateway_actor_impl(caf::actor_config& cfg, gateway_actor_config gc)
    : actor_base<queue_control>(cfg), gc_(std::move(gc)) {}

void gateway_actor_impl::on_exit() {
  // The shards go down with the queue: the admin stops the gateway with the queue's reason.
  for (auto& s : gc_.shards)
    send_exit(s, fail_state() ? fail_state() : caf::exit_reason::user_shutdown);
  gc_.shards.clear();
}

const shard_actor* gateway_actor_impl::shard_of(message_id id) const {
  auto s = shard_of_id(id);
  return s < gc_.shards.size() ? &gc_.shards[s] : nullptr;
}

// -- enqueue -------------------------------------------------------------------------------------

gateway_actor_impl::split_batch gateway_actor_impl::split_by_shard(
    std::vector<outgoing_message>& batch, const std::vector<shared_json>* parsed) {
  split_batch out;
  out.parts.resize(shard_count());
  out.where.resize(shard_count());
  out.jsons.resize(shard_count());
  std::vector<std::uint32_t> shard(batch.size());
  bool placed_all = true;
  for (std::size_t i = 0; i < batch.size() && placed_all; ++i) {
    message m;  // the fields keys read, moved in and back out
    m.body = std::move(batch[i].body);
    m.headers = std::move(batch[i].headers);
    m.fairness_key = std::move(batch[i].fairness_key);
    key_source src = parsed ? key_source{m, (*parsed)[i]} : key_source{m};
    auto placed = place(gc_.spec, src);
    if (placed) {
      auto chosen = laneq::shard_of(gc_.spec, placed.value(), src);
#if LANEQ_CANARY_SHARD_SPREAD
      // Canary build (tests/sim): every message goes to the shards in turn, so a group's messages
      // land in several shards, each of which delivers its own head (breaks S1, G3 and G4).
      chosen.reset();
#endif
      shard[i] = chosen ? *chosen : static_cast<std::uint32_t>(next_unordered_++ % shard_count());
    }
    placed_all = placed.ok();
    batch[i].body = std::move(m.body);
    batch[i].headers = std::move(m.headers);
    batch[i].fairness_key = std::move(m.fairness_key);
  }
  // A message without a place (a missing key under policy reject): the whole batch goes to shard
  // 0, which refuses it as a queue of one shard does, naming the message and counting it.
  if (!placed_all) std::fill(shard.begin(), shard.end(), 0);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    out.parts[shard[i]].push_back(std::move(batch[i]));
    if (parsed) out.jsons[shard[i]].push_back((*parsed)[i]);
    out.where[shard[i]].push_back(i);
  }
  return out;
}

caf::result<std::vector<message_id>> gateway_actor_impl::enqueue_batch(
    std::vector<outgoing_message>& batch) {
  if (auto err = check_batch(batch)) return to_caf(*err);
  auto split = split_by_shard(batch, nullptr);
  auto& parts = split.parts;
  auto& where = split.where;
  auto g = std::make_shared<gather<std::vector<message_id>>>();
  g->promise = make_response_promise<std::vector<message_id>>();
  g->value.resize(batch.size());
  for (std::uint32_t s = 0; s < shard_count(); ++s) {
    if (parts[s].empty()) continue;
    ++g->remaining;
    request(gc_.shards[s], caf::infinite, enqueue_atom_v, std::move(parts[s]))
        .then(
            [g, at = where[s]](std::vector<message_id>& ids) {
              for (std::size_t j = 0; j < ids.size() && j < at.size(); ++j)
                g->value[at[j]] = ids[j];
              g->done();
            },
            [g, at = where[s]](caf::error& e) {
              // Only the first error is answered; the other shards' messages may be stored
              // (docs/design/sharding.md, "A batch over several shards").
              if (!g->failed) {
                auto err = from_caf(e);
                std::optional<caf::error> named;
                for (std::size_t j = 0; j < at.size() && !named; ++j)
                  if (err.message.find(message_field(j, "")) != std::string::npos)
                    named = renamed(e, j, at[j]);
                g->failed = named ? *named : e;
              }
              g->done();
            });
  }
  return g->promise;
}

// -- leases --------------------------------------------------------------------------------------

caf::result<std::vector<lease_outcome>> gateway_actor_impl::ack(
    const std::vector<lease_token>& leases) {
  if (leases.empty() || leases.size() > limits::ack_batch_max)
    return to_caf(error{errc::invalid_argument,
                        "ack: a batch holds 1 to " + std::to_string(limits::ack_batch_max) +
                            " leases, got " + std::to_string(leases.size())});
  std::vector<std::vector<lease_token>> parts(shard_count());
  auto g = std::make_shared<gather<std::vector<lease_outcome>>>();
  g->promise = make_response_promise<std::vector<lease_outcome>>();
  for (const auto& l : leases) {
    if (shard_of(l.msg))
      parts[shard_of_id(l.msg)].push_back(l);
    else
      g->value.push_back(lease_outcome{
          l, error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"}});
  }
  scatter<std::vector<lease_outcome>>(this, gc_.shards, g, parts, false, append, ack_atom_v);
  return g->promise;
}

// -- receive -------------------------------------------------------------------------------------

struct gateway_actor_impl::receive_state {
  caf::typed_response_promise<std::vector<delivery>> promise;
  receive_request req;
  std::vector<delivery> out;
  std::uint32_t start = 0;  ///< the shard asked first in this round
  std::uint32_t asked = 0;  ///< shards asked in this round
  timestamp deadline;
  bool answered = false;
};

caf::result<std::vector<delivery>> gateway_actor_impl::receive(const receive_request& req) {
  if (auto err =
          check_receive(req.max, req.lease_us, req.wait_us, gc_.spec.lease_duration(), req.batch))
    return to_caf(*err);
  auto s = std::make_shared<receive_state>();
  s->promise = make_response_promise<std::vector<delivery>>();
  s->req = req;
  s->start = next_receive_++ % shard_count();
  s->deadline = now() + duration{req.wait_us};
  ask_next(s);
  return s->promise;
}

void gateway_actor_impl::ask_next(std::shared_ptr<receive_state> s) {
  if (s->out.size() >= s->req.max || s->asked == shard_count()) {
    if (!s->out.empty() || s->req.wait_us == 0 || now() >= s->deadline) return finish(s);
    return watch_all(s);
  }
  auto shard = (s->start + s->asked++) % shard_count();
  receive_request part{static_cast<std::uint32_t>(s->req.max - s->out.size()), s->req.lease_us, 0,
                       s->req.batch};
  request(gc_.shards[shard], caf::infinite, receive_atom_v, part)
      .then(
          [this, s](std::vector<delivery>& got) {
            for (auto& d : got) s->out.push_back(std::move(d));
            ask_next(s);
          },
          [this, s](caf::error& e) {
            if (!s->out.empty()) return finish(s);  // what was leased already goes out
            s->answered = true;
            s->promise.deliver(std::move(e));
          });
}

void gateway_actor_impl::watch_all(std::shared_ptr<receive_state> s) {
  // Nothing anywhere: every shard says when it has a message ready (without leasing it); the
  // first to say so is asked first in a new round. Another consumer may take the message first:
  // then the round finds nothing and the receive watches again, until its deadline.
  struct round {
    std::uint32_t left = 0;
    bool over = false;
  };
  auto r = std::make_shared<round>();
  r->left = shard_count();
  auto last = [this, s, r] {
    if (--r->left == 0 && !r->over) {
      r->over = true;
      finish(s);  // every watch ran out
    }
  };
  for (std::uint32_t shard = 0; shard < shard_count(); ++shard)
    request(gc_.shards[shard], caf::infinite, watch_atom_v, s->deadline)
        .then(
            [this, s, r, shard, last](std::uint64_t ready) {
              if (ready == 0 || r->over || s->answered) return last();
              r->over = true;
              --r->left;
              s->start = shard;
              s->asked = 0;
              ask_next(s);
            },
            [last](caf::error&) { last(); });
}

void gateway_actor_impl::finish(std::shared_ptr<receive_state> s) {
  if (s->answered) return;
  s->answered = true;
  if (s->out.empty()) ++empty_receives_;
  s->promise.deliver(std::move(s->out));
}

// -- dead letters, stats, groups -----------------------------------------------------------------

caf::result<std::uint64_t> gateway_actor_impl::redrive(const std::vector<message_id>& ids) {
  if (ids.size() > limits::redrive_batch_max)
    return to_caf(
        error{errc::limit_exceeded,
              "redrive: at most " + std::to_string(limits::redrive_batch_max) + " ids at once"});
  std::vector<std::vector<message_id>> parts(shard_count());
  for (auto id : ids) {
    if (!shard_of(id))
      return to_caf(error{errc::dead_letter_not_found, "queue '" + gc_.spec.name() + "': message " +
                                                           std::to_string(id.value) +
                                                           " is not a dead letter"});
    parts[shard_of_id(id)].push_back(id);
  }
  auto g = std::make_shared<gather<std::uint64_t>>();
  g->promise = make_response_promise<std::uint64_t>();
  // Empty ids: every shard redrives.
  scatter<std::uint64_t>(this, gc_.shards, g, parts, ids.empty(), add_up, redrive_atom_v);
  return g->promise;
}

std::optional<caf::error> gateway_actor_impl::split_ids(
    const std::vector<message_id>& ids, std::vector<std::vector<message_id>>& parts) {
  parts.assign(shard_count(), {});
  for (auto id : ids) {
    if (!shard_of(id))
      return to_caf(error{errc::dead_letter_not_found, "queue '" + gc_.spec.name() + "': message " +
                                                           std::to_string(id.value) +
                                                           " is not a dead letter"});
    parts[shard_of_id(id)].push_back(id);
  }
  return std::nullopt;
}

caf::result<std::vector<dead_letter>> gateway_actor_impl::dead_letters_by_id(
    const std::vector<message_id>& ids) {
  std::vector<std::vector<message_id>> parts;
  if (auto e = split_ids(ids, parts)) return *e;
  auto g = std::make_shared<gather<std::vector<dead_letter>>>();
  g->promise = make_response_promise<std::vector<dead_letter>>();
  // In the order the ids were given (each shard answers its own in that order).
  g->shape = [ids](std::vector<dead_letter>& all) {
    std::vector<dead_letter> out;
    for (auto id : ids)
      for (auto& d : all)
        if (d.msg.id == id) {
          out.push_back(d);
          break;
        }
    all = std::move(out);
  };
  scatter<std::vector<dead_letter>>(this, gc_.shards, g, parts, false, append, dlq_atom_v);
  return g->promise;
}

caf::result<std::uint64_t> gateway_actor_impl::delete_dead_letters(
    const std::vector<message_id>& ids) {
  std::vector<std::vector<message_id>> parts;
  if (auto e = split_ids(ids, parts)) return *e;
  auto g = std::make_shared<gather<std::uint64_t>>();
  g->promise = make_response_promise<std::uint64_t>();
  // Empty ids: every shard deletes all.
  scatter<std::uint64_t>(this, gc_.shards, g, parts, ids.empty(), add_up, dlq_atom_v, drop_atom_v);
  return g->promise;
}

caf::result<std::uint64_t> gateway_actor_impl::purge(const group_filter& which) {
  // A group lives in one shard; every shard is asked (the others find nothing).
  auto g = std::make_shared<gather<std::uint64_t>>();
  g->promise = make_response_promise<std::uint64_t>();
  g->remaining = shard_count();
  for (auto& shard : gc_.shards)
    request(shard, caf::infinite, purge_atom_v, which)
        .then(
            [g](std::uint64_t n) {
              g->value += n;
              g->done();
            },
            [g](caf::error& e) {
              if (!g->failed) g->failed = e;
              g->done();
            });
  return g->promise;
}

caf::result<std::vector<peeked_message>> gateway_actor_impl::peek(const peek_request& req) {
  // Shard by shard, in shard order: the first `limit` of them all.
  using per_shard = std::vector<std::vector<peeked_message>>;
  struct peek_gather {
    caf::typed_response_promise<std::vector<peeked_message>> promise;
    per_shard parts;
    std::size_t remaining = 0;
    std::optional<caf::error> failed;
  };
  auto g = std::make_shared<peek_gather>();
  g->promise = make_response_promise<std::vector<peeked_message>>();
  g->parts.resize(shard_count());
  g->remaining = shard_count();
  auto answered = [g, limit = req.limit] {
    if (--g->remaining > 0) return;
    if (g->failed) {
      g->promise.deliver(*g->failed);
      return;
    }
    std::vector<peeked_message> out;
    for (auto& part : g->parts)
      for (auto& m : part)
        if (out.size() < limit) out.push_back(std::move(m));
    g->promise.deliver(std::move(out));
  };
  for (std::uint32_t s = 0; s < shard_count(); ++s)
    request(gc_.shards[s], caf::infinite, peek_atom_v, req)
        .then(
            [g, s, answered](std::vector<peeked_message>& ms) {
              g->parts[s] = std::move(ms);
              answered();
            },
            [g, answered](caf::error& e) {
              if (!g->failed) g->failed = e;
              answered();
            });
  return g->promise;
}

caf::result<std::vector<dead_letter>> gateway_actor_impl::dead_letters(std::uint32_t max) {
  auto g = std::make_shared<gather<std::vector<dead_letter>>>();
  g->promise = make_response_promise<std::vector<dead_letter>>();
  // Across shards in the order they became dead letters (then by id), the first `max`.
  g->shape = [max](std::vector<dead_letter>& all) {
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.at != b.at ? a.at < b.at : a.msg.id < b.msg.id;
    });
    if (all.size() > max) all.resize(max);
  };
  g->remaining = shard_count();
  for (auto& shard : gc_.shards)
    request(shard, caf::infinite, dlq_atom_v, max)
        .then(
            [g](std::vector<dead_letter>& dls) {
              for (auto& d : dls) g->value.push_back(std::move(d));
              g->done();
            },
            [g](caf::error& e) {
              if (!g->failed) g->failed = e;
              g->done();
            });
  return g->promise;
}

caf::result<queue_stats> gateway_actor_impl::stats() {
  auto g = std::make_shared<gather<queue_stats>>();
  g->promise = make_response_promise<queue_stats>();
  g->value.name = gc_.spec.name();
  g->value.empty_receives = empty_receives_;  // add_stats leaves it: the shards' are partial
  g->remaining = shard_count();
  for (auto& shard : gc_.shards)
    request(shard, caf::infinite, stats_atom_v)
        .then(
            [g](queue_stats& s) {
              add_stats(g->value, s);
              g->done();
            },
            [g](caf::error& e) {
              if (!g->failed) g->failed = e;
              g->done();
            });
  return g->promise;
}

/// A page of groups being gathered shard by shard (a sharded queue's cursor is the shard, two
/// bytes, then the lane within it).
struct groups_gather {
  caf::typed_response_promise<groups_page> promise;
  groups_query query;
  groups_page page;
};

namespace {

std::string shard_cursor(std::uint32_t shard, std::string_view lane) {
  std::string out;
  out += static_cast<char>(shard >> 8);
  out += static_cast<char>(shard & 0xff);
  out.append(lane);
  return out;
}

}  // namespace

caf::result<groups_page> gateway_actor_impl::groups(const groups_query& q) {
  if (q.limit == 0 || q.limit > limits::groups_page_max)
    return to_caf(error{errc::invalid_argument,
                        "limit must be 1 to " + std::to_string(limits::groups_page_max)});
  std::uint32_t shard = 0;
  std::string after;
  if (!q.after.empty()) {
    if (q.after.size() != 18) return to_caf(error{errc::invalid_argument, "cursor is malformed"});
    shard = (static_cast<std::uint32_t>(static_cast<unsigned char>(q.after[0])) << 8) |
            static_cast<unsigned char>(q.after[1]);
    if (shard >= shard_count()) return to_caf(error{errc::invalid_argument, "cursor is malformed"});
    after = q.after.substr(2);
  }
  auto g = std::make_shared<groups_gather>();
  g->promise = make_response_promise<groups_page>();
  g->query = q;
  groups_from(g, shard, std::move(after));
  return g->promise;
}

void gateway_actor_impl::groups_from(std::shared_ptr<groups_gather> g, std::uint32_t shard,
                                     std::string after) {
  // Shard by shard, each in lane order, one shard's page at a time: the work of a page stays
  // bounded by its limit, as in one shard.
  groups_query part = g->query;
  part.after = std::move(after);
  part.limit = g->query.limit - static_cast<std::uint32_t>(g->page.groups.size());
  request(gc_.shards[shard], caf::infinite, groups_atom_v, part)
      .then(
          [this, g, shard](groups_page& p) {
            for (auto& info : p.groups) g->page.groups.push_back(std::move(info));
            if (!p.next.empty()) {
              g->page.next = shard_cursor(shard, p.next);
              g->promise.deliver(std::move(g->page));
            } else if (shard + 1 == shard_count()) {
              g->promise.deliver(std::move(g->page));  // the last page
            } else if (g->page.groups.size() == g->query.limit) {
              // The next shard from its start: no lane id is all zero (codec::make_lane_id).
              g->page.next = shard_cursor(shard + 1, std::string(16, '\0'));
              g->promise.deliver(std::move(g->page));
            } else {
              groups_from(g, shard + 1, {});
            }
          },
          [g](caf::error& e) { g->promise.deliver(std::move(e)); });
}

// -- topics (docs/design/lanes.md L10) and the rest ----------------------------------------------

caf::result<topic_prepared> gateway_actor_impl::prepare(std::vector<outgoing_message>& batch,
                                                        std::vector<shared_json>& parsed) {
  // A topic's batch over several shards: each shard prepares its part and holds its writes; the
  // topic writes every part in its one write, then settles every shard.
  if (!prepared_.empty() || batch.size() != parsed.size())
    return to_caf(error{errc::unavailable,
                        "queue '" + gc_.spec.name() + "' is busy with another topic enqueue"});
  if (auto err = check_batch(batch)) return to_caf(*err);
  auto split = split_by_shard(batch, &parsed);
  auto& parts = split.parts;
  auto& jsons = split.jsons;
  auto& where = split.where;
  auto g = std::make_shared<gather<topic_prepared>>();
  g->promise = make_response_promise<topic_prepared>();
  g->value.ids.resize(batch.size());
  g->remaining = 1;
  for (std::uint32_t s = 0; s < shard_count(); ++s) {
    if (parts[s].empty()) continue;
    ++g->remaining;
    prepared_.push_back(s);
    request(gc_.shards[s], caf::infinite, prepare_atom_v, std::move(parts[s]), std::move(jsons[s]))
        .then(
            [g, at = where[s]](topic_prepared& p) {
              for (std::size_t j = 0; j < p.ids.size() && j < at.size(); ++j)
                g->value.ids[at[j]] = p.ids[j];
              for (auto& op : p.ops) g->value.ops.push_back(std::move(op));
              g->value.sync = p.sync;
              g->done();
            },
            [g](caf::error& e) {
              if (!g->failed) g->failed = e;
              g->done();
            });
  }
  g->done();
  return g->promise;
}

caf::result<caf::ok_atom> gateway_actor_impl::settle(bool committed) {
  auto g = std::make_shared<gather<caf::ok_atom>>();
  g->promise = make_response_promise<caf::ok_atom>();
  g->remaining = 1;
  for (auto s : std::exchange(prepared_, {})) {
    ++g->remaining;
    request(gc_.shards[s], caf::infinite, settle_atom_v, committed)
        .then([g](caf::ok_atom) { g->done(); },
              [g](caf::error& e) {
                if (!g->failed) g->failed = e;
                g->done();
              });
  }
  g->done();
  return g->promise;
}

template <class... Ts>
caf::result<caf::ok_atom> gateway_actor_impl::to_all(Ts... xs) {
  auto g = std::make_shared<gather<caf::ok_atom>>();
  g->promise = make_response_promise<caf::ok_atom>();
  g->remaining = shard_count();
  for (auto& shard : gc_.shards)
    request(shard, caf::infinite, xs...)
        .then([g](caf::ok_atom) { g->done(); },
              [g](caf::error& e) {
                if (!g->failed) g->failed = e;
                g->done();
              });
  return g->promise;
}

gateway_actor_impl::behavior_type gateway_actor_impl::make_behavior() {
  return {
      [this](enqueue_atom, std::vector<outgoing_message>& batch) { return enqueue_batch(batch); },
      [this](receive_atom, const receive_request& req) { return receive(req); },
      [this](ack_atom, const std::vector<lease_token>& leases) { return ack(leases); },
      [this](ack_atom, const lease_token& l, std::uint32_t count) -> caf::result<std::uint64_t> {
        if (const auto* shard = shard_of(l.msg)) return delegate(*shard, ack_atom_v, l, count);
        return to_caf(error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"});
      },
      [this](nack_atom, const lease_token& l,
             const nack_request& req) -> caf::result<caf::ok_atom> {
        if (const auto* shard = shard_of(l.msg)) return delegate(*shard, nack_atom_v, l, req);
        return to_caf(error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"});
      },
      [this](extend_atom, const lease_token& l, std::int64_t by_us) -> caf::result<timestamp> {
        if (const auto* shard = shard_of(l.msg)) return delegate(*shard, extend_atom_v, l, by_us);
        return to_caf(error{errc::lease_not_found, "no lease " + to_string(l) + " is in flight"});
      },
      [this](dlq_atom, std::uint32_t max) { return dead_letters(max); },
      [this](redrive_atom, const std::vector<message_id>& ids) { return redrive(ids); },
      [this](dlq_atom, const std::vector<message_id>& ids) { return dead_letters_by_id(ids); },
      [this](dlq_atom, drop_atom, const std::vector<message_id>& ids) {
        return delete_dead_letters(ids);
      },
      [this](purge_atom, const group_filter& which) { return purge(which); },
      [this](peek_atom, const peek_request& req) { return peek(req); },
      [this](stats_atom) { return stats(); },
      [this](groups_atom, const groups_query& q) { return groups(q); },
      [this](recover_atom) { return to_all(recover_atom_v); },
      [this](create_atom, const queue_spec& spec) {
        gc_.spec = spec;
        for (auto& shard : gc_.shards) send(shard, create_atom_v, spec);
      },
      [this](update_atom, const queue_spec& spec) {
        gc_.spec = spec;  // the receive check's default lease
        return to_all(update_atom_v, spec);
      },
      [this](prepare_atom, std::vector<outgoing_message>& batch, std::vector<shared_json>& parsed) {
        return prepare(batch, parsed);
      },
      [this](settle_atom, bool committed) { return settle(committed); },
      [this](budget_atom, std::uint64_t per_shard) {
        for (auto& shard : gc_.shards) send(shard, budget_atom_v, per_shard);
      },
  };
}

}  // namespace laneq
