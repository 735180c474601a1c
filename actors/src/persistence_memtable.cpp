// The store's memtable representation, entries apart by lane (persistence_memtable.hpp, ADR 0008).
#include "laneq/actors/persistence_memtable.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <rocksdb/slice.h>
#include <boost/unordered/unordered_flat_map.hpp>

#include "laneq/assert.hpp"

namespace laneq {

namespace {

using rocksdb::MemTableRep;
using entry = const char*;  ///< a memtable entry: length-prefixed internal key, then the value

/// An entry as a partition holds it: with the part of its key that orders it among the
/// partition's entries, so that an insert compares numbers instead of reading the entries it
/// passes (with lanes interleaved, each entry read is a cache miss). For a key of the partition's
/// length plus 8 bytes (every message key): `rest`, those 8 bytes big-endian, and `tail`, the
/// internal key's packed sequence number and type. Other keys have `tail` 0 (an inserted key's
/// sequence number is at least 1) and are compared by RocksDB's comparator.
struct keyed {
  entry e;
  std::uint64_t rest;
  std::uint64_t tail;
};

/// Entries per chunk before it splits: an insert into a chunk moves at most this many of them.
constexpr std::size_t chunk_max = 128;

/// The entries of one partition (a lane, or a short key), in order, as chunks of at most
/// `chunk_max` entries; no chunk is empty.
struct partition {
  std::string name;
  std::vector<std::vector<keyed>> chunks;
  /// Where the last insert that was not an append went (chunk, index): a lane's erases come in
  /// its order, so the next one lands just after it (`near_finger`).
  std::size_t finger = 0;
  std::size_t finger_at = 0;
};

/// A partition's name held in place (a lookup reads no memory beyond the table's slot): up to
/// `bytes.size()` bytes, the rest zero. Names come from `lane_rep::partition_name`, at most
/// `partition_bytes_` long, which the rep's constructor checks against this bound once.
struct inline_name {
  std::array<char, 32> bytes{};
  std::uint8_t size = 0;
  explicit inline_name(std::string_view name) : size(static_cast<std::uint8_t>(name.size())) {
    std::memcpy(bytes.data(), name.data(), name.size());
  }
  friend bool operator==(const inline_name&, const inline_name&) = default;
};

/// Mixes all 32 bytes and the size into 64 bits: a lane's 16 bytes are a digest already, and
/// the words are folded with odd multipliers and mixed once more (the map then needs no mixing
/// of its own).
struct inline_name_hash {
  using is_avalanching = void;
  std::size_t operator()(const inline_name& n) const noexcept {
    std::uint64_t w[4];
    std::memcpy(w, n.bytes.data(), sizeof w);
    std::uint64_t h = n.size;
    for (auto x : w) h = (h ^ x) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    return h ^ (h >> 32);
  }
};

/// The user key of an internal key (without its 8-byte sequence number and type).
rocksdb::Slice user_key(const rocksdb::Slice& internal_key) {
  LANEQ_ASSERT(internal_key.size() >= 8, "an internal key ends in 8 bytes of seqno and type");
  return {internal_key.data(), internal_key.size() - 8};
}

/// Asks the CPU to start loading the cache line at `p`. GCC 12 drops `__builtin_prefetch` of a
/// pointer read from a vector in an inlined member function (measured: no prefetch instruction
/// left in the iterator), so x86-64 states the instruction itself.
inline void prefetch_line(const char* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*p));
#else
  __builtin_prefetch(p);
#endif
}

class lane_rep final : public MemTableRep {
 public:
  lane_rep(const KeyComparator& cmp, rocksdb::Allocator* allocator, std::size_t partition_bytes)
      : MemTableRep(allocator), cmp_(cmp), partition_bytes_(partition_bytes) {
    LANEQ_ASSERT(partition_bytes <= sizeof(inline_name::bytes), "a partition name fits inline");
    check_order();
  }

