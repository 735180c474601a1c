// The HTTP access log (docs/operations.md "Access log"): one line per answered request, off
// unless the config names where it goes (`"access_log": "stderr"` or a file path).
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "laneq/error.hpp"

namespace laneq::server {

/// What one line says about a request.
struct access_entry {
  std::chrono::system_clock::time_point at;  ///< when the answer was written
  std::string_view method;                   ///< "-" when no request head was read
  std::string_view path;                     ///< the target without its query string, or "-"
  unsigned status = 0;
  double duration_ms = 0;   ///< from the request head read to the answer handed to the socket
  std::string_view tenant;  ///< the token's tenant ("*": admin); "-" without a valid token
  std::size_t bytes = 0;    ///< bytes of the answer's body
};

/// `2026-12-06T15:58:30.123Z GET /v1/queues/orders 200 0.412 acme 57`: the time (ISO 8601, UTC,
/// milliseconds), method, path, status, duration in ms, tenant and body bytes, separated by
/// spaces and ended by a newline. The path is cut at '?' (query strings are not logged) and
/// characters outside printable ASCII (and spaces) become `%XX`, so a line is always 7 fields.
/// No header is logged: a token never reaches the log.
std::string format_access_line(const access_entry& e);

/// Where the lines go: stderr or a file opened for appending. Any thread may write; each line is
/// written whole and flushed (lines of concurrent requests never interleave).
class access_log {
 public:
  /// "stderr", or a path: the file is created when missing and appended to. Fails
  /// (invalid_argument, naming the path and the reason) when it cannot be opened.
  static result<std::shared_ptr<access_log>> open(const std::string& where);

  ~access_log();
  access_log(const access_log&) = delete;
  access_log& operator=(const access_log&) = delete;

  void write(const access_entry& e);

 private:
  access_log(std::FILE* out, bool owned) : out_(out), owned_(owned) {}

  std::mutex mtx_;  ///< one line at a time
  std::FILE* out_;
  bool owned_;
};

}  // namespace laneq::server
