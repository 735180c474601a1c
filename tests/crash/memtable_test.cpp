// The store's memtable (actors/include/laneq/actors/persistence_memtable.hpp, ADR 0008) against
// RocksDB's own skip list: the same random writes into two databases, every read compared.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "crash_support.hpp"
#include "laneq/actors/persistence_memtable.hpp"
#include "laneq/codec.hpp"

namespace laneq::test {
namespace {

constexpr auto partition_bytes = codec::message_key_lane_prefix_bytes;

std::unique_ptr<rocksdb::DB> open_db(const std::string& dir, bool lanes) {
  rocksdb::Options o;
  o.create_if_missing = true;
  // Small memtables, so that a run fills several and reads merge flushed, immutable and live
  // ones; no compaction, so flushed tombstones stay as written.
  o.write_buffer_size = 64u << 10;
  o.max_write_buffer_number = 4;
  o.disable_auto_compactions = true;
  o.allow_concurrent_memtable_write = false;
  if (lanes) o.memtable_factory = make_lane_memtable_factory(partition_bytes);
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(o, dir, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<rocksdb::DB>{raw};
}

/// Keys that stress the partitions: message keys of a few lanes (one partition each, ordered by
/// the memtable as numbers), keys
/// shorter than a partition name (a partition each), among them prefixes of the longer keys and
/// the empty key, and long keys that share a lane's partition name.
class key_maker {
 public:
  explicit key_maker(std::mt19937_64& rng) : rng_(rng) {
    for (int i = 0; i < 6; ++i)
      lanes_.push_back(codec::make_lane_id("memtable-test", "group-" + std::to_string(i)));
  }

  std::string next() {
    switch (rng_() % 6) {
      case 0:
      case 1:
        return codec::message_key(rng_() % 2, lanes_[rng_() % lanes_.size()],
                                  message_seq{rng_() % 200});
      case 2:  // any of the 8 bytes that the memtable orders as a number may differ
        return codec::message_key(rng_() % 2, lanes_[rng_() % lanes_.size()],
                                  message_seq{rng_() >> (rng_() % 64)});
      case 3: {  // shorter than a partition name, often a prefix of a message key
        auto full = codec::message_key(rng_() % 2, lanes_[rng_() % lanes_.size()], message_seq{1});
        return full.substr(0, rng_() % partition_bytes);
      }
      case 4: {  // short keys over a tiny alphabet: equal and nested prefixes
        std::string k(rng_() % 5, 'a');
        for (auto& c : k) c = static_cast<char>('a' + rng_() % 3);
        return k;
      }
      default: {  // longer than a message key, in a lane's partition
        auto k = codec::message_key(0, lanes_[rng_() % lanes_.size()], message_seq{rng_() % 200});
        k.append(1 + rng_() % 4, static_cast<char>(rng_() % 256));
        return k;
      }
    }
  }

 private:
  std::mt19937_64& rng_;
  std::vector<codec::lane_id> lanes_;
};

/// The seed and the command that reruns the current test with it.
std::string rerun_hint(std::uint64_t seed) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  return "seed " + std::to_string(seed) + "; rerun: LANEQ_CRASH_SEED=" + std::to_string(seed) +
         " build/dev/bin/laneq_crash_tests --gtest_filter='" + info->test_suite_name() + "." +
         info->name() + "'";
}

struct pair_of_dbs {
  std::unique_ptr<rocksdb::DB> skip_list;
  std::unique_ptr<rocksdb::DB> lanes;
};

/// What an iterator walk saw: each key and value, in order.
std::vector<std::pair<std::string, std::string>> walk(rocksdb::DB& db,
                                                      const rocksdb::ReadOptions& ro,
                                                      const std::string& start, bool seek_for_prev,
                                                      bool forward, int steps) {
  std::unique_ptr<rocksdb::Iterator> it{db.NewIterator(ro)};
  if (start.empty() && forward)
    it->SeekToFirst();
  else if (start.empty())
    it->SeekToLast();
  else if (seek_for_prev)
    it->SeekForPrev(start);
  else
    it->Seek(start);
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < steps && it->Valid(); ++i) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
    if (forward)
      it->Next();
    else
      it->Prev();
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

std::optional<std::string> get(rocksdb::DB& db, const rocksdb::ReadOptions& ro,
                               const std::string& key) {
  std::string v;
  auto s = db.Get(ro, key, &v);
  if (s.IsNotFound()) return std::nullopt;
  EXPECT_TRUE(s.ok()) << s.ToString();
  return v;
}

/// Compares point reads, whole scans both ways and short walks from random places.
void compare_reads(pair_of_dbs& dbs, key_maker& keys, std::mt19937_64& rng,
                   const rocksdb::Snapshot* skip_snap, const rocksdb::Snapshot* lane_snap) {
  rocksdb::ReadOptions a, b;
  a.snapshot = skip_snap;
  b.snapshot = lane_snap;
  for (int i = 0; i < 20; ++i) {
    auto k = keys.next();
    ASSERT_EQ(get(*dbs.skip_list, a, k), get(*dbs.lanes, b, k))
        << "Get of a " << k.size() << "-byte key";
  }
  for (bool forward : {true, false})
    ASSERT_EQ(walk(*dbs.skip_list, a, {}, false, forward, 1 << 20),
              walk(*dbs.lanes, b, {}, false, forward, 1 << 20))
        << (forward ? "forward" : "backward") << " scan";
  for (int i = 0; i < 20; ++i) {
    auto start = keys.next();
    if (start.empty()) start = "a";
    bool for_prev = rng() % 2 == 0;
    bool forward = rng() % 2 == 0;
    auto steps = static_cast<int>(1 + rng() % 12);
    ASSERT_EQ(walk(*dbs.skip_list, a, start, for_prev, forward, steps),
              walk(*dbs.lanes, b, start, for_prev, forward, steps))
        << (for_prev ? "SeekForPrev" : "Seek") << " then " << steps
        << (forward ? " Next" : " Prev");
  }
  // A bounded scan, as the store's (persistence.cpp, on_scan).
  auto lo = keys.next();
  auto hi = keys.next();
  if (hi < lo) std::swap(lo, hi);
  rocksdb::Slice upper{hi};
  a.iterate_upper_bound = &upper;
  b.iterate_upper_bound = &upper;
  ASSERT_EQ(walk(*dbs.skip_list, a, lo.empty() ? "a" : lo, false, true, 1 << 20),
            walk(*dbs.lanes, b, lo.empty() ? "a" : lo, false, true, 1 << 20))
      << "bounded scan";
}

TEST(LaneMemtable, reads_match_rocksdbs_skip_list_under_random_writes) {
  auto seed = crash_seed();
  SCOPED_TRACE(rerun_hint(seed));
  std::mt19937_64 rng{seed};
  key_maker keys{rng};
  temp_dir dir{"laneq-memtable"};
  pair_of_dbs dbs{open_db(dir.sub("skip"), false), open_db(dir.sub("lanes"), true)};
  ASSERT_TRUE(dbs.skip_list && dbs.lanes);
  const rocksdb::Snapshot* snaps[2] = {nullptr, nullptr};
  std::uint64_t ops = 0;
  for (int round = 0; round < 300; ++round) {
    rocksdb::WriteBatch batch;
    auto n = 1 + rng() % 40;
    for (std::size_t i = 0; i < n; ++i) {
      auto k = keys.next();
      auto what = rng() % 10;
      if (what < 6) {
        batch.Put(k, std::string(rng() % 300, static_cast<char>('0' + rng() % 10)));
      } else if (what < 9) {
        batch.Delete(k);
      } else {
        auto to = keys.next();
        if (k < to) batch.DeleteRange(k, to);
      }
      ++ops;
    }
    rocksdb::WriteOptions wo;
    ASSERT_TRUE(dbs.skip_list->Write(wo, &batch).ok());
    ASSERT_TRUE(dbs.lanes->Write(wo, &batch).ok());
    // Now and then a snapshot, so that a memtable holds several versions of a key for reads.
    if (round % 50 == 10) {
      snaps[0] = dbs.skip_list->GetSnapshot();
      snaps[1] = dbs.lanes->GetSnapshot();
    }
    if (round % 10 == 0) {
      compare_reads(dbs, keys, rng, nullptr, nullptr);
      if (snaps[0]) compare_reads(dbs, keys, rng, snaps[0], snaps[1]);
    }
    if (round % 50 == 40 && snaps[0]) {
      dbs.skip_list->ReleaseSnapshot(snaps[0]);
      dbs.lanes->ReleaseSnapshot(snaps[1]);
      snaps[0] = snaps[1] = nullptr;
    }
  }
  if (snaps[0]) {
    dbs.skip_list->ReleaseSnapshot(snaps[0]);
    dbs.lanes->ReleaseSnapshot(snaps[1]);
  }
  std::string flushes;
  ASSERT_TRUE(dbs.lanes->GetProperty("rocksdb.num-files-at-level0", &flushes));
  std::printf("%llu random writes; %s flushed memtables\n", static_cast<unsigned long long>(ops),
              flushes.c_str());
  EXPECT_GT(std::stoi(flushes), 2) << "the run should fill and flush several memtables";
  compare_reads(dbs, keys, rng, nullptr, nullptr);
  // Reopened: the WAL's tail is replayed into fresh memtables of each kind.
  dbs.skip_list.reset();
  dbs.lanes.reset();
  dbs = pair_of_dbs{open_db(dir.sub("skip"), false), open_db(dir.sub("lanes"), true)};
  ASSERT_TRUE(dbs.skip_list && dbs.lanes);
  compare_reads(dbs, keys, rng, nullptr, nullptr);
}

/// Memtable entries as RocksDB lays them out: the internal key (user key, then seqno and type in
/// 8 little-endian bytes) length-prefixed, then an empty value.
std::string encode_entry(const std::string& user_key, std::uint64_t seqno) {
  std::string ikey = user_key;
  auto trailer = (seqno << 8) | 1u;  // a put
  for (int i = 0; i < 8; ++i) ikey.push_back(static_cast<char>((trailer >> (8 * i)) & 0xFF));
  std::string out;
  auto n = ikey.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7F) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out += ikey;
  out.push_back('\0');
  return out;
}

/// RocksDB's internal key order: user keys bytewise, then the newer (higher seqno) first.
int compare_internal(const rocksdb::Slice& a, const rocksdb::Slice& b) {
  rocksdb::Slice ua{a.data(), a.size() - 8}, ub{b.data(), b.size() - 8};
  if (int c = ua.compare(ub); c != 0) return c;
  std::uint64_t ta = 0, tb = 0;
  for (int i = 7; i >= 0; --i) {
    ta = (ta << 8) | static_cast<unsigned char>(a.data()[a.size() - 8 + static_cast<unsigned>(i)]);
    tb = (tb << 8) | static_cast<unsigned char>(b.data()[b.size() - 8 + static_cast<unsigned>(i)]);
  }
  return ta > tb ? -1 : ta < tb ? 1 : 0;
}

struct entry_comparator : rocksdb::MemTableRep::KeyComparator {
  int operator()(const char* a, const char* b) const override {
    return compare_internal(rocksdb::GetLengthPrefixedSlice(a), rocksdb::GetLengthPrefixedSlice(b));
  }
  int operator()(const char* a, const rocksdb::Slice& b) const override {
    return compare_internal(rocksdb::GetLengthPrefixedSlice(a), b);
  }
};

/// A lane memtable beside its model, the internal keys in RocksDB's order; the entries' storage
/// outlives the rep.
struct rep_and_model {
  static bool less(const std::string& a, const std::string& b) {
    return compare_internal(a, b) < 0;
  }
  std::vector<std::unique_ptr<std::string>> storage;
  std::set<std::string, decltype(&less)> model{&less};
  std::unique_ptr<rocksdb::MemTableRep> rep{
      make_lane_memtable_factory(partition_bytes)
          ->CreateMemTableRep(cmp(), nullptr, nullptr, nullptr)};

