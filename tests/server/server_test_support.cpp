// The daemon tests' HTTP client and in-process server (server_test_support.hpp), compiled once
// rather than in every test file.
#include "server_test_support.hpp"

namespace laneq::server::test {

client::client(std::uint16_t port) : stream_(io_) {
  stream_.connect(tcp::endpoint{asio::ip::make_address("127.0.0.1"), port});
}

reply client::call(http::verb method, const std::string& target, const std::string& body,
                   const std::string& token) {
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

reply client::read() {
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

void client::send_raw(const std::string& bytes) {
  asio::write(stream_.socket(), asio::buffer(bytes));
}

reply get(std::uint16_t port, const std::string& target, const std::string& token) {
  client c{port};
  return c.call(http::verb::get, target, {}, token);
}

reply post(std::uint16_t port, const std::string& target, const std::string& body,
           const std::string& token) {
  client c{port};
  return c.call(http::verb::post, target, body, token);
}

reply put(std::uint16_t port, const std::string& target, const std::string& body,
          const std::string& token) {
  client c{port};
  return c.call(http::verb::put, target, body, token);
}

reply patch(std::uint16_t port, const std::string& target, const std::string& body,
            const std::string& token) {
  client c{port};
  return c.call(http::verb::patch, target, body, token);
}

reply del(std::uint16_t port, const std::string& target, const std::string& token) {
  client c{port};
  return c.call(http::verb::delete_, target, {}, token);
}

in_process_server::in_process_server(http_limits limits, std::vector<token_config> tokens,
                                     std::size_t http_threads)
    : sys_(prepare(cfg_)) {
  broker_ = std::make_unique<broker>(sys_);
  init(limits, std::move(tokens), http_threads);
}

in_process_server::in_process_server(std::function<store_actor(caf::actor_system&)> make_store,
                                     http_limits limits, std::chrono::milliseconds call_timeout)
    : sys_(prepare(cfg_)) {
  broker_ = std::make_unique<broker>(sys_, make_context(sys_), make_store(sys_));
  init(limits, {}, 1, call_timeout);
}

in_process_server::~in_process_server() {
  http_.reset();
  router_.reset();
  broker_.reset();
}

caf::actor_system_config& in_process_server::prepare(caf::actor_system_config& cfg) {
  add_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  return cfg;
}

void in_process_server::init(http_limits limits, std::vector<token_config> tokens,
                             std::size_t threads, std::chrono::milliseconds call_timeout) {
  router_ = std::make_unique<router>(sys_, broker_->admin(), broker_->store(), limits,
                                     std::move(tokens), call_timeout);
  http_ = std::make_unique<http_server>(*router_, limits, threads);
  auto p = http_->start("127.0.0.1", 0);
  if (!p) throw std::runtime_error(to_string(p.err()));
  port_ = p.value();
}

}  // namespace laneq::server::test
