// The synchronous HTTP/1.1 client on Boost.Beast (see http_client.hpp).
#include "laneq/client/http_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace laneq::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

std::string to_string(const api_error& e) {
  std::string out;
  switch (e.kind) {
    case failure_kind::unreachable: out = "unreachable: "; break;
    case failure_kind::protocol: out = "bad answer: "; break;
    case failure_kind::usage: out = "usage: "; break;
    case failure_kind::server:
      out = e.code.empty() ? std::string("error") : e.code;
      out += " (";
      if (e.number != 0) out += std::to_string(e.number) + ", ";
      out += "HTTP " + std::to_string(e.http_status) + "): ";
      break;
  }
  return out + e.message;
}

std::string to_url(const endpoint& ep) {
  bool v6 = ep.host.find(':') != std::string::npos;
  return std::string(ep.tls ? "https://" : "http://") + (v6 ? "[" + ep.host + "]" : ep.host) + ":" +
         ep.port;
}

api_result<endpoint> parse_url(std::string_view url) {
  auto bad = [&](std::string why) -> api_error {
    return {failure_kind::usage, 0, {}, 0, "bad URL \"" + std::string(url) + "\": " + why};
  };
  endpoint ep;
  std::string_view rest;
  std::string_view port = "80";
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    rest = url.substr(8);
    ep.tls = true;
    port = "443";
  } else {
    return bad("it must start with http:// or https://");
  }
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  ep.prefix = slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash));
  while (!ep.prefix.empty() && ep.prefix.back() == '/') ep.prefix.pop_back();
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string_view::npos) return bad("user info is not supported");
  std::string_view host = authority;
  if (authority.front() == '[') {  // [::1]:7070
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after the host");
      port = after.substr(1);
    }
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  if (port.empty() || port.size() > 5) return bad("bad port");
  unsigned long p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("the port is not a number");
    p = p * 10 + static_cast<unsigned long>(c - '0');
  }
  if (p == 0 || p > 65535) return bad("the port is out of range (1-65535)");
  ep.host = std::string(host);
  ep.port = std::string(port);
  return ep;
}

std::string encode_segment(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

api_error error_from_answer(const http_answer& a) {
  api_error e;
  e.kind = failure_kind::server;
  e.http_status = a.status;
  json::error_code ec;
  auto v = json::parse(a.body, ec);
  const json::object* err = nullptr;
  if (!ec && v.is_object()) {
    if (auto* p = v.as_object().if_contains("error")) err = p->if_object();
  }
  if (err == nullptr) {
    e.message = a.body.empty() ? "HTTP " + std::to_string(a.status) + " with an empty body"
                               : "HTTP " + std::to_string(a.status) + ": " + a.body;
    if (e.message.size() > 300) e.message.resize(300);
    return e;
  }
  if (auto* c = err->if_contains("code"); c && c->is_string()) e.code = c->as_string().c_str();
  if (auto* n = err->if_contains("number"); n && n->is_int64()) e.number = n->as_int64();
  if (auto* m = err->if_contains("message"); m && m->is_string())
    e.message = m->as_string().c_str();
  return e;
}

namespace {

/// OpenSSL's queued errors on this thread as one line (`reason (library)`), cleared.
std::string openssl_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    std::string r = ERR_SYSTEM_ERROR(e) ? std::strerror(ERR_GET_REASON(e))
                    : reason != nullptr ? reason
                                        : "error " + std::to_string(e);
    if (r == "PEM lib" || r == "system lib" || out.find(r) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + r;
  }
  return out.empty() ? "unknown reason" : out;
}

/// Runs one asynchronous operation on `ioc` to its end and returns its error. Every step of a
/// request is asynchronous because a beast::tcp_stream's timer (`expires_after`) applies to
/// asynchronous operations only: a synchronous read from a server that never answers waited
/// for good, whatever `client_options::timeout` said.
template <class Start>
beast::error_code run_op(asio::io_context& ioc, Start start) {
  beast::error_code out;
  start([&out](beast::error_code ec, auto&&...) { out = ec; });
  ioc.restart();
  ioc.run();
  return out;
}

api_error tls_setup_error(const std::string& what, const std::string& file) {
  return api_error{failure_kind::usage, 0, {}, 0, what + " " + file + ": " + openssl_errors()};
}

}  // namespace

