// Deadlines by key, earliest first, in memory that follows the live keys: the shard engine's
// lease deadlines (unordered messages in `lease_table`, group heads in `group_leases_`), reclaim
// graces and window read retries. Header only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "laneq/assert.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// A binary min-heap of (deadline, key) with lazy removal. Setting a key's deadline again or
/// erasing the key leaves its old heap entry behind, stale; stale entries are dropped when they
/// reach the top. So that memory follows the keys that have a deadline, not every deadline set
/// within one lease period (an acked message's entry used to stay until its deadline: with 30 s
/// leases at 100,000 msg/s, three million entries), the heap is rebuilt from the live keys
/// whenever stale entries outnumber live ones by `slack`: amortized O(1) per operation, and at
/// most twice the live keys plus `slack` entries. Ties expire in key order, so the order is
/// deterministic. `K` needs `<`, `==` and `std::hash`. Each key may carry a value `V` that goes
/// with its deadline, so no second map mirrors the keys (the engine's heaps carry none).
template <class K, class V = std::monostate>
class deadline_heap {
 public:
  /// Stale entries the heap may hold beyond the live ones before it is rebuilt.
  static constexpr std::size_t slack = 64;

  /// Sets `key`'s deadline and value, replacing any earlier ones.
  void set(const K& key, timestamp deadline, V value = {}) {
    auto gen = ++generation_;
    live_.insert_or_assign(key, slot{deadline, gen, std::move(value)});
    heap_.push_back(entry{deadline, key, gen});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
    settle();
  }

  /// Forgets `key`'s deadline; false if it had none.
  bool erase(const K& key) {
    if (live_.erase(key) == 0) return false;
    settle();
    return true;
  }

  /// The deadline of `key`, if it has one.
  std::optional<timestamp> deadline(const K& key) const {
    auto it = live_.find(key);
    if (it == live_.end()) return std::nullopt;
    return it->second.deadline;
  }

  /// The earliest deadline, if any key has one.
  std::optional<timestamp> next() const {
    if (heap_.empty()) return std::nullopt;
    return heap_.front().deadline;  // `settle` keeps the top live
  }

  /// Removes every key whose deadline is at or before `now`, earliest first, and calls
  /// `f(key, value)` for each once it is removed.
  template <class F>
  void pop_due(timestamp now, F&& f) {
    while (!heap_.empty() && heap_.front().deadline <= now) {
      auto it = live_.find(heap_.front().key);
      auto key = it->first;
      auto value = std::move(it->second.value);
      live_.erase(it);
      pop_top();
      settle();
      f(key, std::move(value));
    }
  }

  /// Removes every key whose deadline is at or before `now` and returns them, earliest first.
  std::vector<K> pop_due(timestamp now) {
    std::vector<K> out;
    pop_due(now, [&out](const K& key, V&&) { out.push_back(key); });
    return out;
  }

  /// Keys with a deadline.
  std::size_t size() const { return live_.size(); }
  bool empty() const { return live_.empty(); }
  /// Heap entries, stale ones included (tests: the memory bound).
  std::size_t heap_size() const { return heap_.size(); }

  void clear() {
    live_.clear();
    heap_.clear();
  }

  /// Aborts on a broken invariant.
  void check_invariants() const {
    LANEQ_ASSERT(heap_.size() >= live_.size(), "every live key has a heap entry");
    LANEQ_ASSERT(heap_.size() <= 2 * live_.size() + slack, "stale entries are bounded");
    LANEQ_ASSERT(std::is_heap(heap_.begin(), heap_.end(), std::greater<>{}), "a min-heap");
    LANEQ_ASSERT(heap_.empty() || is_live(heap_.front()), "the top is live");
    std::size_t live_entries = 0;
    for (const auto& e : heap_)
      if (is_live(e)) ++live_entries;
    LANEQ_ASSERT(live_entries == live_.size(), "each live key has exactly one live entry");
  }

 private:
  struct slot {
    timestamp deadline;
    std::uint64_t generation = 0;
    V value;
  };
  struct entry {
    timestamp deadline;
    K key;
    std::uint64_t generation = 0;
    bool operator>(const entry& o) const {
      if (deadline != o.deadline) return deadline > o.deadline;
      return o.key < key;
    }
  };

  bool is_live(const entry& e) const {
    auto it = live_.find(e.key);
    return it != live_.end() && it->second.generation == e.generation;
  }

  void pop_top() {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    heap_.pop_back();
  }

  /// Drops stale entries from the top, and rebuilds the heap when too many are left inside.
  void settle() {
    while (!heap_.empty() && !is_live(heap_.front())) pop_top();
    if (heap_.size() <= 2 * live_.size() + slack) return;
    std::vector<entry> fresh;  // a new vector, so the memory shrinks too
    fresh.reserve(2 * live_.size() + slack);
    for (const auto& [key, s] : live_) fresh.push_back(entry{s.deadline, key, s.generation});
    std::make_heap(fresh.begin(), fresh.end(), std::greater<>{});
    heap_.swap(fresh);
  }

  std::unordered_map<K, slot> live_;
  std::vector<entry> heap_;
  std::uint64_t generation_ = 0;
};

}  // namespace laneq
