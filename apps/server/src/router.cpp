// The HTTP API's routing (apps/server/include/laneq/server/router.hpp).
#include "laneq/server/router.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "laneq/actors/actor_base.hpp"
#include "laneq/server/console.hpp"
#include "laneq/server/json_mapping.hpp"
#include "laneq/spec_json.hpp"

namespace laneq::server {

namespace json = boost::json;

namespace {

using steady = std::chrono::steady_clock;
using state_ptr = std::shared_ptr<const router::shared_state>;

using run_atom = caf::atom_constant<caf::atom("run")>;
constexpr run_atom run_atom_v{};
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
constexpr sweep_atom sweep_atom_v{};

}  // namespace

/// What a call does on a gateway: sends its requests from it and answers in their handlers.
struct gateway_job {
  std::function<void(gateway&)> start;
};

}  // namespace laneq::server

// A job is a closure for an actor of this process; it never crosses a process boundary.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::server::gateway_job)

namespace laneq::server {

namespace {
struct call;
using call_ptr = std::shared_ptr<call>;
}  // namespace

/// A long-lived actor that HTTP calls run their CAF requests from: a call is a message to it,
/// where an actor per call cost its spawn and its exit (CAF tells its clock thread about every
/// exit), a few percent of the CAF worker that every actor of the broker shares.
///
/// It also bounds how long a call waits for the broker (`watch`). Its requests carry no CAF
/// timeout: each one was an entry in CAF's clock and a wake-up of the clock thread, whose CPU
/// alone was 3% of laneqd's with 1,000 groups over HTTP
/// (docs/decisions/0010-performance-history.md). Instead the gateway looks at the calls it watches
/// once a second, while it has any, and fails those past their deadline with `unavailable`, as a
/// CAF timeout did.
class gateway : public tsan_visible<caf::event_based_actor> {
 public:
  explicit gateway(caf::actor_config& cfg) : tsan_visible<caf::event_based_actor>(cfg) {}

  caf::behavior make_behavior() override {
    return {
        [this](run_atom, gateway_job& job) { job.start(*this); },
        [this](sweep_atom) { sweep(); },
    };
  }

  void on_exit() override;

  /// Fails `c` unless it is answered by `deadline`.
  void watch(const call_ptr& c, steady::time_point deadline);
  /// `c` (watched as `id`) is answered.
  void forget(std::uint64_t id) { watched_.erase(id); }

 private:
  void sweep();
  void arm() {
    if (armed_ || watched_.empty()) return;
    armed_ = true;
    delayed_send(this, std::chrono::seconds{1}, sweep_atom_v);
  }

  std::map<std::uint64_t, std::pair<steady::time_point, call_ptr>> watched_;
  std::uint64_t next_id_ = 0;
  bool armed_ = false;
};

namespace {

/// `e` with each lease of `leases` named as the client sent it (its wire form, `encode_lease`)
/// where the broker named it in its own text form (`to_string`): an error echoes what the user
/// passed.
error in_wire_form(error e, const std::vector<lease_token>& leases) {
  for (const auto& lease : leases) {
    auto internal = to_string(lease);
    auto wire = encode_lease(lease);
    for (auto at = e.message.find(internal); at != std::string::npos;
         at = e.message.find(internal, at + wire.size()))
      e.message.replace(at, internal.size(), wire);
  }
  return e;
}

/// One request in progress.
struct call {
  state_ptr st;
  route what = route::unknown;
  steady::time_point started;
  respond_fn done;
  gateway* watcher = nullptr;         ///< the gateway that bounds its wait, if any
  std::string tenant = "-";           ///< for the access log (http_response::tenant)
  std::vector<lease_token> leases{};  ///< the leases it names, which its errors name as sent
  std::uint64_t watch_id = 0;