  ~lane_rep() override {
    // RocksDB frees a memtable on whichever thread drops its last reference (often a flush
    // thread), after every iterator over it is gone. The lock orders this read of the slots
    // after their last release in a way ThreadSanitizer can see (RocksDB's own hand-over is in a
    // library not built with it); once per memtable, it costs nothing.
    std::lock_guard guard{slots_mtx_};
    for (auto* s : slots_) {
      LANEQ_ASSERT(s->free, "a memtable iterator outlives its memtable");
      delete s;
    }
  }

  void Insert(rocksdb::KeyHandle handle) override {
    LANEQ_ASSERT(InsertKey(handle), "an internal key is inserted into the memtable once");
  }

  bool InsertKey(rocksdb::KeyHandle handle) override {
    LANEQ_ASSERT(!read_only_, "no insert into a memtable marked read-only");
    auto internal = rocksdb::GetLengthPrefixedSlice(static_cast<entry>(handle));
    auto e = key_of(static_cast<entry>(handle), internal);
    auto& p = partition_for(user_key(internal));
    version_.fetch_add(1, std::memory_order_relaxed);
    if (p.chunks.empty()) {
      grow(p.chunks);
      p.chunks.emplace_back();
      push(p.chunks.back(), p.chunks.back().end(), e);
      return true;
    }
    // The common case: a put at the end of its lane.
    auto& last = p.chunks.back();
    int c = order(e, last.back());
    if (c > 0) {
      if (last.size() >= chunk_max) {
        grow(p.chunks);
        p.chunks.emplace_back();
      }
      push(p.chunks.back(), p.chunks.back().end(), e);
      return true;
    }
    if (c == 0) return false;
    // An erase near the lane's start, or a rewrite: just after the last such insert, or in the
    // chunk that holds the first entry not before `e` (tried first where that insert went).
    auto ci = p.finger;
    auto at = near_finger(p, e);
    if (at == 0) {
      if (!fits(p, ci, e)) ci = first_chunk_not_ending_before(p, e);
      auto& ch = p.chunks[ci];
      auto pos = std::lower_bound(ch.begin(), ch.end(), e, [this](const keyed& a, const keyed& b) {
        return order(a, b) < 0;
      });
      if (pos != ch.end() && order(*pos, e) == 0) return false;
      at = static_cast<std::size_t>(pos - ch.begin());
    }
    auto& ch = p.chunks[ci];
    push(ch, ch.begin() + static_cast<std::ptrdiff_t>(at), e);
    p.finger = ci;
    p.finger_at = at;
    if (ch.size() <= chunk_max) return true;
    auto kept = split(p, ci);  // `ch` may move with the chunk list
    if (at >= kept) {
      p.finger = ci + 1;
      p.finger_at = at - kept;
    }
    return true;
  }

  bool Contains(const char* key) const override {
    auto target = rocksdb::GetLengthPrefixedSlice(key);
    const auto* p = find(partition_name(user_key(target)));
    if (p == nullptr) return false;
    auto [ci, pos] = lower_bound(*p, target);
    return ci < p->chunks.size() && cmp_(p->chunks[ci][pos].e, target) == 0;
  }

  /// A point read, as RocksDB's own representations do it: MemTableRep's default leaks the
  /// iterator it takes (it never deletes it; RocksDB 7.8, memtable.cc).
  void Get(const rocksdb::LookupKey& k, void* callback_args,
           bool (*callback_func)(void* arg, const char* entry)) override;

  void MarkReadOnly() override { read_only_ = true; }

  std::size_t ApproximateMemoryUsage() override { return memory_.load(std::memory_order_relaxed); }

  Iterator* GetIterator(rocksdb::Arena* arena) override;

 private:
  friend class lane_iterator;
  using ordered_map = std::map<std::string_view, std::unique_ptr<partition>>;

  /// Storage for an iterator RocksDB places in its arena: RocksDB only runs its destructor, so
  /// the memory stays here. A slot is reused only by the thread that released it (its destructor
  /// has then surely finished) and freed with the memtable.
  struct slot {
    alignas(std::max_align_t) unsigned char bytes[128];
    std::thread::id released_by;
    bool free = false;
  };

