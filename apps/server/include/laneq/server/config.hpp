// laneqd's configuration: a JSON file (docs/operations.md "Configuration"), validated once at
// start with every broken rule reported, each naming its field; unknown fields are errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

#include "laneq/error.hpp"
#include "laneq/limits.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/server/http_limits.hpp"
#include "laneq/topic_spec.hpp"

namespace laneq::server {

/// A bearer token and the tenant whose queues it may use ("*": every tenant, and /metrics).
struct token_config {
  std::string token;
  std::string tenant;
};

/// Tokens shorter than this are refused (they would be guessable).
inline constexpr std::size_t token_bytes_min = 16;
inline constexpr std::size_t token_bytes_max = 512;
inline constexpr std::size_t tokens_max = 1000;
inline constexpr std::size_t http_threads_max = 64;
/// The largest window budget the config accepts (1 TiB).
inline constexpr std::size_t window_budget_mb_max = std::size_t{1} << 20;

/// A listener's TLS files, PEM (docs/operations.md "TLS"). An empty `cert_file`: no TLS.
struct tls_config {
  std::string cert_file;  ///< the certificate chain, laneqd's own certificate first
  std::string key_file;   ///< its private key, not encrypted
  /// CAs whose certificates clients must present: HTTP's `client_ca_file` (optional; empty: no
  /// client certificates), CAF's `ca_file` (required: CAF's TLS is always mutual).
  std::string ca_file;
  bool enabled() const { return !cert_file.empty(); }
};

/// Everything laneqd needs to start. The defaults serve: a data directory `./laneq-data`,
/// HTTP on 127.0.0.1:7070, CAF remote actors on 127.0.0.1:7071.
struct server_config {
  std::string data_dir = "./laneq-data";
  std::string http_host = "127.0.0.1";
  std::uint16_t http_port = 7070;  ///< 0: the OS picks a free port
  tls_config http_tls;             ///< set: the HTTP port serves HTTPS only (`http.tls`)
  std::string caf_host = "127.0.0.1";
  std::uint16_t caf_port = 7071;  ///< 0: no CAF remote actors
  tls_config caf_tls;             ///< set: the CAF port speaks TLS only (`caf.tls`)
  /// Publish the CAF remote actors on an address other than loopback without tokens (else
  /// laneqd refuses to start): anyone who reaches it may use every queue (`caf.allow_anonymous`).
  bool caf_allow_anonymous = false;
  /// false: no queue syncs its writes (broker_options::sync).
  bool sync = true;
  duration reclaim_grace = limits::reclaim_grace_default;
  std::size_t group_window = limits::group_window_default;
  /// A group may hold this many while all windows together hold less than the budget.
  std::size_t group_window_max = limits::group_window_max_default;
  std::size_t window_budget_bytes = limits::window_budget_bytes_default;
  std::size_t http_threads = 1;   ///< threads running the HTTP front end
  std::size_t actor_threads = 0;  ///< CAF scheduler threads; 0: see actor_threads_for
  http_limits limits;
  std::vector<token_config> tokens;  ///< empty: no authentication
  /// Tokens read from this file at start (into `tokens`) and again on SIGHUP; empty: none. Not
  /// with `tokens`.
  std::string tokens_file;
  /// Serve HTTP without tokens on an address other than loopback (else laneqd refuses to start).
  bool allow_anonymous = false;
  /// Where the access log goes: "stderr" or a file path; empty: no access log (access_log.hpp).
  std::string access_log;
  std::vector<queue_spec> queues;  ///< created (or found identical) at start
  std::vector<topic_spec> topics;  ///< created (or found identical) after the queues
};

/// A config with every error found; `errors` empty means valid.
struct parsed_config {
  server_config config;
  std::vector<error> errors;
};

/// Parses and validates a config document (JSON; `//` and `/* */` comments allowed). Errors are
/// invalid_argument (invalid_spec for a queue or topic), each naming its field path (`http.port`,
/// `tokens[1].tenant`, `queues.orders: queue 'orders': lease_ms: ...`, `topics.orders: topic
/// 'orders': queues: ...`).
parsed_config parse_config(std::string_view text);
parsed_config config_from_json(const boost::json::value& v);

/// The tokens of a tokens file's text: `{"tokens": [{"token": ..., "tenant": ...}, ...]}`
/// (comments allowed), each checked as the config's `tokens` are (16 to 512 printable bytes,
/// distinct, a tenant without '/'), at least one. Every broken rule is an error naming its field
/// (`tokens[1].token: ...`); `out` holds the tokens only when there is none.
std::vector<error> parse_tokens_file(std::string_view text, std::vector<token_config>& out);

/// Reads `path` and parses it (`parse_tokens_file`); each error's message starts with
/// `tokens_file PATH: `.
std::vector<error> read_tokens_file(const std::string& path, std::vector<token_config>& out);

/// When no token is configured and HTTP listens on an address other than loopback: a sentence
/// that names the address and says that anyone who reaches it may use every queue. Nothing
/// otherwise. laneqd refuses to start on it unless `allow_anonymous`, and warns when it is set.
std::optional<std::string> anonymous_listener(const server_config& c);

/// When no token is configured and the CAF remote actors are `published` on an address other
/// than loopback: a sentence that names the address and says that anyone who reaches it may use
/// every queue. Nothing otherwise (with tokens a CAF client must log in). laneqd refuses to
/// start on it unless `caf.allow_anonymous`, and warns when it is set.
std::optional<std::string> anonymous_caf_listener(const server_config& c, bool published);

/// The CAF scheduler threads laneqd runs: `configured` if set, otherwise
/// `laneq::default_scheduler_threads(cores)` (one fewer than the cores, at least 1; protocol.hpp
/// says why).
std::size_t actor_threads_for(std::size_t configured, unsigned cores);

}  // namespace laneq::server
