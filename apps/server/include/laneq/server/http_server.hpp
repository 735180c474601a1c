// The HTTP listener (Boost.Beast, asynchronous): accepts connections, reads requests within the
// configured bounds, hands each to the router and writes its answer on the connection's strand.
// No thread per connection; a long poll holds no thread (docs/api.md, docs/operations.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace boost::asio::ssl {
class context;
}

#include "laneq/error.hpp"
#include "laneq/server/http_limits.hpp"
#include "laneq/server/router.hpp"

namespace laneq::server {

/// Owns the io_context and its threads. The router must outlive it.
class http_server {
 public:
  /// `tls` set: every connection is HTTPS (make_server_tls_context, tls.hpp); none is plain.
  http_server(router& r, http_limits limits, std::size_t threads = 1,
              std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Binds `host:port` (port 0: the OS picks one), starts the threads; returns the bound port.
  result<std::uint16_t> start(const std::string& host, std::uint16_t port);

  /// Stops accepting connections; connections finish their current request, then close.
  void stop_accepting();

  /// Waits until no request is in flight or `timeout` passes; true when none is left.
  bool drain(std::chrono::milliseconds timeout);

  /// Stops everything: answers still to come are dropped, the threads are joined. Idempotent.
  void shutdown();

  /// Requests read and not yet answered.
  std::size_t in_flight() const;

  /// Connections open (accepted and not yet closed).
  std::size_t connections() const;

  struct shared;  ///< state sessions share with the server (defined in http_server.cpp)

 private:
  std::shared_ptr<boost::asio::io_context> io_;
  std::shared_ptr<shared> shared_;
  std::shared_ptr<void> listener_;
  std::vector<std::thread> threads_;
  std::size_t thread_count_;
  bool stopped_ = false;
};

}  // namespace laneq::server
