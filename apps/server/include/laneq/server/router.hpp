// The HTTP API's routing, independent of sockets (docs/api.md): a parsed request in, a response
// out, completed asynchronously. Each request that needs the broker is a message to one of a few
// long-lived gateway actors, which sends the CAF requests and calls the completion with the
// answer, so no actor and no HTTP thread ever blocks (a long poll holds only a pending CAF
// request).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "caf/all.hpp"

#include "laneq/actors/protocol.hpp"
#include "laneq/server/access_log.hpp"
#include "laneq/server/auth.hpp"
#include "laneq/server/http_limits.hpp"
#include "laneq/server/metrics.hpp"

namespace laneq::server {

/// A request as the router sees it (the listener has already applied the size limits).
struct http_request {
  std::string method;  ///< "GET", "PUT", ...
  std::string target;  ///< path and query, as sent (percent-encoded)
  std::string authorization;
  std::string body;
};

/// A response: status, JSON (or Prometheus text) body, extra header fields.
struct http_response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  /// When set, makes the body instead of `body`: a large answer (a receive's deliveries) is then
  /// written out where the response is sent, on the connection's I/O thread, not on the CAF
  /// worker that answered, which every actor of the broker shares
  /// (docs/decisions/0010-performance-history.md).
  std::function<std::string()> render;
  /// When set, called instead of sending the answer when its client is gone (it closed the
  /// connection while the call ran): a receive gives back the messages it leased.
  std::function<void()> abandon;
  /// The tenant of the request's token ("*": an admin's), for the access log; "-" when no valid
  /// token came with it or authentication is off.
  std::string tenant = "-";

  /// The body: `render`'s text when it is set, else `body`. Call once.
  std::string take_body() { return render ? render() : std::move(body); }
};

/// One endpoint of the HTTP API, as the router matches it and docs/openapi.json documents it.
struct route_entry {
  std::string_view method;  ///< "GET", "PUT", "POST" or "DELETE"
  /// The path template: literal segments and `{name}`, one segment naming the queue (under
  /// `/v1/queues/`) or the topic (under `/v1/topics/`), percent-encoded in a request.
  std::string_view path;
  route what;
  bool body;  ///< whether it takes a JSON body (the others refuse one, the probes ignore it)
};

/// Every endpoint the router serves, one entry per method and path: the table `handle` matches
/// requests against, in order (a path's methods in the order its 405 `Allow` lists them).
/// tests/server/openapi_test.cpp compares it with docs/openapi.json.
std::span<const route_entry> routes();

/// An error as a response (status from `http_status`).
http_response error_response(const error& e);

/// Called exactly once per request, from any thread (an HTTP thread or a CAF worker).
using respond_fn = std::function<void(http_response)>;

class gateway;

/// The actors HTTP calls send their requests from (router.cpp): one per CAF worker, calls taken
/// in turn. Stopped with the pool.
class gateway_pool {
 public:
  explicit gateway_pool(caf::actor_system& sys);
  ~gateway_pool();
  gateway_pool(const gateway_pool&) = delete;
  gateway_pool& operator=(const gateway_pool&) = delete;

  /// Runs `start` on a gateway: it sends its requests from there and answers in their handlers.
  void run(std::function<void(gateway&)> start);

 private:
  std::vector<caf::actor> actors_;
  std::atomic<std::size_t> next_{0};
};

/// Routes requests to the broker.
class router {
 public:
  /// `call_timeout`: how long a call waits for the broker before it fails with `unavailable`
  /// (a receive waits that long beyond its long poll).
  router(caf::actor_system& sys, admin_actor admin, store_actor store, http_limits limits,
         std::vector<token_config> tokens,
         std::chrono::milliseconds call_timeout = http_bounds::call_timeout);

  /// Handles one request; `done` receives the response. Bad input is answered before any actor
  /// is involved.
  void handle(http_request req, respond_fn done);

  const http_limits& limits() const { return state_->limits; }

  /// Whether `authorization` carries a valid token (never when authentication is off).
  bool authenticated(std::string_view authorization) const;

  /// Puts `next` in force for every request that starts after this returns (a tokens_file
  /// reload). Any thread.
  void replace_tokens(auth_snapshot next) { state_->auth->replace(std::move(next)); }

  /// Whether `target` (path and query) is the health check, which needs no token.
  static bool health_check(std::string_view target);
  const std::shared_ptr<server_metrics>& metrics() const { return state_->metrics; }

  /// Writes one line per HTTP request to `log` (null: off, the default). Set before an
  /// http_server is made on this router: the listener takes the log when it is constructed.
  void log_access(std::shared_ptr<access_log> log) { access_log_ = std::move(log); }
  const std::shared_ptr<access_log>& access_log_sink() const { return access_log_; }

  /// What the calls share; it outlives the router while requests are in flight.
  struct shared_state {
    admin_actor admin;
    store_actor store;
    http_limits limits;
    std::shared_ptr<auth_source> auth;  ///< the tokens in force (replace_tokens swaps them)
    std::shared_ptr<server_metrics> metrics;
    std::chrono::milliseconds call_timeout;
  };

 private:
  /// A request `admit` accepted: its call, route, principal, name, body and query (router.cpp).
  struct routed;

  /// Routes, authenticates and parses `req` into `r`; false when it answered the call already.
  bool admit(const http_request& req, routed& r) const;
  /// GET /healthz: whether the store is healthy (200) or degraded (503).
  void route_health(routed& r) const;
  /// GET /metrics: the server's counters, every queue's stats and the store's, as Prometheus text.
  void route_metrics(routed& r) const;
  /// The queues: list, create (PUT), describe (GET) and delete.
  void route_queues(routed& r) const;
  /// POST .../messages: an enqueue into a queue.
  void route_enqueue(routed& r) const;
  /// POST .../receive: a receive, long-polling up to its wait.
  void route_receive(routed& r) const;
  /// POST .../ack, .../nack and .../extend: what a consumer does with its leases.
  void route_leases(routed& r) const;
  /// GET .../dead-letters, POST .../dead-letters/redrive, DELETE .../dead-letters[/{id}].
  void route_dead_letters(routed& r) const;
  /// POST .../dead-letters/redrive: in the queue, or with `to` into another queue.
  void route_redrive(routed& r) const;
  /// POST .../purge and GET .../messages (a peek).
  void route_purge_peek(routed& r) const;
  /// GET .../groups: a page of a queue's groups.
  void route_groups(routed& r) const;
  /// The topics: list, create (PUT), describe (GET), delete and publish.
  void route_topics(routed& r) const;
  /// POST /v1/admin/checkpoint: a checkpoint of the store.
  void route_checkpoint(routed& r) const;

  std::unique_ptr<gateway_pool> gateways_;
  std::shared_ptr<const shared_state> state_;
  std::shared_ptr<access_log> access_log_;
};

}  // namespace laneq::server