  std::string_view partition_name(const rocksdb::Slice& user) const {
    return {user.data(), std::min(user.size(), partition_bytes_)};
  }

  const partition* find(std::string_view name) const {
    auto it = by_name_.find(inline_name{name});
    return it == by_name_.end() ? nullptr : it->second;
  }

  /// `e` with its ordering numbers (`keyed`); `internal` is its internal key.
  keyed key_of(entry e, const rocksdb::Slice& internal) const {
    auto user = internal.size() - 8;
    if (user != partition_bytes_ + 8) return {e, 0, 0};
    std::uint64_t rest = 0, tail = 0;
    std::memcpy(&rest, internal.data() + partition_bytes_, 8);
    std::memcpy(&tail, internal.data() + user, 8);
    static_assert(std::endian::native == std::endian::little);
    return {e, __builtin_bswap64(rest), tail};
  }

  /// Stops the process unless `order` agrees with RocksDB's comparator on probe keys (it assumes
  /// a bytewise user comparator, which a database opened with another would break).
  void check_order() const {
    LANEQ_ASSERT(partition_bytes_ + 16 < 128, "a probe key's length fits one byte");
    auto probe = [this](char rest, std::uint64_t seq) {
      std::string k(1 + partition_bytes_ + 16, 'p');
      k[0] = static_cast<char>(partition_bytes_ + 16);
      k[1 + partition_bytes_] = rest;
      auto packed = seq << 8 | 1;  // a put
      std::memcpy(k.data() + 1 + partition_bytes_ + 8, &packed, 8);
      return k;
    };
    const std::string probes[] = {probe('\x01', 2), probe('\x01', 1), probe('\xff', 3)};
    for (const auto& a : probes)
      for (const auto& b : probes) {
        auto ka = key_of(a.data(), rocksdb::GetLengthPrefixedSlice(a.data()));
        auto kb = key_of(b.data(), rocksdb::GetLengthPrefixedSlice(b.data()));
        auto sign = [](int c) { return (c > 0) - (c < 0); };
        LANEQ_ASSERT(sign(order(ka, kb)) == sign(cmp_(a.data(), b.data())),
                     "the lane memtable needs RocksDB's bytewise comparator");
      }
  }

  /// RocksDB's order of two entries of one partition (its internal key comparator, over a
  /// bytewise user comparator: make_lane_memtable_factory's contract): the 8 bytes after the
  /// partition's name, then the later sequence number first.
  int order(const keyed& a, const keyed& b) const {
    if (a.tail == 0 || b.tail == 0) return cmp_(a.e, b.e);
    if (a.rest != b.rest) return a.rest < b.rest ? -1 : 1;
    if (a.tail != b.tail) return a.tail > b.tail ? -1 : 1;
    return 0;
  }

  partition& partition_for(const rocksdb::Slice& user) {
    auto name = partition_name(user);
    inline_name key_in_place{name};
    if (auto it = by_name_.find(key_in_place); it != by_name_.end()) return *it->second;
    auto p = std::make_unique<partition>();
    p->name.assign(name.data(), name.size());
    auto* raw = p.get();
    std::string_view key{raw->name};
    ordered_.emplace(key, std::move(p));
    by_name_.emplace(key_in_place, raw);
    // The partition, its name, a node of the ordered map and a slot of the table.
    account(static_cast<std::int64_t>(sizeof(partition) + raw->name.capacity() + 128));
    return *raw;
  }

  /// Inserts `e` at `pos` of `chunk`, counting any growth of the chunk's storage.
  void push(std::vector<keyed>& chunk, std::vector<keyed>::iterator pos, const keyed& e) {
    auto before = chunk.capacity();
    chunk.insert(pos, e);
    account(static_cast<std::int64_t>((chunk.capacity() - before) * sizeof(keyed)));
  }

  /// Counts the growth of the chunk list before it gets one more chunk.
  void grow(std::vector<std::vector<keyed>>& chunks) {
    if (chunks.size() < chunks.capacity()) return;
    auto before = chunks.capacity();
    chunks.reserve(std::max<std::size_t>(1, before * 2));
    account(static_cast<std::int64_t>((chunks.capacity() - before) * sizeof(chunks[0])));
  }

