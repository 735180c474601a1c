// laneqd's configuration (apps/server/include/laneq/server/config.hpp).
#include "laneq/server/config.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <boost/asio/ip/address.hpp>

#include "laneq/actors/protocol.hpp"
#include "laneq/spec_json.hpp"

namespace laneq::server {

namespace json = boost::json;

namespace {

/// Collects errors while walking the document; every check reports and carries on.
class reader {
 public:
  explicit reader(std::vector<error>& errors) : errors_(errors) {}

  void fail(const std::string& path, const std::string& what) {
    errors_.push_back(error{errc::invalid_argument, path + ": " + what});
  }

  const json::object* object(const json::value& v, const std::string& path) {
    if (const auto* o = v.if_object()) return o;
    fail(path, "must be an object");
    return nullptr;
  }

  void known(const json::object& o, std::initializer_list<std::string_view> allowed,
             const std::string& prefix) {
    for (const auto& kv : o) {
      bool ok = false;
      for (auto a : allowed) ok = ok || a == kv.key();
      if (!ok) fail(prefix + std::string{kv.key()}, "is not a known field");
    }
  }

  void string(const json::object& o, std::string_view key, const std::string& prefix,
              std::string& out, bool allow_empty = false) {
    const auto* v = o.if_contains(key);
    if (v == nullptr) return;
    const auto* s = v->if_string();
    if (s == nullptr) return fail(prefix + std::string{key}, "must be a string");
    if (!allow_empty && s->empty()) return fail(prefix + std::string{key}, "must not be empty");
    out = std::string{*s};
  }

  void boolean(const json::object& o, std::string_view key, const std::string& prefix, bool& out) {
    const auto* v = o.if_contains(key);
    if (v == nullptr) return;
    const auto* b = v->if_bool();
    if (b == nullptr) return fail(prefix + std::string{key}, "must be true or false");
    out = *b;
  }

  template <class T>
  void integer(const json::object& o, std::string_view key, const std::string& prefix,
               std::int64_t min, std::int64_t max, T& out) {
    const auto* v = o.if_contains(key);
    if (v == nullptr) return;
    std::int64_t n = 0;
    if (const auto* i = v->if_int64()) {
      n = *i;
    } else if (const auto* u = v->if_uint64(); u != nullptr && *u <= std::uint64_t{INT64_MAX}) {
      n = static_cast<std::int64_t>(*u);
    } else {
      return fail(prefix + std::string{key}, "must be an integer");
    }
    if (n < min || n > max)
      return fail(prefix + std::string{key},
                  "must be between " + std::to_string(min) + " and " + std::to_string(max));
    out = static_cast<T>(n);
  }

  void host(const json::object& o, std::string_view key, const std::string& prefix,
            std::string& out) {
    std::string h = out;
    string(o, key, prefix, h);
    boost::system::error_code ec;
    boost::asio::ip::make_address(h, ec);
    if (ec) return fail(prefix + std::string{key}, "'" + h + "' is not an IP address");
    out = h;
  }