  /// Answers the call; later answers (a reply after the gateway failed it late) are dropped,
  /// and what they handed out is given back (`http_response::abandon`).
  void finish(http_response resp) {
    if (!done) {
      if (resp.abandon) resp.abandon();  // nobody waits for it any more
      return;
    }
    if (watcher != nullptr) watcher->forget(watch_id);
    watcher = nullptr;
    auto secs = std::chrono::duration<double>(steady::now() - started).count();
    st->metrics->observe_request(what, resp.status, secs);
    auto d = std::exchange(done, nullptr);
    resp.tenant = std::move(tenant);
    d(std::move(resp));
  }
  void fail(const error& e) { finish(error_response(in_wire_form(e, leases))); }
  void fail(const caf::error& e) { fail(from_caf(e)); }
  void reply(unsigned status, const json::object& body) {
    http_response r;
    r.status = status;
    r.body = json::serialize(body);
    finish(std::move(r));
  }
};
error bad(std::string what) {
  return error{errc::invalid_argument, std::move(what)};
}

/// The endpoints (`routes()`), one per method and path; a path's methods in the order of its
/// 405's `Allow`.
constexpr std::array<route_entry, route_count - 1> route_table{{
    {"GET", "/healthz", route::healthz, false},
    {"GET", "/metrics", route::metrics, false},
    {"POST", "/v1/admin/checkpoint", route::checkpoint, true},
    {"GET", "/v1/queues", route::list_queues, false},
    {"PUT", "/v1/queues/{name}", route::put_queue, true},
    {"GET", "/v1/queues/{name}", route::get_queue, false},
    {"DELETE", "/v1/queues/{name}", route::delete_queue, false},
    {"PATCH", "/v1/queues/{name}", route::patch_queue, true},
    {"POST", "/v1/queues/{name}/messages", route::enqueue, true},
    {"GET", "/v1/queues/{name}/messages", route::peek, false},
    {"POST", "/v1/queues/{name}/purge", route::purge, true},
    {"POST", "/v1/queues/{name}/receive", route::receive, true},
    {"POST", "/v1/queues/{name}/ack", route::ack, true},
    {"POST", "/v1/queues/{name}/nack", route::nack, true},
    {"POST", "/v1/queues/{name}/extend", route::extend, true},
    {"GET", "/v1/queues/{name}/dead-letters", route::dead_letters, false},
    {"DELETE", "/v1/queues/{name}/dead-letters", route::delete_dead_letters, true},
    {"POST", "/v1/queues/{name}/dead-letters/redrive", route::redrive, true},
    {"DELETE", "/v1/queues/{name}/dead-letters/{id}", route::delete_dead_letter, false},
    {"GET", "/v1/queues/{name}/groups", route::groups, false},
    {"GET", "/v1/topics", route::list_topics, false},
    {"PUT", "/v1/topics/{name}", route::put_topic, true},
    {"GET", "/v1/topics/{name}", route::get_topic, false},
    {"DELETE", "/v1/topics/{name}", route::delete_topic, false},
    {"POST", "/v1/topics/{name}/messages", route::publish, true},
}};

/// Whether every route but `unknown` has exactly one entry in the table.
constexpr bool every_route_once() {
  for (std::size_t r = 0; r + 1 < route_count; ++r) {
    std::size_t n = 0;
    for (const auto& e : route_table) n += static_cast<std::size_t>(e.what) == r ? 1 : 0;
    if (n != 1) return false;
  }
  return true;
}
static_assert(every_route_once(), "route_table lists each route once");

/// The route, the queue or topic it names (percent-decoded) and the query string.
struct match {
  route what = route::unknown;
  std::string queue;  ///< the queue's or, when `topic`, the topic's name
  std::string item;   ///< what `{id}` matched (a dead letter's id), still percent-encoded
  bool topic = false;
  std::string query;
  std::string allowed;  ///< methods of the path, for 405 (set only then)
};

/// Whether `path` (from its leading '/') has the template's segments, any one where it has
/// `{name}` or `{id}`: those go to `name` and `item`, still percent-encoded.
bool fits(std::string_view tmpl, std::string_view path, std::string_view& name,
          std::string_view& item) {
  std::string_view named;
  std::string_view id;
  while (!tmpl.empty() && !path.empty()) {
    tmpl.remove_prefix(1);  // the '/' before each segment
    path.remove_prefix(1);
    auto t = tmpl.substr(0, tmpl.find('/'));
    auto p = path.substr(0, path.find('/'));
    if (t == "{name}")
      named = p;
    else if (t == "{id}")
      id = p;
    else if (t != p)
      return false;
    tmpl.remove_prefix(t.size());
    path.remove_prefix(p.size());
  }
  if (!tmpl.empty() || !path.empty()) return false;
  name = named;
  item = id;
  return true;
}

/// The methods of the entries whose template `path` fits, as 405's `Allow` lists them.
std::string allowed_methods(std::string_view path) {
  std::string out;
  std::string_view name;
  std::string_view item;
  for (const auto& e : route_table)
    if (fits(e.path, path, name, item)) out += (out.empty() ? "" : ", ") + std::string{e.method};
  return out;
}

/// Matches `target` against the table: the route (`unknown` when the path is served with other
/// methods only: 405), the name it carries decoded, and the query string.
result<match> match_route(std::string_view method, std::string_view target) {
  match m;
  auto q = target.find('?');
  auto path = target.substr(0, q);
  if (q != std::string_view::npos) m.query = std::string{target.substr(q + 1)};
  auto not_found = [&] {
    return error{errc::route_not_found,
                 "no endpoint " + std::string{method} + " " + std::string{target.substr(0, 200)}};
  };
  // Every segment must be non-empty: no "//", no trailing '/'.
  if (path.empty() || path.front() != '/' || path.back() == '/' ||
      path.find("//") != std::string_view::npos)
    return not_found();
  const route_entry* found = nullptr;
  std::string_view name;
  std::string_view item;
  for (const auto& e : route_table)
    if (fits(e.path, path, name, item) && (found == nullptr || e.method == method)) {
      found = &e;
      if (e.method == method) break;
    }
  if (found == nullptr) return not_found();
  // The last template that fitted set `name` and `item`: find the chosen one's again.
  (void)fits(found->path, path, name, item);
  m.item = std::string{item};
  if (found->method == method)
    m.what = found->what;
  else
    m.allowed = allowed_methods(path);  // the path exists, the method does not: 405
  if (found->path.find("{name}") == std::string_view::npos) return m;
  m.topic = found->path.starts_with("/v1/topics/");
  auto what = std::string{m.topic ? "topic" : "queue"};
  auto decoded = percent_decode(name);
  if (!decoded) return bad("the " + what + " name in the path has a malformed percent escape");
  if (decoded->empty()) return bad("the " + what + " name in the path is empty");
  m.queue = std::move(*decoded);
  return m;
}

/// The query parameters, percent-decoded; only `allowed` names may appear.
result<std::vector<std::pair<std::string, std::string>>> parse_query(
    std::string_view query, std::initializer_list<std::string_view> allowed) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto key = percent_decode(part.substr(0, eq));
    auto val =
        percent_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1));
    if (!key || !val) return bad("the query string has a malformed percent escape");
    bool known = false;
    for (auto a : allowed) known = known || a == *key;
    if (!known) return bad("query parameter '" + key->substr(0, 64) + "' is not known here");
    out.emplace_back(std::move(*key), std::move(*val));
  }
  return out;
}

