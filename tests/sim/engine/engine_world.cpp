// The engine simulation's world (engine_world.hpp): the engines, the store that commits their
// writes in order at later steps, the replies waiting for their clients, and crashes.
#include "engine_world.hpp"

namespace laneq::sim {

void add_counters(shard_counters& a, const shard_counters& b) {
  a.enqueued += b.enqueued;
  a.delivered += b.delivered;
  a.acked += b.acked;
  a.nacked += b.nacked;
  a.lease_expired += b.lease_expired;
  a.dead_lettered += b.dead_lettered;
  a.redriven += b.redriven;
  a.key_missing += b.key_missing;
  a.deduplicated += b.deduplicated;
  a.rejected += b.rejected;
  a.recovered += b.recovered;
  a.window_reads += b.window_reads;
  a.class_reads += b.class_reads;
  a.window_read_messages += b.window_read_messages;
  a.corrupt_records += b.corrupt_records;
}

engine_world::engine_world(std::vector<shard_config> queues, timestamp start, fail_fn fail,
                           recovered_fn recovered)
    : fail_(std::move(fail)), recovered_(std::move(recovered)), now_(start) {
  engines_.resize(queues.size());
  ended_.resize(queues.size());
  for (std::size_t q = 0; q < queues.size(); ++q) {
    engines_[q].cfg = std::move(queues[q]);
    start_engine(q);
  }
}

engine_world::~engine_world() = default;

void engine_world::start_engine(std::size_t q) {
  auto& s = engines_[q];
  s.engine = std::make_unique<shard_engine>(s.cfg);
  s.recovering = true;
  s.recover_request = next_recover_++;
  s.engine->recover(s.recover_request, now_);
  collect(q);
}

void engine_world::collect(std::size_t q) {
  auto& s = engines_[q];
  auto fx = s.engine->take_effects();
  s.wake = fx.wake;
  for (auto& r : fx.replies) {
    if (s.recovering && r.to == s.recover_request) {
      if (const auto* e = std::get_if<error>(&r.value))
        fail_(check::recovery, "queue " + s.cfg.spec.name() + " did not recover: " + to_string(*e));
      s.recovering = false;
      recovered_(q, now_);
      continue;
    }
    s.inbox.push_back(pending_reply{std::move(r), now_});
  }
  if (fx.failed)
    fail_(check::recovery, "queue " + s.cfg.spec.name() + " stopped: " + to_string(*fx.failed));
  if (!fx.log.empty()) fail_(check::recovery, "queue " + s.cfg.spec.name() + ": " + fx.log[0]);
  // A write that reaches a degraded store fails, however late the store gets to it.
  for (auto& w : fx.writes) writes_.push_back(held_write{q, std::move(w), degraded()});
  fail_doomed();
  // Reads made before the recovery's answer are the recovery's; after it, window fetches.
  for (auto& r : fx.reads) reads_.push_back(held_read{q, std::move(r), s.recovering});
}

void engine_world::advance(duration d) {
  now_ = now_ + d;
  for (std::size_t q = 0; q < engines_.size(); ++q) {
    engines_[q].engine->tick(now_);
    collect(q);
  }
}

std::optional<timestamp> engine_world::next_wake() const {
  std::optional<timestamp> next;
  for (const auto& s : engines_)
    if (s.wake && (!next || *s.wake < *next)) next = s.wake;
  return next;
}

bool engine_world::commit_next() {
  if (writes_.empty()) return false;
  auto h = std::move(writes_.front());
  writes_.pop_front();
  auto& engine = *engines_[h.q].engine;
  if (h.doomed || degraded()) {
    ++counts_.writes_failed;
    engine.on_written(h.w.id, error{errc::storage_failed, "injected store failure"}, now_);
    collect(h.q);
    return true;
  }
  test::apply_write(store_, h.w.write);
  ++counts_.writes_committed;
  // Polls whose time is up ended at the last input (this one comes at the same instant): fewer
  // waiting after an enqueue's commit were served by it.
  auto waiting = h.w.write.admits ? engine.waiting_receives() : 0;
  engine.on_written(h.w.id, std::nullopt, now_);
  if (waiting > 0) counts_.polls_served_by_enqueue += waiting - engine.waiting_receives();
  collect(h.q);
  return true;
}

void engine_world::fail_store(duration reopen) {
  if (writes_.empty()) return;
  degraded_until_ = now_ + reopen;
  for (auto& h : writes_) h.doomed = true;
  fail_doomed();
}

void engine_world::fail_doomed() {
  if (failing_) return;  // an answer's effects: the loop below takes them
  failing_ = true;
  // The store reaches them at once, as the persistence actor handles its mailbox: their engines
  // hear of the failure before they send anything else.
  while (!writes_.empty() && writes_.front().doomed) commit_next();
  failing_ = false;
}

bool engine_world::degraded() const {
  return degraded_until_ && now_ < *degraded_until_;
}

bool engine_world::answer_next_read(bool fail) {
  if (reads_.empty()) return false;
  auto h = std::move(reads_.front());
  reads_.pop_front();
  auto& engine = *engines_[h.q].engine;
  if (fail && !h.recovery) {
    ++counts_.reads_failed;
    engine.on_read(h.r.id, error{errc::storage_failed, "injected read failure"}, now_);
  } else {
    engine.on_read(h.r.id, test::scan(store_, h.r.from, h.r.to, h.r.max), now_);
  }
  collect(h.q);
  return true;
}

void engine_world::settle() {
  degraded_until_.reset();  // a store that reopened, and fails nothing any more
  for (auto& h : writes_) h.doomed = false;
  for (int rounds = 0; rounds < 1'000'000; ++rounds)
    if (!commit_next() && !answer_next_read(false)) return;
  fail_(check::lost, "the engines kept asking the store for work");
}

std::size_t engine_world::crash() {
  auto lost = writes_.size();
  ++counts_.crashes;
  if (lost > 0) ++counts_.crashes_losing_writes;
  counts_.writes_lost += lost;
  writes_.clear();
  reads_.clear();
  degraded_until_.reset();  // the store opens afresh
  for (std::size_t q = 0; q < engines_.size(); ++q) {
    auto& s = engines_[q];
    counts_.replies_lost += s.inbox.size();
    s.inbox.clear();
    add_counters(ended_[q], s.engine->counters());
    s.engine.reset();  // nothing it waited for is answered: a crash
    ++s.cfg.epoch;
    start_engine(q);
  }
  return lost;
}

shard_counters engine_world::counters(std::size_t q) const {
  auto c = ended_[q];
  add_counters(c, engines_[q].engine->counters());
  return c;
}

void engine_world::check_invariants() const {
  for (const auto& s : engines_) s.engine->check_invariants();
}

}  // namespace laneq::sim