 private:
  std::vector<error>& errors_;
};

void read_limits(reader& r, const json::object& o, http_limits& l) {
  const std::string p = "limits.";
  r.known(o,
          {"target_bytes", "header_count", "header_bytes", "body_bytes", "batch", "head_timeout_ms",
           "connections", "connections_reserve", "answer_bytes"},
          p);
  r.integer(o, "target_bytes", p, 64, http_bounds::target_bytes_max, l.target_bytes);
  r.integer(o, "header_count", p, 4, http_bounds::header_count_max, l.header_count);
  r.integer(o, "header_bytes", p, 256, http_bounds::header_bytes_max, l.header_bytes);
  r.integer(o, "body_bytes", p, 1024, http_bounds::body_bytes_max, l.body_bytes);
  r.integer(o, "batch", p, 1, static_cast<std::int64_t>(limits::enqueue_batch_max), l.batch);
  r.integer(o, "head_timeout_ms", p, http_bounds::head_timeout_ms_min,
            http_bounds::head_timeout_ms_max, l.head_timeout_ms);
  r.integer(o, "connections", p, http_bounds::connections_min, http_bounds::connections_max,
            l.connections);
  if (!o.contains("connections_reserve"))
    l.connections_reserve = std::min(l.connections_reserve, l.connections / 4);
  r.integer(o, "connections_reserve", p, 1, http_bounds::connections_max, l.connections_reserve);
  r.integer(o, "answer_bytes", p, http_bounds::answer_bytes_min, http_bounds::answer_bytes_max,
            l.answer_bytes);
  if (l.connections_reserve >= l.connections)
    r.fail(p + "connections_reserve",
           "must be below limits.connections (" + std::to_string(l.connections) + ")");
}

/// `"tls": {"cert_file", "key_file", <ca_field>}` under `prefix` ("http.", "caf."): the two
/// files are required, the CA file too when `ca_required`. Whether the files load is checked at
/// start (`check_tls_files`), not here.
void read_tls(reader& r, const json::value& v, const std::string& prefix, std::string_view ca_field,
              bool ca_required, tls_config& out) {
  const std::string p = prefix + "tls.";
  const auto* o = r.object(v, prefix + "tls");
  if (o == nullptr) return;
  r.known(*o, {"cert_file", "key_file", ca_field}, p);
  for (std::string_view f : {std::string_view{"cert_file"}, std::string_view{"key_file"}})
    if (!o->contains(f)) r.fail(p + std::string{f}, "is required");
  if (ca_required && !o->contains(ca_field))
    r.fail(p + std::string{ca_field},
           "is required (CAF's TLS is mutual: laneqd checks each client's certificate)");
  tls_config t;
  r.string(*o, "cert_file", p, t.cert_file);
  r.string(*o, "key_file", p, t.key_file);
  r.string(*o, ca_field, p, t.ca_file);
  if (!t.cert_file.empty() && !t.key_file.empty()) out = std::move(t);
}

void read_tokens(reader& r, const json::value& v, std::vector<token_config>& out) {
  const auto* arr = v.if_array();
  if (arr == nullptr) return r.fail("tokens", "must be an array of {\"token\", \"tenant\"}");
  if (arr->size() > tokens_max)
    return r.fail("tokens", "at most " + std::to_string(tokens_max) + " tokens");
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto p = "tokens[" + std::to_string(i) + "]";
    const auto* o = r.object((*arr)[i], p);
    if (o == nullptr) continue;
    p += ".";
    r.known(*o, {"token", "tenant"}, p);
    token_config t;
    if (!o->contains("token")) r.fail(p + "token", "is required");
    if (!o->contains("tenant")) r.fail(p + "tenant", "is required");
    r.string(*o, "token", p, t.token);
    r.string(*o, "tenant", p, t.tenant);
    if (!t.token.empty() && (t.token.size() < token_bytes_min || t.token.size() > token_bytes_max))
      r.fail(p + "token", "must be " + std::to_string(token_bytes_min) + " to " +
                              std::to_string(token_bytes_max) + " bytes");
    for (char c : t.token)
      if (c <= ' ' || c > '~') {
        r.fail(p + "token", "must be printable ASCII without spaces");
        break;
      }
    if (t.tenant.find('/') != std::string::npos) r.fail(p + "tenant", "must not contain '/'");
    for (std::size_t k = 0; k < i; ++k)
      if (!t.token.empty() && out.size() > k && out[k].token == t.token)
        r.fail(p + "token", "repeats tokens[" + std::to_string(k) + "]");
    out.push_back(std::move(t));
  }
}

void read_queues(reader& r, std::vector<error>& errors, const json::value& v,
                 std::vector<queue_spec>& out) {
  const auto* o = r.object(v, "queues");
  if (o == nullptr) return;
  if (o->size() > limits::queues_max)
    return r.fail("queues", "at most " + std::to_string(limits::queues_max) + " queues");
  for (const auto& kv : *o) {
    auto parsed = queue_spec_from_json(kv.key(), kv.value());
    if (!parsed.errors.empty()) {
      for (auto& e : parsed.errors) {
        e.message = "queues." + std::string{kv.key()} + ": " + e.message;
        errors.push_back(std::move(e));
      }
      continue;
    }
    out.push_back(std::move(parsed.spec));
  }
}

/// `"topics": {"<name>": {"queues": [...]}}`. Whether the queues exist is checked when the
/// daemon creates the topics, after the queues (a queue may already be in the data directory).
void read_topics(reader& r, std::vector<error>& errors, const json::value& v,
                 std::vector<topic_spec>& out) {
  const auto* o = r.object(v, "topics");
  if (o == nullptr) return;
  if (o->size() > limits::topics_max)
    return r.fail("topics", "at most " + std::to_string(limits::topics_max) + " topics");
  for (const auto& kv : *o) {
    auto parsed = topic_spec_from_json(kv.key(), kv.value());
    if (!parsed.errors.empty()) {
      for (auto& e : parsed.errors) {
        e.message = "topics." + std::string{kv.key()} + ": " + e.message;
        errors.push_back(std::move(e));
      }
      continue;
    }
    out.push_back(std::move(parsed.spec));
  }
}

}  // namespace

