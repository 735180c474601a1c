// RocksDB's information log (LOG in the data directory), written by laneq instead of RocksDB's
// own logger (docs/design/persistence.md, "Storage faults"). RocksDB's logger writes through its
// buffered file writer, and on a full disk Debian's RocksDB 7.8 stopped laneqd with an assertion
// (`sync_without_flush_called_`) when the LOG could not be flushed. This logger writes each line
// with write(2) and drops lines it cannot write: a full disk must show up as failed writes and a
// degraded store, never as a crash of the daemon because a diagnostic line did not fit.
#pragma once

#include <memory>
#include <string>

#include <rocksdb/env.h>

namespace laneq {

/// A logger appending to `path` (created if missing), moved to `path + ".old"` once it holds
/// `max_bytes`. Lines that cannot be written are dropped; the first drop after a successful
/// write is reported on stderr once. Thread-safe (RocksDB logs from its background
/// threads).
std::shared_ptr<rocksdb::Logger> make_store_logger(std::string path, std::size_t max_bytes,
                                                   rocksdb::InfoLogLevel level);

}  // namespace laneq
