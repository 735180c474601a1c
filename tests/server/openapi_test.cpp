// docs/openapi.json against the router and a real server: every route served is documented and
// every documented route served, request bodies where the router takes them, every example sent
// to an in-process laneqd and answered as documented, the error codes and the bearer scheme.
#include <gtest/gtest.h>

#include <set>

#include "laneq/server/json_mapping.hpp"
#include "openapi_check.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

using openapi::deref;
using openapi::document;
using openapi::operation;

const std::vector<operation>& all_operations() {
  static const auto ops = openapi::operations(document());
  return ops;
}

const operation& find_operation(std::string_view method, std::string_view path) {
  for (const auto& o : all_operations())
    if (o.method == method && o.path == path) return o;
  throw std::runtime_error{"docs/openapi.json has no " + std::string{method} + " " +
                           std::string{path}};
}

const json::object* request_content(const operation& o) {
  const auto* body = o.op->if_contains("requestBody");
  return body != nullptr ? openapi::json_content(document(), *body) : nullptr;
}

/// The first example of the operation's request body.
const json::value& first_request_example(const operation& o) {
  return *openapi::examples_of(document(), *request_content(o)).at(0).value;
}

/// The catalog's error names by number (`errc` 1 up to the last one named).
std::vector<std::string> catalog_codes() {
  std::vector<std::string> out;
  for (int n = 1; n < 256; ++n) {
    auto name = to_string(static_cast<errc>(n));
    if (name != "unknown_error") out.emplace_back(name);
  }
  return out;
}

/// The HTTP status the router gives the error named `code` (0 when it is no catalog name).
unsigned status_of_code(std::string_view code) {
  for (int n = 1; n < 256; ++n)
    if (to_string(static_cast<errc>(n)) == code) return http_status(static_cast<errc>(n));
  return 0;
}

/// Each problem of the examples of one request body or response (`what`) against its schema.
void expect_examples_conform(const json::object& content, const std::string& what,
                             unsigned status = 0) {
  const auto& doc = document();
  auto examples = openapi::examples_of(doc, content);
  EXPECT_FALSE(examples.empty()) << what << " has no example";
  for (const auto& ex : examples) {
    EXPECT_EQ(openapi::violation(doc, *ex.value, content.at("schema"), "example"), "")
        << what << ", example " << ex.name;
    const auto* obj = ex.value->if_object();
    const auto* e = obj != nullptr ? obj->if_contains("error") : nullptr;
    if (e != nullptr && status != 0) {
      EXPECT_EQ(status_of_code(e->at("code").as_string()), status)
          << what << ", example " << ex.name << ": the router answers its code with another status";
    }
  }
}

TEST(openapi, documents_every_route_the_router_serves_and_no_other) {
  std::set<std::string> served;
  std::set<std::string> documented;
  for (const auto& e : routes()) served.insert(std::string{e.method} + " " + std::string{e.path});
  for (const auto& o : all_operations()) documented.insert(o.name());
  for (const auto& s : served)
    EXPECT_TRUE(documented.count(s)) << s << " is served but not in docs/openapi.json";
  for (const auto& d : documented)
    EXPECT_TRUE(served.count(d)) << d << " is in docs/openapi.json but not served";
  EXPECT_EQ(served.size(), routes().size()) << "the router's table lists a route twice";
}

TEST(openapi, documents_a_request_body_exactly_where_the_router_takes_one) {
  for (const auto& e : routes()) {
    const auto& o = find_operation(e.method, e.path);
    EXPECT_EQ(o.op->contains("requestBody"), e.body) << o.name();
    if (e.body) {
      EXPECT_NE(request_content(o), nullptr) << o.name() << ": no application/json body";
    }
  }
}

TEST(openapi, every_example_carries_the_fields_its_schema_requires) {
  const auto& doc = document();
  for (const auto& o : all_operations()) {
    if (const auto* req = request_content(o)) expect_examples_conform(*req, o.name() + " request");
    for (const auto& [status, resp] : o.op->at("responses").as_object()) {
      auto what = o.name() + " " + std::string{status};
      if (const auto* content = openapi::json_content(doc, resp))
        expect_examples_conform(*content, what, static_cast<unsigned>(std::stoul(status)));
    }
  }
}