/// The page a `GET .../groups` asks for (docs/api.md "Groups"): `state`, `limit`, `cursor`.
result<groups_query> groups_query_from(
    const std::vector<std::pair<std::string, std::string>>& params) {
  groups_query q;
  for (const auto& [k, v] : params) {
    if (k == "state") {
      if (v != "blocked" && v != "all") return bad("query parameter state must be blocked or all");
      q.blocked_only = v == "blocked";
    } else if (k == "limit") {
      auto n = decode_id(v);  // a positive decimal
      if (!n || n->value > limits::groups_page_max)
        return bad("query parameter limit must be 1 to " + std::to_string(limits::groups_page_max));
      q.limit = static_cast<std::uint32_t>(n->value);
    } else {
      auto after = decode_groups_cursor(v);
      if (!after)
        return bad("query parameter cursor is malformed (pass next_cursor back unchanged)");
      q.after = std::move(*after);
    }
  }
  return q;
}

/// A peek's query (docs/api.md "Peek"): `limit` (1 to limits::peek_max) and `group`.
result<peek_request> peek_request_from(
    const std::vector<std::pair<std::string, std::string>>& params) {
  peek_request q;
  for (const auto& [k, v] : params) {
    if (k == "group") {
      q.group.one = true;
      q.group.key = v;
      continue;
    }
    auto n = decode_id(v);  // a positive decimal
    if (!n || n->value > limits::peek_max)
      return bad("query parameter limit must be 1 to " + std::to_string(limits::peek_max));
    q.limit = static_cast<std::uint32_t>(n->value);
  }
  return q;
}

/// `force` of a queue delete: `true` or `false` (absent: false).
result<bool> force_from(const std::vector<std::pair<std::string, std::string>>& params) {
  bool force = false;
  for (const auto& [k, v] : params) {
    if (v != "true" && v != "false") return bad("query parameter force must be true or false");
    force = v == "true";
  }
  return force;
}

/// Whether a route refuses a request body: those that take none, except the probes, which
/// ignore what they are sent.
bool takes_no_body(route r) {
  if (r == route::healthz || r == route::metrics) return false;
  for (const auto& e : route_table)
    if (e.what == r) return !e.body;
  return false;
}

caf::timespan call_timeout(const call& c) {
  return std::chrono::duration_cast<caf::timespan>(c.st->call_timeout);
}

/// Why /healthz answers degraded, or "" when the store is healthy: its last batch failed, or
/// it refuses enqueues for space (docs/design/persistence.md, "A full disk").
std::string health_problem(const store_stats& s) {
  if (s.degraded) return s.reason;
  if (!s.low_space) return {};
  auto kib = [](std::uint64_t b) { return std::to_string(b >> 10) + " KiB"; };
  return "low disk space: about " + kib(s.free_bytes) + " free, reserve " + kib(s.reserve_bytes) +
         ": new messages are refused until space returns (deliveries and acks go on)";
}

json::object topic_to_json(const topic_spec& t) {
  json::object o;
  o["name"] = t.name();
  o["spec"] = topic_spec_to_json(t);
  return o;
}

/// How a reply is made of a CAF answer: `json::object` is 200 with it, `with_status` sets the
/// status, `result<json::object>` is 200 with the object or the error, `json_text` is 200 with
/// the text its function writes on the connection's I/O thread (deliveries_json,
/// dead_letters_json).
struct with_status {
  unsigned status;
  json::object body;
};
struct json_text {
  std::function<std::string()> render;
};
void answer(const call_ptr& c, const json::object& body) {
  c->reply(200, body);
}
void answer(const call_ptr& c, json_text text) {
  http_response r;
  r.render = std::move(text.render);
  c->finish(std::move(r));
}
void answer(const call_ptr& c, const with_status& r) {
  c->reply(r.status, r.body);
}
void answer(const call_ptr& c, const result<json::object>& r) {
  if (!r) return c->fail(r.err());
  c->reply(200, r.value());
}

/// The parameter types of a call operator, as `params<Ts...>`.
template <class... Ts>
struct params {};
template <class Op>
struct params_of;
template <class C, class R, class... Ts>
struct params_of<R (C::*)(Ts...) const> {
  using type = params<Ts...>;
};
template <class C, class R, class... Ts>
struct params_of<R (C::*)(Ts...)> {
  using type = params<Ts...>;
};

/// The response handler for `request(...).then`: answers the call with what `convert` makes of
/// the response. CAF checks a handler's argument types against the response, so they are taken
/// from `convert`'s (a lambda with concrete parameter types).
template <class F, class Args = typename params_of<decltype(&F::operator())>::type>
struct answer_with;
template <class F, class... Ts>
struct answer_with<F, params<Ts...>> {
  call_ptr c;
  F convert;
  void operator()(Ts... xs) { answer(c, convert(std::forward<Ts>(xs)...)); }
};