 private:
  static const entry_comparator& cmp() {
    static const entry_comparator c;
    return c;
  }
};

TEST(LaneMemtable, its_iterator_agrees_with_an_ordered_set_everywhere) {
  auto seed = crash_seed();
  SCOPED_TRACE(rerun_hint(seed));
  std::mt19937_64 rng{seed};
  key_maker keys{rng};
  rep_and_model t;
  auto& [storage, model, rep] = t;
  auto ikey = [](const std::string& entry) {
    return rocksdb::GetLengthPrefixedSlice(entry.data());
  };
  std::uint64_t seqno = 0;
  for (int i = 0; i < 6000; ++i) {
    auto k = keys.next();
    // Mostly new versions of keys; now and then the same internal key again (refused).
    auto again = !storage.empty() && rng() % 20 == 0;
    auto e = again ? *storage[rng() % storage.size()] : encode_entry(k, ++seqno);
    storage.push_back(std::make_unique<std::string>(e));
    auto inserted = rep->InsertKey(const_cast<char*>(storage.back()->data()));
    ASSERT_EQ(inserted, model.insert(ikey(e).ToString()).second) << "insert " << i;
    ASSERT_TRUE(rep->Contains(storage.back()->data()));
    if (i % 500 != 0) continue;
    ASSERT_FALSE(rep->Contains(encode_entry(keys.next(), seqno + 1).data()));
    // Every position the iterator can reach, against the model.
    std::unique_ptr<rocksdb::MemTableRep::Iterator> it{rep->GetIterator(nullptr)};
    std::vector<std::string> fwd, back;
    for (it->SeekToFirst(); it->Valid(); it->Next())
      fwd.push_back(rocksdb::GetLengthPrefixedSlice(it->key()).ToString());
    for (it->SeekToLast(); it->Valid(); it->Prev())
      back.push_back(rocksdb::GetLengthPrefixedSlice(it->key()).ToString());
    ASSERT_EQ(fwd, std::vector<std::string>(model.begin(), model.end()));
    ASSERT_EQ(back, std::vector<std::string>(model.rbegin(), model.rend()));
    for (int j = 0; j < 200; ++j) {
      auto target = ikey(encode_entry(keys.next(), rng() % (seqno + 2))).ToString();
      it->Seek(target, nullptr);
      auto lb = model.lower_bound(target);
      ASSERT_EQ(it->Valid(), lb != model.end()) << "Seek";
      if (it->Valid()) {
        ASSERT_EQ(rocksdb::GetLengthPrefixedSlice(it->key()).ToString(), *lb);
      }
      it->SeekForPrev(target, nullptr);
      auto ub = model.upper_bound(target);
      ASSERT_EQ(it->Valid(), ub != model.begin()) << "SeekForPrev";
      if (it->Valid()) {
        ASSERT_EQ(rocksdb::GetLengthPrefixedSlice(it->key()).ToString(), *std::prev(ub));
      }
    }
  }
  EXPECT_GT(rep->ApproximateMemoryUsage(), model.size() * sizeof(void*));
}

// The store's own pattern: each lane's puts in seq order, and its erases (a newer entry of the
// same key, just before the put) mostly in that order too, which the rep places by a finger
// next to the last erase; now and then one out of order, and chunks that split under it.
TEST(LaneMemtable, places_a_lanes_erases_in_order_after_the_last_one) {
  auto seed = crash_seed();
  SCOPED_TRACE(rerun_hint(seed));
  std::mt19937_64 rng{seed};
  rep_and_model t;
  auto& [storage, model, rep] = t;
  std::uint64_t seqno = 0;
  auto insert = [&](const std::string& user_key) {
    storage.push_back(std::make_unique<std::string>(encode_entry(user_key, ++seqno)));
    ASSERT_TRUE(rep->InsertKey(const_cast<char*>(storage.back()->data())));
    model.insert(rocksdb::GetLengthPrefixedSlice(storage.back()->data()).ToString());
  };
  constexpr std::uint64_t lanes = 3;
  std::vector<codec::lane_id> lane;
  for (std::uint64_t l = 0; l < lanes; ++l)
    lane.push_back(codec::make_lane_id("memtable-test", "fifo-" + std::to_string(l)));
  std::vector<std::uint64_t> put(lanes, 0), erased(lanes, 0);
  for (int i = 0; i < 4000; ++i) {
    auto l = rng() % lanes;
    if (put[l] == erased[l] || rng() % 2 == 0) {
      insert(codec::message_key(0, lane[l], message_seq{put[l]++}));
    } else if (rng() % 8 == 0) {  // out of order: a later message of the backlog
      insert(codec::message_key(0, lane[l], message_seq{erased[l] + rng() % (put[l] - erased[l])}));
    } else {
      insert(codec::message_key(0, lane[l], message_seq{erased[l]++}));
    }
  }
  std::unique_ptr<rocksdb::MemTableRep::Iterator> it{rep->GetIterator(nullptr)};
  std::vector<std::string> got;
  for (it->SeekToFirst(); it->Valid(); it->Next())
    got.push_back(rocksdb::GetLengthPrefixedSlice(it->key()).ToString());
  ASSERT_EQ(got, std::vector<std::string>(model.begin(), model.end()));
  for (const auto& e : storage) EXPECT_TRUE(rep->Contains(e->data()));
}

TEST(LaneMemtable, an_iterator_used_after_an_insert_stops_the_process) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  temp_dir dir{"laneq-memtable"};
  EXPECT_DEATH(
      {
        auto db = open_db(dir.sub("db"), true);
        rocksdb::WriteOptions wo;
        (void)db->Put(wo, "a", "1");
        (void)db->Put(wo, "c", "3");
        std::unique_ptr<rocksdb::Iterator> it{db->NewIterator(rocksdb::ReadOptions{})};
        it->SeekToFirst();
        (void)db->Put(wo, "b", "2");  // the memtable's entries move under the iterator
        it->Next();
      },
      "used after an insert");
}

}  // namespace
}  // namespace laneq::test
