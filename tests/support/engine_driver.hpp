// Drives a shard_engine without actors, for the unit tests and the engine simulation: a memory
// store (an ordered map of keys to values) that carries out the engine's writes and answers its
// reads, the replies collected by request id, and time moved by hand. Writes can be answered at
// once (`settle`) or held and then answered, failed or lost one by one (`pending_writes`), so
// a test can put a write between the engine and the store exactly where it wants it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "laneq/shard_engine.hpp"

namespace laneq::test {

/// A store as a map: what a shard's records look like after its committed writes.
using memory_map = std::map<std::string, std::string>;

/// Applies a write's operations to `store`, in order.
inline void apply_write(memory_map& store, const store_write& w) {
  each_op(w, [&store](const store_op& op) {
    switch (op.what) {
      case store_op::kind::put: store[op.key] = op.value; break;
      case store_op::kind::erase: store.erase(op.key); break;
      case store_op::kind::erase_range:
        store.erase(store.lower_bound(op.key), store.lower_bound(op.value));
        break;
    }
    return true;
  });
}

/// The entries of `store` in [from, to), at most `max`.
inline std::vector<store_entry> scan(const memory_map& store, const std::string& from,
                                     const std::string& to, std::uint32_t max) {
  std::vector<store_entry> out;
  for (auto it = store.lower_bound(from); it != store.end() && it->first < to && out.size() < max;
       ++it)
    out.push_back(store_entry{it->first, it->second});
  return out;
}

class engine_driver {
 public:
  explicit engine_driver(shard_config cfg, timestamp start = timestamp::from_ms(1'000'000))
      : now(start), engine_(std::make_unique<shard_engine>(std::move(cfg))) {}

  shard_engine& engine() { return *engine_; }
  memory_map store;
  timestamp now;
  /// Replies by request id, as the engine gave them.
  std::map<request_id, engine_answer> replies;
  /// Log lines and the failure, if the engine stopped.
  std::vector<std::string> log;
  std::optional<error> failed;
  /// When true, writes wait in `pending_writes` until answered by hand.
  bool hold_writes = false;
  std::deque<engine_write> pending_writes;
  /// When true, reads wait in `pending_reads` until `answer_reads`.
  bool hold_reads = false;
  std::deque<engine_read> pending_reads;
  std::optional<timestamp> wake;

  request_id next_request() { return next_request_++; }

  /// Takes the engine's effects until it asks for nothing more: writes applied and answered (or
  /// held), reads answered, replies filed.
  void settle() {
    for (int rounds = 0; rounds < 100'000; ++rounds) {
      auto fx = engine_->take_effects();
      wake = fx.wake;
      for (auto& r : fx.replies) replies.insert_or_assign(r.to, std::move(r.value));
      for (auto& l : fx.log) log.push_back(std::move(l));
      if (fx.failed) failed = fx.failed;
      bool any = !fx.writes.empty() || !fx.reads.empty();
      for (auto& w : fx.writes) {
        if (hold_writes) {
          pending_writes.push_back(std::move(w));
        } else {
          apply_write(store, w.write);
          engine_->on_written(w.id, std::nullopt, now);
        }
      }
      for (auto& r : fx.reads) {
        if (hold_reads)
          pending_reads.push_back(std::move(r));
        else
          engine_->on_read(r.id, scan(store, r.from, r.to, r.max), now);
      }
      engine_->check_invariants();
      if (!any) return;
    }
    ADD_FAILURE() << "the engine kept asking for work";
  }

  /// Answers the held reads from the store as it is now, and every read they lead to.
  void answer_reads() {
    hold_reads = false;
    while (!pending_reads.empty()) {
      auto r = std::move(pending_reads.front());
      pending_reads.pop_front();
      engine_->on_read(r.id, scan(store, r.from, r.to, r.max), now);
    }
    settle();
  }

  /// Answers the oldest held write: committed (applied, then answered), failed, or lost (never
  /// applied, never answered: a crash).
  void commit_next() {
    auto w = pop_write();
    apply_write(store, w.write);
    engine_->on_written(w.id, std::nullopt, now);
    settle();
  }
  void fail_next(std::string why = "injected failure") {
    auto w = pop_write();
    engine_->on_written(w.id, error{errc::storage_failed, std::move(why)}, now);
    settle();
  }

  /// Moves time on and lets the engine act on it.
  void advance(duration d) {
    now = now + d;
    engine_->tick(now);
    settle();
  }

  /// The reply to `r`, if one came.
  const engine_answer* reply(request_id r) const {
    auto it = replies.find(r);
    return it == replies.end() ? nullptr : &it->second;
  }
  template <class T>
  const T* reply_as(request_id r) const {
    const auto* a = reply(r);
    return a ? std::get_if<T>(a) : nullptr;
  }

  // -- requests, each settled: the id of the request, to look up its reply --------------------

