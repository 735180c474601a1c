// The end of an engine-simulation episode (engine_episode.hpp): the drain (no more crashes or
// store failures; consumers ack everything until nothing is left), the journals' final judgement
// (every message the clients know was stored ended acked or dead), the engines' accounting
// against the store, a restart that must find what the drain left, and the episode's coverage.
#include <algorithm>

#include "engine_episode.hpp"

namespace laneq::sim {

using namespace std::chrono_literals;
using engine_cov::event;

namespace {

std::size_t records(const memory_map& store, codec::tag t, std::uint64_t uid) {
  auto [from, to] = codec::queue_range(t, uid);
  std::size_t n = 0;
  for (auto it = store.lower_bound(from); it != store.end() && it->first < to; ++it) ++n;
  return n;
}

}  // namespace

void engine_episode::drain() {
  draining_ = true;
  write_fail_per_mille_ = 0;
  read_fail_per_mille_ = 0;
  // A throttled queue gives a few messages per round: rounds are many but cheap.
  for (int round = 0; round < 20'000; ++round)
    if (drain_round()) return;
  std::string left;
  for (std::size_t q = 0; q < clients_.size(); ++q)
    left += " " + clients_[q].name + ": backlog " +
            std::to_string(world_->engine(q).stats(world_->now()).backlog) + groups_of(q);
  fail(check::lost, "the drain did not end in 20,000 rounds;" + left);
}

/// One round: time moves past every lease, retry, delay, reclaim grace, store retry and throttle
/// refill; then the store and the clients catch up, every held lease is acked and each queue
/// receives up to 100, until the receives find nothing. Done when a round found nothing, nothing
/// waits in the store and the engines hold no message (a message that never comes out keeps the
/// drain going until it fails).
bool engine_episode::drain_round() {
  duration longest{0};
  for (const auto& c : clients_) longest = std::max(longest, c.longest_lease);
  world_->advance(3 * longest + 5s);
  std::uint64_t got = 0;
  do {  // take what is ready now
    world_->settle();
    read_all();
    for (std::size_t q = 0; q < clients_.size(); ++q)
      while (!clients_[q].held.empty()) do_ack(q, limits::ack_batch_max);
    world_->settle();
    read_all();
    received_ = 0;
    for (std::size_t q = 0; q < clients_.size(); ++q) do_receive(q, 100, true);
    world_->settle();
    read_all();
    got += received_;
  } while (received_ > 0);
  world_->check_invariants();
  bool empty = got == 0 && world_->writes_held() == 0 && world_->reads_held() == 0;
  // A head fetched back or released by a throttle late in the round waits for the next one.
  for (std::size_t q = 0; q < clients_.size(); ++q)
    empty = empty && world_->engine(q).stats(world_->now()).backlog == 0;
  return empty;
}

/// Each queue's journal judges the drain against the dead letters listed now; the engine's
/// gauges and the store must agree that nothing else is left.
void engine_episode::judge_end() {
  for (std::size_t q = 0; q < clients_.size(); ++q) {
    auto& c = clients_[q];
    // Dead letters are read from the store, whose reads may fail: list until one is answered.
    c.listed_ok = false;
    for (int tries = 0; tries < 1000 && !c.listed_ok; ++tries) {
      do_list(q, 1'000'000);
      world_->settle();  // the listing reads the store
      read_all();
    }
    std::set<message_id> dead(c.listed.begin(), c.listed.end());
    c.checker->judge_drain(dead);
    judge_accounting(q, dead.size());
  }
}

/// Up to 5 of queue `q`'s groups as introspection shows them, for a failure.
std::string engine_episode::groups_of(std::size_t q) {
  groups_query gq;
  gq.limit = 5;
  auto page = world_->engine(q).groups(gq, world_->now());
  std::string out;
  for (const auto& g : page ? page.value().groups : std::vector<group_info>{})
    out += "\n    group " + g.key + ": " + std::to_string(g.backlog) + " messages, " +
           std::string{to_string(g.state)} + ", head " + std::to_string(g.head.value) +
           (g.reason.empty() ? "" : ", " + g.reason);
  return out;
}

void engine_episode::judge_accounting(std::size_t q, std::size_t dead) {
  const auto& cfg = world_->config(q);
  auto s = world_->engine(q).stats(world_->now());
  auto messages = records(world_->store(), codec::tag::message, cfg.uid);
  auto leases = records(world_->store(), codec::tag::lease, cfg.uid);
  auto dead_records = records(world_->store(), codec::tag::dead, cfg.uid);
  if (s.backlog != 0 || s.in_flight != 0 || s.live_groups != 0 || s.waiting_receives != 0 ||
      s.dead_letters != dead || messages != 0 || leases != 0 || dead_records != dead)
    fail(check::accounting,
         clients_[q].name + " after the drain: backlog " + std::to_string(s.backlog) +
             ", in flight " + std::to_string(s.in_flight) + ", live groups " +
             std::to_string(s.live_groups) + ", waiting receives " +
             std::to_string(s.waiting_receives) + ", dead letters " +
             std::to_string(s.dead_letters) + " (listed " + std::to_string(dead) +
             "); in the store: " + std::to_string(messages) + " messages, " +
             std::to_string(leases) + " leases, " + std::to_string(dead_records) + " dead letters" +
             groups_of(q));
}

/// A restart after the drain recovers no message and the same dead letters.
void engine_episode::restart_finds_the_same() {
  std::vector<std::uint64_t> dead;
  for (std::size_t q = 0; q < clients_.size(); ++q)
    dead.push_back(world_->engine(q).stats(world_->now()).dead_letters);
  do_crash();
  world_->settle();
  for (std::size_t q = 0; q < clients_.size(); ++q) {
    auto s = world_->engine(q).stats(world_->now());
    if (world_->recovering(q) || s.recovered != 0 || s.dead_letters != dead[q])
      fail(check::recovery, clients_[q].name + ": a restart after the drain recovered " +
                                std::to_string(s.recovered) + " messages and " +
                                std::to_string(s.dead_letters) + " dead letters, expected 0 and " +
                                std::to_string(dead[q]));
  }
  world_->check_invariants();
}

void engine_episode::count_coverage() {
  const auto& w = world_->counts();
  cov_.bump(event::crashes, w.crashes);
  cov_.bump(event::crashes_losing_writes, w.crashes_losing_writes);
  cov_.bump(event::writes_lost, w.writes_lost);
  cov_.bump(event::replies_lost, w.replies_lost);
  cov_.bump(event::write_failures, w.writes_failed);
  cov_.bump(event::read_failures, w.reads_failed);
  cov_.bump(event::polls_answered_by_enqueue, w.polls_served_by_enqueue);
  for (std::size_t q = 0; q < clients_.size(); ++q) {
    auto c = world_->counters(q);
    cov_.bump(event::expiries, c.lease_expired);
    cov_.bump(event::dead_letters, c.dead_lettered);
    cov_.bump(event::redriven, c.redriven);
    cov_.bump(event::window_reads, c.window_reads);
    cov_.bump(event::class_reads, c.class_reads);
    cov_.bump(event::deduplicated, c.deduplicated);
    const auto& n = clients_[q].checker->counts();
    cov_.bump(event::reclaims, n.reclaims + n.old_durable_leases);
    cov_.bump(event::acks_racing_expiry, n.acks_racing_expiry);
    cov_.bump(event::deliveries, n.deliveries);
    cov_.bump(event::acks, n.acks);
    cov_.bump(event::stale_refused, n.stale_refused);
    cov_.bump(event::order_suspicions, n.suspicions);
    cov_.bump(event::batches, n.batches);
  }
  cov_.bump(event::partial_acks, partial_acks_);
  cov_.bump(event::mid_batch_nacks, mid_nacks_);
}

}  // namespace laneq::sim
