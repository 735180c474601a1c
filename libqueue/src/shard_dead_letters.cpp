// Dead letters (docs/design/ordering.md, "Dead-lettering" and "Redrive"; persistence.md):
// they stay in the store, not in memory. A move writes the dead letter's record ('D' uid
// order: the list's order) and an index from its message id to that order ('I' uid id); the
// shard keeps only their count. A listing and a redrive read the records back once every write
// the shard made before the request is durable (so they see every move made before it). A
// redrive takes its place among the shard's writes, and its new arrival seqs, when it comes: what
// is enqueued after it is behind it in its group (O9), and the next listing or redrive waits for
// it, so a redrive never reads a record another is taking away.
#include <algorithm>

#include "shard_parts.hpp"

namespace laneq {

namespace {

error not_a_dead_letter(const std::string& queue, message_id id) {
  return error{errc::dead_letter_not_found, "queue '" + queue + "': message " +
                                                std::to_string(id.value) + " is not a dead letter"};
}

/// The range of exactly one key.
std::pair<std::string, std::string> one_key(std::string key) {
  auto end = key;
  end.push_back('\0');
  return {std::move(key), std::move(end)};
}

}  // namespace

std::vector<store_op> shard_engine::move_dead(std::vector<dead_letter> dls,
                                              const codec::lane_id& lane) {
  std::vector<store_op> ops;
  counters_.dead_lettered += dls.size();
  for (auto& dl : dls) {
    release_bytes(dl.msg.body.size());
    auto order = next_dead_++;
    dl.keep_lane(lane.bytes);  // the live record goes from the lane it was stored under (L7)
    ops.push_back(erase_message(cfg_.uid, lane, dl.msg.seq));
    ops.push_back(store_op{store_op::kind::put, codec::dead_key(cfg_.uid, order),
                           codec::encode_dead_letter(dl)});
    ops.push_back(store_op{store_op::kind::put, codec::dead_index_key(cfg_.uid, dl.msg.id),
                           codec::encode_u64(order)});
    if (dead_count_++ == 0) oldest_dead_at_ = dl.at;
  }
  return ops;
}

void shard_engine::dead_letters(request_id r, std::uint32_t max, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, max] { dead_letters(r, max, last_now_); });
  auto n = std::min<std::uint32_t>(max, limits::store_scan_max);
  auto s = std::make_unique<redrive_state>();
  s->r = r;
  dead_ops_.emplace(r, std::move(s));
  writes_.add_durable(
      [this, r, n] {
        auto [from, to] = codec::queue_range(codec::tag::dead, cfg_.uid);
        read(read_slot{read_kind::dead_list, group_id{}, r}, std::move(from), std::move(to), n);
      },
      last_now_);
}

void shard_engine::on_dead_list(request_id r, result<std::vector<store_entry>> page) {
  dead_ops_.erase(r);
  if (!page) return reply(r, storage_failure(cfg_.spec.name(), page.err()));
  std::vector<dead_letter> out;
  out.reserve(page.value().size());
  for (const auto& e : page.value()) {
    auto d = codec::decode_dead_letter(e.value);
    if (!d) return reply(r, storage_failure(cfg_.spec.name(), d.err()));
    out.push_back(std::move(d).value());
  }
  reply(r, std::move(out));
}

void shard_engine::redrive(request_id r, const std::vector<message_id>& ids, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, ids] { redrive(r, ids, last_now_); });
  if (ids.size() > limits::redrive_batch_max)
    return reply(
        r, error{errc::limit_exceeded,
                 "redrive: at most " + std::to_string(limits::redrive_batch_max) + " ids at once"});
  auto s = std::make_unique<redrive_state>();
  s->r = r;
  s->ids = ids;
  // Its place now: the arrival seqs its messages get, and its write among the shard's writes.
  s->first_seq = next_seq_;
  next_seq_ += ids.empty() ? limits::redrive_batch_max : ids.size();
  start_dead_op(std::move(s));
}