// One connection: plain (`plain`) or TLS (`tls`, made again for each connection over `ctx`).
struct http_client::connection {
  asio::io_context ioc;
  beast::tcp_stream plain{ioc};
  std::optional<asio::ssl::context> ctx;  ///< https: made at the first connect
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  bool open = false;

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : plain; }

  void close() {
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
    tls.reset();
    open = false;
    buffer.clear();
  }
};

http_client::http_client(endpoint ep, client_options opts)
    : ep_(std::move(ep)), opts_(std::move(opts)), conn_(std::make_unique<connection>()) {}

http_client::~http_client() {
  if (conn_ && conn_->open) conn_->close();
}

// The client side of https: TLS 1.2 at least; the server's certificate checked against the
// system's CAs or `cacert_file` (unless `insecure`), and its host name or IP address against the
// URL's (`connect_tls`).
std::optional<api_error> http_client::make_tls_context() {
  auto& ctx = conn_->ctx.emplace(asio::ssl::context::tls_client);
  SSL_CTX* h = ctx.native_handle();
  SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
  ERR_clear_error();
  if (opts_.insecure) {
    SSL_CTX_set_verify(h, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(h, SSL_VERIFY_PEER, nullptr);
    if (!opts_.cacert_file.empty()) {
      if (SSL_CTX_load_verify_locations(h, opts_.cacert_file.c_str(), nullptr) != 1)
        return tls_setup_error("cannot load the CA file", opts_.cacert_file);
    } else if (SSL_CTX_set_default_verify_paths(h) != 1) {
      return tls_setup_error("cannot load the system's CA store", "(OpenSSL's default paths)");
    }
  }
  if (!opts_.cert_file.empty() &&
      SSL_CTX_use_certificate_chain_file(h, opts_.cert_file.c_str()) != 1)
    return tls_setup_error("cannot load the client certificate", opts_.cert_file);
  if (!opts_.key_file.empty() &&
      SSL_CTX_use_PrivateKey_file(h, opts_.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return tls_setup_error("cannot load the client key", opts_.key_file);
  return std::nullopt;
}

// The TCP connection is up: SNI and the name to check (an IP address is checked as one, and
// sent no SNI), then the handshake. A certificate that fails verification is named as such,
// with OpenSSL's reason ("self-signed certificate", "hostname mismatch").
std::optional<api_error> http_client::connect_tls() {
  auto& c = *conn_;
  SSL* ssl = c.tls->native_handle();
  beast::error_code ec;
  asio::ip::make_address(ep_.host, ec);
  const bool by_name = static_cast<bool>(ec);  // not an IP address
  if (!opts_.insecure) {
    auto* param = SSL_get0_param(ssl);
    int set = by_name ? X509_VERIFY_PARAM_set1_host(param, ep_.host.c_str(), 0)
                      : X509_VERIFY_PARAM_set1_ip_asc(param, ep_.host.c_str());
    if (set != 1)
      return api_error{failure_kind::usage,
                       0,
                       {},
                       0,
                       "cannot check the server's name " + ep_.host + ": " + openssl_errors()};
  }
  // SSL_set_tlsext_host_name, without the macro's C cast.
  if (by_name)
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             static_cast<void*>(const_cast<char*>(ep_.host.c_str())));
  ec = {};
  c.lowest().expires_after(opts_.timeout);
  ec = run_op(c.ioc, [&](auto done) {
    c.tls->async_handshake(asio::ssl::stream_base::client, std::move(done));
  });
  if (!ec) return std::nullopt;
  auto verify = SSL_get_verify_result(ssl);
  std::string why = verify != X509_V_OK
                        ? std::string(certificate_verify_failed) + " for " + to_url(ep_) + ": " +
                              X509_verify_cert_error_string(verify)
                        : "TLS handshake with " + to_url(ep_) + " failed: " + ec.message();
  return api_error{failure_kind::unreachable, 0, {}, 0, why};
}

std::string http_client::path(std::string_view rest) const {
  return ep_.prefix + std::string(rest);
}

std::string http_client::queue_path(std::string_view queue, std::string_view rest) const {
  return ep_.prefix + "/v1/queues/" + encode_segment(queue) + std::string(rest);
}

std::string http_client::topic_path(std::string_view topic, std::string_view rest) const {
  return ep_.prefix + "/v1/topics/" + encode_segment(topic) + std::string(rest);
}

api_result<http_answer> http_client::send_raw(std::string_view method, std::string_view target,
                                              std::string_view body) {
  auto verb = http::string_to_verb(method);
  if (verb == http::verb::unknown)
    return api_error{failure_kind::usage, 0, {}, 0, "unknown HTTP method " + std::string(method)};
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, ep_.host + ":" + ep_.port);
  req.set(http::field::user_agent, "laneq-client");
  req.keep_alive(true);
  if (!opts_.token.empty()) req.set(http::field::authorization, "Bearer " + opts_.token);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.prepare_payload();

  auto& c = *conn_;
  std::string last_error;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = c.open;
    beast::error_code ec;
    if (!c.open) {
      tcp::resolver resolver{c.ioc};
      auto results = resolver.resolve(ep_.host, ep_.port, ec);
      if (ec)
        return api_error{failure_kind::unreachable,
                         0,
                         {},
                         0,
                         "cannot resolve " + ep_.host + ": " + ec.message()};
      if (ep_.tls && !c.ctx)
        if (auto e = make_tls_context()) return *e;
      if (ep_.tls) c.tls.emplace(c.ioc, *c.ctx);
      c.lowest().expires_after(opts_.timeout);
      ec = run_op(c.ioc, [&](auto done) { c.lowest().async_connect(results, std::move(done)); });
      if (ec) {
        c.close();
        return api_error{failure_kind::unreachable,
                         0,
                         {},
                         0,
                         "cannot connect to " + ep_.host + ":" + ep_.port + ": " + ec.message()};
      }
      c.lowest().socket().set_option(tcp::no_delay(true), ec);
      if (ep_.tls)
        if (auto e = connect_tls()) {
          c.close();
          return *e;
        }
      c.open = true;
      c.buffer.clear();
      // Beast reads at most the buffer's free space per call (512 bytes when empty): a
      // reserved buffer reads a batch's answer in a few calls instead of dozens.
      c.buffer.reserve(64 * 1024);
    }
    c.lowest().expires_after(opts_.timeout);
    http::response_parser<http::string_body> parser;
    parser.body_limit(256u * 1024u * 1024u);
    auto exchange = [&](auto& stream) {
      ec = run_op(c.ioc, [&](auto done) { http::async_write(stream, req, std::move(done)); });
      if (!ec)
        ec = run_op(
            c.ioc, [&](auto done) { http::async_read(stream, c.buffer, parser, std::move(done)); });
    };
    if (c.tls)
      exchange(*c.tls);
    else
      exchange(c.plain);
    if (ec) {
      c.close();
      last_error = ec.message();
      // A reused keep-alive connection may have been closed by the server: retry once.
      if (reused && ec != beast::error::timeout) continue;
      return api_error{failure_kind::unreachable,
                       0,
                       {},
                       0,
                       "request " + std::string(method) + " " + std::string(target) + " to " +
                           to_url(ep_) + " failed: " + last_error};
    }
    auto res = parser.release();
    if (!res.keep_alive()) c.close();
    return http_answer{res.result_int(), std::move(res.body())};
  }
  return api_error{
      failure_kind::unreachable, 0, {}, 0, "request to " + to_url(ep_) + " failed: " + last_error};
}

