// The store's own record of what it committed, kept apart from RocksDB's files, and the checks
// that refuse to open a store whose acknowledged writes cannot all be there
// (docs/design/persistence.md, "Missing and truncated files").
//
// RocksDB opens "OK" with files missing: a deleted or truncated WAL replays what is left, a
// directory without CURRENT becomes a new empty database (create_if_missing), and a truncated
// MANIFEST forgets table files. So the persistence actor keeps LANEQ-COMMITTED in the data
// directory: the highest RocksDB sequence number known synced, rewritten (new file, sync,
// rename, directory sync) at most once per marker interval while synced writes go on, and at a
// clean close after the final flush. It only ever lags the store, never leads it (it is written
// after the sync it names), so a power loss never makes a healthy store look damaged.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/status.h>

namespace laneq::store_marker {

inline constexpr const char* file_name = "LANEQ-COMMITTED";

/// The marker is rewritten at most this often while synced writes go on.
inline constexpr std::chrono::seconds interval{1};

/// What the directory holds before an open.
enum class dir_state : std::uint8_t {
  empty,  ///< missing or empty: a new store is created
  store,  ///< holds a RocksDB store (CURRENT is there)
};

/// Classifies `dir`. Refuses (InvalidArgument, naming the files) a non-empty directory without
/// CURRENT: it is a damaged store or something else, and a new database must not be created
/// over it.
rocksdb::Status inspect_dir(rocksdb::Env& env, const std::string& dir, dir_state& state);

/// The sequence number in `dir`'s marker, or nullopt when there is none (a new store, or one
/// written before the marker existed). A marker that cannot be read or fails its checksum is
/// Corruption naming the file.
rocksdb::Status read(rocksdb::Env& env, const std::string& dir, std::optional<std::uint64_t>& seq);

/// Replaces the marker with `seq`, durably.
rocksdb::Status write(rocksdb::Env& env, const std::string& dir, std::uint64_t seq);

/// Corruption, with what is missing, when an opened store ends before the marker's sequence.
rocksdb::Status check_complete(const std::string& dir, std::uint64_t store_seq,
                               std::uint64_t marked_seq);

}  // namespace laneq::store_marker