TEST(openapi, the_error_codes_are_the_catalogs) {
  const auto& doc = document();
  const auto& body = doc.at("components").at("schemas").at("ErrorBody").as_object();
  const auto& code = body.at("properties").at("code").as_object();
  std::vector<std::string> documented;
  for (const auto& c : code.at("enum").as_array()) documented.emplace_back(c.as_string());
  auto catalog = catalog_codes();
  EXPECT_EQ(documented, catalog);
  EXPECT_EQ(body.at("properties").at("number").at("maximum").to_number<std::size_t>(),
            catalog.size());
}

TEST(openapi, the_bearer_scheme_guards_every_operation_but_those_documented_open) {
  const auto& doc = document();
  const auto& scheme = doc.at("components").at("securitySchemes").at("bearer").as_object();
  EXPECT_EQ(scheme.at("type").as_string(), "http");
  EXPECT_EQ(scheme.at("scheme").as_string(), "bearer");
  in_process_server srv{{}, {token_config{"openapi-admin-token-0123", "*"}}};
  for (const auto& o : all_operations()) {
    const auto* own = o.op->if_contains("security");
    const auto& security = own != nullptr ? *own : doc.at("security");
    bool open = security.as_array().empty();
    client c{srv.port()};
    auto r = c.call(http::string_to_verb(o.method), openapi::example_target(doc, o));
    if (open) {
      EXPECT_NE(r.status, 401u) << o.name() << " is documented open";
      continue;
    }
    EXPECT_EQ(r.status, 401u) << o.name() << " is documented as needing the token: " << r.body;
    EXPECT_EQ(r.header("WWW-Authenticate"), "Bearer") << o.name();
    EXPECT_TRUE(o.op->at("responses").as_object().contains("401")) << o.name();
  }
}

TEST(openapi, every_operation_documents_the_400_of_an_unknown_query_parameter) {
  in_process_server srv;
  for (const auto& o : all_operations()) {
    auto target = openapi::example_target(document(), o);
    target += (target.find('?') == std::string::npos ? "?" : "&") + std::string{"bogus=1"};
    client c{srv.port()};
    auto r = c.call(http::string_to_verb(o.method), target);
    EXPECT_EQ(r.status, 400u) << o.name() << ": " << r.body;
    EXPECT_TRUE(o.op->at("responses").as_object().contains("400")) << o.name();
  }
}

/// A fresh laneqd in process holding what the examples name: the queue (made with the first
/// example of `PUT /v1/queues/{name}`), one dead letter in it (id 1), two messages ready, the
/// topic's queues and the topic (the first example of `PUT /v1/topics/{name}`). An operation
/// that creates one of them is tested without it. Its messages carry an `account` header, which
/// the queue example's ordering key reads (a change there shows as "setting up: 400").
class sandbox {
 public:
  explicit sandbox(const operation& testing) {
    const auto& put_queue = find_operation("PUT", "/v1/queues/{name}");
    queue_ = openapi::example_target(document(), put_queue);
    if (testing.name() != put_queue.name()) make_queue(put_queue);
    const auto& put_topic = find_operation("PUT", "/v1/topics/{name}");
    const auto& topic = first_request_example(put_topic).as_object();
    for (const auto& q : topic.at("queues").as_array())
      expect_2xx(put(port(), "/v1/queues/" + std::string{q.as_string()}, "{}"));
    if (testing.name() != put_topic.name())
      expect_2xx(
          put(port(), openapi::example_target(document(), put_topic), json::serialize(topic)));
  }

  std::uint16_t port() const { return srv_.port(); }

  /// `body` with its `lease` (or each of its `leases`) replaced by a lease held now: each of a
  /// fresh group of three messages received as one ordered batch, so `count` and `from` up to 2
  /// fit it.
  json::value with_live_leases(json::value body) {
    auto* o = body.if_object();
    if (o == nullptr) return body;
    if (o->contains("lease")) (*o)["lease"] = hold_leases(1).at(0);
    if (auto* many = o->if_contains("leases")) {
      json::array live;
      for (const auto& l : hold_leases(many->as_array().size())) live.emplace_back(l);
      *many = std::move(live);
    }
    return body;
  }

 private:
  static void expect_2xx(const reply& r) {
    EXPECT_TRUE(r.status >= 200 && r.status < 300) << "setting up: " << r.status << " " << r.body;
  }

