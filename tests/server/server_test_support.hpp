// Test support for the daemon: a small synchronous Beast HTTP client, an in-process server on an
// ephemeral port over an in-memory broker, and a raw socket for malformed requests. The
// functions are compiled once, in server_test_support.cpp.
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
  explicit client(std::uint16_t port);

  reply call(http::verb method, const std::string& target, const std::string& body = {},
             const std::string& token = {});

  reply read();

  /// Sends raw bytes (malformed or oversized requests).
  void send_raw(const std::string& bytes);

  beast::tcp_stream& stream() { return stream_; }

 private:
  asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

reply get(std::uint16_t port, const std::string& target, const std::string& token = {});
reply post(std::uint16_t port, const std::string& target, const std::string& body,
           const std::string& token = {});
reply put(std::uint16_t port, const std::string& target, const std::string& body,
          const std::string& token = {});
reply patch(std::uint16_t port, const std::string& target, const std::string& body,
            const std::string& token = {});
reply del(std::uint16_t port, const std::string& target, const std::string& token = {});

/// A laneq broker in memory behind a real HTTP listener on an ephemeral port.
class in_process_server {
 public:
  explicit in_process_server(http_limits limits = {}, std::vector<token_config> tokens = {},
                             std::size_t http_threads = 1);

  /// Over a given store (tests pass a store that reports itself degraded, or stops answering),
  /// with calls failing after `call_timeout` without an answer.
  in_process_server(std::function<store_actor(caf::actor_system&)> make_store, http_limits limits,
                    std::chrono::milliseconds call_timeout = http_bounds::call_timeout);

  ~in_process_server();

  std::uint16_t port() const { return port_; }
  caf::actor_system& sys() { return sys_; }
  broker& brk() { return *broker_; }
  http_server& http() { return *http_; }
  connection_counts& connections() { return router_->metrics()->connections(); }

 private:
  static caf::actor_system_config& prepare(caf::actor_system_config& cfg);

  void init(http_limits limits, std::vector<token_config> tokens, std::size_t threads,
            std::chrono::milliseconds call_timeout = http_bounds::call_timeout);

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  std::unique_ptr<broker> broker_;
  std::unique_ptr<router> router_;
  std::unique_ptr<http_server> http_;
  std::uint16_t port_ = 0;
};

}  // namespace laneq::server::test
