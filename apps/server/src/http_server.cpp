// The Beast HTTP listener (apps/server/include/laneq/server/http_server.hpp).
#include "laneq/server/http_server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <type_traits>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "laneq/server/access_log.hpp"
#include "laneq/server/json_mapping.hpp"

namespace laneq::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct http_server::shared {
  router* route = nullptr;
  http_limits limits;
  std::shared_ptr<asio::ssl::context> tls;  ///< set: every connection is TLS (HTTPS only)
  std::mutex mtx;
  std::condition_variable idle;
  bool open = true;           ///< answers may still be posted to the io_context
  std::size_t in_flight = 0;  ///< guarded by mtx
  std::atomic<bool> stopping{false};
  connection_counts* counts = nullptr;  ///< the router's metrics'
  std::shared_ptr<access_log> log;      ///< the router's access log; null: off
  std::mutex log_mtx;
  std::chrono::steady_clock::time_point refused_logged{};  ///< guarded by log_mtx
  std::chrono::steady_clock::time_point accept_logged{};   ///< guarded by log_mtx

  void request_done() {
    std::lock_guard guard{mtx};
    --in_flight;
    if (in_flight == 0) idle.notify_all();
  }

  /// Writes `line` on stderr unless one was written for `last` within `refused_log_interval`.
  void log_limited(std::chrono::steady_clock::time_point& last, const std::string& line) {
    std::lock_guard guard{log_mtx};
    auto now = std::chrono::steady_clock::now();
    if (last != std::chrono::steady_clock::time_point{} &&
        now - last < http_bounds::refused_log_interval)
      return;
    last = now;
    std::cerr << line << '\n';
  }

  void log_refused(std::string_view why) {
    log_limited(refused_logged, "laneqd: HTTP connections refused (" + std::string{why} +
                                    "): " + std::to_string(counts->open) +
                                    " open, connection cap " + std::to_string(limits.connections) +
                                    ", reserve " + std::to_string(limits.connections_reserve) +
                                    "; refused so far: " + std::to_string(counts->refused_cap) +
                                    " at the cap, " + std::to_string(counts->refused_reserve) +
                                    " in the reserve, " + std::to_string(counts->evicted) +
                                    " idle in the reserve closed");
  }
};

namespace {

using shared_ptr_t = std::shared_ptr<http_server::shared>;

/// How long the acceptor waits after a failed accept before it accepts again.
constexpr std::chrono::milliseconds accept_backoff{100};

/// Answers this small are written even when `limits.answer_bytes` is reached (health checks,
/// errors, acks): with `connections_max` connections they add 256 MiB at most.
constexpr std::size_t small_answer_bytes = 64 * 1024;

using tls_stream = beast::ssl_stream<beast::tcp_stream>;

/// What the listener does with a connection of either kind (plain or TLS).
class connection {
 public:
  virtual ~connection() = default;
  virtual void run() = 0;
  /// Called by the listener at the cap: closes this connection if it was taken from the
  /// reserve and no request head has come in on it yet; false when one has (it is not idle).
  virtual bool evict() = 0;
  /// Whether `evict` may still close it.
  virtual bool evictable() const = 0;
};

/// How long a TLS connection's close waits for the client's close_notify after sending its own.
constexpr std::chrono::seconds tls_shutdown_timeout{2};

/// One connection: requests read, routed and answered in turn. `Stream` is `beast::tcp_stream`
/// (plain HTTP) or `tls_stream` (HTTPS, after a handshake bounded by the head timeout); the rest
/// is the same code, so every bound, limit and count applies to both alike.
template <class Stream>
class session : public connection, public std::enable_shared_from_this<session<Stream>> {
  static constexpr bool tls = std::is_same_v<Stream, tls_stream>;
  using std::enable_shared_from_this<session<Stream>>::shared_from_this;

