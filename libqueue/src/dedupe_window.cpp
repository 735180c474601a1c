// A shard's dedupe window (libqueue/include/laneq/dedupe_window.hpp).
#include "laneq/dedupe_window.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "laneq/assert.hpp"

namespace laneq {

std::optional<dedupe_window::hit> dedupe_window::find(const std::string& key, timestamp now) const {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.expires <= now) return std::nullopt;
  return hit{it->second.id, it->second.confirmed};
}

void dedupe_window::add(const std::string& key, message_id id, timestamp expires) {
  if (auto it = entries_.find(key); it != entries_.end()) drop(it);  // an expired entry
  entries_.insert_or_assign(key, entry{id, expires, false});
  order_.emplace_back(expires, key);
  bound();
}

void dedupe_window::restore(const std::string& key, message_id id, timestamp expires) {
  entries_.insert_or_assign(key, entry{id, expires, true});
  order_.emplace_back(expires, key);
  bound();
}

void dedupe_window::confirm(const std::string& key) {
  if (auto it = entries_.find(key); it != entries_.end()) it->second.confirmed = true;
}

void dedupe_window::forget(const std::string& key) {
  if (auto it = entries_.find(key); it != entries_.end()) entries_.erase(it);  // no record yet
  compact();
}

void dedupe_window::drop(std::unordered_map<std::string, entry>::iterator it) {
  if (it->second.confirmed) erasures_.push_back(it->first);
  entries_.erase(it);
}

void dedupe_window::expire(timestamp now) {
  while (!order_.empty() && order_.front().first <= now) {
    auto& [expires, key] = order_.front();
    if (auto it = entries_.find(key); it != entries_.end() && it->second.expires == expires)
      drop(it);
    order_.pop_front();
  }
  compact();
}

void dedupe_window::bound() {
  while (entries_.size() > max_ && !order_.empty()) {
    auto& [expires, key] = order_.front();
    if (auto it = entries_.find(key); it != entries_.end() && it->second.expires == expires) {
      drop(it);
      ++evictions_;
    }
    order_.pop_front();
  }
  compact();
}

void dedupe_window::compact() {
  // Stale entries in the order (dropped or forgotten keys) are bounded by the live ones.
  if (order_.size() > 2 * entries_.size() + 64) {
    std::deque<std::pair<timestamp, std::string>> fresh;
    for (auto& [expires, key] : order_)
      if (auto it = entries_.find(key); it != entries_.end() && it->second.expires == expires)
        fresh.emplace_back(expires, std::move(key));
    order_ = std::move(fresh);
  }
}

std::vector<std::string> dedupe_window::take_erasures() {
  return std::exchange(erasures_, {});
}

void dedupe_window::check_invariants() const {
  LANEQ_ASSERT(entries_.size() <= max_, "the window holds at most max_entries");
  LANEQ_ASSERT(order_.size() <= 2 * entries_.size() + 64, "stale order entries are bounded");
  // A key forgotten and added again at the same instant has two identical places in the order
  // (the stale one is skipped lazily, like any other): each entry counts once. (Found by the
  // engine simulation: an enqueue whose write failed, sent again at the same instant.)
  std::vector<const entry*> live;
  live.reserve(entries_.size());
  for (const auto& [expires, key] : order_) {
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.expires == expires) live.push_back(&it->second);
  }
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  LANEQ_ASSERT(live.size() == entries_.size(), "each entry is in the expiry order");
}

}  // namespace laneq