parsed_config config_from_json(const json::value& v) {
  parsed_config out;
  reader r{out.errors};
  const auto* root = v.if_object();
  if (root == nullptr) {
    r.fail("(config)", "the config must be a JSON object");
    return out;
  }
  auto& c = out.config;
  r.known(*root,
          {"data_dir", "http", "caf", "sync", "reclaim_grace_ms", "group_window",
           "group_window_max", "window_budget_mb", "limits", "tokens", "tokens_file",
           "allow_anonymous", "access_log", "queues", "topics"},
          "");
  r.string(*root, "data_dir", "", c.data_dir);
  if (const auto* h = root->if_contains("http")) {
    if (const auto* o = r.object(*h, "http")) {
      r.known(*o, {"host", "port", "threads", "tls"}, "http.");
      r.host(*o, "host", "http.", c.http_host);
      r.integer(*o, "port", "http.", 0, 65535, c.http_port);
      r.integer(*o, "threads", "http.", 1, http_threads_max, c.http_threads);
      if (const auto* t = o->if_contains("tls"))
        read_tls(r, *t, "http.", "client_ca_file", false, c.http_tls);
    }
  }
  if (const auto* h = root->if_contains("caf")) {
    if (const auto* o = r.object(*h, "caf")) {
      r.known(*o, {"host", "port", "threads", "allow_anonymous", "tls"}, "caf.");
      r.host(*o, "host", "caf.", c.caf_host);
      r.integer(*o, "port", "caf.", 0, 65535, c.caf_port);
      r.integer(*o, "threads", "caf.", 0, 256, c.actor_threads);
      r.boolean(*o, "allow_anonymous", "caf.", c.caf_allow_anonymous);
      if (const auto* t = o->if_contains("tls"))
        read_tls(r, *t, "caf.", "ca_file", true, c.caf_tls);
    }
  }
  r.boolean(*root, "sync", "", c.sync);
  std::int64_t grace_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(c.reclaim_grace).count();
  r.integer(
      *root, "reclaim_grace_ms", "", 0,
      std::chrono::duration_cast<std::chrono::milliseconds>(limits::reclaim_grace_max).count(),
      grace_ms);
  c.reclaim_grace = std::chrono::milliseconds{grace_ms};
  r.integer(*root, "group_window", "", 2, 1'000'000, c.group_window);
  r.integer(*root, "group_window_max", "", 2, 1'000'000, c.group_window_max);
  if (root->contains("group_window_max") && c.group_window_max < c.group_window)
    r.fail("group_window_max",
           "must be at least group_window (" + std::to_string(c.group_window) + ")");
  std::size_t budget_mb = c.window_budget_bytes >> 20;
  r.integer(*root, "window_budget_mb", "", 0, window_budget_mb_max, budget_mb);
  c.window_budget_bytes = budget_mb << 20;
  if (const auto* l = root->if_contains("limits"))
    if (const auto* o = r.object(*l, "limits")) read_limits(r, *o, c.limits);
  if (const auto* t = root->if_contains("tokens")) read_tokens(r, *t, c.tokens);
  r.string(*root, "tokens_file", "", c.tokens_file);
  if (!c.tokens.empty() && !c.tokens_file.empty())
    r.fail("tokens_file", "is set with tokens: tokens come from one of them");
  r.boolean(*root, "allow_anonymous", "", c.allow_anonymous);
  r.string(*root, "access_log", "", c.access_log);
  if (const auto* q = root->if_contains("queues")) read_queues(r, out.errors, *q, c.queues);
  if (const auto* t = root->if_contains("topics")) read_topics(r, out.errors, *t, c.topics);
  if (c.caf_port != 0 && c.caf_port == c.http_port && c.caf_host == c.http_host)
    r.fail("caf.port", "is the same as http.port");
  return out;
}

