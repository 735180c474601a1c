// The HTTP API's routing (apps/server/include/laneq/server/router.hpp).
#include "laneq/server/router.hpp"

#include <chrono>
#include <string_view>

#include "laneq/server/json_mapping.hpp"
#include "laneq/spec_json.hpp"

namespace laneq::server {

namespace json = boost::json;

namespace {

using steady = std::chrono::steady_clock;
using state_ptr = std::shared_ptr<const router::shared_state>;

/// Runs a start function on its first activation and lives until the requests it sent are
/// answered (an empty behavior with pending responses keeps a CAF 0.17 actor alive).
class bridge : public caf::event_based_actor {
 public:
  using start_fn = std::function<void(caf::event_based_actor*)>;
  bridge(caf::actor_config& cfg, start_fn start)
      : caf::event_based_actor(cfg), start_(std::move(start)) {}

  caf::behavior make_behavior() override {
    auto start = std::move(start_);
    start(this);
    return {};
  }

 private:
  start_fn start_;
};

/// One request in progress.
struct call {
  state_ptr st;
  route what = route::unknown;
  steady::time_point started;
  respond_fn done;

  void finish(http_response resp) {
    auto secs = std::chrono::duration<double>(steady::now() - started).count();
    st->metrics->observe_request(what, resp.status, secs);
    auto d = std::move(done);
    d(std::move(resp));
  }
  void fail(const error& e) { finish(error_response(e)); }
  void fail(const caf::error& e) { fail(from_caf(e)); }
  void reply(unsigned status, const json::object& body) {
    http_response r;
    r.status = status;
    r.body = json::serialize(body);
    finish(std::move(r));
  }
};
using call_ptr = std::shared_ptr<call>;

error bad(std::string what) {
  return error{errc::invalid_argument, std::move(what)};
}

/// The route, the queue or topic it names (percent-decoded) and the query string.
struct match {
  route what = route::unknown;
  std::string queue;  ///< the queue's or, when `topic`, the topic's name
  bool topic = false;
  std::string query;
  std::string_view allowed;  ///< methods of the path, for 405
};

result<match> match_route(std::string_view method, std::string_view target) {
  match m;
  auto q = target.find('?');
  auto path = target.substr(0, q);
  if (q != std::string_view::npos) m.query = std::string{target.substr(q + 1)};
  std::vector<std::string_view> seg;
  if (path.empty() || path.front() != '/')
    return error{errc::route_not_found, "no endpoint " + std::string{target.substr(0, 200)}};
  path.remove_prefix(1);
  while (true) {
    auto slash = path.find('/');
    seg.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  auto not_found = [&] {
    return error{errc::route_not_found,
                 "no endpoint " + std::string{method} + " " + std::string{target.substr(0, 200)}};
  };
  for (auto s : seg)
    if (s.empty()) return not_found();
  auto is = [&](std::string_view want) { return method == want; };
  auto pick =
      [&](std::string_view allowed,
          std::initializer_list<std::pair<std::string_view, route>> by_method) -> result<match> {
    m.allowed = allowed;
    for (auto [verb, r] : by_method)
      if (is(verb)) {
        m.what = r;
        return m;
      }
    m.what = route::unknown;  // the path exists, the method does not: 405
    return m;
  };
  if (seg.size() == 1 && seg[0] == "metrics") return pick("GET", {{"GET", route::metrics}});
  if (seg.size() == 1 && seg[0] == "healthz") return pick("GET", {{"GET", route::healthz}});
  if (seg.size() == 3 && seg[0] == "v1" && seg[1] == "admin" && seg[2] == "checkpoint")
    return pick("POST", {{"POST", route::checkpoint}});
  if (seg.size() >= 2 && seg[0] == "v1" && seg[1] == "topics") {
    if (seg.size() == 2) return pick("GET", {{"GET", route::list_topics}});
    auto topic = percent_decode(seg[2]);
    if (!topic) return bad("the topic name in the path has a malformed percent escape");
    if (topic->empty()) return bad("the topic name in the path is empty");
    m.queue = std::move(*topic);
    m.topic = true;
    if (seg.size() == 3)
      return pick(
          "PUT, GET, DELETE",
          {{"PUT", route::put_topic}, {"GET", route::get_topic}, {"DELETE", route::delete_topic}});
    if (seg.size() == 4 && seg[3] == "messages") return pick("POST", {{"POST", route::publish}});
    return not_found();
  }
  if (seg.size() < 2 || seg[0] != "v1" || seg[1] != "queues") return not_found();
  if (seg.size() == 2) return pick("GET", {{"GET", route::list_queues}});
  auto name = percent_decode(seg[2]);
  if (!name) return bad("the queue name in the path has a malformed percent escape");
  if (name->empty()) return bad("the queue name in the path is empty");
  m.queue = std::move(*name);
  if (seg.size() == 3)
    return pick(
        "PUT, GET, DELETE",
        {{"PUT", route::put_queue}, {"GET", route::get_queue}, {"DELETE", route::delete_queue}});
  if (seg.size() == 4) {
    if (seg[3] == "messages") return pick("POST", {{"POST", route::enqueue}});
    if (seg[3] == "receive") return pick("POST", {{"POST", route::receive}});
    if (seg[3] == "ack") return pick("POST", {{"POST", route::ack}});
    if (seg[3] == "nack") return pick("POST", {{"POST", route::nack}});
    if (seg[3] == "extend") return pick("POST", {{"POST", route::extend}});
    if (seg[3] == "dead-letters") return pick("GET", {{"GET", route::dead_letters}});
    if (seg[3] == "groups") return pick("GET", {{"GET", route::groups}});
  }
  if (seg.size() == 5 && seg[3] == "dead-letters" && seg[4] == "redrive")
    return pick("POST", {{"POST", route::redrive}});
  return not_found();
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

caf::timespan call_timeout() {
  return std::chrono::duration_cast<caf::timespan>(http_bounds::call_timeout);
}

json::object topic_to_json(const topic_spec& t) {
  json::object o;
  o["name"] = t.name();
  o["spec"] = topic_spec_to_json(t);
  return o;
}

/// Looks the queue up, then runs `then` with its handle.
template <class F>
void with_queue(caf::event_based_actor* self, const call_ptr& c, const std::string& name, F then) {
  self->request(c->st->admin, call_timeout(), lookup_atom_v, name)
      .then([then](queue_api& q) mutable { then(std::move(q)); },
            [c](caf::error& e) { c->fail(e); });
}

json::array ids_to_json(const std::vector<message_id>& ids) {
  json::array out;
  out.reserve(ids.size());
  for (auto id : ids) out.emplace_back(encode_id(id));
  return out;
}

}  // namespace

http_response error_response(const error& e) {
  http_response r;
  r.status = http_status(e.code);
  r.body = error_body(e);
  if (e.code == errc::unauthorized) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

router::router(caf::actor_system& sys, admin_actor admin, store_actor store, http_limits limits,
               std::vector<token_config> tokens)
    : sys_(sys),
      state_(std::make_shared<const shared_state>(
          shared_state{std::move(admin), std::move(store), limits, authenticator{std::move(tokens)},
                       std::make_shared<server_metrics>()})) {}

void router::handle(http_request req, respond_fn done) {
  auto c = std::make_shared<call>(call{state_, route::unknown, steady::now(), std::move(done)});
  auto matched = match_route(req.method, req.target);
  if (!matched) return c->fail(matched.err());
  auto m = std::move(matched.value());
  if (m.what == route::unknown) {
    auto resp = error_response(error{errc::route_not_found, req.method.substr(0, 16) +
                                                                " is not allowed here (allowed: " +
                                                                std::string{m.allowed} + ")"});
    resp.status = 405;
    resp.headers.emplace_back("Allow", std::string{m.allowed});
    return c->finish(std::move(resp));
  }
  c->what = m.what;
  const auto& st = *state_;

  // healthz is open (probes carry no token); everything else needs one when tokens are set.
  principal who{"*"};
  if (m.what != route::healthz) {
    auto p = st.auth.authenticate(req.authorization);
    if (!p) return c->fail(p.err());
    who = std::move(p.value());
  }
  if (m.what == route::metrics && !who.admin())
    return c->fail(error{errc::forbidden, "/metrics needs an admin (tenant \"*\") token"});
  if (m.what == route::checkpoint && !who.admin())
    return c->fail(
        error{errc::forbidden, "/v1/admin/checkpoint needs an admin (tenant \"*\") token"});
  std::string name;
  if (!m.queue.empty()) {
    auto resolved = st.auth.resolve(who, m.queue, m.topic ? "topic" : "queue");
    if (!resolved) return c->fail(resolved.err());
    name = std::move(resolved.value());
  }
  auto body = parse_body(req.body);
  if (!body) return c->fail(body.err());
  auto& obj = body.value();
  auto no_body = [&]() -> status {
    if (!obj.empty()) return bad("this endpoint takes no body");
    return ok_t{};
  };
  auto spawn = [&](bridge::start_fn fn) { sys_.spawn<bridge>(std::move(fn)); };

  switch (m.what) {
    case route::healthz: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      return spawn([c](caf::event_based_actor* self) {
        self->request(c->st->store, call_timeout(), stats_atom_v)
            .then(
                [c](store_stats& s) {
                  json::object o;
                  o["status"] = s.degraded ? "degraded" : "ok";
                  if (s.degraded) o["reason"] = s.reason;
                  c->reply(s.degraded ? 503 : 200, o);
                },
                [c](caf::error& e) {
                  json::object o;
                  o["status"] = "degraded";
                  o["reason"] = "the store did not answer: " + from_caf(e).message;
                  c->reply(503, o);
                });
      });
    }
    case route::metrics: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      return spawn([c](caf::event_based_actor* self) {
        struct gather {
          std::vector<queue_stats> queues;
          std::optional<store_stats> store;
          std::size_t remaining = 0;
        };
        auto g = std::make_shared<gather>();
        auto complete = [c, g] {
          if (--g->remaining > 0) return;
          http_response r;
          r.content_type = "text/plain; version=0.0.4; charset=utf-8";
          r.body = c->st->metrics->render(g->queues, g->store ? &*g->store : nullptr);
          c->finish(std::move(r));
        };
        self->request(c->st->admin, call_timeout(), list_atom_v)
            .then(
                [self, c, g, complete](std::vector<std::string>& names) {
                  g->remaining = names.size() + 1;
                  self->request(c->st->store, call_timeout(), stats_atom_v)
                      .then(
                          [g, complete](store_stats& s) {
                            g->store = std::move(s);
                            complete();
                          },
                          [complete](caf::error&) { complete(); });
                  for (auto& n : names)
                    self->request(c->st->admin, call_timeout(), describe_atom_v, n)
                        .then(
                            [g, complete](queue_description& d) {
                              g->queues.push_back(std::move(d.stats));
                              complete();
                            },
                            // A queue deleted meanwhile is left out.
                            [complete](caf::error&) { complete(); });
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::list_queues: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      return spawn([c, who](caf::event_based_actor* self) {
        self->request(c->st->admin, call_timeout(), list_atom_v)
            .then(
                [c, who](std::vector<std::string>& names) {
                  std::sort(names.begin(), names.end());
                  json::array arr;
                  for (auto& n : names)
                    if (authenticator::may_use(who, n)) arr.emplace_back(n);
                  json::object o;
                  o["queues"] = std::move(arr);
                  c->reply(200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::put_queue: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto parsed = queue_spec_from_json(name, json::value(obj));
      if (!parsed.ok()) return c->fail(combine(parsed.errors));
      auto spec_json = queue_spec_to_json(parsed.spec);
      return spawn([c, name, spec = std::move(parsed.spec),
                    spec_json = std::move(spec_json)](caf::event_based_actor* self) mutable {
        self->request(c->st->admin, call_timeout(), create_atom_v, std::move(spec))
            .then(
                [c, name, spec_json](queue_api&, bool created) {
                  json::object o;
                  o["name"] = name;
                  o["created"] = created;
                  o["spec"] = spec_json;
                  c->reply(created ? 201 : 200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::get_queue: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      return spawn([c, name](caf::event_based_actor* self) {
        self->request(c->st->admin, call_timeout(), describe_atom_v, name)
            .then(
                [c, name](queue_description& d) {
                  json::object o;
                  o["name"] = name;
                  o["summary"] = d.summary;
                  boost::system::error_code ec;
                  auto spec = json::parse(d.spec_json, ec);
                  if (!ec) o["spec"] = std::move(spec);
                  o["stats"] = to_json(d.stats);
                  c->reply(200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::delete_queue: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      return spawn([c, name](caf::event_based_actor* self) {
        self->request(c->st->admin, call_timeout(), drop_atom_v, name)
            .then(
                [c, name](caf::ok_atom) {
                  json::object o;
                  o["deleted"] = name;
                  c->reply(200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::enqueue: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto msgs = messages_from_json(obj, st.limits.batch);
      if (!msgs) return c->fail(msgs.err());
      return spawn([c, name, msgs = std::move(msgs.value())](caf::event_based_actor* self) mutable {
        with_queue(self, c, name, [self, c, msgs = std::move(msgs)](queue_api q) mutable {
          self->request(q, call_timeout(), enqueue_atom_v, std::move(msgs))
              .then(
                  [c](std::vector<message_id>& ids) {
                    json::object o;
                    o["ids"] = ids_to_json(ids);
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::receive: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto rr = receive_from_json(obj);
      if (!rr) return c->fail(rr.err());
      if (rr.value().max > st.limits.batch)
        return c->fail(
            error{errc::limit_exceeded, "max is " + std::to_string(rr.value().max) + ", at most " +
                                            std::to_string(st.limits.batch) + " allowed"});
      return spawn([c, name, rr = rr.value()](caf::event_based_actor* self) {
        with_queue(self, c, name, [self, c, rr](queue_api q) {
          auto timeout = call_timeout() + std::chrono::microseconds{rr.wait_us};
          self->request(q, timeout, receive_atom_v, rr)
              .then(
                  [c](std::vector<delivery>& ds) {
                    json::array arr;
                    arr.reserve(ds.size());
                    for (const auto& d : ds) arr.emplace_back(to_json(d));
                    json::object o;
                    o["messages"] = std::move(arr);
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::ack: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto ll = leases_from_json(obj, st.limits.batch);
      if (!ll) return c->fail(ll.err());
      return spawn([c, name, ll = std::move(ll.value())](caf::event_based_actor* self) mutable {
        with_queue(self, c, name, [self, c, ll = std::move(ll)](queue_api q) mutable {
          auto total = ll.leases.size();
          auto single = ll.single;
          self->request(q, call_timeout(), ack_atom_v, std::move(ll.leases))
              .then(
                  [c, total, single](std::vector<lease_outcome>& failed) {
                    if (single && !failed.empty()) return c->fail(failed.front().err);
                    json::array arr;
                    for (const auto& f : failed) {
                      json::object e;
                      e["lease"] = encode_lease(f.lease);
                      e["error"] = json::parse(error_body(f.err)).as_object()["error"];
                      arr.emplace_back(std::move(e));
                    }
                    json::object o;
                    o["acked"] = total - failed.size();
                    o["failed"] = std::move(arr);
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::nack: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto nr = nack_from_json(obj);
      if (!nr) return c->fail(nr.err());
      return spawn([c, name, nr = nr.value()](caf::event_based_actor* self) {
        with_queue(self, c, name, [self, c, nr](queue_api q) {
          self->request(q, call_timeout(), nack_atom_v, nr.first, nr.second)
              .then(
                  [c, dead = nr.second.kind == nack_kind::dead_letter](caf::ok_atom) {
                    json::object o;
                    o["nacked"] = true;
                    o["dead_lettered"] = dead;
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::extend: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto er = extend_from_json(obj);
      if (!er) return c->fail(er.err());
      return spawn([c, name, er = er.value()](caf::event_based_actor* self) {
        with_queue(self, c, name, [self, c, er](queue_api q) {
          self->request(q, call_timeout(), extend_atom_v, er.first, er.second)
              .then(
                  [c](timestamp deadline) {
                    json::object o;
                    o["lease_deadline_ms"] = deadline.ms();
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::dead_letters: {
      auto query = parse_query(m.query, {"max"});
      if (!query) return c->fail(query.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      std::uint32_t max = 100;
      for (const auto& [k, v] : query.value()) {
        auto n = decode_id(v);  // a positive decimal
        if (!n || n->value > limits::redrive_batch_max)
          return c->fail(
              bad("query parameter max must be 1 to " + std::to_string(limits::redrive_batch_max)));
        max = static_cast<std::uint32_t>(n->value);
      }
      return spawn([c, name, max](caf::event_based_actor* self) {
        with_queue(self, c, name, [self, c, max](queue_api q) {
          self->request(q, call_timeout(), dlq_atom_v, max)
              .then(
                  [c](std::vector<dead_letter>& ds) {
                    json::array arr;
                    arr.reserve(ds.size());
                    for (const auto& d : ds) arr.emplace_back(to_json(d));
                    json::object o;
                    o["dead_letters"] = std::move(arr);
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::redrive: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto ids = redrive_from_json(obj, limits::redrive_batch_max);
      if (!ids) return c->fail(ids.err());
      return spawn([c, name, ids = std::move(ids.value())](caf::event_based_actor* self) mutable {
        with_queue(self, c, name, [self, c, ids = std::move(ids)](queue_api q) mutable {
          self->request(q, call_timeout(), redrive_atom_v, std::move(ids))
              .then(
                  [c](std::uint64_t n) {
                    json::object o;
                    o["redriven"] = n;
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::groups: {
      auto query = parse_query(m.query, {"state"});
      if (!query) return c->fail(query.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      bool blocked = false;
      for (const auto& [k, v] : query.value()) {
        if (v == "blocked")
          blocked = true;
        else if (v == "all")
          blocked = false;
        else
          return c->fail(bad("query parameter state must be blocked or all"));
      }
      return spawn([c, name, blocked](caf::event_based_actor* self) {
        with_queue(self, c, name, [self, c, blocked](queue_api q) {
          self->request(q, call_timeout(), groups_atom_v, blocked)
              .then(
                  [c](std::vector<group_info>& gs) {
                    json::array arr;
                    arr.reserve(gs.size());
                    for (const auto& g : gs) arr.emplace_back(to_json(g));
                    json::object o;
                    o["groups"] = std::move(arr);
                    c->reply(200, o);
                  },
                  [c](caf::error& e) { c->fail(e); });
        });
      });
    }
    case route::list_topics: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      return spawn([c, who](caf::event_based_actor* self) {
        self->request(c->st->admin, call_timeout(), topic_atom_v, list_atom_v)
            .then(
                [c, who](std::vector<topic_spec>& topics) {
                  json::array arr;
                  for (const auto& t : topics)
                    if (authenticator::may_use(who, t.name())) arr.emplace_back(topic_to_json(t));
                  json::object o;
                  o["topics"] = std::move(arr);
                  c->reply(200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::put_topic: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      // A tenant's token names its queues bare, as in their URLs.
      if (auto* qs = obj.if_contains("queues"); qs != nullptr && qs->is_array())
        for (auto& q : qs->as_array())
          if (q.is_string()) {
            auto full = st.auth.resolve(who, std::string{q.as_string()});
            if (!full) return c->fail(full.err());
            q = full.value();
          }
      auto parsed = topic_spec_from_json(name, json::value(obj));
      if (!parsed.ok()) return c->fail(combine(parsed.errors));
      return spawn([c, spec = std::move(parsed.spec)](caf::event_based_actor* self) mutable {
        auto out = topic_to_json(spec);
        self->request(c->st->admin, call_timeout(), create_atom_v, std::move(spec))
            .then(
                [c, out = std::move(out)](bool created) mutable {
                  out["created"] = created;
                  c->reply(created ? 201 : 200, out);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::get_topic: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      return spawn([c, name](caf::event_based_actor* self) {
        self->request(c->st->admin, call_timeout(), topic_atom_v, lookup_atom_v, name)
            .then([c](topic_spec& t) { c->reply(200, topic_to_json(t)); },
                  [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::delete_topic: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      if (auto ok = no_body(); !ok) return c->fail(ok.err());
      return spawn([c, name](caf::event_based_actor* self) {
        self->request(c->st->admin, call_timeout(), topic_atom_v, drop_atom_v, name)
            .then(
                [c, name](caf::ok_atom) {
                  json::object o;
                  o["deleted"] = name;
                  c->reply(200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::publish: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto msgs = messages_from_json(obj, st.limits.batch);
      if (!msgs) return c->fail(msgs.err());
      return spawn([c, name, msgs = std::move(msgs.value())](caf::event_based_actor* self) mutable {
        self->request(c->st->admin, call_timeout(), publish_atom_v, name, std::move(msgs))
            .then(
                [c](std::vector<topic_enqueued>& per_queue) {
                  json::object ids;
                  for (const auto& q : per_queue) ids[q.queue] = ids_to_json(q.ids);
                  json::object o;
                  o["ids"] = std::move(ids);
                  c->reply(200, o);
                },
                [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::checkpoint: {
      if (auto ok = parse_query(m.query, {}); !ok) return c->fail(ok.err());
      auto dir = checkpoint_dir_from_json(obj);
      if (!dir) return c->fail(dir.err());
      return spawn([c, dir = std::move(dir.value())](caf::event_based_actor* self) mutable {
        // A checkpoint flushes and links (or copies) the whole store: no HTTP call timeout.
        self->request(c->st->admin, caf::infinite, checkpoint_atom_v, std::move(dir))
            .then([c](checkpoint_info& info) { c->reply(200, to_json(info)); },
                  [c](caf::error& e) { c->fail(e); });
      });
    }
    case route::unknown: break;
  }
  c->fail(error{errc::route_not_found, "no endpoint"});
}

}  // namespace laneq::server