  void make_queue(const operation& put_queue) {
    expect_2xx(put(port(), queue_, json::serialize(first_request_example(put_queue))));
    expect_2xx(
        post(port(), queue_ + "/messages", R"({"body": "dead", "headers": {"account": "dl"}})"));
    auto got = post(port(), queue_ + "/receive", R"({"max": 1})");
    expect_2xx(got);
    if (got.status != 200 || got.obj().at("messages").as_array().empty()) return;
    auto lease = got.obj().at("messages").at(0).at("lease");
    json::object nack{{"lease", lease}, {"dead_letter", true}};
    expect_2xx(post(port(), queue_ + "/nack", json::serialize(nack)));
    expect_2xx(post(port(), queue_ + "/messages",
                    R"({"messages": [{"body": "r1", "headers": {"account": "ready"}},
                                     {"body": "r2", "headers": {"account": "ready"}}]})"));
  }

  /// `n` leases, each an ordered batch of three messages of a group of its own.
  std::vector<std::string> hold_leases(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      json::object headers{{"account", "lease-" + std::to_string(i)}};
      json::object m{{"body", "m"}, {"headers", headers}};
      expect_2xx(post(port(), queue_ + "/messages",
                      json::serialize(json::object{{"messages", json::array{m, m, m}}})));
    }
    auto got = post(port(), queue_ + "/receive", R"({"max": 1000, "batch": 3})");
    expect_2xx(got);
    std::vector<std::string> leases;
    if (got.status != 200) return leases;
    for (const auto& d : got.obj().at("messages").as_array())
      if (d.at("ordering_key").as_string().starts_with("lease-") &&
          d.at("batch_index").to_number<int>() == 0)
        leases.emplace_back(d.at("lease").as_string());
    EXPECT_EQ(leases.size(), n);
    return leases;
  }

  in_process_server srv_;
  std::string queue_;
};

/// The answer `r` to `o` has a documented status and, for a JSON answer, the documented shape.
void expect_documented_answer(const operation& o, const reply& r, const std::string& what) {
  const auto& doc = document();
  const auto& responses = o.op->at("responses").as_object();
  const auto* resp = responses.if_contains(std::to_string(r.status));
  ASSERT_NE(resp, nullptr) << what << ": status " << r.status << " is not documented: " << r.body;
  const auto* content = deref(doc, *resp).as_object().if_contains("content");
  ASSERT_NE(content, nullptr) << what << ": status " << r.status << " documents no body";
  bool typed = false;
  for (const auto& [media, _] : content->as_object())
    typed = typed || r.content_type.starts_with(std::string{media});
  EXPECT_TRUE(typed) << what << ": answered as " << r.content_type;
  if (const auto* js = openapi::json_content(doc, *resp)) {
    EXPECT_EQ(openapi::violation(doc, r.doc, js->at("schema"), "answer"), "")
        << what << ": " << r.body;
  }
}

/// Sends `body` ("" for none) to `o` on a fresh sandbox; the answer must not refuse it as
/// malformed (400) and must be documented. `live`: leases replaced by held ones, and then the
/// example must succeed (2xx; a checkpoint of the in-memory broker fails with 500
/// checkpoint_failed, as documented: the laneqd process tests take real ones).
void send_example(const operation& o, const json::value* body, const std::string& what, bool live) {
  sandbox box{o};
  std::string text;
  if (body != nullptr) text = json::serialize(live ? box.with_live_leases(*body) : *body);
  client c{box.port()};
  auto r = c.call(http::string_to_verb(o.method), openapi::example_target(document(), o), text);
  EXPECT_NE(r.status, 400u) << what << " is refused as malformed: " << r.body;
  expect_documented_answer(o, r, what);
  if (!live) return;
  if (o.path == "/v1/admin/checkpoint") {
    EXPECT_EQ(r.code(), "checkpoint_failed") << what << ": " << r.body;
  } else {
    EXPECT_TRUE(r.status >= 200 && r.status < 300) << what << ": " << r.status << " " << r.body;
  }
}

TEST(openapi, every_request_example_is_answered_by_a_real_server_as_documented) {
  for (const auto& o : all_operations()) {
    const auto* content = request_content(o);
    if (content == nullptr) {
      send_example(o, nullptr, o.name(), true);
      continue;
    }
    for (const auto& ex : openapi::examples_of(document(), *content)) {
      auto what = o.name() + " example " + ex.name;
      send_example(o, ex.value, what, true);
      bool leased = ex.value->is_object() && (ex.value->as_object().contains("lease") ||
                                              ex.value->as_object().contains("leases"));
      // As written, its leases are well formed but not held: 404 lease_not_found.
      if (leased) send_example(o, ex.value, what + " (its own leases)", false);
    }
  }
}

}  // namespace
}  // namespace laneq::server::test