  /// Moves the upper half of chunk `ci` into a new chunk after it; returns the entries kept.
  std::size_t split(partition& p, std::size_t ci) {
    grow(p.chunks);
    auto& full = p.chunks[ci];
    auto half = full.size() / 2;
    std::vector<keyed> upper(full.begin() + static_cast<std::ptrdiff_t>(half), full.end());
    full.resize(half);
    account(static_cast<std::int64_t>(upper.capacity() * sizeof(keyed)));
    p.chunks.insert(p.chunks.begin() + static_cast<std::ptrdiff_t>(ci) + 1, std::move(upper));
    return half;
  }

  /// The index in the finger's chunk where `e` belongs, if that is within a few entries after the
  /// finger and before the chunk's last entry; 0 otherwise. A lane's erases come in its
  /// order: each tombstone goes just before the put it erases, so the next one lands two entries
  /// after the last (three comparisons instead of a search of the chunk). The finger may be stale;
  /// the answer holds anyway, as the entries around it are compared.
  std::size_t near_finger(const partition& p, const keyed& e) const {
    constexpr std::size_t reach = 4;
    if (p.finger >= p.chunks.size()) return 0;
    const auto& ch = p.chunks[p.finger];
    auto j = p.finger_at;
    if (j >= ch.size() || order(e, ch[j]) <= 0) return 0;
    for (auto k = j + 1; k < ch.size() && k <= j + reach; ++k) {
      int c = order(e, ch[k]);
      if (c < 0) return k;
      if (c == 0) return 0;  // a duplicate: the search below reports it
    }
    return 0;
  }

  /// Whether chunk `ci` holds the first entry not before `e`: `e` is not after its last entry
  /// and after the last entry of the chunk before it.
  bool fits(const partition& p, std::size_t ci, const keyed& e) const {
    if (ci >= p.chunks.size() || order(e, p.chunks[ci].back()) > 0) return false;
    return ci == 0 || order(e, p.chunks[ci - 1].back()) > 0;
  }

  /// The first chunk whose last entry is not before `e` (one exists: `e` is before the last
  /// entry of the partition).
  std::size_t first_chunk_not_ending_before(const partition& p, const keyed& e) const {
    auto it =
        std::partition_point(p.chunks.begin(), p.chunks.end(),
                             [&](const std::vector<keyed>& ch) { return order(ch.back(), e) < 0; });
    return static_cast<std::size_t>(it - p.chunks.begin());
  }

  /// The position of the first entry of `p` that is not before `target` (an internal key):
  /// chunk and index, or chunk == chunks.size() when every entry is before it.
  std::pair<std::size_t, std::size_t> lower_bound(const partition& p,
                                                  const rocksdb::Slice& target) const {
    auto it = std::partition_point(
        p.chunks.begin(), p.chunks.end(),
        [&](const std::vector<keyed>& ch) { return cmp_(ch.back().e, target) < 0; });
    if (it == p.chunks.end()) return {p.chunks.size(), 0};
    auto pos = std::partition_point(it->begin(), it->end(),
                                    [&](const keyed& k) { return cmp_(k.e, target) < 0; });
    return {static_cast<std::size_t>(it - p.chunks.begin()),
            static_cast<std::size_t>(pos - it->begin())};
  }

  void account(std::int64_t delta) {
    memory_.fetch_add(static_cast<std::size_t>(delta), std::memory_order_relaxed);
  }

  void* take_slot();
  void release_slot(void* bytes);

  const KeyComparator& cmp_;
  const std::size_t partition_bytes_;
  boost::unordered_flat_map<inline_name, partition*, inline_name_hash> by_name_;
  ordered_map ordered_;  // partitions in key order
  std::atomic<std::size_t> memory_{0};
  /// Inserts so far: an iterator positioned before an insert must not be used after it.
  std::atomic<std::uint64_t> version_{0};
  bool read_only_ = false;
  std::mutex slots_mtx_;
  std::vector<slot*> slots_;
};

