// laneqd's file descriptor budget: the soft RLIMIT_NOFILE (raised to the hard limit when
// allowed), what laneqd needs for itself and its store, and the connection cap that is left, so
// the cap and its reserve engage before accept fails with EMFILE (docs/operations.md, "File
// descriptors and connections").
#pragma once

#include <cstddef>
#include <string>

#include "laneq/error.hpp"
#include "laneq/server/http_limits.hpp"

namespace laneq::server {

namespace descriptor_bounds {
/// Everything but HTTP connections, CAF clients and the store's table files: stdio, the two
/// io_contexts (epoll, eventfd, timerfd each) and the signal pipe, the HTTP and CAF listeners,
/// CAF's multiplexer (epoll, pipe), RocksDB's WAL, MANIFEST, LOG, LOCK and directory handles,
/// flush and compaction outputs, a checkpoint's copies and the commit marker's rewrite. About
/// 25 are open on an idle laneqd (measured in /proc/<pid>/fd); the rest is margin.
inline constexpr std::size_t runtime = 48;
/// Kept for CAF remote clients (one descriptor each) when the CAF port is published. CAF does
/// not cap its connections: more clients than this take descriptors from the HTTP margin.
inline constexpr std::size_t caf_clients = 32;
/// The store's table files (RocksDB max_open_files): at least a quarter of what is left after
/// `runtime`, and at least `store_files_min`, at most `store_files_max`; in between, what the
/// configured connection cap leaves. RocksDB opens a table that does not fit its table cache
/// for each read and closes it again: slower, never a failure.
inline constexpr std::size_t store_files_min = 64;
/// 4,096 tables of RocksDB's 64 MiB target size hold 256 GiB, all of them kept open.
inline constexpr std::size_t store_files_max = 4096;
}  // namespace descriptor_bounds

/// RLIMIT_NOFILE as laneqd found it and as it runs under.
struct descriptor_limit {
  std::size_t soft = 0;      ///< the limit laneqd runs under (SIZE_MAX: unlimited)
  std::size_t hard = 0;      ///< SIZE_MAX: unlimited
  std::size_t original = 0;  ///< the soft limit before raise_descriptor_limit
  std::string raise_failed;  ///< why raising failed ("" when it was not needed or worked)
};

/// Raises the soft RLIMIT_NOFILE to the hard limit (an unlimited hard limit: the kernel's
/// fs.nr_open) when it is lower, as nginx, etcd and Go's runtime do; returns both limits.
descriptor_limit raise_descriptor_limit();

/// Descriptors open in this process now (/proc/self/fd), at least 3 (stdio).
std::size_t open_descriptors();

/// How laneqd spends its descriptor limit.
struct descriptor_plan {
  std::size_t limit = 0;        ///< the soft limit planned for
  std::size_t own = 0;          ///< open at start, runtime and CAF clients
  std::size_t store_files = 0;  ///< RocksDB's max_open_files
  std::size_t connections = 0;  ///< the effective connection cap: at most the configured one
  std::size_t connections_reserve = 0;  ///< below `connections`, a quarter of it at most when
                                        ///< the limit lowered the cap
  std::size_t configured = 0;           ///< the configured cap
  /// The limit the configured cap would need (store files at the maximum).
  std::size_t needed_for_configured = 0;
};

/// Splits `limit` descriptors (`open_now` already open, the CAF port published or not) between
/// laneqd itself, the store's table files and HTTP connections. Fails (invalid_argument naming
/// the limit and the least it needs) when fewer than http_bounds::connections_min connections
/// would be left.
result<descriptor_plan> plan_descriptors(std::size_t limit, std::size_t open_now, bool caf,
                                         const http_limits& configured);

/// One line for the log: "connection cap N (configured M, descriptor limit L): ...".
std::string describe(const descriptor_plan& p, const descriptor_limit& l);

}  // namespace laneq::server
