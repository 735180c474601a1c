// Purge and peek (docs/design/purge.md): a purge removes the waiting messages of a shard, or of
// one ordering group, and erases their records in one write, in its place among the shard's
// writes; a peek reads the first messages back from the store without a lease.
//
// A purge takes effect once every write the shard made before it is durable: then everything that
// arrived before it has been routed into memory (or counted in the store), and nothing that
// arrived after it has (its write comes later). It removes what arrived before it, by arrival seq
// (`end`): the erases stop at `end`, so a message enqueued after the purge keeps its record even
// when its write reached the store first. Messages in flight stay, with their leases.
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

namespace {

store_op erase_range(std::string from, std::string to) {
  return store_op{store_op::kind::erase_range, std::move(from), std::move(to)};
}

/// Erases of `lane`'s records with seq below `end`, except those in `keep` (ascending).
void erase_lane_except(std::uint64_t uid, const codec::lane_id& lane,
                       const std::vector<message_seq>& keep, message_seq end,
                       std::vector<store_op>& ops) {
  auto from = codec::message_key(uid, lane, message_seq{0});
  for (auto seq : keep) {
    if (seq >= end) break;
    ops.push_back(erase_range(std::move(from), codec::message_key(uid, lane, seq)));
    from = codec::message_key(uid, lane, message_seq{seq.value + 1});
  }
  ops.push_back(erase_range(std::move(from), codec::message_key(uid, lane, end)));
}

error peek_limit_error(const std::string& queue, std::uint32_t limit) {
  return error{errc::invalid_argument, "queue '" + queue + "': peek limit " +
                                           std::to_string(limit) + " must be 1 to " +
                                           std::to_string(limits::peek_max)};
}

}  // namespace

shard_engine::group_slot* shard_engine::group_by_label(std::string_view key) {
  // Groups are indexed by their encoded key, which a label does not give back for every key
  // kind: a linear pass, for an operator's call.
  for (auto& g : group_by_lane_)
    if (!g.kept && g.label() == key) return &g;  // a kept group is not live: nothing to show
  return nullptr;
}

void shard_engine::discard_reads(group_id g, std::optional<std::uint64_t> cls) {
  for (auto& [id, slot] : reads_) {
    bool group_read = slot.kind == read_kind::fetch && slot.group == g;
    bool class_read = cls && slot.kind == read_kind::unordered && slot.index == *cls;
    if (group_read || class_read) slot.kind = read_kind::discarded;
  }
}

void shard_engine::purge(request_id r, const group_filter& which, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, which] { purge(r, which, last_now_); });
  // What arrived before it: seqs below `end` (a redrive took its seqs when it came).
  auto end = message_seq{next_seq_};
  writes_.add_durable([this, r, which, end] { purge_now(r, which, end, last_now_); }, last_now_);
}

void shard_engine::purge_now(request_id r, const group_filter& which, message_seq end,
                             timestamp t) {
  std::vector<store_op> ops;
  std::vector<group_id> touched;
  std::uint64_t n = 0;
  if (which.one) {
    if (auto* g = group_by_label(which.key)) {
      n += purge_group(*g, end, ops, t);
      touched.push_back(g->state.id());
    }
  } else {
    // Every head offered to the scheduler is a waiting message (held and in-flight heads are
    // not in it): one pass takes them all.
    sched_.remove_if([](group_id, message_seq) { return true; });
    for (auto& g : group_by_lane_) {
      if (g.kept) continue;  // empty, and nothing waits on it
      g.scheduled = false;
      n += purge_group(g, end, ops, t);
      touched.push_back(g.state.id());
    }
    n += purge_unordered(end, ops, t);
  }
  release_purged_bytes(n);
  counters_.purged += n;
  if (ops.empty()) {
    for (auto id : touched)
      if (auto* g = find_group(id)) offer_when_settled(*g, t);  // an empty group goes
    return reply(r, n);
  }
  for (auto id : touched) ++find_group(id)->unsettled;  // their next heads wait for the erases
  write_request w;
  w.ops = std::move(ops);
  // Not a write that admits: a failed one is answered at once and sent again until durable.
  w.answer = [this, r, n](std::optional<error> e) {
    if (e)
      reply(r, storage_failure(cfg_.spec.name(), std::move(*e)));
    else
      reply(r, n);
  };
  w.settle = [this, touched = std::move(touched)](bool) {
    for (auto id : touched) {
      if (auto* g = find_group(id)) {
        --g->unsettled;
        offer_when_settled(*g, last_now_);
      }
    }
  };
  writes_.add(std::move(w));
  resume_reading(t);
  serve_pending(t);
}

