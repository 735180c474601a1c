// Replies as the clients read them (engine_episode.hpp): each matched to the request it answers,
// read mostly in the order the engine gave them, sometimes one of the next few first, and handed
// to the queue's journal (answer_checker).
#include <algorithm>

#include "engine_episode.hpp"

namespace laneq::sim {

using engine_cov::event;

namespace {

/// The answer as `T` or an error; nullopt when it is neither (an answer of the wrong kind).
template <class T>
std::optional<result<T>> answer_as(const engine_answer& a) {
  if (const auto* e = std::get_if<error>(&a)) return result<T>{*e};
  if (const auto* v = std::get_if<T>(&a)) return result<T>{*v};
  return std::nullopt;
}

}  // namespace

void engine_episode::read_replies(std::size_t n) {
  std::vector<std::size_t> ready;
  for (; n > 0; --n) {
    ready.clear();
    for (std::size_t q = 0; q < clients_.size(); ++q)
      if (!world_->inbox(q).empty()) ready.push_back(q);
    if (ready.empty()) return;
    auto q = ready[pick(ready.size())];
    read_reply(q, pick(std::min<std::size_t>(world_->inbox(q).size(), 3)));
  }
}

void engine_episode::read_all() {
  for (bool any = true; any;) {
    any = false;
    for (std::size_t q = 0; q < clients_.size(); ++q)
      while (!world_->inbox(q).empty()) {
        read_reply(q, 0);
        any = true;
      }
  }
}

void engine_episode::read_reply(std::size_t q, std::size_t i) {
  auto& inbox = world_->inbox(q);
  auto pr = std::move(inbox[i]);
  inbox.erase(inbox.begin() + static_cast<std::ptrdiff_t>(i));
  auto it = pending_.find(pr.reply.to);
  if (it == pending_.end() || it->second.q != q)
    fail(check::api, "a reply to request " + std::to_string(pr.reply.to) + " of " +
                         clients_[q].name + ", which waits for none");
  auto p = std::move(it->second);
  pending_.erase(it);
  on_reply(p, pr);
}

void engine_episode::on_reply(const pending& p, const pending_reply& pr) {
  auto& checker = *clients_[p.q].checker;
  auto now = world_->now();
  auto wrong = [&](const char* what) {
    fail(check::api, std::string{"an answer of the wrong kind to a "} + what);
  };
  switch (p.kind) {
    case req_kind::enqueue:
      if (auto ids = answer_as<std::vector<message_id>>(pr.reply.value))
        return checker.enqueue_answered(p.op, *ids);
      return wrong("enqueue");
    case req_kind::receive: return on_received(p, pr);
    case req_kind::ack: return on_acked(p, pr);
    case req_kind::nack:
      if (auto st = answer_as<ok_t>(pr.reply.value)) {
        if (*st && p.mid_batch) ++mid_nacks_;
        return on_ended(p, *st, timestamp{});
      }
      return wrong("nack");
    case req_kind::extend:
      if (auto d = answer_as<timestamp>(pr.reply.value))
        return on_ended(p, *d ? status{ok_t{}} : status{d->err()}, *d ? d->value() : timestamp{});
      return wrong("extend");
    case req_kind::ack_count:
      if (auto n = answer_as<std::uint64_t>(pr.reply.value)) {
        // It acks those past what was sent before, and those before whose acks did not happen.
        if (*n && (n->value() < p.acked_min || n->value() > p.acks.size()))
          fail(check::api, "an ack of a batch's prefix answered that it acked " +
                               std::to_string(n->value()) + " messages, not " +
                               std::to_string(p.acked_min) + " to " +
                               std::to_string(p.acks.size()));
        if (*n) ++partial_acks_;
        return on_ended(p, *n ? status{ok_t{}} : status{n->err()}, timestamp{});
      }
      return wrong("ack of a batch's prefix");
    case req_kind::list: return on_listed(p, pr);
    case req_kind::redrive:
      if (auto n = answer_as<std::uint64_t>(pr.reply.value))
        return checker.redrive_answered(p.op, *n, now);
      return wrong("redrive");
  }
}

void engine_episode::on_received(const pending& p, const pending_reply& pr) {
  auto& c = clients_[p.q];
  auto out = answer_as<std::vector<delivery>>(pr.reply.value);
  if (!out) fail(check::api, "an answer of the wrong kind to a receive");
  if (p.poll) --c.polls_open;
  bool got = *out && !out->value().empty();
  if (got) received_ += out->value().size();
  // The deliveries of one lease (an ordered batch's, in batch order) are held together.
  for (auto l : c.checker->receive_answered(p.op, *out, world_->now())) {
    const auto& token = c.checker->lease(l).d.lease;
    if (c.held.empty() || c.held.back().leases.empty() ||
        !(c.checker->lease(c.held.back().leases.front()).d.lease == token) ||
        c.checker->lease(l).d.batch_index == 0)
      c.held.push_back(held_lease{});
    c.held.back().leases.push_back(l);
  }
}

void engine_episode::on_ended(const pending& p, const status& st, timestamp extended_to) {
  auto& checker = *clients_[p.q].checker;
  for (const auto& [token, op] : p.acks) checker.end_answered(op, st, extended_to, world_->now());
}

/// A batch ack's answer: the leases that failed, or one error for all.
void engine_episode::on_acked(const pending& p, const pending_reply& pr) {
  auto& checker = *clients_[p.q].checker;
  auto out = answer_as<std::vector<lease_outcome>>(pr.reply.value);
  if (!out) fail(check::api, "an answer of the wrong kind to an ack");
  if (*out)
    for (const auto& f : out->value())
      if (std::none_of(p.acks.begin(), p.acks.end(),
                       [&](const auto& a) { return a.first == f.lease; }))
        fail(check::api, "an ack answered a failure of lease " + to_string(f.lease) +
                             ", which it did not carry");
  // Alone: the ack of one lease (one batch's messages), whose write is its own.
  bool alone = std::all_of(p.acks.begin(), p.acks.end(),
                           [&](const auto& a) { return a.first == p.acks.front().first; });
  for (const auto& [token, op] : p.acks) {
    status st = ok_t{};
    if (!*out) st = out->err();
    for (const auto& f : *out ? out->value() : std::vector<lease_outcome>{})
      if (f.lease == token) st = f.err;
    checker.end_answered(op, st, timestamp{}, world_->now(), alone);
  }
}

void engine_episode::on_listed(const pending& p, const pending_reply& pr) {
  auto& c = clients_[p.q];
  c.listing_open = false;
  auto out = answer_as<std::vector<dead_letter>>(pr.reply.value);
  c.listed_ok = false;
  if (out && !*out && out->err().code == errc::storage_failed) return;  // its read failed
  if (!out || !*out) fail(check::api, "a dead-letter listing failed or answered the wrong kind");
  c.listed_ok = true;
  // The listing shows the dead letters in the store once every write the engine made before it
  // is durable: the moves made before it, and what a redrive asked for before it did.
  c.checker->dead_listed(out->value(), pr.at);
  c.listed.clear();
  for (const auto& dl : out->value()) c.listed.push_back(dl.msg.id);
}

}  // namespace laneq::sim