namespace {

bool loopback(const std::string& host) {
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}

}  // namespace

std::optional<std::string> anonymous_listener(const server_config& c) {
  if (!c.tokens.empty() || loopback(c.http_host)) return std::nullopt;
  return "HTTP listens on " + c.http_host +
         ", which is not a loopback address, and no tokens are configured: anyone who reaches "
         "it may use every queue";
}

std::optional<std::string> anonymous_caf_listener(const server_config& c, bool published) {
  if (!published || !c.tokens.empty() || loopback(c.caf_host)) return std::nullopt;
  return "the CAF port is published on " + c.caf_host +
         ", which is not a loopback address, and no tokens are configured: anyone who reaches it "
         "may use every queue of every tenant";
}

std::size_t actor_threads_for(std::size_t configured, unsigned cores) {
  return configured != 0 ? configured : default_scheduler_threads(cores);
}

std::vector<error> parse_tokens_file(std::string_view text, std::vector<token_config>& out) {
  std::vector<error> errors;
  reader r{errors};
  boost::system::error_code ec;
  json::parse_options options;
  options.allow_comments = true;
  auto v = json::parse(text, ec, {}, options);
  if (ec) {
    r.fail("(tokens file)", "not valid JSON: " + ec.message());
    return errors;
  }
  std::vector<token_config> tokens;
  if (const auto* o = r.object(v, "(tokens file)")) {
    r.known(*o, {"tokens"}, "");
    if (const auto* t = o->if_contains("tokens"))
      read_tokens(r, *t, tokens);
    else
      r.fail("tokens", "is required");
    if (o->contains("tokens") && tokens.empty() && errors.empty())
      r.fail("tokens", "must hold at least one token (a reload never turns authentication off)");
  }
  if (errors.empty()) out = std::move(tokens);
  return errors;
}

std::vector<error> read_tokens_file(const std::string& path, std::vector<token_config>& out) {
  std::ifstream in{path};
  if (!in)
    return {error{errc::invalid_argument,
                  "tokens_file " + path + ": cannot be read (" + std::strerror(errno) + ")"}};
  std::stringstream text;
  text << in.rdbuf();
  auto errors = parse_tokens_file(text.str(), out);
  for (auto& e : errors) e.message = "tokens_file " + path + ": " + e.message;
  return errors;
}

parsed_config parse_config(std::string_view text) {
  boost::system::error_code ec;
  // Comments (// and /* */) are allowed, so a config file can say what it is for
  // (packaging/laneqd.json does, field by field).
  json::parse_options options;
  options.allow_comments = true;
  auto v = json::parse(text, ec, {}, options);
  if (ec) {
    parsed_config out;
    out.errors.push_back(
        error{errc::invalid_argument, "(config): not valid JSON: " + ec.message()});
    return out;
  }
  return config_from_json(v);
}

}  // namespace laneq::server