std::uint64_t shard_engine::purge_group(group_slot& g, message_seq end, std::vector<store_op>& ops,
                                        timestamp t) {
  auto& s = g.state;
  // What stays: the lease's batch in flight, or a head held for its old lease holder after a
  // restart (with the rest of its batch, if its record names one).
  std::size_t keep = s.batch_left();
  if (g.held && s.in_memory() > 0) {
    const auto* rc = reclaim_of(g);
    keep = std::max<std::size_t>(keep, rc && rc->record ? rc->record->count : 1);
    keep = std::min(keep, s.in_memory());
  }
  if (g.scheduled) {
    sched_.remove_if([id = s.id()](group_id gid, message_seq) { return gid == id; });
    g.scheduled = false;
  }
  if (keep == 0) g.next = false;  // its head is gone
  discard_reads(s.id(), std::nullopt);
  fetch_retries_.erase(s.id());
  auto after = keep > 0 ? s.at(keep - 1).seq : message_seq{0};
  auto gone = s.on_purge(keep, t);
  auto held = s.memory_bytes();
  window_bytes_ = window_bytes_ + held - g.charged;
  g.charged = held;
  if (gone > 0) {
    auto [from, to] = codec::lane_range(cfg_.uid, g.lane, after);
    ops.push_back(erase_range(std::move(from), codec::message_key(cfg_.uid, g.lane, end)));
  }
  return gone;
}

std::uint64_t shard_engine::purge_unordered(message_seq end, std::vector<store_op>& ops,
                                            timestamp t) {
  (void)t;
  // The scheduler's unordered messages went with everything else (purge_now); the delayed ones'
  // wake-ups go too. In-flight messages keep their records: the lanes are erased around them.
  delayed_.clear();
  auto in_flight = leases_.seqs();
  for (auto& [key, c] : classes_)
    in_flight.insert(in_flight.end(), c->ahead.begin(), c->ahead.end());
  std::sort(in_flight.begin(), in_flight.end());
  std::uint64_t n = 0;
  std::vector<std::uint64_t> ids;
  for (auto& [key, cp] : classes_) {
    auto& c = *cp;
    n += c.queued + c.stored_only;
    if (c.queued + c.stored_only > 0) erase_lane_except(cfg_.uid, c.lane, in_flight, end, ops);
    window_bytes_ -= c.bytes;
    c.bytes = 0;
    c.queued = 0;
    c.delayed = 0;
    c.stored_only = 0;
    c.corrupt = false;
    if (c.fetching) {
      discard_reads(group_id{}, c.id);
      c.fetching = false;
      fetching_.erase(c.id);
    }
    class_retries_.erase(c.id);
    ids.push_back(c.id);
  }
  for (auto id : ids)
    if (auto* c = find_class(id)) maybe_drop_class(*c);
  return n;
}

void shard_engine::peek(request_id r, const peek_request& req, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, req] { peek(r, req, last_now_); });
  if (req.limit == 0 || req.limit > limits::peek_max)
    return reply(r, peek_limit_error(cfg_.spec.name(), req.limit));
  std::pair<std::string, std::string> range;
  if (req.group.one) {
    auto* g = group_by_label(req.group.key);
    if (!g) return reply(r, std::vector<peeked_message>{});  // no message has that key now
    range = codec::lane_range(cfg_.uid, g->lane, message_seq{0});
  } else {
    range = codec::queue_range(codec::tag::message, cfg_.uid);
  }
  // Once every earlier write is durable, the store holds what memory says: a message acked
  // before the peek is gone, one enqueued before it is there.
  writes_.add_durable(
      [this, r, range = std::move(range), limit = req.limit] {
        read(read_slot{read_kind::peek, group_id{}, r}, range.first, range.second, limit);
      },
      last_now_);
}

void shard_engine::on_peek(request_id r, result<std::vector<store_entry>> page) {
  if (!page) return reply(r, storage_failure(cfg_.spec.name(), page.err()));
  std::vector<peeked_message> out;
  out.reserve(page.value().size());
  for (const auto& e : page.value()) {
    auto m = codec::decode_message(e.value);
    auto k = codec::parse_message_key(e.key);
    if (!m || !k) return reply(r, storage_failure(cfg_.spec.name(), m ? k.err() : m.err()));
    peeked_message p;
    p.msg = std::move(m).value();
    if (auto it = group_by_lane_.find(k.value().lane.bytes); it != group_by_lane_.end()) {
      const auto& s = it->state;
      p.ordering_key = std::string{it->label()};
      for (std::size_t i = 0; i < s.batch_left(); ++i)
        if (s.at(i).seq == p.msg.seq) p.in_flight = true;
      if (p.in_flight) p.lease_deadline = s.lease_deadline();
    } else if (auto w = leases_.window(p.msg.id)) {
      p.in_flight = true;
      p.lease_deadline = w->second;
    }
    out.push_back(std::move(p));
  }
  reply(r, std::move(out));
}

}  // namespace laneq