/// The error handler of a request: fails the call.
auto fail_call(const call_ptr& c) {
  return [c](caf::error& e) { c->fail(e); };
}

/// From `self`, sends the elements of `args` to `dest` and answers the call with what `convert`
/// makes of the response; a CAF error fails the call. The gateway bounds the wait (`watch`).
template <class Dest, class F, class Tuple>
void send_and_answer(gateway& self, const Dest& dest, const call_ptr& c, F convert, Tuple& args) {
  std::apply(
      [&](auto&... xs) {
        self.request(dest, caf::infinite, std::move(xs)...)
            .then(answer_with<F>{c, std::move(convert)}, fail_call(c));
      },
      args);
}

/// Sends `args` to `dest` from a gateway and answers the call with what `convert` makes of the
/// response; a CAF error fails the call, and so does no answer within the call timeout.
template <class Dest, class F, class... Args>
void ask(gateway_pool& gw, const call_ptr& c, Dest dest, F convert, Args&&... args) {
  gw.run([c, dest = std::move(dest), convert = std::move(convert),
          args = std::make_tuple(std::forward<Args>(args)...)](gateway& self) mutable {
    self.watch(c, steady::now() + c->st->call_timeout);
    send_and_answer(self, dest, c, std::move(convert), args);
  });
}

/// As `ask`, to the queue `name` (looked up first), failing the call when no answer came within
/// `timeout`.
template <class F, class... Args>
void ask_queue_within(gateway_pool& gw, const call_ptr& c, std::string name,
                      steady::duration timeout, F convert, Args&&... args) {
  gw.run([c, name = std::move(name), timeout, convert = std::move(convert),
          args = std::make_tuple(std::forward<Args>(args)...)](gateway& self) mutable {
    self.watch(c, steady::now() + timeout);
    self.request(c->st->admin, caf::infinite, lookup_atom_v, name)
        .then([&self, c, convert = std::move(convert), args = std::move(args)](
                  queue_api& q) mutable { send_and_answer(self, q, c, std::move(convert), args); },
              fail_call(c));
  });
}

/// As `ask`, to the queue `name` (looked up first).
template <class F, class... Args>
void ask_queue(gateway_pool& gw, const call_ptr& c, std::string name, F convert, Args&&... args) {
  ask_queue_within(gw, c, std::move(name), c->st->call_timeout, std::move(convert),
                   std::forward<Args>(args)...);
}

/// Leases for the client of a receive: its answer renders the deliveries on the I/O thread, and
/// if the client has gone when the answer is to be written, each message is nacked back to `q`
/// at once (an attempt counted, as for an expired lease) instead of staying leased to nobody.
http_response deliveries_answer(queue_api q, std::vector<delivery> ds) {
  auto shared = std::make_shared<std::vector<delivery>>(std::move(ds));
  http_response r;
  r.render = [shared] { return deliveries_json(*shared); };
  r.abandon = [q = std::move(q), shared] {
    // Once per lease: an ordered batch's first message (batch_index 0) stands for it, and its
    // nack returns the whole batch, the first message's attempt counted (O12).
    for (const auto& d : *shared)
      if (d.batch_index == 0)
        caf::anon_send(q, nack_atom_v, d.lease, nack_request{nack_kind::retry, 0});
  };
  return r;
}

/// A receive: as `ask_queue_within`, the wait bounded by the call timeout beyond the long poll.
void ask_receive(gateway_pool& gw, const call_ptr& c, std::string name, receive_request req) {
  gw.run([c, name = std::move(name), req](gateway& self) {
    self.watch(c, steady::now() + c->st->call_timeout + std::chrono::microseconds{req.wait_us});
    self.request(c->st->admin, caf::infinite, lookup_atom_v, name)
        .then(
            [&self, c, req](queue_api& q) {
              self.request(q, caf::infinite, receive_atom_v, req)
                  .then(
                      [c, q](std::vector<delivery>& ds) {
                        c->finish(deliveries_answer(q, std::move(ds)));
                      },
                      fail_call(c));
            },
            fail_call(c));
  });
}

/// `{key: v}`.
template <class V>
json::object one_field(std::string_view key, V&& v) {
  json::object o;
  o[key] = std::forward<V>(v);
  return o;
}

/// `{key: [...]}` with `convert` of each element of `xs` that `keep` accepts.
template <class T, class F, class Keep>
json::object array_reply(std::string_view key, const std::vector<T>& xs, F convert, Keep keep) {
  json::array arr;
  arr.reserve(xs.size());
  for (const auto& x : xs)
    if (keep(x)) arr.emplace_back(convert(x));
  return one_field(key, std::move(arr));
}

/// `{key: [to_json(x), ...]}` for every element of `xs`.
template <class T>
json::object array_reply(std::string_view key, const std::vector<T>& xs) {
  return array_reply(
      key, xs, [](const T& x) { return to_json(x); }, [](const T&) { return true; });
}

json::array ids_to_json(const std::vector<message_id>& ids) {
  json::array out;
  out.reserve(ids.size());
  for (auto id : ids) out.emplace_back(encode_id(id));
  return out;
}

}  // namespace

std::span<const route_entry> routes() {
  return route_table;
}