void shard_engine::dead_letters(request_id r, const std::vector<message_id>& ids, timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, ids] { dead_letters(r, ids, last_now_); });
  if (ids.empty()) return reply(r, std::vector<dead_letter>{});
  if (ids.size() > limits::redrive_batch_max)
    return reply(r, error{errc::limit_exceeded,
                          "queue '" + cfg_.spec.name() + "': dead letters by id: at most " +
                              std::to_string(limits::redrive_batch_max) + " ids at once"});
  auto s = std::make_unique<redrive_state>();
  s->what = redrive_state::op::list;
  s->r = r;
  s->ids = ids;
  start_dead_op(std::move(s));
}

void shard_engine::delete_dead_letters(request_id r, const std::vector<message_id>& ids,
                                       timestamp now) {
  catch_up(now);
  if (recovery_) return hold(r, [this, r, ids] { delete_dead_letters(r, ids, last_now_); });
  if (ids.size() > limits::dead_letter_delete_max)
    return reply(r, error{errc::limit_exceeded,
                          "queue '" + cfg_.spec.name() + "': delete dead letters: at most " +
                              std::to_string(limits::dead_letter_delete_max) + " ids at once"});
  auto s = std::make_unique<redrive_state>();
  s->what = redrive_state::op::erase;
  s->r = r;
  s->ids = ids;
  // Deleting every one: what moved to the list after this request is not deleted (its write
  // comes after this one); the count leaves it out.
  s->moved_before = counters_.dead_lettered;
  start_dead_op(std::move(s));
}

void shard_engine::start_dead_op(std::unique_ptr<redrive_state> s) {
  auto r = s->r;
  dead_ops_.emplace(r, std::move(s));
  // Once every earlier write is durable it reads, in the place it reserves now among the
  // shard's writes. With nothing pending that is at once, before its place is reserved: then it
  // reads right after.
  writes_.add_durable(
      [this, r] {
        auto& st = *dead_ops_.at(r);
        if (st.slot == 0)
          st.due = true;
        else
          read_dead_letters(st);
      },
      last_now_);
  auto& st = *dead_ops_.at(r);
  st.slot = writes_.reserve();
  if (st.due) read_dead_letters(st);
}

void shard_engine::read_dead_letters(redrive_state& s) {
  if (s.what == redrive_state::op::erase && s.ids.empty()) return erase_dead_letters(s);
  if (s.ids.empty()) {
    auto [from, to] = codec::queue_range(codec::tag::dead, cfg_.uid);
    s.waiting = 1;
    auto max = s.what == redrive_state::op::expire ? limits::dead_letter_expiry_batch
                                                   : limits::redrive_batch_max;
    return read(read_slot{read_kind::redrive_dead, group_id{}, s.r}, std::move(from), std::move(to),
                static_cast<std::uint32_t>(max));
  }
  s.orders.resize(s.ids.size());
  s.waiting = s.ids.size();
  for (std::size_t i = 0; i < s.ids.size(); ++i) {
    auto [from, to] = one_key(codec::dead_index_key(cfg_.uid, s.ids[i]));
    read(read_slot{read_kind::redrive_index, group_id{}, s.r, i}, std::move(from), std::move(to),
         1);
  }
}

void shard_engine::on_redrive_index(request_id r, std::size_t i,
                                    result<std::vector<store_entry>> page) {
  auto& s = *dead_ops_.at(r);
  if (!page) {
    s.failed = storage_failure(cfg_.spec.name(), page.err());
  } else if (!page.value().empty()) {
    auto order = codec::decode_u64(page.value().front().value);
    if (!order)
      s.failed = storage_failure(cfg_.spec.name(), order.err());
    else
      s.orders[i] = order.value();
  }
  if (--s.waiting > 0) return;
  if (s.failed) return end_redrive(s, std::move(s.failed));
  for (std::size_t j = 0; j < s.ids.size(); ++j)
    if (!s.orders[j]) return end_redrive(s, not_a_dead_letter(cfg_.spec.name(), s.ids[j]));
  // The records, each by its order (an id listed twice is read and redriven once).
  std::vector<std::uint64_t> orders;
  for (const auto& o : s.orders) orders.push_back(*o);
  std::sort(orders.begin(), orders.end());
  orders.erase(std::unique(orders.begin(), orders.end()), orders.end());
  s.waiting = orders.size();
  for (auto order : orders) {
    auto [from, to] = one_key(codec::dead_key(cfg_.uid, order));
    read(read_slot{read_kind::redrive_dead, group_id{}, s.r}, std::move(from), std::move(to), 1);
  }
}