// Partitions are disjoint ranges of keys, and their names sort as the ranges do: a key of a
// partition of `partition_bytes` starts with the name, and a shorter name is the one key of its
// partition. So the iterator walks the partitions in name order, and each partition's chunks.
class lane_iterator final : public MemTableRep::Iterator {
 public:
  lane_iterator(const lane_rep* rep, void* slot)
      : rep_(rep), slot_(slot), at_(rep->ordered_.end()) {}
  ~lane_iterator() override {
    if (slot_ != nullptr) const_cast<lane_rep*>(rep_)->release_slot(slot_);
  }

  bool Valid() const override { return at_ != rep_->ordered_.end(); }

  const char* key() const override {
    check();
    return chunks()[chunk_][index_].e;
  }

  void Next() override {
    check();
    if (++index_ < chunks()[chunk_].size()) {
      prefetch(index_ + prefetch_distance);
      return;
    }
    index_ = 0;
    if (++chunk_ < chunks().size()) return prefetch_chunk_start();
    chunk_ = 0;
    if (++at_ != rep_->ordered_.end()) prefetch_chunk_start();
  }

  void Prev() override {
    check();
    if (index_ > 0) {
      --index_;
    } else if (chunk_ > 0) {
      --chunk_;
      index_ = chunks()[chunk_].size() - 1;
    } else if (at_ == rep_->ordered_.begin()) {
      at_ = rep_->ordered_.end();
    } else {
      --at_;
      to_last_of_partition();
    }
  }

  void Seek(const rocksdb::Slice& internal_key, const char* /*memtable_key*/) override {
    mark();
    auto name = rep_->partition_name(user_key(internal_key));
    at_ = rep_->ordered_.lower_bound(name);
    chunk_ = index_ = 0;
    if (at_ == rep_->ordered_.end() || at_->first != name) return;  // a later partition's first
    auto [ci, pos] = rep_->lower_bound(*at_->second, internal_key);
    if (ci == chunks().size()) {
      ++at_;  // everything here is before the target: the next partition's first entry
      return;
    }
    chunk_ = ci;
    index_ = pos;
  }

  void SeekForPrev(const rocksdb::Slice& internal_key, const char* memtable_key) override {
    Seek(internal_key, memtable_key);
    if (!Valid()) {
      SeekToLast();
    } else if (rep_->cmp_(key(), internal_key) > 0) {
      Prev();
    }
  }

  void SeekToFirst() override {
    mark();
    at_ = rep_->ordered_.begin();
    chunk_ = index_ = 0;
    if (Valid()) prefetch_chunk_start();
  }

  void SeekToLast() override {
    mark();
    at_ = rep_->ordered_.end();
    if (rep_->ordered_.empty()) return;
    --at_;
    to_last_of_partition();
  }

 private:
  const std::vector<std::vector<keyed>>& chunks() const { return at_->second->chunks; }

  /// Entries ahead that a forward scan (a flush) asks the CPU to load: consecutive entries of a
  /// lane lie far apart in the memtable's arena when lanes are interleaved, so each one read in
  /// key order is a cache miss unless it was loaded while the ones before it were used.
  static constexpr std::size_t prefetch_distance = 8;

  /// Starts loading the entry at `i` of the current chunk (its key and the first bytes of its
  /// value), if there is one.
  void prefetch(std::size_t i) const {
    const auto& ch = chunks()[chunk_];
    if (i >= ch.size()) return;
    prefetch_line(ch[i].e);
    prefetch_line(ch[i].e + 64);
  }

  void prefetch_chunk_start() const {
    for (std::size_t i = 0; i <= prefetch_distance; ++i) prefetch(i);
  }

  void to_last_of_partition() {
    chunk_ = chunks().size() - 1;
    index_ = chunks()[chunk_].size() - 1;
  }

  void mark() { version_ = rep_->version_.load(std::memory_order_relaxed); }
  void check() const {
    LANEQ_ASSERT(Valid(), "a memtable iterator is used while it is not valid");
    LANEQ_ASSERT(version_ == rep_->version_.load(std::memory_order_relaxed),
                 "a memtable iterator is used after an insert (persistence_memtable.hpp)");
  }

