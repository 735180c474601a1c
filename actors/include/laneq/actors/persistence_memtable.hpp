// The store's RocksDB memtable: entries kept apart by lane, in sorted runs (ADR 0008,
// docs/design/persistence.md). Used by the persistence actor and laneq_memtable_bench.
#pragma once

#include <cstddef>
#include <memory>

#include <rocksdb/memtablerep.h>

namespace laneq {

/// A memtable representation for the store's key pattern: a message is put at its lane's end and
/// erased near its lane's start, with many lanes interleaved in every batch. Entries are grouped
/// by the first `partition_bytes` bytes of their user key (tag, queue uid and lane for message
/// keys; a shorter key is a group of its own) and each group keeps its entries in sorted chunks,
/// so an insert touches only its own lane: an append at the end costs one comparison, any other
/// insert a binary search within the lane. RocksDB's skip list instead searches the whole
/// memtable, about 50 key comparisons, each a cache miss, per insert with 1,000 lanes. A key of
/// `partition_bytes + 8` bytes (a message key) is kept with those 8 bytes and its sequence number
/// as numbers, so comparing two of them within a lane reads neither entry.
///
/// Contract (what the persistence actor guarantees): the database's comparator is RocksDB's
/// bytewise comparator (the default; each memtable checks it on probe keys and stops the process
/// otherwise). Every insert into a memtable and every read
/// of it while it is still mutable come from one thread at a time, and no iterator over the
/// mutable memtable is used after a later insert. Once RocksDB marks it read-only (before a
/// flush), any number of threads may read it. The first part is checked: an iterator that is
/// used after an insert fails an assertion instead of reading freed memory.
std::shared_ptr<rocksdb::MemTableRepFactory> make_lane_memtable_factory(
    std::size_t partition_bytes);

}  // namespace laneq
