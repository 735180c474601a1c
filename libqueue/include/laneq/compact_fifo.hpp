// A first-in first-out queue that costs one small allocation for a few elements. A group holds
// its messages in one; std::deque would allocate a 512-byte block for the first message, which
// with a million live groups is half a gigabyte of mostly empty blocks.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "laneq/assert.hpp"

namespace laneq {

/// FIFO over a vector with a moving head. Popped slots are reclaimed once there are at least 16
/// and they make up half of the vector, so pops are amortized O(1); an emptied fifo frees its
/// elements (the vector keeps its capacity, which a group's short life makes moot).
template <class T>
class compact_fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }

  T& front() {
    LANEQ_ASSERT(!empty(), "front() of an empty fifo");
    return items_[head_];
  }
  const T& front() const {
    LANEQ_ASSERT(!empty(), "front() of an empty fifo");
    return items_[head_];
  }
  const T& back() const {
    LANEQ_ASSERT(!empty(), "back() of an empty fifo");
    return items_.back();
  }
  /// The i-th element from the front.
  const T& operator[](std::size_t i) const { return items_[head_ + i]; }
  T& operator[](std::size_t i) { return items_[head_ + i]; }

  void push_back(T x) { items_.push_back(std::move(x)); }

  /// Removes the last element (a purge cuts a group's window behind what is in flight).
  void pop_back() {
    LANEQ_ASSERT(!empty(), "pop_back() of an empty fifo");
    items_.pop_back();
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    }
  }

  /// Frees the room an empty fifo keeps beyond `keep` elements.
  void release(std::size_t keep) {
    if (empty() && items_.capacity() > keep) std::vector<T>{}.swap(items_);
  }

  void pop_front() {
    LANEQ_ASSERT(!empty(), "pop_front() of an empty fifo");
    items_[head_] = T{};  // release the element's memory now
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 16 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

}  // namespace laneq