api_result<json::value> http_client::call(std::string_view method, std::string_view target,
                                          const json::value* body) {
  std::string text = body != nullptr ? json::serialize(*body) : std::string();
  auto a = send_raw(method, target, text);
  if (!a) return a.err();
  auto& ans = a.value();
  if (ans.status < 200 || ans.status >= 300) return error_from_answer(ans);
  if (ans.body.empty()) return json::value(nullptr);
  json::error_code ec;
  // One arena per answer, freed at once with it: a receive's answer is a few hundred nodes.
  auto v = json::parse(ans.body, ec,
                       json::make_shared_resource<json::monotonic_resource>(ans.body.size() * 2));
  if (ec)
    return api_error{failure_kind::protocol,
                     ans.status,
                     {},
                     0,
                     "the answer to " + std::string(method) + " " + std::string(target) +
                         " is not JSON (" + ec.message() + ")"};
  return v;
}

api_result<std::pair<json::value, bool>> http_client::create_queue(std::string_view name,
                                                                   const json::value& spec) {
  return put_created(queue_path(name), spec);
}

api_result<std::pair<json::value, bool>> http_client::put_created(const std::string& target,
                                                                  const json::value& body) {
  auto text = json::serialize(body);
  auto a = send_raw("PUT", target, text);
  if (!a) return a.err();
  auto& ans = a.value();
  if (ans.status != 200 && ans.status != 201) return error_from_answer(ans);
  json::error_code ec;
  auto v = ans.body.empty() ? json::value(nullptr) : json::parse(ans.body, ec);
  if (ec) return api_error{failure_kind::protocol, ans.status, {}, 0, "the answer is not JSON"};
  return std::pair<json::value, bool>{std::move(v), ans.status == 201};
}