 public:
  /// `reserved`: taken from the reserve (the anonymous connections had filled the rest).
  /// `context...`: the TLS context for a `tls_stream`, nothing for a plain one.
  template <class... Context>
  session(tcp::socket&& socket, shared_ptr_t sh, std::weak_ptr<asio::io_context> io, bool reserved,
          Context&... context)
      : stream_(std::move(socket), context...),
        sh_(std::move(sh)),
        io_(std::move(io)),
        reserved_(reserved) {
    ++sh_->counts->open;
    ++sh_->counts->anonymous;
    buffer_.reserve(http_bounds::read_buffer_bytes);
    // Answers are written whole; Nagle's algorithm would only hold back their last segment.
    beast::error_code ignored;
    lowest().socket().set_option(tcp::no_delay(true), ignored);
  }
  ~session() {
    release();
    --sh_->counts->open;
    if (!authenticated_) --sh_->counts->anonymous;
  }

  void run() override {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if constexpr (tls)
        self->handshake();
      else
        self->read();
    });
  }

  bool evict() override {
    if (!reserved_ || claimed_.exchange(true)) return false;
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
    return true;
  }

  bool evictable() const override { return reserved_ && !claimed_; }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  /// HTTPS: the handshake must end within the head timeout, as a request head must, so a client
  /// that connects and never handshakes holds its connection slot for seconds only. A client
  /// that speaks plain HTTP to the port is told so in a plain HTTP answer, then closed.
  void handshake() {
    lowest().expires_after(std::chrono::milliseconds{sh_->limits.head_timeout_ms});
    stream_.async_handshake(
        asio::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
          if (!ec) {
            self->handshaken_ = true;
            return self->read();
          }
          // Closed meanwhile (evicted, or laneqd is stopping): not a failed handshake. (A
          // timeout is one: it ends with beast::error::timeout.)
          if (ec == asio::error::operation_aborted) return self->close();
          ++self->sh_->counts->tls_handshake_failed;
          if (ec.category() == asio::error::get_ssl_category() &&
              ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST)
            return self->answer_plain_http();
          self->close();
        });
  }

  /// The answer to a plain HTTP request on the HTTPS port, written without TLS.
  void answer_plain_http() {
    auto r = error_response(
        error{errc::invalid_argument, "this port serves HTTPS only: use https:// (TLS)"});
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "laneqd");
    res->set(http::field::content_type, r.content_type);
    res->body() = r.take_body();
    res->keep_alive(false);
    res->prepare_payload();
    lowest().expires_after(std::chrono::milliseconds{sh_->limits.head_timeout_ms});
    http::async_write(
        lowest(), *res,
        [self = shared_from_this(), res](beast::error_code, std::size_t) { self->close(); });
  }

  void read() {
    if (sh_->stopping) return finish();
    if (sh_->log) note_request(nullptr);
    head_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(sh_->limits.header_bytes));
    parser_->body_limit(sh_->limits.body_bytes);
    if (served_ && buffer_.size() == 0) return await_request();
    read_header();
  }

  /// Between requests a kept-alive connection may idle (idle timeout); the head timeout starts
  /// with the next request's first bytes.
  void await_request() {
    lowest().expires_after(http_bounds::idle_timeout);
    stream_.async_read_some(buffer_.prepare(http_bounds::read_buffer_bytes),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (self->failed(ec)) return;
                              self->buffer_.commit(n);
                              self->read_header();
                            });
  }

  /// The whole head must arrive within the head timeout: a connection that holds a slot
  /// without asking anything is closed in seconds, not after the idle timeout.
  void read_header() {
    lowest().expires_after(std::chrono::milliseconds{sh_->limits.head_timeout_ms});
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&session::on_header, shared_from_this()));
  }

  /// Answers a failed read; false when there was nothing to answer (the caller carries on).
  bool failed(beast::error_code ec) {
    if (!ec) return false;
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
      close();
    } else if (ec == http::error::header_limit) {
      answer_now(error{errc::limit_exceeded, "the request line and header fields exceed " +
                                                 std::to_string(sh_->limits.header_bytes) +
                                                 " bytes"});
    } else if (ec == http::error::body_limit) {
      answer_now(body_too_large());
    } else {
      answer_now(error{errc::invalid_argument, "malformed HTTP request: " + ec.message()});
    }
    return true;
  }

  /// Whether the head has more fields or a longer target than the limits allow.
  std::optional<error> head_out_of_bounds(const http::request<http::string_body>& req) const {
    std::size_t fields = 0;
    for (auto it = req.begin(); it != req.end(); ++it) ++fields;
    if (fields > sh_->limits.header_count)
      return error{errc::limit_exceeded, "the request has " + std::to_string(fields) +
                                             " header fields, at most " +
                                             std::to_string(sh_->limits.header_count) + " allowed"};
    if (req.target().size() > sh_->limits.target_bytes)
      return error{errc::limit_exceeded, "the request target exceeds " +
                                             std::to_string(sh_->limits.target_bytes) + " bytes"};
    return std::nullopt;
  }

  /// A connection from the reserve is kept once its first request head is in, unless the
  /// listener evicted it first (its close is on the way: false).
  bool keep() {
    if (!reserved_ || kept_) return true;
    kept_ = true;
    return !claimed_.exchange(true);
  }

  /// A connection counts as anonymous until a request on it carries a valid token. One taken
  /// from the reserve is served health checks (then closed) and authenticated requests only.
  std::optional<error> admit(const http::request<http::string_body>& req) {
    if (!authenticated_) {
      auto a = req.find(http::field::authorization);
      if (a != req.end() && sh_->route->authenticated(a->value())) {
        authenticated_ = true;
        --sh_->counts->anonymous;
      }
    }
    if (!reserved_ || authenticated_) return std::nullopt;
    if (router::health_check(req.target())) {
      keep_alive_ = false;
      return std::nullopt;
    }
    ++sh_->counts->refused_reserve;
    sh_->log_refused("only health checks and authenticated requests in the reserve");
    return error{errc::unavailable,
                 "too many connections: only /healthz and authenticated requests are served"};
  }

  error body_too_large() const {
    return error{errc::limit_exceeded,
                 "the request body exceeds " + std::to_string(sh_->limits.body_bytes) + " bytes"};
  }

  /// The head is in: a client that sent `Expect: 100-continue` waits for `100 Continue` (or a
  /// final answer) before it sends the body.
  void on_header(beast::error_code ec, std::size_t) {
    if (failed(ec) || !keep()) return;
    lowest().expires_after(http_bounds::idle_timeout);  // the body, as before
    auto& req = parser_->get();
    if (sh_->log) note_request(&req);
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    if (auto e = head_out_of_bounds(req)) return answer_now(*e);
    if (auto e = admit(req)) return answer_now(*e);
    if (auto e = req.find(http::field::expect);
        e == req.end() || !beast::iequals(e->value(), "100-continue") || version_ < 11)
      return read_body();
    if (auto n = parser_->content_length(); n && *n > sh_->limits.body_bytes)
      return answer_now(body_too_large());
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(stream_, *cont,
                      [self = shared_from_this(), cont](beast::error_code wec, std::size_t) {
                        if (wec) return self->close();
                        self->read_body();
                      });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (failed(ec)) return;
    auto& req = parser_->get();
    http_request r;
    // HEAD is answered as GET without the body (`write`), so the framing stays right.
    head_ = req.method() == http::verb::head;
    r.method = head_ ? std::string{"GET"} : std::string{req.method_string()};
    r.target = std::string{req.target()};
    if (auto a = req.find(http::field::authorization); a != req.end())
      r.authorization = std::string{a->value()};
    r.body = std::move(req.body());
    served_ = true;
    parser_.reset();
    lowest().expires_never();
    {
      std::lock_guard guard{sh_->mtx};
      ++sh_->in_flight;
    }
    // The answer may come from any thread; it is written on this connection's strand.
    struct completion {
      std::shared_ptr<asio::io_context> io;  // destroyed last: the session's socket needs it
      shared_ptr_t sh;
      std::shared_ptr<session> s;
      void operator()(http_response resp) const {
        std::lock_guard guard{sh->mtx};
        if (!sh->open) {
          if (resp.abandon) resp.abandon();
          --sh->in_flight;
          if (sh->in_flight == 0) sh->idle.notify_all();
          return;
        }
        asio::post(s->stream_.get_executor(),
                   [s = s, resp = std::move(resp)]() mutable { s->write(std::move(resp), true); });
      }
    };
    sh_->route->handle(std::move(r), completion{io_.lock(), sh_, shared_from_this()});
  }

  /// Answers a request the router never saw (bad framing or limits); the connection closes.
  void answer_now(const error& e) {
    keep_alive_ = false;
    if (version_ == 0) version_ = 11;
    write(error_response(e), false);
  }

  void write(http_response r, bool counted) {
    if (counted && client_gone()) {
      // Nobody reads this answer: what it handed out (a receive's leases) goes back at once.
      if (r.abandon) r.abandon();
      sh_->request_done();
      return close();
    }
    auto body = r.take_body();
    if (!hold(body.size())) {
      // Other clients do not read their answers: this one would take memory past the bound.
      if (r.abandon) r.abandon();
      keep_alive_ = false;
      r = error_response(
          error{errc::unavailable, "answers waiting for their clients hold more than " +
                                       std::to_string(sh_->limits.answer_bytes) +
                                       " bytes (limits.answer_bytes); try again"});
      body = r.take_body();
      hold(body.size(), true);
    }
    if (sh_->log) log_answer(r, body.size());
    if (head_) return write_head(r, body.size(), counted);
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version_);
    set_fields(*res, r);
    res->body() = std::move(body);
    res->prepare_payload();
    send(res, counted);
  }

  /// Access log: the request being read starts now (`req`: its head is in; null: not yet).
  void note_request(const http::request<http::string_body>* req) {
    began_ = std::chrono::steady_clock::now();
    log_method_ = req ? std::string{req->method_string()} : std::string{"-"};
    log_path_ = req ? std::string{req->target()} : std::string{"-"};
  }

  /// Access log: the line of the answer `r` with a body of `bytes`.
  void log_answer(const http_response& r, std::size_t bytes) {
    access_entry e;
    e.at = std::chrono::system_clock::now();
    e.method = log_method_;
    e.path = log_path_;
    e.status = r.status;
    e.duration_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began_)
            .count();
    e.tenant = r.tenant;
    e.bytes = bytes;
    sh_->log->write(e);
  }

  /// Counts `n` bytes of answer until it is written; false (and nothing counted) when `n` is
  /// not a small answer, other answers over small_answer_bytes are being written, and `n` would
  /// take those past `limits.answer_bytes`. Small answers count in the metric only, so they never
  /// make a large answer wait: one large answer alone is always written.
  bool hold(std::size_t n, bool always = false) {
    bool large = n > small_answer_bytes;
    if (large) {
      auto& held_large = sh_->counts->large_answer_bytes;
      auto before = held_large.fetch_add(n);
      if (!always && before > 0 && before + n > sh_->limits.answer_bytes) {
        held_large -= n;
        ++sh_->counts->refused_answers;
        return false;
      }
    }
    sh_->counts->answer_bytes += n;
    held_ = n;
    held_large_ = large;
    return true;
  }

  void release() {
    sh_->counts->answer_bytes -= held_;
    if (held_large_) sh_->counts->large_answer_bytes -= held_;
    held_ = 0;
    held_large_ = false;
  }

  /// The answer to a HEAD request: GET's header fields, its Content-Length, no body.
  void write_head(const http_response& r, std::size_t length, bool counted) {
    auto res = std::make_shared<http::response<http::empty_body>>(
        static_cast<http::status>(r.status), version_);
    set_fields(*res, r);
    res->content_length(length);
    send(res, counted);
  }

  template <class Body>
  void set_fields(http::response<Body>& res, const http_response& r) {
    res.set(http::field::server, "laneqd");
    res.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.keep_alive(keep_alive_ && !sh_->stopping);
  }

  template <class Response>
  void send(const std::shared_ptr<Response>& res, bool counted) {
    lowest().expires_after(http_bounds::idle_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, counted](beast::error_code ec, std::size_t) {
                        self->release();
                        if (counted) self->sh_->request_done();
                        if (ec) return self->close();
                        if (res->need_eof()) return self->finish();
                        self->read();
                      });
  }

  /// Whether the client closed the connection (or it broke) while its request ran: the socket
  /// reads as ended. Pipelined bytes waiting to be read do not count. Over TLS a client that
  /// closes sends its close_notify first, so bytes are waiting: there the peer's FIN counts,
  /// seen by poll() as POLLRDHUP whether or not bytes are waiting.
  bool client_gone() {
    const int fd = lowest().socket().native_handle();
    if constexpr (tls) {
      pollfd p{fd, POLLRDHUP, 0};
      return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    } else {
      char byte = 0;
      auto n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
  }

  /// Closes the connection at once (the peer left, an error, a timeout, an eviction).
  void close() {
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().socket().close(ignored);
  }

  /// Ends a connection in good order after its last answer (no operation pending): over TLS
  /// with a close_notify, waiting for the client's at most `tls_shutdown_timeout`.
  void finish() {
    if constexpr (tls) {
      if (handshaken_) {
        handshaken_ = false;
        lowest().expires_after(tls_shutdown_timeout);
        return stream_.async_shutdown(
            [self = shared_from_this()](beast::error_code) { self->close(); });
      }
    }
    close();
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  shared_ptr_t sh_;
  /// Weak: the io_context holds sessions in its handlers (a strong pointer would be a cycle).
  std::weak_ptr<asio::io_context> io_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;           ///< the request being answered is a HEAD
  bool served_ = false;         ///< a request was read: the connection may idle between requests
  bool reserved_ = false;       ///< taken from the reserve (see `admit`)
  bool authenticated_ = false;  ///< a request on it carried a valid token
  bool kept_ = false;           ///< `keep` ran: a request head came in
  bool handshaken_ = false;     ///< TLS: the handshake is done and no shutdown has begun
  /// Taken by the first of `evict` (the listener) and `keep` (this connection's strand).
  std::atomic<bool> claimed_{false};
  std::size_t held_ = 0;  ///< bytes of the answer being written (`hold`)
  /// Access log only (set while it is on): the request being answered.
  std::chrono::steady_clock::time_point began_{};
  std::string log_method_, log_path_;
  bool held_large_ = false;  ///< ... over small_answer_bytes: counted against the bound
};

class listener : public std::enable_shared_from_this<listener> {
 public:
  listener(const std::shared_ptr<asio::io_context>& io, shared_ptr_t sh)
      : io_(io), acceptor_(asio::make_strand(*io)), sh_(std::move(sh)) {}

  result<std::uint16_t> bind(const std::string& host, std::uint16_t port) {
    beast::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec) return error{errc::invalid_argument, "http host '" + host + "': " + ec.message()};
    tcp::endpoint ep{addr, port};
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return error{errc::unavailable,
                   "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message()};
    return acceptor_.local_endpoint().port();
  }

  void accept() {
    auto io = io_.lock();
    if (!io) return;
    acceptor_.async_accept(asio::make_strand(*io),
                           beast::bind_front_handler(&listener::on_accept, shared_from_this()));
  }

  void stop() {
    asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
      self->timer_.cancel();
    });
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (!ec) admit(std::move(socket));
    if (ec && ec != asio::error::connection_aborted) return back_off(ec);
    accept();
  }

  /// Serves the connection, from the reserve when the anonymous ones fill the rest. When
  /// `limits.connections` are open, it takes the place of the oldest idle connection in the
  /// reserve (one that sent no request head), or is closed at once when there is none: idle
  /// connections cannot hold the reserve against probes. Only this strand opens sessions.
  void admit(tcp::socket socket) {
    const auto& l = sh_->limits;
    auto& c = *sh_->counts;
    const bool at_cap = c.open >= l.connections;
    if (sh_->stopping || (at_cap && !evict_idle())) {
      beast::error_code ignored;
      socket.close(ignored);
      if (sh_->stopping) return;
      ++c.refused_cap;
      return sh_->log_refused("connection cap reached");
    }
    bool reserved = at_cap || c.anonymous >= l.connections - l.connections_reserve;
    std::shared_ptr<connection> s;
    if (sh_->tls)
      s = std::make_shared<session<tls_stream>>(std::move(socket), sh_, io_, reserved, *sh_->tls);
    else
      s = std::make_shared<session<beast::tcp_stream>>(std::move(socket), sh_, io_, reserved);
    if (reserved) remember(s);
    s->run();
  }

  /// Closes the oldest idle connection from the reserve; false when there is none.
  bool evict_idle() {
    while (!reserved_.empty()) {
      auto s = reserved_.front().lock();
      reserved_.pop_front();
      if (s && s->evict()) {
        ++sh_->counts->evicted;
        sh_->log_refused("connection cap reached, an idle connection in the reserve closed");
        return true;
      }
    }
    return false;
  }

  /// Keeps `s` as a candidate for `evict_idle`, forgetting the ones that left or are in use.
  void remember(const std::shared_ptr<connection>& s) {
    if (reserved_.size() >= 2 * sh_->limits.connections_reserve + 16)
      std::erase_if(reserved_, [](const std::weak_ptr<connection>& w) {
        auto live = w.lock();
        return !live || !live->evictable();
      });
    reserved_.push_back(s);
  }

  /// After a failed accept (out of descriptors, EMFILE or ENFILE, say) the listening socket
  /// stays readable: accepting again at once would spin a core. Waits, then accepts again.
  void back_off(beast::error_code ec) {
    auto& c = *sh_->counts;
    if (ec == asio::error::no_descriptors)
      ++c.accept_emfile;
    else if (ec == boost::system::errc::too_many_files_open_in_system)
      ++c.accept_enfile;
    else
      ++c.accept_other;
    sh_->log_limited(sh_->accept_logged,
                     "laneqd: HTTP accept failed: " + ec.message() + "; accepting again every " +
                         std::to_string(accept_backoff.count()) +
                         " ms (descriptors used outside the connection cap, CAF clients say)");
    timer_.expires_after(accept_backoff);
    timer_.async_wait([self = shared_from_this()](beast::error_code wec) {
      if (!wec && self->acceptor_.is_open()) self->accept();
    });
  }

  std::weak_ptr<asio::io_context> io_;
  tcp::acceptor acceptor_;
  asio::steady_timer timer_{acceptor_.get_executor()};  ///< the back-off after a failed accept
  shared_ptr_t sh_;
  /// Connections taken from the reserve, oldest first, that may still be idle (`evict_idle`).
  std::deque<std::weak_ptr<connection>> reserved_;
};

}  // namespace

