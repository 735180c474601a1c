// A small synchronous HTTP/1.1 client for laneqd's JSON API (issue 4 §3, docs/api.md): one
// keep-alive connection, plain HTTP or HTTPS (the server's certificate verified against the
// system's CAs or a given CA file, host name included), a timeout per request, an optional bearer
// token, and typed helpers that return parsed JSON or a numbered error. Used by the `laneq` CLI
// and `laneq_loadgen`.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/json.hpp>

#include "laneq/assert.hpp"

namespace laneq::client {

/// Where laneqd listens: parsed from `http[s]://host[:port][/prefix]`.
struct endpoint {
  std::string host = "127.0.0.1";
  std::string port = "7070";
  std::string prefix;  ///< path prefix without a trailing '/', usually empty
  bool tls = false;    ///< https: TLS 1.2 or later
};

/// `http://host:port` or `https://host:port` (IPv6 hosts in brackets), for messages.
std::string to_url(const endpoint& ep);

/// The start of every error message of a server certificate that failed verification (then the
/// URL and OpenSSL's reason), so a caller can add how to trust it (the CLI names --cacert).
inline constexpr std::string_view certificate_verify_failed = "certificate verification failed";

/// Why a call failed. The CLI maps each kind to its own exit code.
enum class failure_kind : std::uint8_t {
  unreachable = 1,  ///< could not connect, or the connection broke or timed out
  protocol = 2,     ///< the server answered something that is not the API's shape
  server = 3,       ///< the server answered with an API error (`{"error": {...}}`)
  usage = 4,        ///< the caller passed something unusable (a bad URL, a bad JSON value)
};

/// A failed call: for `server`, the HTTP status and the API's error code, number and message.
struct api_error {
  failure_kind kind = failure_kind::server;
  unsigned http_status = 0;
  std::string code;         ///< API error name (`"queue_not_found"`); empty unless `server`
  std::int64_t number = 0;  ///< API error number (laneq::errc); 0 unless `server`
  std::string message;      ///< what went wrong, naming the thing
};

/// Renders an error in one line: `queue_not_found (3, HTTP 404): no queue named "x"`.
std::string to_string(const api_error& e);

/// Either a value or an api_error.
template <class T>
class [[nodiscard]] api_result {
 public:
  api_result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  api_result(api_error err) : v_(std::move(err)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    LANEQ_ASSERT(ok(), "api_result::value() on an error");
    return std::get<0>(v_);
  }
  const T& value() const& {
    LANEQ_ASSERT(ok(), "api_result::value() on an error");
    return std::get<0>(v_);
  }
  const api_error& err() const {
    LANEQ_ASSERT(!ok(), "api_result::err() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, api_error> v_;
};

/// Parses `http[s]://host[:port][/prefix]` (the port defaults to 80, for https to 443).
api_result<endpoint> parse_url(std::string_view url);

/// Percent-encodes a queue name for a path segment (a tenant's '/' becomes %2F).
std::string encode_segment(std::string_view s);

/// Client settings.
struct client_options {
  std::string token;  ///< bearer token; empty: no Authorization header
  /// Per request: connect (and TLS handshake), then write and read together.
  std::chrono::milliseconds timeout{10'000};
  /// https: trust the CAs in this PEM file instead of the system's (a self-signed server's own
  /// certificate works too). Empty: the system's CA store.
  std::string cacert_file = {};
  /// https: do not verify the server's certificate at all. For testing only: anyone between the
  /// client and the server can read and change the traffic, the token included.
  bool insecure = false;
  /// https: a client certificate chain and its key (PEM), for a laneqd with client_ca_file.
  std::string cert_file = {};
  std::string key_file = {};
};

/// A raw answer: HTTP status and body (JSON parsed when the content is JSON).
struct http_answer {
  unsigned status = 0;
  std::string body;
};

/// One message to send (`POST .../messages`).
struct outgoing {
  std::string body;
  bool base64 = false;  ///< `body` is already base64 and goes out as `body_base64`
  std::vector<std::pair<std::string, std::string>> headers;
  std::string fairness_key;
  std::int64_t delay_ms = 0;
};

/// The receive parameters (`POST .../receive`).
struct receive_params {
  std::uint32_t max = 1;
  std::optional<std::int64_t> lease_ms;  ///< absent: the queue's default
  std::int64_t wait_ms = 0;
  std::uint32_t batch = 1;  ///< above 1: ordered batches of up to this many (sent only then)
};

/// One page of GET .../groups (docs/api.md "Groups").
struct groups_params {
  bool blocked_only = false;
  std::optional<std::uint32_t> limit;  ///< absent: the server's default (1000)
  std::string cursor;                  ///< the previous page's next_cursor; empty: the first page
};

/// A synchronous client over one keep-alive connection. Not thread-safe: one per thread.
class http_client {
 public:
  http_client(endpoint ep, client_options opts);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// One request; `body` (JSON text) is sent with content-type application/json when not empty.
  /// Reconnects once when a reused connection turns out closed. Any HTTP status is a value here.
  api_result<http_answer> send_raw(std::string_view method, std::string_view target,
                                   std::string_view body = {});

  /// A JSON request: a 2xx answer's body parsed (null when empty); any other status becomes a
  /// `server` error carrying the API's code, number and message.
  api_result<boost::json::value> call(std::string_view method, std::string_view target,
                                      const boost::json::value* body = nullptr);

  // -- typed helpers, one per endpoint ---------------------------------------------------------

  /// PUT /v1/queues/{name}: the answer's JSON plus whether it was newly created (201).
  api_result<std::pair<boost::json::value, bool>> create_queue(std::string_view name,
                                                               const boost::json::value& spec);
  api_result<boost::json::value> get_queue(std::string_view name);
  api_result<boost::json::value> list_queues();
  /// DELETE /v1/queues/{name}: an empty queue (409 queue_not_empty otherwise); with `force`, one
  /// with messages or dead letters too.
  api_result<boost::json::value> delete_queue(std::string_view name, bool force = false);
  /// POST .../purge: the waiting messages of the queue, or of the group `group` names; answers
  /// `{"purged": n}`.
  api_result<boost::json::value> purge(std::string_view queue,
                                       const std::optional<std::string>& group = std::nullopt);
  /// GET .../messages?limit=N[&group=key]: the first messages, without a lease; answers
  /// `{"messages": [...]}`.
  api_result<boost::json::value> peek(std::string_view queue, std::uint32_t limit,
                                      const std::optional<std::string>& group = std::nullopt);
  /// PATCH /v1/queues/{name}: changes the settings `patch` names (a JSON merge patch of the
  /// spec, docs/api.md); the answer's JSON (`{"name", "spec"}` with the spec as stored).
  api_result<boost::json::value> update_queue(std::string_view name,
                                              const boost::json::value& patch);
  /// POST .../messages; answers the ids.
  api_result<std::vector<std::string>> send(std::string_view queue,
                                            const std::vector<outgoing>& messages);
  /// POST .../receive; answers `{"messages": [...]}`.
  api_result<boost::json::value> receive(std::string_view queue, const receive_params& p);
  /// POST .../ack with `{"lease"}` for one lease (its failure is an error answer) or
  /// `{"leases": [..]}` (failures listed in the answer's `failed`); with `count` (one lease),
  /// `{"lease", "count"}`: an ordered batch's first `count` messages.
  api_result<boost::json::value> ack(std::string_view queue, const std::vector<std::string>& leases,
                                     std::optional<std::uint32_t> count = std::nullopt);
  /// POST .../nack: retry after `retry_after_ms`, or dead-letter; with `from`, the batch_index of
  /// an ordered batch's message that failed.
  api_result<boost::json::value> nack(std::string_view queue, std::string_view lease,
                                      std::int64_t retry_after_ms, bool dead_letter,
                                      std::optional<std::uint32_t> from = std::nullopt);
  api_result<boost::json::value> extend(std::string_view queue, std::string_view lease,
                                        std::int64_t lease_ms);
  api_result<boost::json::value> dead_letters(std::string_view queue);
  /// POST .../dead-letters/redrive; empty `ids`: every dead letter.
  api_result<boost::json::value> redrive(std::string_view queue,
                                         const std::vector<std::string>& ids);
  /// POST .../dead-letters/redrive `{"ids", "to"}`: into queue `to` (it must exist).
  api_result<boost::json::value> redrive_into(std::string_view queue,
                                              const std::vector<std::string>& ids,
                                              std::string_view to);
  /// DELETE .../dead-letters: every one when `ids` is empty, else those; answers
  /// `{"deleted": n}`.
  api_result<boost::json::value> delete_dead_letters(std::string_view queue,
                                                     const std::vector<std::string>& ids = {});
  /// DELETE .../dead-letters/{id}: one dead letter.
  api_result<boost::json::value> delete_dead_letter(std::string_view queue, std::string_view id);
  /// GET .../groups: one page; its `next_cursor` (absent on the last page) asks for the next.
  api_result<boost::json::value> groups(std::string_view queue, const groups_params& p);
  /// PUT /v1/topics/{name} `{"queues"}`: the answer's JSON plus whether it was newly created
  /// (201).
  api_result<std::pair<boost::json::value, bool>> create_topic(
      std::string_view name, const std::vector<std::string>& queues);
  api_result<boost::json::value> get_topic(std::string_view name);
  api_result<boost::json::value> list_topics();
  api_result<boost::json::value> delete_topic(std::string_view name);
  /// POST /v1/topics/{name}/messages: into every queue of the topic, all or nothing; answers
  /// `{"ids": {"<queue>": [...]}}`.
  api_result<boost::json::value> publish(std::string_view topic,
                                         const std::vector<outgoing>& messages);
  /// POST /v1/admin/checkpoint `{"dir"}`: an online backup into `dir` on the laneqd host
  /// (absolute, must not exist; an admin token); answers `{"dir", "bytes", "files", "ms"}`.
  api_result<boost::json::value> checkpoint(std::string_view dir);
  /// GET /healthz: the status and body text.
  api_result<http_answer> health();
  /// GET /metrics (Prometheus text).
  api_result<std::string> metrics();

  const endpoint& where() const { return ep_; }

 private:
  struct connection;
  std::optional<api_error> make_tls_context();
  std::optional<api_error> connect_tls();
  std::string path(std::string_view rest) const;
  std::string topic_path(std::string_view topic, std::string_view rest = {}) const;
  api_result<std::pair<boost::json::value, bool>> put_created(const std::string& target,
                                                              const boost::json::value& body);
  std::string queue_path(std::string_view queue, std::string_view rest = {}) const;

  endpoint ep_;
  client_options opts_;
  std::unique_ptr<connection> conn_;
};

/// The API error inside an error answer, or a protocol error when the body has no such shape.
api_error error_from_answer(const http_answer& a);

}  // namespace laneq::client