void shard_engine::on_redrive_dead(request_id r, result<std::vector<store_entry>> page) {
  auto& s = *dead_ops_.at(r);
  if (!page) s.failed = storage_failure(cfg_.spec.name(), page.err());
  for (const auto& e : page ? page.value() : std::vector<store_entry>{}) {
    auto d = codec::decode_dead_letter(e.value);
    auto order = codec::parse_dead_order(e.key);
    if (!d || !order) {
      s.failed = storage_failure(cfg_.spec.name(), d ? order.err() : d.err());
      break;
    }
    s.taken.emplace_back(order.value(), std::move(d).value());
  }
  if (--s.waiting > 0) return;
  if (s.failed) return end_redrive(s, std::move(s.failed));
  if (s.what != redrive_state::op::redrive) return dead_letters_taken(s);
  redrive_taken(s);
}

void shard_engine::redrive_in_given_order(redrive_state& s) {
  // In the order the ids were given (the list's order when none were).
  if (s.ids.empty()) return;
  std::vector<std::pair<std::uint64_t, dead_letter>> in_order;
  for (const auto& o : s.orders) {
    auto it =
        std::find_if(s.taken.begin(), s.taken.end(), [&o](const auto& x) { return x.first == *o; });
    if (it == s.taken.end()) continue;  // listed twice: redriven once
    in_order.push_back(std::move(*it));
    s.taken.erase(it);
  }
  s.taken = std::move(in_order);
}

void shard_engine::redrive_taken(redrive_state& s) {
  // A redriven message is a new arrival: the seqs taken when the redrive came, after everything
  // that arrived before it; its id, enqueued_at and not-before time stay (O7, O9). It goes back
  // to the lane it was stored under (lanes.md L7).
  redrive_in_given_order(s);
  auto batch = std::make_shared<std::vector<placed>>();
  write_request w;
  auto seq = s.first_seq;
  for (auto& [order, dl] : s.taken) {
    auto m = std::move(dl.msg);
    codec::lane_id lane{dl.lane};
    if (!dl.lane_known) {
      // A dead letter stored before records kept their lane: the lane again from the envelope.
      auto where = place(cfg_.spec, m);
      if (!where) {
        auto err = where.err();
        err.message = "redrive of message " + std::to_string(m.id.value) + ": " + err.message;
        return end_redrive(s, std::move(err));  // a key function that no longer finds the key
      }
      lane = lane_of(where.value(), m);
    }
    w.ops.push_back(erase_dead(codec::dead_key(cfg_.uid, order)));
    w.ops.push_back(erase_dead(codec::dead_index_key(cfg_.uid, m.id)));
    m.seq = message_seq{seq++};
    m.attempts = 0;
    m.not_before = m.delay_until;
    m.redriven_after_s = seconds_after(m.enqueued_at, last_now_);  // retention counts anew
    auto where = stored_placement(m, lane);
    // An unordered one goes to its class's lane (from lane 0, if it died before classes).
    if (!where.ordered) lane = lane_of(where, m);
    w.ops.push_back(put_message(cfg_.uid, lane, m));
    batch->push_back(placed{std::move(m), std::move(where), lane, group_id{}});
  }
  auto n = static_cast<std::uint64_t>(batch->size());
  if (n == 0) return end_redrive(s, std::nullopt);
  std::uint64_t bytes = 0;
  for (const auto& p : *batch) bytes += p.msg.body.size();
  auto r = s.r;
  w.admits = true;
  w.counters = true;
  w.answer = [this, r](std::optional<error> e) {
    if (e) reply(r, storage_failure(cfg_.spec.name(), std::move(*e)));
  };
  w.settle = [this, r, n, bytes, batch](bool durable) {
    if (!durable) return;  // nothing was redriven (answered with the error)
    dead_count_ -= n;
    depth_bytes_ += bytes;
    if (dead_count_ == 0) oldest_dead_at_.reset();
    counters_.redriven += n;
    route(std::move(*batch), last_now_);
    reply(r, n);
  };
  auto slot = s.slot;
  dead_ops_.erase(r);
  writes_.fill(slot, std::move(w), last_now_);
}