  const lane_rep* rep_;
  void* slot_;  ///< its storage when RocksDB placed it in an arena, else nullptr
  lane_rep::ordered_map::const_iterator at_;
  std::size_t chunk_ = 0;
  std::size_t index_ = 0;
  std::uint64_t version_ = 0;
};

/// The internal key of a RocksDB LookupKey. Its class is not in RocksDB's installed headers; its
/// layout, unchanged since LevelDB, starts with three pointers: the length-prefixed memtable
/// key, the internal key within it, and their end. The pointers are checked against each other,
/// so a RocksDB whose LookupKey differs stops here instead of reading elsewhere.
rocksdb::Slice lookup_key_of(const rocksdb::LookupKey& k) {
  struct layout {
    const char* start;
    const char* kstart;
    const char* end;
  };
  layout l{};
  std::memcpy(&l, &k, sizeof l);
  LANEQ_ASSERT(
      l.start != nullptr && l.kstart > l.start && l.kstart - l.start <= 5 && l.end >= l.kstart + 8,
      "RocksDB's LookupKey starts with its memtable key, internal key and end");
  auto internal = rocksdb::GetLengthPrefixedSlice(l.start);
  LANEQ_ASSERT(
      internal.data() == l.kstart && internal.size() == static_cast<std::size_t>(l.end - l.kstart),
      "RocksDB's LookupKey is a length-prefixed internal key");
  return internal;
}

void lane_rep::Get(const rocksdb::LookupKey& k, void* callback_args,
                   bool (*callback_func)(void* arg, const char* entry)) {
  lane_iterator it{this, nullptr};
  for (it.Seek(lookup_key_of(k), nullptr); it.Valid() && callback_func(callback_args, it.key());
       it.Next()) {
  }
}

MemTableRep::Iterator* lane_rep::GetIterator(rocksdb::Arena* arena) {
  static_assert(sizeof(lane_iterator) <= sizeof(slot::bytes));
  static_assert(alignof(lane_iterator) <= alignof(std::max_align_t));
  if (arena == nullptr) return new lane_iterator(this, nullptr);
  auto* bytes = take_slot();
  return new (bytes) lane_iterator(this, bytes);
}

void* lane_rep::take_slot() {
  std::lock_guard guard{slots_mtx_};
  auto me = std::this_thread::get_id();
  for (auto* s : slots_)
    if (s->free && s->released_by == me) {
      s->free = false;
      return s->bytes;
    }
  // Not counted in memory_: RocksDB requires a read-only memtable's usage to stay as it was, and
  // iterators over it come and go; a few slots per reading thread.
  slots_.push_back(new slot);
  return slots_.back()->bytes;
}

void lane_rep::release_slot(void* bytes) {
  std::lock_guard guard{slots_mtx_};
  for (auto* s : slots_)
    if (s->bytes == bytes) {
      s->free = true;
      s->released_by = std::this_thread::get_id();
      return;
    }
  LANEQ_ASSERT(false, "a memtable iterator's slot belongs to its memtable");
}

class lane_rep_factory final : public rocksdb::MemTableRepFactory {
 public:
  explicit lane_rep_factory(std::size_t partition_bytes) : partition_bytes_(partition_bytes) {}

  using MemTableRepFactory::CreateMemTableRep;
  MemTableRep* CreateMemTableRep(const MemTableRep::KeyComparator& cmp,
                                 rocksdb::Allocator* allocator, const rocksdb::SliceTransform*,
                                 rocksdb::Logger*) override {
    return new lane_rep(cmp, allocator, partition_bytes_);
  }

  const char* Name() const override { return "laneq.lane_memtable"; }

 private:
  std::size_t partition_bytes_;
};

}  // namespace

std::shared_ptr<rocksdb::MemTableRepFactory> make_lane_memtable_factory(
    std::size_t partition_bytes) {
  return std::make_shared<lane_rep_factory>(partition_bytes);
}

}  // namespace laneq
