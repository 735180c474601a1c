// The HTTP front end against hostile or careless clients (issue 22, parts 5 and 6): header names
// that are not tokens, HEAD and `Expect: 100-continue` framing, long polls whose client left, the
// request-head timeout, the connection cap and its reserve, and the bound on the bytes of answers
// waiting for clients that do not read. An in-process server over an in-memory broker. (Paged
// group listings are in http_api_test.cpp.)
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

using namespace std::chrono_literals;

class http_hardening : public ::testing::Test {
 protected:
  in_process_server srv_;
  std::uint16_t port() const { return srv_.port(); }

  std::int64_t enqueued(const std::string& q) {
    auto r = get(port(), "/v1/queues/" + q);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.obj().at("stats").as_object().at("enqueued").to_number<std::int64_t>();
  }
};

TEST_F(http_hardening, a_header_name_that_is_not_an_http_token_is_refused_and_not_stored) {
  ASSERT_EQ(put(port(), "/v1/queues/q", "{}").status, 201u);
  for (const std::string name : {"X\\r\\nInjected", "a b", "x:y", "caf\\u00e9", "(x)"}) {
    auto r = post(port(), "/v1/queues/q/messages",
                  R"({"body": "x", "headers": {")" + name + R"(": "v"}})");
    EXPECT_EQ(r.status, 400u) << name << ": " << r.body;
    EXPECT_EQ(r.code(), "invalid_argument") << name;
  }
  ASSERT_EQ(put(port(), "/v1/topics/t", R"({"queues": ["q"]})").status, 201u);
  auto pub = post(port(), "/v1/topics/t/messages", R"({"body": "x", "headers": {"X\r\nY": "v"}})");
  EXPECT_EQ(pub.status, 400u) << pub.body;
  EXPECT_EQ(enqueued("q"), 0);
  // Every token character is allowed.
  auto ok = post(port(), "/v1/queues/q/messages",
                 R"({"body": "x", "headers": {"Az09!#$%&'*+-.^_`|~": "v"}})");
  EXPECT_EQ(ok.status, 200u) << ok.body;
}

/// Reads one answer to a HEAD request on `c` (a header, no body whatever its Content-Length).
reply read_head_answer(client& c, beast::flat_buffer& buf) {
  http::response_parser<http::empty_body> parser;
  parser.skip(true);
  http::read(c.stream(), buf, parser);
  reply r;
  r.status = parser.get().result_int();
  for (const auto& f : parser.get())
    r.headers.emplace_back(std::string{f.name_string()}, f.value());
  return r;
}

/// Reads one ordinary answer on `c` through `buf`.
reply read_answer(client& c, beast::flat_buffer& buf) {
  http::response<http::string_body> res;
  http::read(c.stream(), buf, res);
  reply r;
  r.status = res.result_int();
  r.body = res.body();
  return r;
}

TEST_F(http_hardening, head_answers_carry_no_body_so_the_connection_stays_usable) {
  ASSERT_EQ(put(port(), "/v1/queues/q", "{}").status, 201u);
  client c{port()};
  // A path with GET, a path without it, and a path that does not exist; then a GET.
  c.send_raw(
      "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "HEAD /v1/queues/q/receive HTTP/1.1\r\nHost: x\r\n\r\n"
      "HEAD /nothing HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /v1/queues/q HTTP/1.1\r\nHost: x\r\n\r\n");
  beast::flat_buffer buf;
  auto health = read_head_answer(c, buf);
  EXPECT_EQ(health.status, 200u);
  EXPECT_NE(health.header("Content-Length"), "");
  EXPECT_EQ(read_head_answer(c, buf).status, 405u);
  EXPECT_EQ(read_head_answer(c, buf).status, 404u);
  auto after = read_answer(c, buf);
  EXPECT_EQ(after.status, 200u) << after.body;
  EXPECT_NE(after.body.find("\"name\":\"q\""), std::string::npos) << after.body;
}

TEST_F(http_hardening, expect_100_continue_is_answered_before_the_body_is_sent) {
  ASSERT_EQ(put(port(), "/v1/queues/q", "{}").status, 201u);
  client c{port()};
  const std::string body = R"({"body": "x"})";
  c.send_raw(
      "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  // Only the header is sent: a server that waits for the body never answers (until its idle
  // timeout closes the connection, which fails the read).
  beast::flat_buffer buf;
  http::response_parser<http::empty_body> interim;
  http::read_header(c.stream(), buf, interim);
  EXPECT_EQ(interim.get().result_int(), 100u);
  c.send_raw(body);
  auto r = read_answer(c, buf);
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(enqueued("q"), 1);
}

TEST_F(http_hardening, expect_100_continue_with_a_body_over_the_limit_is_refused_at_once) {
  client c{port()};
  c.send_raw(
      "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(http_limits{}.body_bytes + 1) + "\r\n\r\n");
  beast::flat_buffer buf;
  auto r = read_answer(c, buf);
  EXPECT_EQ(r.status, 413u) << r.body;
}

// A long poll whose client closed its connection must not keep the message it is handed: the
// message goes back at once, and the next receiver gets it within its own long poll (the lease
// the gone client took is 10 minutes, far beyond that poll).
TEST_F(http_hardening, a_long_poll_whose_client_left_gives_its_message_back_at_once) {
  ASSERT_EQ(put(port(), "/v1/queues/q", "{}").status, 201u);
  auto waiting = [&] {
    auto r = get(port(), "/v1/queues/q");
    return r.obj().at("stats").as_object().at("waiting_receives").to_number<std::int64_t>();
  };
  {
    client gone{port()};
    const std::string body = R"({"max": 1, "wait_ms": 20000, "lease_ms": 600000})";
    gone.send_raw(
        "POST /v1/queues/q/receive HTTP/1.1\r\nHost: x\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    while (waiting() != 1) std::this_thread::sleep_for(10ms);
    gone.stream().socket().close();
  }
  auto sent = post(port(), "/v1/queues/q/messages", R"({"body": "x"})");
  ASSERT_EQ(sent.status, 200u) << sent.body;
  auto r = post(port(), "/v1/queues/q/receive", R"({"max": 1, "wait_ms": 20000})");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto& msgs = r.obj().at("messages").as_array();
  ASSERT_EQ(msgs.size(), 1u) << "the message stayed leased to the client that left";
  EXPECT_EQ(msgs[0].as_object().at("body").as_string(), "x");
}

/// Whether the server closes `c` within `patience` (bytes it answered first are skipped).
/// The patience is a hang guard: far above the timeouts under test (a slow machine does not
/// exhaust it) and far below the 60 s idle timeout (so a close within it is not the idle one).
bool closed_by_server(client& c, std::chrono::milliseconds patience = 20s) {
  pollfd p{c.stream().socket().native_handle(), POLLIN, 0};
  char sink[4096];
  while (::poll(&p, 1, static_cast<int>(patience.count())) == 1) {
    auto n = ::recv(p.fd, sink, sizeof sink, 0);
    if (n <= 0) return true;
  }
  return false;
}

TEST(http_hardening_timeouts, a_connection_without_a_complete_head_is_closed_after_head_timeout) {
  http_limits limits;
  limits.head_timeout_ms = 300;
  in_process_server srv{limits};
  // One connection that sends nothing, then one that sends half a head. Each is closed, well
  // inside the 60 s keep-alive idle timeout, and not before the head timeout has run from its
  // start (measured from before the connect, which comes before the server's accept and timer).
  for (const std::string sent : {"", "GET /healthz HTTP/1.1\r\nHost: x\r\n"}) {
    SCOPED_TRACE(sent.empty() ? "silent" : "partial head");
    auto started = std::chrono::steady_clock::now();
    client c{srv.port()};
    if (!sent.empty()) c.send_raw(sent);
    EXPECT_TRUE(closed_by_server(c));
    EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  }
}

TEST(http_hardening_timeouts, a_kept_alive_connection_idles_past_the_head_timeout) {
  http_limits limits;
  limits.head_timeout_ms = 200;
  in_process_server srv{limits};
  client c{srv.port()};
  EXPECT_EQ(c.call(http::verb::get, "/healthz").status, 200u);
  std::this_thread::sleep_for(600ms);  // idle between requests: the idle timeout (60 s) applies
  EXPECT_EQ(c.call(http::verb::get, "/healthz").status, 200u);
}

/// Waits until the server counts `n` open connections (it accepts after the client connects).
void wait_for_connections(in_process_server& srv, std::size_t n) {
  for (int i = 0; i < 2000 && srv.http().connections() != n; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(srv.http().connections(), n);
}

TEST(http_hardening_connections,
     idle_anonymous_connections_leave_the_reserve_to_probes_and_tokens) {
  const std::string token = "admin-secret-token-1";
  http_limits limits;
  limits.connections = 8;
  limits.connections_reserve = 2;
  limits.head_timeout_ms = 60'000;  // the idle connections stay for the whole test
  in_process_server srv{limits, {{token, "*"}}};
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < 6; ++i) idle.push_back(std::make_unique<client>(srv.port()));
  wait_for_connections(srv, 6);
  // Six anonymous connections fill all but the reserve: a probe and a token still get in.
  EXPECT_EQ(get(srv.port(), "/healthz").status, 200u);
  EXPECT_EQ(get(srv.port(), "/v1/queues", token).status, 200u);
  auto anon = get(srv.port(), "/v1/queues");
  EXPECT_EQ(anon.status, 503u) << anon.body;
  EXPECT_EQ(anon.code(), "unavailable");
  // A probe in the reserve is not kept alive (its answer says so, then the server closes it);
  // an authenticated connection is.
  client probe{srv.port()};
  auto probed = probe.call(http::verb::get, "/healthz");
  EXPECT_EQ(probed.status, 200u);
  EXPECT_EQ(probed.header("Connection"), "close");
  EXPECT_TRUE(closed_by_server(probe));
  client authed{srv.port()};
  auto first = authed.call(http::verb::get, "/v1/queues", {}, token);
  EXPECT_EQ(first.status, 200u);
  EXPECT_NE(first.header("Connection"), "close");
  EXPECT_EQ(authed.call(http::verb::get, "/v1/queues", {}, token).status, 200u);
  // At the cap (8 open), a new connection takes the place of the idle one in the reserve.
  wait_for_connections(srv, 7);
  idle.push_back(std::make_unique<client>(srv.port()));
  wait_for_connections(srv, 8);
  EXPECT_EQ(get(srv.port(), "/healthz").status, 200u);
  EXPECT_TRUE(closed_by_server(*idle.back()));
  idle.pop_back();
  // With the reserve held by authenticated connections, a further connection is closed at once.
  wait_for_connections(srv, 7);
  client authed2{srv.port()};
  EXPECT_EQ(authed2.call(http::verb::get, "/v1/queues", {}, token).status, 200u);
  wait_for_connections(srv, 8);
  client over{srv.port()};
  EXPECT_TRUE(closed_by_server(over));
  auto m = authed.call(http::verb::get, "/metrics", {}, token);
  EXPECT_NE(m.body.find("laneq_http_connections 8\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("laneq_http_connections_max 8\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("laneq_http_connections_refused_total{reason=\"cap\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("laneq_http_connections_refused_total{reason=\"reserve\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("laneq_http_connections_refused_total{reason=\"evicted\"} 1\n"),
            std::string::npos);
}

/// A series' value in the /metrics text (-1 when absent).
double metric(std::uint16_t port, const std::string& series) {
  auto body = get(port, "/metrics").body;
  auto at = body.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(body.substr(at + series.size() + 2));
}

// The bytes of answers waiting for clients that do not read are counted, and an answer that
// would take them over limits.answer_bytes is refused with its leases given back.
TEST(http_hardening_answers,
     an_answer_past_the_bytes_held_for_clients_that_do_not_read_is_refused) {
  // A bound below one receive of 20 bodies of 900 KiB (about 18 MB): one such answer alone is
  // written all the same, a second is refused. The /metrics answers of the polling below are
  // small and do not count against the bound (when they did, the first answer was refused too
  // whenever one of them was being written: 2 of 8 runs on a loaded machine).
  const double bodies = 20 * 900 * 1024;  // bytes
  http_limits limits;
  limits.answer_bytes = 16 * 1024 * 1024;
  static_assert(20 * 900 * 1024 > 16 * 1024 * 1024);
  in_process_server srv{limits};
  const auto port = srv.port();
  ASSERT_EQ(put(port, "/v1/queues/q", "{}").status, 201u);
  const std::string big(900 * 1024, 'x');
  for (int i = 0; i < 40; ++i)
    ASSERT_EQ(post(port, "/v1/queues/q/messages", R"({"body": ")" + big + R"("})").status, 200u);
  const std::string take = R"({"max": 20, "lease_ms": 600000})";
  // A receiver that never reads: its 18 MB answer outgrows the socket buffers and waits. Its
  // receive buffer is fixed small: Linux grows it on loopback up to tcp_rmem's maximum (32 MiB
  // here), which can take the whole answer.
  client stuck{port};
  stuck.stream().socket().set_option(asio::socket_base::receive_buffer_size(4096));
  stuck.send_raw(
      "POST /v1/queues/q/receive HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(take.size()) + "\r\n\r\n" + take);
  for (int i = 0; i < 2000 && metric(port, "laneq_http_answer_bytes") <= bodies; ++i)
    std::this_thread::sleep_for(5ms);
  ASSERT_GT(metric(port, "laneq_http_answer_bytes"), bodies) << "the first answer is not held";
  // A second such answer would hold more than limits.answer_bytes: refused, leases given back.
  auto refused = post(port, "/v1/queues/q/receive", take);
  EXPECT_EQ(refused.status, 503u) << refused.body.substr(0, 200);
  EXPECT_EQ(refused.code(), "unavailable");
  EXPECT_EQ(metric(port, "laneq_http_answers_refused_total"), 1);
  auto in_flight = [&] {
    auto q = get(port, "/v1/queues/q");
    return q.obj().at("stats").as_object().at("in_flight").to_number<std::int64_t>();
  };
  for (int i = 0; i < 2000 && in_flight() != 20; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(in_flight(), 20);
  // Once the stuck client goes, the refused messages are delivered.
  stuck.stream().socket().close();
  for (int i = 0; i < 2000 && metric(port, "laneq_http_answer_bytes") > 1024 * 1024; ++i)
    std::this_thread::sleep_for(5ms);
  auto got = post(port, "/v1/queues/q/receive", take);
  ASSERT_EQ(got.status, 200u);
  EXPECT_EQ(got.obj().at("messages").as_array().size(), 20u);
}

}  // namespace
}  // namespace laneq::server::test