api_result<json::value> http_client::get_queue(std::string_view name) {
  return call("GET", queue_path(name));
}

api_result<json::value> http_client::list_queues() {
  return call("GET", path("/v1/queues"));
}

api_result<json::value> http_client::delete_queue(std::string_view name, bool force) {
  return call("DELETE", queue_path(name, force ? "?force=true" : ""));
}

api_result<json::value> http_client::purge(std::string_view queue,
                                           const std::optional<std::string>& group) {
  json::object o;
  if (group) o["group"] = *group;
  json::value body = std::move(o);
  return call("POST", queue_path(queue, "/purge"), &body);
}

api_result<json::value> http_client::peek(std::string_view queue, std::uint32_t limit,
                                          const std::optional<std::string>& group) {
  auto query = "?limit=" + std::to_string(limit);
  if (group) query += "&group=" + encode_segment(*group);
  return call("GET", queue_path(queue, "/messages" + query));
}

api_result<json::value> http_client::update_queue(std::string_view name, const json::value& patch) {
  return call("PATCH", queue_path(name), &patch);
}

namespace {

/// `{"messages": [...]}` of a send or a publish.
json::value messages_body(const std::vector<outgoing>& messages) {
  json::array arr;
  arr.reserve(messages.size());
  for (const auto& m : messages) {
    json::object o;
    o[m.base64 ? "body_base64" : "body"] = m.body;
    if (!m.headers.empty()) {
      json::object h;
      for (const auto& [k, v] : m.headers) h[k] = v;
      o["headers"] = std::move(h);
    }
    if (!m.fairness_key.empty()) o["fairness_key"] = m.fairness_key;
    if (m.delay_ms != 0) o["delay_ms"] = m.delay_ms;
    arr.emplace_back(std::move(o));
  }
  return json::object{{"messages", std::move(arr)}};
}

}  // namespace

api_result<std::pair<json::value, bool>> http_client::create_topic(
    std::string_view name, const std::vector<std::string>& queues) {
  json::array list;
  for (const auto& q : queues) list.emplace_back(q);
  return put_created(topic_path(name), json::object{{"queues", std::move(list)}});
}

api_result<json::value> http_client::get_topic(std::string_view name) {
  return call("GET", topic_path(name));
}

api_result<json::value> http_client::list_topics() {
  return call("GET", path("/v1/topics"));
}

api_result<json::value> http_client::delete_topic(std::string_view name) {
  return call("DELETE", topic_path(name));
}

api_result<json::value> http_client::publish(std::string_view topic,
                                             const std::vector<outgoing>& messages) {
  auto body = messages_body(messages);
  return call("POST", topic_path(topic, "/messages"), &body);
}

api_result<std::vector<std::string>> http_client::send(std::string_view queue,
                                                       const std::vector<outgoing>& messages) {
  auto body = messages_body(messages);
  auto r = call("POST", queue_path(queue, "/messages"), &body);
  if (!r) return r.err();
  std::vector<std::string> ids;
  const json::array* list = nullptr;
  if (auto* o = r.value().if_object())
    if (auto* p = o->if_contains("ids")) list = p->if_array();
  if (list == nullptr)
    return api_error{failure_kind::protocol, 200, {}, 0, "the send answer has no \"ids\" array"};
  ids.reserve(list->size());
  for (const auto& id : *list) {
    if (id.is_string())
      ids.emplace_back(id.as_string().c_str());
    else
      ids.emplace_back(json::serialize(id));
  }
  return ids;
}