http_server::http_server(router& r, http_limits limits, std::size_t threads,
                         std::shared_ptr<boost::asio::ssl::context> tls)
    : io_(std::make_shared<asio::io_context>(static_cast<int>(threads))),
      shared_(std::make_shared<shared>()),
      thread_count_(threads == 0 ? 1 : threads) {
  shared_->route = &r;
  shared_->limits = limits;
  shared_->tls = std::move(tls);
  shared_->counts = &r.metrics()->connections();
  shared_->log = r.access_log_sink();
  shared_->counts->max = limits.connections;
}

http_server::~http_server() {
  shutdown();
}

result<std::uint16_t> http_server::start(const std::string& host, std::uint16_t port) {
  auto l = std::make_shared<listener>(io_, shared_);
  auto bound = l->bind(host, port);
  if (!bound) return bound.err();
  l->accept();
  listener_ = l;
  for (std::size_t i = 0; i < thread_count_; ++i)
    threads_.emplace_back([io = io_] {
      auto guard = asio::make_work_guard(*io);
      io->run();
    });
  return bound;
}

void http_server::stop_accepting() {
  shared_->stopping = true;
  if (listener_) std::static_pointer_cast<listener>(listener_)->stop();
}

bool http_server::drain(std::chrono::milliseconds timeout) {
  std::unique_lock guard{shared_->mtx};
  return shared_->idle.wait_for(guard, timeout, [this] { return shared_->in_flight == 0; });
}

void http_server::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  stop_accepting();
  {
    std::lock_guard guard{shared_->mtx};
    shared_->open = false;
  }
  io_->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  listener_.reset();
}

std::size_t http_server::connections() const {
  return shared_->counts->open;
}

std::size_t http_server::in_flight() const {
  std::lock_guard guard{shared_->mtx};
  return shared_->in_flight;
}

}  // namespace laneq::server