void shard_engine::dead_letters_taken(redrive_state& s) {
  if (s.what == redrive_state::op::expire) return expire_dead_taken(s);
  redrive_in_given_order(s);
  if (s.what == redrive_state::op::list) {
    std::vector<dead_letter> out;
    out.reserve(s.taken.size());
    for (auto& [order, dl] : s.taken) out.push_back(std::move(dl));
    auto r = s.r;
    end_redrive(s, std::nullopt, false);
    return reply(r, std::move(out));
  }
  write_request w;
  for (const auto& [order, dl] : s.taken) {
    w.ops.push_back(erase_dead(codec::dead_key(cfg_.uid, order)));
    w.ops.push_back(erase_dead(codec::dead_index_key(cfg_.uid, dl.msg.id)));
  }
  auto n = static_cast<std::uint64_t>(s.taken.size());
  if (n == 0) return end_redrive(s, std::nullopt);
  write_dead_deletes(s, std::move(w), n);
}

void shard_engine::erase_dead_letters(redrive_state& s) {
  // Every dead letter moved before the request: those moved since are in writes after this one
  // (and counted in dead_count_ already), so the count leaves them out.
  auto moved_since = counters_.dead_lettered - s.moved_before;
  auto n = dead_count_ - std::min(dead_count_, moved_since);
  if (n == 0) return end_redrive(s, std::nullopt);
  write_request w;
  for (auto t : {codec::tag::dead, codec::tag::dead_index}) {
    auto [from, to] = codec::queue_range(t, cfg_.uid);
    w.ops.push_back(store_op{store_op::kind::erase_range, std::move(from), std::move(to)});
  }
  write_dead_deletes(s, std::move(w), n);
}

void shard_engine::write_dead_deletes(redrive_state& s, write_request w, std::uint64_t n) {
  auto r = s.r;
  bool expiry = s.what == redrive_state::op::expire;
  // Not a write that admits: a failed one is answered at once and sent again until durable, so
  // the answer is the write's (the error, or the count) and the bookkeeping waits for its settle.
  if (!expiry) {
    w.answer = [this, r, n](std::optional<error> e) {
      if (e)
        reply(r, storage_failure(cfg_.spec.name(), std::move(*e)));
      else
        reply(r, n);
    };
  }
  w.settle = [this, n, expiry](bool durable) {
    if (!durable) return;
    dead_count_ -= n;
    if (dead_count_ == 0) oldest_dead_at_.reset();
    (expiry ? counters_.dead_letters_expired : counters_.dead_letters_deleted) += n;
  };
  auto slot = s.slot;
  dead_ops_.erase(r);
  writes_.fill(slot, std::move(w), last_now_);
}

void shard_engine::end_redrive(redrive_state& s, std::optional<error> failed, bool answer) {
  auto r = s.r;
  auto slot = s.slot;
  bool expiry = s.what == redrive_state::op::expire;  // answers no one (a sweep comes again)
  dead_ops_.erase(r);
  if (failed && !expiry)
    reply(r, std::move(*failed));
  else if (answer && !expiry)
    reply(r, std::uint64_t{0});
  writes_.fill(slot, std::nullopt, last_now_);
}

}  // namespace laneq
