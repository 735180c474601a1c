// The in-memory store's table (memory_store.hpp): keys and values in key order, kept apart by
// lane as the RocksDB store's memtable keeps them (ADR 0008, persistence_memtable.hpp). A key's
// partition is its first `partition_bytes` bytes (the whole key when it is shorter): a queue's
// message records (`M` uid lane seq) fall into one partition per lane, and the writes a queue
// makes most — a message put at the end of its lane, erased near its front when it is acked —
// find their place with one hash lookup and a comparison of the last 8 bytes, where an ordered
// map of whole keys walked a tree of long keys that share their first 25 bytes.
//
// Order: partitions are ordered by name and, inside one, entries by the rest of the key (the
// suffix). That is the order of the whole keys, because every key of a partition starts with
// its name and a name shorter than `partition_bytes` is a whole key of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "laneq/engine_io.hpp"

namespace laneq {

class memory_table {
 public:
  explicit memory_table(std::size_t partition_bytes) : partition_bytes_(partition_bytes) {}
  memory_table(const memory_table&) = delete;
  memory_table& operator=(const memory_table&) = delete;

  void put(std::string_view key, std::string value);
  void erase(std::string_view key);
  /// Erases every key in [from, to).
  void erase_range(std::string_view from, std::string_view to);
  /// The entries with from <= key < to in key order, at most `max`.
  std::vector<store_entry> scan(std::string_view from, std::string_view to, std::size_t max) const;
  /// Live keys.
  std::size_t size() const { return size_; }
  /// Partitions: those holding live keys and up to `idle_partitions_max` emptied ones, kept for
  /// their lane's next put.
  std::size_t partitions() const { return parts_.size(); }
  /// Entries the partitions have room for, erased ones included: what their vectors take.
  std::size_t entries_capacity() const;
  /// Emptied partitions kept: a lane whose consumers keep up empties after nearly every ack,
  /// and making its partition again at its next put cost more than the table saved. Beyond
  /// this many, the longest emptied go.
  static constexpr std::size_t idle_partitions_max = 4096;

 private:
  /// A suffix with its first 8 bytes as a big-endian number (zero-padded), so that most
  /// comparisons (a message key's suffix is its 8-byte sequence number) are one of integers.
  struct suffix_key {
    std::uint64_t lead = 0;
    std::string_view rest;
    explicit suffix_key(std::string_view s);
  };
  struct entry {
    std::uint64_t lead = 0;
    std::string suffix;
    std::string value;
    bool live = true;
    bool operator<(const suffix_key& k) const {
      return lead != k.lead ? lead < k.lead : std::string_view{suffix} < k.rest;
    }
    bool operator==(const suffix_key& k) const { return lead == k.lead && suffix == k.rest; }
  };
  /// The entries of one partition in suffix order. Those before `head` are erased; `dead`
  /// counts the erased ones at or after it. A lane's acks erase near its front, so `head`
  /// moves past them, and the vector is compacted once the erased outnumber the live.
  struct partition {
    std::string_view name;  ///< its key in `parts_`
    std::vector<entry> entries;
    std::size_t head = 0;
    std::size_t dead = 0;
    bool idle = false;  ///< in `idle_`
    std::size_t live() const { return entries.size() - head - dead; }
  };
  /// Eight bytes at a time: a name is mostly a uid and a lane id, which a hash made already.
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const;
  };
  using part_map = std::unordered_map<std::string, partition, name_hash, std::equal_to<>>;

  std::string_view name_of(std::string_view key) const {
    return key.substr(0, std::min(key.size(), partition_bytes_));
  }
  /// The partition named `name`, or null; the last one found is kept at hand, as consecutive
  /// writes often go to one lane.
  partition* find(std::string_view name);
  partition& find_or_make(std::string_view name);
  void drop(std::string_view name);
  /// The index of the first entry at or after `head` whose suffix is not less than `suffix`.
  static std::size_t lower_bound(const partition& p, const suffix_key& suffix);
  /// The index of the first entry of `p` (named `name`) whose key may be at or above `from`.
  std::size_t first_from(std::string_view name, const partition& p, std::string_view from) const;
  void kill(partition& p, entry& e);
  /// Moves `head` past erased entries, compacts (giving back room the entries no longer need),
  /// and queues the partition in `idle_` once it is empty.
  void tidy(partition& p);
  /// Drops the longest emptied partitions beyond `idle_partitions_max` (those still empty).
  void trim_idle();
  /// The partitions that may hold keys in [from, to), in order.
  std::vector<std::pair<std::string_view, partition*>> in_range(std::string_view from,
                                                                std::string_view to) const;

  std::size_t partition_bytes_;
  part_map parts_;
  /// The partitions by name, for the ordered walks (scans and range erases); names point into
  /// `parts_`' keys, which stay where they are.
  std::map<std::string_view, partition*> order_;
  partition* last_ = nullptr;          ///< the last partition found (`find`)
  std::deque<std::string_view> idle_;  ///< names of emptied partitions, oldest first
  std::size_t size_ = 0;
};

}  // namespace laneq
