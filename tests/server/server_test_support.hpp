// Test support for the daemon: a small synchronous Beast HTTP client, an in-process server on an
// ephemeral port over an in-memory broker, and a raw socket for malformed requests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "laneq/actors/broker.hpp"
#include "laneq/server/http_server.hpp"
#include "laneq/server/router.hpp"

namespace laneq::server::test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
namespace json = boost::json;
using tcp = asio::ip::tcp;

/// An HTTP answer with its body parsed as JSON when it is JSON.
struct reply {
  unsigned status = 0;
  std::string body;
  json::value doc;
  std::string content_type;
  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (iequals(k, name)) return v;
    return {};
  }
  std::vector<std::pair<std::string, std::string>> headers;
  /// `error.code` of an error answer ("" otherwise).
  std::string code() const {
    if (!doc.is_object()) return {};
    const auto* e = doc.as_object().if_contains("error");
    if (e == nullptr || !e->is_object()) return {};
    return std::string{e->as_object().at("code").as_string()};
  }
  /// `error.message` of an error answer ("" otherwise).
  std::string message() const {
    if (code().empty()) return {};
    return std::string{doc.as_object().at("error").as_object().at("message").as_string()};
  }
  std::int64_t number() const {
    return doc.as_object().at("error").as_object().at("number").to_number<std::int64_t>();
  }
  const json::object& obj() const { return doc.as_object(); }
};

/// A keep-alive HTTP/1.1 connection to 127.0.0.1:port.
class client {
 public:
  explicit client(std::uint16_t port) : stream_(io_) {
    stream_.connect(tcp::endpoint{asio::ip::make_address("127.0.0.1"), port});
  }

  reply call(http::verb method, const std::string& target, const std::string& body = {},
             const std::string& token = {}) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    http::write(stream_, req);
    return read();
  }

  reply read() {
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(stream_, buffer_, parser);
    auto& res = parser.get();
    reply r;
    r.status = res.result_int();
    r.body = res.body();
    for (const auto& f : res) r.headers.emplace_back(std::string{f.name_string()}, f.value());
    r.content_type = std::string{res[http::field::content_type]};
    boost::system::error_code ec;
    if (r.content_type.rfind("application/json", 0) == 0) r.doc = json::parse(r.body, ec);
    return r;
  }

  /// Sends raw bytes (malformed or oversized requests).
  void send_raw(const std::string& bytes) { asio::write(stream_.socket(), asio::buffer(bytes)); }

  beast::tcp_stream& stream() { return stream_; }

 private:
  asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

inline reply get(std::uint16_t port, const std::string& target, const std::string& token = {}) {
  client c{port};
  return c.call(http::verb::get, target, {}, token);
}
inline reply post(std::uint16_t port, const std::string& target, const std::string& body,
                  const std::string& token = {}) {
  client c{port};
  return c.call(http::verb::post, target, body, token);
}
inline reply put(std::uint16_t port, const std::string& target, const std::string& body,
                 const std::string& token = {}) {
  client c{port};
  return c.call(http::verb::put, target, body, token);
}
inline reply del(std::uint16_t port, const std::string& target, const std::string& token = {}) {
  client c{port};
  return c.call(http::verb::delete_, target, {}, token);
}

/// A laneq broker in memory behind a real HTTP listener on an ephemeral port.
class in_process_server {
 public:
  explicit in_process_server(http_limits limits = {}, std::vector<token_config> tokens = {},
                             std::size_t http_threads = 1)
      : sys_(prepare(cfg_)) {
    broker_ = std::make_unique<broker>(sys_);
    init(limits, std::move(tokens), http_threads);
  }

  /// Over a given store (tests pass a store that reports itself degraded, or stops answering),
  /// with calls failing after `call_timeout` without an answer.
  in_process_server(std::function<store_actor(caf::actor_system&)> make_store, http_limits limits,
                    std::chrono::milliseconds call_timeout = http_bounds::call_timeout)
      : sys_(prepare(cfg_)) {
    broker_ = std::make_unique<broker>(sys_, make_context(sys_), make_store(sys_));
    init(limits, {}, 1, call_timeout);
  }

  ~in_process_server() {
    http_.reset();
    router_.reset();
    broker_.reset();
  }

  std::uint16_t port() const { return port_; }
  caf::actor_system& sys() { return sys_; }
  broker& brk() { return *broker_; }
  http_server& http() { return *http_; }

 private:
  static caf::actor_system_config& prepare(caf::actor_system_config& cfg) {
    add_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    return cfg;
  }

  void init(http_limits limits, std::vector<token_config> tokens, std::size_t threads,
            std::chrono::milliseconds call_timeout = http_bounds::call_timeout) {
    router_ = std::make_unique<router>(sys_, broker_->admin(), broker_->store(), limits,
                                       std::move(tokens), call_timeout);
    http_ = std::make_unique<http_server>(*router_, limits, threads);
    auto p = http_->start("127.0.0.1", 0);
    if (!p) throw std::runtime_error(to_string(p.err()));
    port_ = p.value();
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  std::unique_ptr<broker> broker_;
  std::unique_ptr<router> router_;
  std::unique_ptr<http_server> http_;
  std::uint16_t port_ = 0;
};

}  // namespace laneq::server::test