http_response error_response(const error& e) {
  http_response r;
  r.status = http_status(e.code);
  r.body = error_body(e);
  if (e.code == errc::unauthorized) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  // Backpressure (docs/api.md): a depth drains at the consumers' pace; the client waits this
  // long before it sends again (and longer each time the queue is still full).
  if (e.code == errc::queue_full)
    r.headers.emplace_back("Retry-After", std::to_string(limits::queue_full_retry_after_s));
  return r;
}

gateway_pool::gateway_pool(caf::actor_system& sys) {
  auto n = std::max<std::size_t>(1, sys.scheduler().num_workers());
  for (std::size_t i = 0; i < n; ++i) actors_.push_back(sys.spawn<gateway>());
}

gateway_pool::~gateway_pool() {
  for (auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

void gateway::watch(const call_ptr& c, steady::time_point deadline) {
  c->watcher = this;
  c->watch_id = next_id_++;
  watched_.emplace(c->watch_id, std::make_pair(deadline, c));
  arm();
}

void gateway::on_exit() {
  for (auto& [id, w] : watched_) w.second->watcher = nullptr;  // never answered now
  watched_.clear();
}

void gateway::sweep() {
  armed_ = false;
  auto now = steady::now();
  std::vector<call_ptr> late;
  for (auto& [id, w] : watched_)
    if (w.first <= now) late.push_back(w.second);
  for (auto& c : late)
    c->fail(
        error{errc::unavailable,
              "the broker did not answer within " +
                  std::to_string(
                      std::chrono::duration_cast<std::chrono::seconds>(now - c->started).count()) +
                  " s"});
  arm();
}

void gateway_pool::run(std::function<void(gateway&)> start) {
  auto i = next_.fetch_add(1, std::memory_order_relaxed) % actors_.size();
  caf::anon_send(actors_[i], run_atom_v, gateway_job{std::move(start)});
}

router::router(caf::actor_system& sys, admin_actor admin, store_actor store, http_limits limits,
               std::vector<token_config> tokens, std::chrono::milliseconds call_timeout)
    : gateways_(std::make_unique<gateway_pool>(sys)),
      state_(std::make_shared<const shared_state>(shared_state{
          std::move(admin), std::move(store), limits,
          std::make_shared<auth_source>(std::make_shared<const authenticator>(std::move(tokens))),
          std::make_shared<server_metrics>(), call_timeout})) {}

bool router::authenticated(std::string_view authorization) const {
  auto auth = state_->auth->get();
  return auth->enabled() && auth->authenticate(authorization).ok();
}

bool router::health_check(std::string_view target) {
  return target.substr(0, target.find('?')) == "/healthz";
}

/// A request `admit` accepted, as its route's function takes it.
struct router::routed {
  call_ptr c;
  match m;
  principal who{"*"};  ///< whose token it carries ("*": an admin's, or no authentication)
  std::string name;    ///< the queue's or topic's full name, when the path names one
  /// The body: the parser's tree moved in, which keeps the request's arena (assigning it to an
  /// object made beforehand copied the whole tree into the default allocator, as the two
  /// memory resources differ: about 1,500 instructions per message enqueued over HTTP).
  std::optional<json::object> parsed_body;
  json::object& obj() { return *parsed_body; }
  std::vector<std::pair<std::string, std::string>> query;  ///< the query parameters, decoded
};

void router::handle(http_request req, respond_fn done) {
  // The web console's static files: no token, no broker, not an API route (console.hpp).
  if (console_target(req.target)) return done(console_response(req.method, req.target));
  routed r;
  r.c = std::make_shared<call>(call{state_, route::unknown, steady::now(), std::move(done)});
  if (!admit(req, r)) return;
  switch (r.m.what) {
    case route::healthz: return route_health(r);
    case route::metrics: return route_metrics(r);
    case route::list_queues:
    case route::put_queue:
    case route::get_queue:
    case route::delete_queue:
    case route::patch_queue: return route_queues(r);
    case route::enqueue: return route_enqueue(r);
    case route::receive: return route_receive(r);
    case route::ack:
    case route::nack:
    case route::extend: return route_leases(r);
    case route::dead_letters:
    case route::redrive:
    case route::delete_dead_letters:
    case route::delete_dead_letter: return route_dead_letters(r);
    case route::purge:
    case route::peek: return route_purge_peek(r);
    case route::groups: return route_groups(r);
    case route::list_topics:
    case route::put_topic:
    case route::get_topic:
    case route::delete_topic:
    case route::publish: return route_topics(r);
    case route::checkpoint: return route_checkpoint(r);
    case route::unknown: break;
  }
  r.c->fail(error{errc::route_not_found, "no endpoint"});
}

bool router::admit(const http_request& req, routed& r) const {
  const auto& c = r.c;
  auto matched = match_route(req.method, req.target);
  if (!matched) {
    c->fail(matched.err());
    return false;
  }
  r.m = std::move(matched.value());
  const auto& m = r.m;
  if (m.what == route::unknown) {
    auto resp = error_response(
        error{errc::route_not_found,
              req.method.substr(0, 16) + " is not allowed here (allowed: " + m.allowed + ")"});
    resp.status = 405;
    resp.headers.emplace_back("Allow", m.allowed);
    c->finish(std::move(resp));
    return false;
  }
  c->what = m.what;
  const auto& st = *state_;
  auto refuse = [&c](const error& e) {
    c->fail(e);
    return false;
  };

  // healthz is open (probes carry no token); everything else needs one when tokens are set.
  if (m.what != route::healthz) {
    auto auth = st.auth->get();  // one set of tokens for the whole request
    auto p = auth->authenticate(req.authorization);
    if (!p) return refuse(p.err());
    r.who = std::move(p.value());
    if (auth->enabled()) c->tenant = r.who.tenant;
  }
  if (m.what == route::metrics && !r.who.admin())
    return refuse(error{errc::forbidden, "/metrics needs an admin (tenant \"*\") token"});
  if (m.what == route::checkpoint && !r.who.admin())
    return refuse(
        error{errc::forbidden, "/v1/admin/checkpoint needs an admin (tenant \"*\") token"});
  if (!m.queue.empty()) {
    auto resolved = authenticator::resolve(r.who, m.queue, m.topic ? "topic" : "queue");
    if (!resolved) return refuse(resolved.err());
    r.name = std::move(resolved.value());
  }
  auto body = parse_body(req.body);
  if (!body) return refuse(body.err());
  r.parsed_body.emplace(std::move(body.value()));
  // Only the dead-letter and group listings take query parameters.
  auto query = m.what == route::dead_letters   ? parse_query(m.query, {"max"})
               : m.what == route::groups       ? parse_query(m.query, {"state", "limit", "cursor"})
               : m.what == route::peek         ? parse_query(m.query, {"limit", "group"})
               : m.what == route::delete_queue ? parse_query(m.query, {"force"})
                                               : parse_query(m.query, {});
  if (!query) return refuse(query.err());
  if (takes_no_body(m.what) && !r.obj().empty()) return refuse(bad("this endpoint takes no body"));
  r.query = std::move(query.value());
  return true;
}

void router::route_health(routed& r) const {
  gateways_->run([c = r.c](gateway& self) {
    self.request(c->st->store, call_timeout(*c), stats_atom_v)
        .then(
            [c](store_stats& s) {
              auto reason = health_problem(s);
              json::object o;
              o["status"] = reason.empty() ? "ok" : "degraded";
              if (!reason.empty()) o["reason"] = reason;
              c->reply(reason.empty() ? 200 : 503, o);
            },
            [c](caf::error& e) {
              json::object o;
              o["status"] = "degraded";
              o["reason"] = "the store did not answer: " + from_caf(e).message;
              c->reply(503, o);
            });
  });
}

void router::route_metrics(routed& r) const {
  gateways_->run([c = r.c](gateway& self) {
    struct gather {
      std::vector<queue_stats> queues;
      std::optional<store_stats> store;
      std::size_t remaining = 0;
    };
    auto g = std::make_shared<gather>();
    auto started = std::chrono::steady_clock::now();
    auto complete = [c, g, started] {
      if (--g->remaining > 0) return;
      http_response resp;
      resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
      resp.body = c->st->metrics->render(g->queues, g->store ? &*g->store : nullptr);
      c->st->metrics->note_scrape(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      c->finish(std::move(resp));
    };
    self.request(c->st->admin, call_timeout(*c), list_atom_v)
        .then(
            [&self, c, g, complete](std::vector<std::string>& names) {
              g->remaining = names.size() + 1;
              self.request(c->st->store, call_timeout(*c), stats_atom_v)
                  .then(
                      [g, complete](store_stats& s) {
                        g->store = std::move(s);
                        complete();
                      },
                      [complete](caf::error&) { complete(); });
              for (auto& n : names)
                self.request(c->st->admin, call_timeout(*c), describe_atom_v, n)
                    .then(
                        [g, complete](queue_description& d) {
                          g->queues.push_back(std::move(d.stats));
                          complete();
                        },
                        // A queue deleted meanwhile is left out.
                        [complete](caf::error&) { complete(); });
            },
            fail_call(c));
  });
}

void router::route_queues(routed& r) const {
  const auto& st = *state_;
  auto& gw = *gateways_;
  const auto& c = r.c;
  const auto& name = r.name;
  switch (r.m.what) {
    case route::list_queues: {
      return ask(
          gw, c, st.admin,
          [who = r.who](std::vector<std::string>& names) {
            std::sort(names.begin(), names.end());
            return array_reply(
                "queues", names, [](const std::string& n) { return n; },
                [&who](const std::string& n) { return authenticator::may_use(who, n); });
          },
          list_atom_v);
    }
    case route::put_queue: {
      auto parsed = queue_spec_from_json(name, json::value(r.obj()));
      if (!parsed.ok()) return c->fail(combine(parsed.errors));
      auto spec_json = queue_spec_to_json(parsed.spec);
      return ask(
          gw, c, st.admin,
          [name, spec_json = std::move(spec_json)](queue_api&, bool created) {
            json::object o;
            o["name"] = name;
            o["created"] = created;
            o["spec"] = spec_json;
            return with_status{created ? 201u : 200u, std::move(o)};
          },
          create_atom_v, std::move(parsed.spec));
    }
    case route::patch_queue: {
      return ask(
          gw, c, st.admin,
          [name](queue_spec& spec) {
            json::object o;
            o["name"] = name;
            o["spec"] = queue_spec_to_json(spec);
            return o;
          },
          update_atom_v, name, json::serialize(r.obj()));
    }
    case route::get_queue: {
      return ask(
          gw, c, st.admin,
          [name](queue_description& d) {
            json::object o;
            o["name"] = name;
            o["summary"] = d.summary;
            boost::system::error_code ec;
            auto spec = json::parse(d.spec_json, ec);
            if (!ec) o["spec"] = std::move(spec);
            o["stats"] = to_json(d.stats);
            return o;
          },
          describe_atom_v, name);
    }
    case route::delete_queue: {
      auto force = force_from(r.query);
      if (!force) return c->fail(force.err());
      return ask(
          gw, c, st.admin, [name](caf::ok_atom) { return one_field("deleted", name); }, drop_atom_v,
          name, force.value());
    }
    default: return;  // handle sends only the routes above here
  }
}

void router::route_enqueue(routed& r) const {
  auto msgs = messages_from_json(r.obj(), state_->limits.batch);
  if (!msgs) return r.c->fail(msgs.err());
  ask_queue(
      *gateways_, r.c, r.name,
      [](std::vector<message_id>& ids) { return one_field("ids", ids_to_json(ids)); },
      enqueue_atom_v, std::move(msgs.value()));
}

void router::route_receive(routed& r) const {
  const auto& st = *state_;
  auto rr = receive_from_json(r.obj());
  if (!rr) return r.c->fail(rr.err());
  if (rr.value().max > st.limits.batch)
    return r.c->fail(error{errc::limit_exceeded, "max is " + std::to_string(rr.value().max) +
                                                     ", at most " +
                                                     std::to_string(st.limits.batch) + " allowed"});
  ask_receive(*gateways_, r.c, r.name, rr.value());
}

void router::route_leases(routed& r) const {
  auto& gw = *gateways_;
  const auto& c = r.c;
  const auto& name = r.name;
  switch (r.m.what) {
    case route::ack: {
      auto ll = leases_from_json(r.obj(), state_->limits.batch);
      if (!ll) return c->fail(ll.err());
      c->leases = ll.value().leases;
      if (auto count = ll.value().count) {
        // An ordered batch's first `count` messages (O12): the lease goes on over the rest.
        auto lease = ll.value().leases.front();
        return ask_queue(
            gw, c, name,
            [rest = lease.batch > *count ? lease.batch - *count : 0](std::uint64_t acked) {
              json::object o;
              o["acked"] = acked;
              o["failed"] = json::array{};
              o["remaining"] = rest;
              return o;
            },
            ack_atom_v, lease, *count);
      }
      auto total = ll.value().leases.size();
      auto single = ll.value().single;
      return ask_queue(
          gw, c, name,
          [total, single](std::vector<lease_outcome>& failed) -> result<json::object> {
            if (single && !failed.empty()) return failed.front().err;
            json::array arr;
            for (const auto& f : failed) {
              json::object e;
              e["lease"] = encode_lease(f.lease);
              e["error"] =
                  json::parse(error_body(in_wire_form(f.err, {f.lease}))).as_object()["error"];
              arr.emplace_back(std::move(e));
            }
            json::object o;
            o["acked"] = total - failed.size();
            o["failed"] = std::move(arr);
            return o;
          },
          ack_atom_v, std::move(ll.value().leases));
    }
    case route::nack: {
      auto nr = nack_from_json(r.obj());
      if (!nr) return c->fail(nr.err());
      c->leases = {nr.value().first};
      return ask_queue(
          gw, c, name,
          [dead = nr.value().second.kind == nack_kind::dead_letter](caf::ok_atom) {
            json::object o;
            o["nacked"] = true;
            o["dead_lettered"] = dead;
            return o;
          },
          nack_atom_v, nr.value().first, nr.value().second);
    }
    case route::extend: {
      auto er = extend_from_json(r.obj());
      if (!er) return c->fail(er.err());
      c->leases = {er.value().first};
      return ask_queue(
          gw, c, name,
          [](timestamp deadline) { return one_field("lease_deadline_ms", deadline.ms()); },
          extend_atom_v, er.value().first, er.value().second);
    }
    default: return;  // handle sends only the routes above here
  }
}

void router::route_dead_letters(routed& r) const {
  switch (r.m.what) {
    case route::redrive: return route_redrive(r);
    case route::delete_dead_letters: {
      auto ids = dead_letter_ids_from_json(r.obj());
      if (!ids) return r.c->fail(ids.err());
      return ask_queue(
          *gateways_, r.c, r.name, [](std::uint64_t n) { return one_field("deleted", n); },
          dlq_atom_v, drop_atom_v, std::move(ids.value()));
    }
    case route::delete_dead_letter: {
      auto text = percent_decode(r.m.item);
      auto id = text ? decode_id(*text) : std::nullopt;
      if (!id)
        return r.c->fail(bad("the dead letter id in the path, '" + r.m.item.substr(0, 64) +
                             "', is not a message id"));
      return ask_queue(
          *gateways_, r.c, r.name, [](std::uint64_t n) { return one_field("deleted", n); },
          dlq_atom_v, drop_atom_v, std::vector<message_id>{*id});
    }
    default: break;
  }
  std::uint32_t max = 100;
  for (const auto& [k, v] : r.query) {
    auto n = decode_id(v);  // a positive decimal
    if (!n || n->value > limits::redrive_batch_max)
      return r.c->fail(
          bad("query parameter max must be 1 to " + std::to_string(limits::redrive_batch_max)));
    max = static_cast<std::uint32_t>(n->value);
  }
  ask_queue(
      *gateways_, r.c, r.name,
      [](std::vector<dead_letter>& ds) {
        return json_text{[ds = std::move(ds)] { return dead_letters_json(ds); }};
      },
      dlq_atom_v, max);
}

void router::route_redrive(routed& r) const {
  auto ids = redrive_from_json(r.obj(), limits::redrive_batch_max);
  if (!ids) return r.c->fail(ids.err());
  auto to = redrive_target_from_json(r.obj());
  if (!to) return r.c->fail(to.err());
  if (!to.value())
    return ask_queue(
        *gateways_, r.c, r.name, [](std::uint64_t n) { return one_field("redriven", n); },
        redrive_atom_v, std::move(ids.value()));
  // Into another queue: a tenant's token names it bare, as in its URLs.
  auto target = authenticator::resolve(r.who, *to.value(), "queue");
  if (!target) return r.c->fail(target.err());
  ask(
      *gateways_, r.c, state_->admin, [](std::uint64_t n) { return one_field("redriven", n); },
      redrive_atom_v, r.name, std::move(ids.value()), std::move(target.value()));
}

void router::route_purge_peek(routed& r) const {
  if (r.m.what == route::purge) {
    auto which = purge_from_json(r.obj());
    if (!which) return r.c->fail(which.err());
    return ask_queue(
        *gateways_, r.c, r.name, [](std::uint64_t n) { return one_field("purged", n); },
        purge_atom_v, std::move(which.value()));
  }
  auto req = peek_request_from(r.query);
  if (!req) return r.c->fail(req.err());
  ask_queue(
      *gateways_, r.c, r.name,
      [](std::vector<peeked_message>& ms) {
        return json_text{[ms = std::move(ms)] { return peeked_json(ms); }};
      },
      peek_atom_v, std::move(req.value()));
}

void router::route_groups(routed& r) const {
  auto q = groups_query_from(r.query);
  if (!q) return r.c->fail(q.err());
  ask_queue(
      *gateways_, r.c, r.name,
      [](groups_page& page) {
        auto out = array_reply("groups", page.groups);
        if (!page.next.empty()) out["next_cursor"] = encode_groups_cursor(page.next);
        return out;
      },
      groups_atom_v, std::move(q.value()));
}

void router::route_topics(routed& r) const {
  const auto& st = *state_;
  auto& gw = *gateways_;
  const auto& c = r.c;
  const auto& name = r.name;
  switch (r.m.what) {
    case route::list_topics: {
      return ask(
          gw, c, st.admin,
          [who = r.who](std::vector<topic_spec>& topics) {
            return array_reply("topics", topics, topic_to_json, [&who](const topic_spec& t) {
              return authenticator::may_use(who, t.name());
            });
          },
          topic_atom_v, list_atom_v);
    }
    case route::put_topic: {
      // A tenant's token names its queues bare, as in their URLs.
      if (auto* qs = r.obj().if_contains("queues"); qs != nullptr && qs->is_array())
        for (auto& q : qs->as_array())
          if (q.is_string()) {
            auto full = authenticator::resolve(r.who, std::string{q.as_string()});
            if (!full) return c->fail(full.err());
            q = full.value();
          }
      auto parsed = topic_spec_from_json(name, json::value(r.obj()));
      if (!parsed.ok()) return c->fail(combine(parsed.errors));
      auto out = topic_to_json(parsed.spec);
      return ask(
          gw, c, st.admin,
          [out = std::move(out)](bool created) mutable {
            out["created"] = created;
            return with_status{created ? 201u : 200u, std::move(out)};
          },
          create_atom_v, std::move(parsed.spec));
    }
    case route::get_topic: {
      return ask(
          gw, c, st.admin, [](topic_spec& t) { return topic_to_json(t); }, topic_atom_v,
          lookup_atom_v, name);
    }
    case route::delete_topic: {
      return ask(
          gw, c, st.admin, [name](caf::ok_atom) { return one_field("deleted", name); },
          topic_atom_v, drop_atom_v, name);
    }
    case route::publish: {
      auto msgs = messages_from_json(r.obj(), st.limits.batch);
      if (!msgs) return c->fail(msgs.err());
      return ask(
          gw, c, st.admin,
          [](std::vector<topic_enqueued>& per_queue) {
            json::object ids;
            for (const auto& q : per_queue) ids[q.queue] = ids_to_json(q.ids);
            return one_field("ids", std::move(ids));
          },
          publish_atom_v, name, std::move(msgs.value()));
    }
    default: return;  // handle sends only the routes above here
  }
}

void router::route_checkpoint(routed& r) const {
  auto dir = checkpoint_dir_from_json(r.obj());
  if (!dir) return r.c->fail(dir.err());
  gateways_->run([c = r.c, dir = std::move(dir.value())](gateway& self) mutable {
    // A checkpoint flushes and links (or copies) the whole store: no HTTP call timeout.
    self.request(c->st->admin, caf::infinite, checkpoint_atom_v, std::move(dir))
        .then([c](checkpoint_info& info) { c->reply(200, to_json(info)); },
              [c](caf::error& e) { c->fail(e); });
  });
}

}  // namespace laneq::server