api_result<json::value> http_client::receive(std::string_view queue, const receive_params& p) {
  json::object o;
  o["max"] = p.max;
  if (p.lease_ms) o["lease_ms"] = *p.lease_ms;
  o["wait_ms"] = p.wait_ms;
  if (p.batch > 1) o["batch"] = p.batch;
  json::value body = std::move(o);
  return call("POST", queue_path(queue, "/receive"), &body);
}

api_result<json::value> http_client::ack(std::string_view queue,
                                         const std::vector<std::string>& leases,
                                         std::optional<std::uint32_t> count) {
  json::value body;
  if (leases.size() == 1) {  // a single lease's failure comes back as an HTTP error
    body = json::object{{"lease", leases.front()}};
    if (count) body.as_object()["count"] = *count;
  } else {
    json::array arr;
    for (const auto& l : leases) arr.emplace_back(l);
    body = json::object{{"leases", std::move(arr)}};
  }
  return call("POST", queue_path(queue, "/ack"), &body);
}

api_result<json::value> http_client::nack(std::string_view queue, std::string_view lease,
                                          std::int64_t retry_after_ms, bool dead_letter,
                                          std::optional<std::uint32_t> from) {
  json::object o;
  o["lease"] = lease;
  if (from) o["from"] = *from;
  if (dead_letter)
    o["dead_letter"] = true;
  else
    o["retry_after_ms"] = retry_after_ms;
  json::value body = std::move(o);
  return call("POST", queue_path(queue, "/nack"), &body);
}

api_result<json::value> http_client::extend(std::string_view queue, std::string_view lease,
                                            std::int64_t lease_ms) {
  json::value body = json::object{{"lease", lease}, {"lease_ms", lease_ms}};
  return call("POST", queue_path(queue, "/extend"), &body);
}

api_result<json::value> http_client::dead_letters(std::string_view queue) {
  return call("GET", queue_path(queue, "/dead-letters"));
}

api_result<json::value> http_client::redrive(std::string_view queue,
                                             const std::vector<std::string>& ids) {
  json::object o;
  if (!ids.empty()) {
    json::array arr;
    for (const auto& id : ids) arr.emplace_back(id);
    o["ids"] = std::move(arr);
  }
  json::value body = std::move(o);
  return call("POST", queue_path(queue, "/dead-letters/redrive"), &body);
}

api_result<json::value> http_client::redrive_into(std::string_view queue,
                                                  const std::vector<std::string>& ids,
                                                  std::string_view to) {
  json::object o;
  if (!ids.empty()) {
    json::array arr;
    for (const auto& id : ids) arr.emplace_back(id);
    o["ids"] = std::move(arr);
  }
  o["to"] = to;
  json::value body = std::move(o);
  return call("POST", queue_path(queue, "/dead-letters/redrive"), &body);
}

api_result<json::value> http_client::delete_dead_letters(std::string_view queue,
                                                         const std::vector<std::string>& ids) {
  if (ids.empty()) return call("DELETE", queue_path(queue, "/dead-letters"));
  json::array arr;
  for (const auto& id : ids) arr.emplace_back(id);
  json::value body = json::object{{"ids", std::move(arr)}};
  return call("DELETE", queue_path(queue, "/dead-letters"), &body);
}

api_result<json::value> http_client::delete_dead_letter(std::string_view queue,
                                                        std::string_view id) {
  return call("DELETE", queue_path(queue, "/dead-letters/" + encode_segment(id)));
}

api_result<json::value> http_client::groups(std::string_view queue, const groups_params& p) {
  std::string query;
  auto add = [&query](std::string_view name, std::string_view value) {
    query += query.empty() ? "?" : "&";
    query += name;
    query += '=';
    query += value;
  };
  if (p.blocked_only) add("state", "blocked");
  if (p.limit) add("limit", std::to_string(*p.limit));
  if (!p.cursor.empty()) add("cursor", encode_segment(p.cursor));
  return call("GET", queue_path(queue, "/groups" + query));
}

api_result<json::value> http_client::checkpoint(std::string_view dir) {
  json::value body = json::object{{"dir", dir}};
  return call("POST", path("/v1/admin/checkpoint"), &body);
}

api_result<http_answer> http_client::health() {
  return send_raw("GET", path("/healthz"));
}

api_result<std::string> http_client::metrics() {
  auto a = send_raw("GET", path("/metrics"));
  if (!a) return a.err();
  if (a.value().status != 200) return error_from_answer(a.value());
  return std::move(a.value().body);
}

}  // namespace laneq::client