  request_id enqueue(std::vector<outgoing_message> batch) {
    auto r = next_request();
    engine_->enqueue(r, std::move(batch), now);
    settle();
    return r;
  }
  request_id receive(std::uint32_t max = 1, duration lease = duration{0},
                     duration wait = duration{0}) {
    auto r = next_request();
    engine_->receive(r, receive_request{max, lease.count(), wait.count()}, now);
    settle();
    return r;
  }
  /// A receive of ordered batches of up to `batch` messages (docs/design/ordering.md O12).
  request_id receive_batch(std::uint32_t max, std::uint32_t batch, duration lease = duration{0},
                           duration wait = duration{0}) {
    auto r = next_request();
    engine_->receive(r, receive_request{max, lease.count(), wait.count(), batch}, now);
    settle();
    return r;
  }
  /// Acks an ordered batch's first `count` messages.
  request_id ack(const lease_token& l, std::uint32_t count) {
    auto r = next_request();
    engine_->ack(r, l, count, now);
    settle();
    return r;
  }
  request_id nack(const lease_token& l, const nack_request& req) {
    auto r = next_request();
    engine_->nack(r, l, req, now);
    settle();
    return r;
  }
  request_id ack(std::vector<lease_token> leases) {
    auto r = next_request();
    engine_->ack(r, leases, now);
    settle();
    return r;
  }
  request_id nack(const lease_token& l, nack_kind kind = nack_kind::retry,
                  duration retry_after = duration{0}) {
    auto r = next_request();
    engine_->nack(r, l, nack_request{kind, retry_after.count()}, now);
    settle();
    return r;
  }
  request_id extend(const lease_token& l, duration by) {
    auto r = next_request();
    engine_->extend(r, l, by.count(), now);
    settle();
    return r;
  }
  request_id redrive(std::vector<message_id> ids = {}) {
    auto r = next_request();
    engine_->redrive(r, ids, now);
    settle();
    return r;
  }
  request_id dead_letters(std::uint32_t max = 1000) {
    auto r = next_request();
    engine_->dead_letters(r, max, now);
    settle();
    return r;
  }
  request_id dead_letters_by_id(std::vector<message_id> ids) {
    auto r = next_request();
    engine_->dead_letters(r, ids, now);
    settle();
    return r;
  }
  request_id delete_dead_letters(std::vector<message_id> ids = {}) {
    auto r = next_request();
    engine_->delete_dead_letters(r, ids, now);
    settle();
    return r;
  }
  /// Purges the shard, or the group whose ordering key is `group`.
  request_id purge(std::optional<std::string> group = std::nullopt) {
    auto r = next_request();
    engine_->purge(r, group ? group_filter{true, *group} : group_filter{}, now);
    settle();
    return r;
  }
  request_id peek(std::uint32_t limit = 100, std::optional<std::string> group = std::nullopt) {
    auto r = next_request();
    peek_request req;
    req.limit = limit;
    if (group) req.group = group_filter{true, *group};
    engine_->peek(r, req, now);
    settle();
    return r;
  }
  request_id recover() {
    auto r = next_request();
    engine_->recover(r, now);
    settle();
    return r;
  }

  /// Starts a new engine on the same store (a restart): what the store holds is all it knows.
  void restart(shard_config cfg) {
    engine_->stop(error{errc::unavailable, "restart"});
    (void)engine_->take_effects();
    engine_ = std::make_unique<shard_engine>(std::move(cfg));
    pending_writes.clear();
    replies.clear();
  }

 private:
  engine_write pop_write() {
    EXPECT_FALSE(pending_writes.empty()) << "no write is held";
    auto w = std::move(pending_writes.front());
    pending_writes.pop_front();
    return w;
  }

  request_id next_request_ = 1;
  std::unique_ptr<shard_engine> engine_;
};

/// The message records in the store of the shard `test_config` makes (uid 42).
inline std::size_t message_records(const engine_driver& d) {
  auto [from, to] = codec::queue_range(codec::tag::message, 42);
  std::size_t n = 0;
  for (auto it = d.store.lower_bound(from); it != d.store.end() && it->first < to; ++it) ++n;
  return n;
}

/// A shard of queue `spec` as the unit tests make it: uid 42, epoch 3, fixed nonce keys, no
/// reclaim grace.
inline shard_config test_config(queue_spec spec) {
  shard_config c;
  c.spec = std::move(spec);
  c.uid = 42;
  c.epoch = 3;
  c.nonces = nonce_source{11, 22};
  c.reclaim_grace = duration{0};
  return c;
}

/// The deliveries a receive was answered with (a test failure if it was answered otherwise).
inline std::vector<delivery> deliveries(engine_driver& d, request_id r) {
  const auto* out = d.reply_as<std::vector<delivery>>(r);
  EXPECT_NE(out, nullptr) << "receive " << r << " was not answered with deliveries";
  return out ? *out : std::vector<delivery>{};
}

inline std::vector<std::string> bodies(const std::vector<delivery>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.msg.body);
  return out;
}

}  // namespace laneq::test
