// Bounds of the HTTP front end (docs/api.md "Limits"); the engine's own bounds are in
// laneq/limits.hpp and apply behind these.
#pragma once

#include <chrono>
#include <cstddef>

#include "laneq/limits.hpp"

namespace laneq::server {

/// What one HTTP request may carry. Configurable (config `limits`), each within its `_max`.
struct http_limits {
  std::size_t target_bytes = 2048;       ///< request target (path and query)
  std::size_t header_count = 64;         ///< header fields
  std::size_t header_bytes = 16 * 1024;  ///< request line and header fields together
  std::size_t body_bytes = 4 * 1024 * 1024;
  std::size_t batch = limits::enqueue_batch_max;  ///< messages, leases or ids in one request
  /// A connection must send a complete request head this soon after it opens, or after the
  /// first byte of a later request; otherwise it is closed (not the keep-alive idle timeout).
  std::size_t head_timeout_ms = 5000;
  /// Connections served at once; a connection over it is closed at once.
  std::size_t connections = 4096;
  /// Of `connections`, how many are kept for health checks and authenticated clients: a
  /// connection that opens while `connections - connections_reserve` connections are anonymous
  /// (no valid token seen on them) is served only `/healthz` or an authenticated request.
  std::size_t connections_reserve = 64;
  /// Bytes of answers being written, all connections together. A connection gets one answer at
  /// a time and is not read while it is written; an answer that would take the bytes over this
  /// while others are still being written (their clients not reading) is refused with 503 and
  /// what it handed out (a receive's leases) is given back.
  std::size_t answer_bytes = 256 * 1024 * 1024;
};

namespace http_bounds {
inline constexpr std::size_t target_bytes_max = 64 * 1024;
inline constexpr std::size_t header_count_max = 1024;
inline constexpr std::size_t header_bytes_max = 1024 * 1024;
inline constexpr std::size_t body_bytes_max = 64 * 1024 * 1024;
inline constexpr std::size_t head_timeout_ms_min = 100;
inline constexpr std::size_t head_timeout_ms_max = 60'000;
/// `connections` at most (each holds a read buffer, below).
inline constexpr std::size_t connections_max = 4096;
inline constexpr std::size_t connections_min = 8;
inline constexpr std::size_t answer_bytes_min = 1024 * 1024;
inline constexpr std::size_t answer_bytes_max = std::size_t{16} * 1024 * 1024 * 1024;
/// How often at most the log says that connections were refused.
inline constexpr std::chrono::seconds refused_log_interval{10};
/// Each connection's read buffer. Beast reads at most the buffer's free space per system call
/// (512 bytes when the buffer is empty), and the parser empties it as it goes: an unreserved
/// buffer read a 35 KB batch of 100 messages in 20-40 recvmsg calls (measured with strace).
/// 64 KiB reads such a batch in one or two calls; 4,096 connections hold 256 MiB at most.
inline constexpr std::size_t read_buffer_bytes = 64 * 1024;
/// A connection idle (no request in progress) this long is closed.
inline constexpr std::chrono::seconds idle_timeout{60};
/// How long SIGTERM waits for requests in flight.
inline constexpr std::chrono::seconds drain_timeout{5};
/// Slack on top of a long poll before the broker call times out.
inline constexpr std::chrono::seconds call_timeout{30};

static_assert(limits::receive_wait_max < call_timeout);
static_assert(limits::body_bytes_max < body_bytes_max);
}  // namespace http_bounds

}  // namespace laneq::server
