// The steps of an engine-simulation episode (engine_episode.hpp): client requests sent without
// waiting for the answers to earlier ones, time moving on, crashes, and the store and the
// clients catching up on part of what waits for them.
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "engine_episode.hpp"

namespace laneq::sim {

using engine_cov::event;

void engine_episode::run() {
  for (step_ = 0; step_ < steps_; ++step_) {
    step();
    world_->check_invariants();  // the whole shard, every engine, after every step
  }
  cov_.bump(event::steps, steps_);
  drain();
  judge_end();
  count_coverage();
  restart_finds_the_same();
}

/// A request or time moving on; then a crash (it finds what this step asked of the store still
/// uncommitted and its replies unread) or the store and the clients catching up.
void engine_episode::step() {
  if (pick(100) < 12)
    move_time();
  else
    act(pick_queue());
  if (pick(1000) < crash_per_mille_) return do_crash();
  pump();
}

std::size_t engine_episode::pick_queue() {
  std::uint64_t total = 0;
  for (const auto& c : clients_) total += c.weight;
  auto r = pick(total);
  for (std::size_t q = 0; q < clients_.size(); ++q) {
    if (r < clients_[q].weight) return q;
    r -= clients_[q].weight;
  }
  return 0;
}

/// One request of a client of queue `q`.
void engine_episode::act(std::size_t q) {
  auto r = pick(100);
  if (r < 24)
    do_enqueue(q);
  else if (r < 46)
    do_receive(q);
  else if (r < 58)
    do_ack(q, 1 + pick(4));
  else if (r < 64)
    do_ack_count(q);
  else if (r < 70)
    do_nack(q, end_kind::retry);
  else if (r < 72)
    do_nack(q, end_kind::dead);
  else if (r < 76)
    do_extend(q);
  else if (r < 80)
    do_silence(q);
  else if (r < 86)
    do_stale(q);
  else if (r < 89)
    do_list(q);
  else if (r < 93)
    do_redrive(q);
  else if (clients_[q].resend)
    do_resend(q);
  else
    do_enqueue(q);
}

/// The store commits (or fails) some of the writes it holds and answers some reads; the clients
/// read some of their replies.
void engine_episode::pump() {
  if (pick(1000) < write_fail_per_mille_) world_->fail_store(reopen_);
  for (auto n = pick(4); n > 0; --n) world_->commit_next();
  for (auto n = pick(3); n > 0; --n) world_->answer_next_read(pick(1000) < read_fail_per_mille_);
  read_replies(pick(5));
}

/// Moves the timeline on: by a little, by up to a lease, or to the next wake-up an engine asked
/// for (a lease's deadline, a retry, a long poll's end, a throttle's token, a store retry).
void engine_episode::move_time() {
  auto lease = clients_[pick(clients_.size())].lease.count();
  auto k = pick(4);
  duration d = pick_us(1, 2'000);
  if (k == 1) d = pick_us(0, lease);
  if (k == 2) d = pick_us(0, lease / 10 + 1);
  if (k == 3)
    if (auto wake = world_->next_wake(); wake && *wake > world_->now()) d = *wake - world_->now();
  world_->advance(d);
}

void engine_episode::do_crash() {
  auto now = world_->now();
  world_->crash();
  for (auto& c : clients_) {
    c.checker->crash(now);  // every answer not read yet is lost with its connection
    c.polls_open = 0;
    c.listing_open = false;
    c.listed.clear();  // a listing of the old run may name moves the crash undid
  }
  pending_.clear();
}

request_id engine_episode::send(pending p) {
  auto r = next_request_++;
  static const bool trace = std::getenv("LANEQ_SIM_TRACE") != nullptr;
  static const char* kinds[] = {"enqueue", "receive", "ack",     "nack",
                                "extend",  "list",    "redrive", "ack of a batch's prefix"};
  if (trace)
    std::cout << "  [" << (world_->now() - timestamp::from_ms(1'000'000)).count() << "us "
              << clients_[p.q].name << "] request " << r << ": " << kinds[static_cast<int>(p.kind)]
              << "\n";
  pending_.emplace(r, std::move(p));
  return r;
}

// -- producers --------------------------------------------------------------------------------

/// A message of queue `c`: a tenant as its fairness key, an account header (missing one time in
/// accounts + 1), an `id` header on a dedupe queue, an enqueue delay one time in ten.
outgoing_message engine_episode::draw_message(queue_client& c, std::string& group,
                                              duration& delay) {
  outgoing_message m;
  m.fairness_key = "t" + std::to_string(pick(c.tenants));
  auto a = pick(c.accounts + 1);
  std::string account = a == 0 ? "" : "a" + std::to_string(a);
  if (!account.empty()) m.headers.push_back(header_field{"account", account});
  delay = pick(10) == 0 ? pick_us(1, 300'000) : duration{0};
  m.delay = delay;
  auto missing = c.keyless_lane ? std::string{"~keyless"} : std::string{};
  switch (c.groups) {
    case grouping::none: group.clear(); break;
    case grouping::whole_queue: group = "*"; break;
    case grouping::account: group = account.empty() ? missing : "a:" + account; break;
    case grouping::tenant_and_account:
      group = account.empty() ? missing : m.fairness_key + "|" + account;
      break;
  }
  return m;
}

void engine_episode::do_enqueue(std::size_t q) {
  auto& c = clients_[q];
  std::vector<outgoing_message> batch;
  std::vector<std::uint64_t> bodies;
  for (auto n = 1 + pick(3); n > 0; --n) {
    std::string group;
    duration delay{0};
    auto m = draw_message(c, group, delay);
    auto body = c.checker->new_message(group, delay);
    m.body = answer_checker::body_text(body);
    if (c.dedupe) m.headers.push_back(header_field{"id", m.body});
    if (c.resend && group.empty()) c.recent.push_back({body, m, c.sent});
    ++c.sent;
    while (!c.recent.empty() && c.sent - c.recent.front().sent_before > c.resend_horizon)
      c.recent.pop_front();
    batch.push_back(std::move(m));
    bodies.push_back(body);
  }
  auto op = c.checker->enqueue_sent(bodies, world_->now());
  auto r = send(pending{q, req_kind::enqueue, op, {}, false});
  world_->request(q, [&](shard_engine& e, timestamp now) { e.enqueue(r, std::move(batch), now); });
}

/// A producer sends a recent unordered message again, with its dedupe key: its first enqueue's
/// outcome is unknown (a crash cut the answer, or the store failed), or it was stored and this
/// is a duplicate. Either way one copy is stored (the window is long, the entry recent).
void engine_episode::do_resend(std::size_t q) {
  auto& c = clients_[q];
  if (c.recent.empty()) return;
  const auto& [body, m, before] = c.recent[pick(c.recent.size())];
  if (c.checker->enqueue_open(body)) return;
  auto op = c.checker->enqueue_sent({body}, world_->now());
  auto r = send(pending{q, req_kind::enqueue, op, {}, false});
  world_->request(q, [&, copy = m](shard_engine& e, timestamp now) { e.enqueue(r, {copy}, now); });
}

// -- consumers --------------------------------------------------------------------------------

/// A receive of up to 6 (or `max`), half of them of ordered batches of up to 2 to 5 messages
/// (O12); one in ten asks for its own lease, a quarter are long polls (at most two wait at a time
/// per queue).
void engine_episode::do_receive(std::size_t q, std::uint32_t max, bool no_poll) {
  auto& c = clients_[q];
  if (max == 0) max = static_cast<std::uint32_t>(1 + pick(6));
  auto batch = pick(2) == 0 ? 1u : static_cast<std::uint32_t>(2 + pick(4));
  auto own = pick(10) == 0 ? pick_us(5'000, 1'000'000) : duration{0};
  c.longest_lease = std::max(c.longest_lease, own);
  bool poll = !no_poll && c.polls_open < 2 && pick(4) == 0;
  auto wait = poll ? pick_us(1, 300'000) : duration{0};
  if (poll) ++c.polls_open;
  if (c.checker->enqueues_open() > 0) cov_.bump(event::receives_racing_enqueues);
  auto op = c.checker->receive_sent(max, own.count() == 0 ? c.lease : own, world_->now(), batch);
  auto r = send(pending{q, req_kind::receive, op, {}, poll});
  world_->request(q, [&](shard_engine& e, timestamp now) {
    e.receive(r, receive_request{max, own.count(), wait.count(), batch}, now);
  });
}

std::size_t engine_episode::first_unconfirmed(const queue_client& c, const held_lease& h) const {
  std::size_t i = 0;
  while (i < h.done && c.checker->lease(h.leases[i]).acked) ++i;
  return i;
}

held_lease engine_episode::take_held(queue_client& c) {
  auto i = pick(c.held.size());
  auto h = std::move(c.held[i]);
  c.held.erase(c.held.begin() + static_cast<std::ptrdiff_t>(i));
  return h;
}

/// Acks up to `n` leases its consumers hold, in one batch: each acks what is left of its batch.
void engine_episode::do_ack(std::size_t q, std::size_t n) {
  auto& c = clients_[q];
  pending p{q, req_kind::ack, 0, {}, false};
  std::vector<lease_token> tokens;
  for (; n > 0 && !c.held.empty(); --n) {
    auto h = take_held(c);
    tokens.push_back(c.checker->lease(h.leases.front()).d.lease);
    for (auto i = first_unconfirmed(c, h); i < h.leases.size(); ++i)
      p.acks.emplace_back(tokens.back(),
                          c.checker->end_sent(h.leases[i], end_kind::ack, world_->now()));
  }
  if (tokens.empty()) return;
  auto r = send(std::move(p));
  world_->request(q, [&](shard_engine& e, timestamp now) { e.ack(r, tokens, now); });
}

/// Acks a part of an ordered batch: its first `count` messages as delivered, more than those it
/// sent acks for so far and fewer than all; the consumer holds on to the rest. The engine acks
/// from the first it has not acked, which may be before `done` (an ack whose outcome a crash
/// cut, or one refused): the journal's ops start at the first not confirmed.
void engine_episode::do_ack_count(std::size_t q) {
  auto& c = clients_[q];
  std::vector<std::size_t> batches;
  for (std::size_t i = 0; i < c.held.size(); ++i)
    if (c.held[i].left() > 1) batches.push_back(i);
  if (batches.empty()) return do_ack(q, 1);
  auto& h = c.held[batches[pick(batches.size())]];
  auto count = h.done + 1 + static_cast<std::uint32_t>(pick(h.left() - 1));
  auto token = c.checker->lease(h.leases.front()).d.lease;
  pending p{q, req_kind::ack_count, 0, {}, false};
  p.acked_min = count - h.done;
  for (auto i = first_unconfirmed(c, h); i < count; ++i)
    p.acks.emplace_back(token, c.checker->end_sent(h.leases[i], end_kind::ack, world_->now()));
  h.done = count;
  auto r = send(std::move(p));
  world_->request(q, [&](shard_engine& e, timestamp now) { e.ack(r, token, count, now); });
}

/// A nack of a held lease: of a batch, from one of its messages left. Without `from` the engine
/// fails its first message not acked, which the consumer knows only while it sent no ack of a
/// part of the batch (one whose outcome it does not know may or may not have happened).
void engine_episode::do_nack(std::size_t q, end_kind k) {
  auto& c = clients_[q];
  if (c.held.empty()) return;
  auto h = take_held(c);
  std::optional<std::uint32_t> from;
  // Of a batch with more than one message left: a quarter name its first, half one behind it
  // (mid-batch: those before it are acked), a quarter leave `from` out (the engine's default).
  if (auto r = pick(4); h.left() > 1 && r < 3)
    from = h.done + (r == 0 ? 0 : 1 + static_cast<std::uint32_t>(pick(h.left() - 1)));
  send_end(q, h, k, from);
}

void engine_episode::do_extend(std::size_t q) {
  auto& c = clients_[q];
  if (!c.held.empty()) send_end(q, c.held[pick(c.held.size())], end_kind::extend);
}

/// A consumer goes silent: its lease must run out.
void engine_episode::do_silence(std::size_t q) {
  auto& c = clients_[q];
  if (c.held.empty()) return;
  c.stale.push_back(take_held(c));
  if (c.stale.size() > 48) c.stale.erase(c.stale.begin());
}

/// A token that a consumer let go of, or that ran out, presented again.
void engine_episode::do_stale(std::size_t q) {
  auto& c = clients_[q];
  if (c.stale.empty()) return;
  const auto& h = c.stale[pick(c.stale.size())];
  auto r = pick(10);
  send_end(q, h, r < 7 ? end_kind::ack : r < 9 ? end_kind::retry : end_kind::extend);
}

void engine_episode::send_end(std::size_t q, const held_lease& h, end_kind k,
                              std::optional<std::uint32_t> from) {
  auto& c = clients_[q];
  if (h.left() == 0) return;
  // One extend of a lease at a time: its messages are extended together.
  if (k == end_kind::extend) {
    for (auto i = first_unconfirmed(c, h); i < h.leases.size(); ++i)
      if (c.checker->lease(h.leases[i]).extends_open > 0) return;
  }
  auto lease = c.lease.count();
  auto retry_after = pick(3) == 0 ? duration{0} : pick_us(0, lease);
  auto by = pick_us(1'000, 1'000 + lease);
  auto token = c.checker->lease(h.leases.front()).d.lease;
  // After acks of a part of the batch, name the message that failed: the engine's first one not
  // acked may be earlier (an ack whose outcome is unknown, do_nack).
  if ((k == end_kind::retry || k == end_kind::dead) && !from && h.done > 0) from = h.done;
  auto failed = from.value_or(h.done);
  auto kind = k == end_kind::ack      ? req_kind::ack
              : k == end_kind::extend ? req_kind::extend
                                      : req_kind::nack;
  pending p{q, kind, 0, {}, false};
  p.mid_batch = failed > h.done;
  // From the first message not confirmed acked: the engine may not have acked those the consumer
  // sent acks for (do_ack_count).
  for (auto i = first_unconfirmed(c, h); i < h.leases.size(); ++i) {
    // A nack acks the messages before the one that failed and returns those behind it (O12).
    auto ki = k;
    if (k == end_kind::retry || k == end_kind::dead)
      ki = i < failed ? end_kind::ack : i == failed ? k : end_kind::release;
    p.acks.emplace_back(token,
                        c.checker->end_sent(h.leases[i], ki, world_->now(), retry_after, by));
  }
  auto r = send(std::move(p));
  world_->request(q, [&](shard_engine& e, timestamp now) {
    if (k == end_kind::ack) return e.ack(r, {token}, now);
    if (k == end_kind::extend) return e.extend(r, token, by.count(), now);
    auto nk = k == end_kind::dead ? nack_kind::dead_letter : nack_kind::retry;
    e.nack(r, token,
           nack_request{nk, retry_after.count(), from.value_or(nack_request::first_unacked)}, now);
  });
}

// -- dead letters -----------------------------------------------------------------------------

void engine_episode::do_list(std::size_t q, std::uint32_t max) {
  auto& c = clients_[q];
  if (c.listing_open) return;
  c.listing_open = true;
  c.listed.clear();  // no redrive from an older listing while this one is under way
  if (max == 0) max = static_cast<std::uint32_t>(1 + pick(64));
  auto r = send(pending{q, req_kind::list, 0, {}, false});
  world_->request(q, [&](shard_engine& e, timestamp now) { e.dead_letters(r, max, now); });
}

/// Redrives a random subset of the last listing, in random order.
void engine_episode::do_redrive(std::size_t q) {
  auto& c = clients_[q];
  if (c.listed.empty()) return;
  std::shuffle(c.listed.begin(), c.listed.end(), rng_);
  auto n = 1 + pick(std::min<std::size_t>(c.listed.size(), 8));
  std::vector<message_id> ids(c.listed.end() - static_cast<std::ptrdiff_t>(n), c.listed.end());
  c.listed.resize(c.listed.size() - n);
  auto op = c.checker->redrive_sent(ids, world_->now());
  auto r = send(pending{q, req_kind::redrive, op, {}, false});
  world_->request(q, [&](shard_engine& e, timestamp now) { e.redrive(r, ids, now); });
}

}  // namespace laneq::sim
