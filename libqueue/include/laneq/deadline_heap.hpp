// Deadlines by key, earliest first, in memory that follows the live keys: the shard engine's
// lease deadlines (unordered messages in `lease_table`, group heads in `group_leases_`), reclaim
// graces and window read retries. Header only.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "laneq/assert.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// A binary min-heap of (deadline, key), indexed: each key's slot knows its place in the heap,
/// so setting a key's deadline again moves its one entry and erasing a key removes it, each in
/// O(log n), and the heap holds exactly one entry per key with a deadline: its memory follows the
/// keys in flight, not every deadline set within one lease period (an acked message's deadline is
/// gone at its ack). Ties expire in key order, so the order is deterministic. `K` needs `<`, `==`
/// and `std::hash`. Each key may carry a value `V` that goes with its deadline, so no second map
/// mirrors the keys (the engine's heaps carry none).
template <class K, class V = std::monostate>
class deadline_heap {
 public:
  /// Sets `key`'s deadline and value, replacing any earlier ones.
  void set(const K& key, timestamp deadline, V value = {}) {
    auto [it, fresh] = live_.try_emplace(key);
    auto& s = it->second;
    s.deadline = deadline;
    s.value = std::move(value);
    if (fresh) {
      s.key = &it->first;
      s.pos = heap_.size();
      heap_.push_back(&s);
    }
    restore(s.pos);
  }

  /// Forgets `key`'s deadline; false if it had none.
  bool erase(const K& key) {
    auto it = live_.find(key);
    if (it == live_.end()) return false;
    remove_at(it->second.pos);
    live_.erase(it);
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
    return heap_.front()->deadline;
  }

  /// Removes every key whose deadline is at or before `now`, earliest first, and calls
  /// `f(key, value)` for each once it is removed.
  template <class F>
  void pop_due(timestamp now, F&& f) {
    while (!heap_.empty() && heap_.front()->deadline <= now) {
      auto* top = heap_.front();
      auto key = *top->key;
      auto value = std::move(top->value);
      remove_at(0);
      live_.erase(key);
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
  /// Heap entries (tests: one per key with a deadline).
  std::size_t heap_size() const { return heap_.size(); }

  void clear() {
    heap_.clear();
    live_.clear();
  }

  /// Aborts on a broken invariant.
  void check_invariants() const {
    LANEQ_ASSERT(heap_.size() == live_.size(), "one heap entry per live key");
    for (std::size_t i = 0; i < heap_.size(); ++i) {
      LANEQ_ASSERT(heap_[i]->pos == i, "each slot knows its place in the heap");
      LANEQ_ASSERT(i == 0 || !before(*heap_[i], *heap_[(i - 1) / 2]), "a min-heap");
      auto it = live_.find(*heap_[i]->key);
      LANEQ_ASSERT(it != live_.end() && &it->second == heap_[i], "each entry is a live key's slot");
    }
  }

 private:
  /// A key's deadline and value, in the map's node (its address is stable), with its place in
  /// the heap.
  struct slot {
    timestamp deadline;
    std::size_t pos = 0;
    const K* key = nullptr;
    V value;
  };

  static bool before(const slot& a, const slot& b) {
    if (a.deadline != b.deadline) return a.deadline < b.deadline;
    return *a.key < *b.key;
  }

  void place(std::size_t i, slot* s) {
    heap_[i] = s;
    s->pos = i;
  }

  /// Moves the entry at `i` up or down to where the heap order puts it.
  void restore(std::size_t i) {
    auto* s = heap_[i];
    while (i > 0 && before(*s, *heap_[(i - 1) / 2])) {
      place(i, heap_[(i - 1) / 2]);
      i = (i - 1) / 2;
    }
    for (;;) {
      auto child = 2 * i + 1;
      if (child >= heap_.size()) break;
      if (child + 1 < heap_.size() && before(*heap_[child + 1], *heap_[child])) ++child;
      if (!before(*heap_[child], *s)) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, s);
  }

  /// Takes the entry at `i` out of the heap (its slot stays in the map).
  void remove_at(std::size_t i) {
    auto* last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    place(i, last);
    restore(i);
  }

  std::unordered_map<K, slot> live_;
  std::vector<slot*> heap_;  // min-heap by (deadline, key) of the live keys' slots
};

}  // namespace laneq
