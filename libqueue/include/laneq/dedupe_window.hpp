// A shard's dedupe window (docs/design/lanes.md L8): the dedupe keys seen within the queue's
// window, each with the id of the message that first carried it. Bounded twice: by time (an entry
// expires `window` after it was seen) and by count (`max_entries`; past it the oldest entry goes
// first, counted as an eviction). An entry is unconfirmed until its message's write is durable;
// a duplicate of an unconfirmed entry waits for that write. Each confirmed entry has a record in
// the store; the records of entries that expire or are evicted are erased with a later write.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "laneq/ids.hpp"
#include "laneq/time.hpp"

namespace laneq {

class dedupe_window {
 public:
  explicit dedupe_window(std::size_t max_entries) : max_(max_entries < 1 ? 1 : max_entries) {}

  struct hit {
    message_id id;
    bool confirmed = false;
  };
  /// The live entry of `key` at `now`, if any.
  std::optional<hit> find(const std::string& key, timestamp now) const;
  /// A new, unconfirmed entry.
  void add(const std::string& key, message_id id, timestamp expires);
  /// An entry read back from the store (confirmed). Call in expiry order, or `sort` after.
  void restore(const std::string& key, message_id id, timestamp expires);
  /// Its message's write is durable: the entry has a record now.
  void confirm(const std::string& key);
  /// Its message's write failed: the entry goes (a retry is a new message).
  void forget(const std::string& key);
  /// Drops the entries expired at `now`.
  void expire(timestamp now);
  /// The keys whose records must be erased (expired or evicted confirmed entries), once.
  std::vector<std::string> take_erasures();

  std::size_t size() const { return entries_.size(); }
  std::uint64_t evictions() const { return evictions_; }
  void check_invariants() const;

 private:
  struct entry {
    message_id id;
    timestamp expires;
    bool confirmed = false;
  };
  void drop(std::unordered_map<std::string, entry>::iterator it);
  void bound();
  void compact();

  std::size_t max_;
  std::unordered_map<std::string, entry> entries_;
  /// Keys in expiry order (the window is fixed, so insertion order is expiry order; restored
  /// entries come sorted). Entries whose key was dropped or re-added are skipped lazily.
  std::deque<std::pair<timestamp, std::string>> order_;
  std::vector<std::string> erasures_;
  std::uint64_t evictions_ = 0;
};

}  // namespace laneq
