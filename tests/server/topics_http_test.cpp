// Topics over the HTTP API (docs/api.md "Topics") and the lane fields of queue specs: create
// (201/200/409), get, list, delete, publish with ids per queue, tenant scoping, the spec fields
// in `GET /v1/queues/{name}`, and the function key component refused naming the in-process API.
#include <gtest/gtest.h>

#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

std::string str(const json::value& v) {
  return std::string{v.as_string()};
}

std::string message_of(const reply& r) {
  return str(r.obj().at("error").as_object().at("message"));
}

class http_topics : public ::testing::Test {
 protected:
  in_process_server srv_;
  std::uint16_t port() const { return srv_.port(); }

  void create(const std::string& name, const std::string& spec = "{}") {
    auto r = put(port(), "/v1/queues/" + name, spec);
    ASSERT_EQ(r.status, 201u) << r.body;
  }
  std::size_t backlog(const std::string& name) {
    auto r = get(port(), "/v1/queues/" + name);
    EXPECT_EQ(r.status, 200u) << r.body;
    if (r.status != 200u) return 0;
    return static_cast<std::size_t>(
        r.obj().at("stats").as_object().at("backlog").to_number<std::int64_t>());
  }
};

TEST_F(http_topics, put_creates_201_then_200_when_identical_and_409_when_different) {
  create("a");
  create("b");
  auto first = put(port(), "/v1/topics/events", R"({"queues": ["a", "b"]})");
  ASSERT_EQ(first.status, 201u) << first.body;
  EXPECT_TRUE(first.obj().at("created").as_bool());
  EXPECT_EQ(str(first.obj().at("name")), "events");
  EXPECT_EQ(first.obj().at("spec").as_object().at("queues").as_array().size(), 2u);
  auto same = put(port(), "/v1/topics/events", R"({"queues": ["a", "b"]})");
  EXPECT_EQ(same.status, 200u) << same.body;
  EXPECT_FALSE(same.obj().at("created").as_bool());
  auto other = put(port(), "/v1/topics/events", R"({"queues": ["a"]})");
  EXPECT_EQ(other.status, 409u) << other.body;
  EXPECT_EQ(other.code(), "spec_conflict");
}

TEST_F(http_topics, a_broken_topic_spec_is_400_naming_the_topic_and_field_and_creates_nothing) {
  create("a");
  auto unknown_queue = put(port(), "/v1/topics/t1", R"({"queues": ["a", "nope"]})");
  EXPECT_EQ(unknown_queue.status, 400u) << unknown_queue.body;
  EXPECT_EQ(unknown_queue.code(), "invalid_spec");
  EXPECT_NE(message_of(unknown_queue).find("'nope'"), std::string::npos) << unknown_queue.body;
  auto empty = put(port(), "/v1/topics/t2", R"({"queues": []})");
  EXPECT_EQ(empty.status, 400u) << empty.body;
  EXPECT_NE(message_of(empty).find("topic 't2'"), std::string::npos) << empty.body;
  auto twice = put(port(), "/v1/topics/t3", R"({"queues": ["a", "a"], "colour": 1})");
  EXPECT_EQ(twice.status, 400u) << twice.body;
  EXPECT_NE(message_of(twice).find("colour"), std::string::npos) << twice.body;
  auto l = get(port(), "/v1/topics");
  ASSERT_EQ(l.status, 200u) << l.body;
  EXPECT_TRUE(l.obj().at("topics").as_array().empty()) << l.body;
}

TEST_F(http_topics, get_list_and_delete_topics) {
  create("a");
  create("b");
  ASSERT_EQ(put(port(), "/v1/topics/t1", R"({"queues": ["a"]})").status, 201u);
  ASSERT_EQ(put(port(), "/v1/topics/t2", R"({"queues": ["b"]})").status, 201u);
  auto l = get(port(), "/v1/topics");
  ASSERT_EQ(l.status, 200u) << l.body;
  const auto& arr = l.obj().at("topics").as_array();
  ASSERT_EQ(arr.size(), 2u);
  EXPECT_EQ(str(arr[0].as_object().at("name")), "t1");
  EXPECT_EQ(str(arr[1].as_object().at("spec").as_object().at("queues").as_array()[0]), "b");
  auto g = get(port(), "/v1/topics/t1");
  ASSERT_EQ(g.status, 200u) << g.body;
  EXPECT_EQ(str(g.obj().at("spec").as_object().at("queues").as_array()[0]), "a");
  auto none = get(port(), "/v1/topics/none");
  EXPECT_EQ(none.status, 404u);
  EXPECT_EQ(none.code(), "topic_not_found") << none.body;
  // A queue in a topic cannot be deleted; once the topic is gone it can.
  EXPECT_NE(del(port(), "/v1/queues/a").status, 200u);
  auto d = del(port(), "/v1/topics/t1");
  ASSERT_EQ(d.status, 200u) << d.body;
  EXPECT_EQ(str(d.obj().at("deleted")), "t1");
  EXPECT_EQ(get(port(), "/v1/topics/t1").status, 404u);
  auto gone = del(port(), "/v1/topics/t1");
  EXPECT_EQ(gone.status, 404u);
  EXPECT_EQ(gone.code(), "topic_not_found") << gone.body;
  EXPECT_EQ(del(port(), "/v1/queues/a").status, 200u);
  auto bad_method = post(port(), "/v1/topics/t2", "{}");
  EXPECT_EQ(bad_method.status, 405u);
  EXPECT_EQ(bad_method.header("Allow"), "PUT, GET, DELETE");
}

TEST_F(http_topics, publish_answers_the_ids_per_queue_and_lands_in_every_queue) {
  create("a");
  create("b", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  ASSERT_EQ(put(port(), "/v1/topics/events", R"({"queues": ["a", "b"]})").status, 201u);
  auto one =
      post(port(), "/v1/topics/events/messages", R"({"body": "x", "headers": {"account": "7"}})");
  ASSERT_EQ(one.status, 200u) << one.body;
  const auto& ids = one.obj().at("ids").as_object();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.at("a").as_array().size(), 1u);
  EXPECT_EQ(ids.at("b").as_array().size(), 1u);
  auto batch = post(port(), "/v1/topics/events/messages",
                    R"({"messages": [{"body": "1", "headers": {"account": "7"}},
                                     {"body": "2", "headers": {"account": "8"}}]})");
  ASSERT_EQ(batch.status, 200u) << batch.body;
  EXPECT_EQ(batch.obj().at("ids").as_object().at("b").as_array().size(), 2u);
  EXPECT_EQ(backlog("a"), 3u);
  EXPECT_EQ(backlog("b"), 3u);
  // One queue refusing (no account: queue b rejects) stores the message in none.
  auto refused = post(port(), "/v1/topics/events/messages", R"({"body": "no account"})");
  EXPECT_EQ(refused.status, 400u) << refused.body;
  EXPECT_EQ(refused.code(), "ordering_key_missing") << refused.body;
  EXPECT_EQ(backlog("a"), 3u);
  EXPECT_EQ(backlog("b"), 3u);
  auto none = post(port(), "/v1/topics/none/messages", R"({"body": "x"})");
  EXPECT_EQ(none.status, 404u) << none.body;
  EXPECT_EQ(none.code(), "topic_not_found") << none.body;
  auto malformed = post(port(), "/v1/topics/events/messages", R"({"bdy": "x"})");
  EXPECT_EQ(malformed.status, 400u) << malformed.body;
}

TEST_F(http_topics, get_queue_shows_the_spec_with_lane_fields) {
  create("lanes", R"({"ordering": {"mode": "key", "key": [{"json": "data.customer"},
                                                          {"header": "account"}],
                                   "when_key_missing": "keyless_lane"},
                      "store_headers": {"deny": ["authorization"]},
                      "dedupe": {"key": [{"header": "idempotency-key"}], "window_ms": 60000}})");
  auto r = get(port(), "/v1/queues/lanes");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto& spec = r.obj().at("spec").as_object();
  const auto& ordering = spec.at("ordering").as_object();
  EXPECT_EQ(str(ordering.at("mode")), "key");
  EXPECT_EQ(str(ordering.at("key").as_array()[0].as_object().at("json")), "data.customer");
  EXPECT_EQ(str(ordering.at("key").as_array()[1].as_object().at("header")), "account");
  EXPECT_EQ(str(ordering.at("when_key_missing")), "keyless_lane");
  EXPECT_EQ(str(spec.at("store_headers").as_object().at("deny").as_array()[0]), "authorization");
  const auto& dedupe = spec.at("dedupe").as_object();
  EXPECT_EQ(dedupe.at("window_ms").to_number<std::int64_t>(), 60000);
  EXPECT_EQ(str(dedupe.at("key").as_array()[0].as_object().at("header")), "idempotency-key");
  // The spec GET shows is one PUT takes back as identical.
  auto again = put(port(), "/v1/queues/lanes", json::serialize(spec));
  EXPECT_EQ(again.status, 200u) << again.body;
}

TEST_F(http_topics, lane_rules_are_refused_with_the_queue_and_field_named) {
  auto fn = put(port(), "/v1/queues/f",
                R"({"ordering": {"mode": "key", "key": [{"function": "by_tenant"}]}})");
  EXPECT_EQ(fn.status, 400u) << fn.body;
  EXPECT_EQ(fn.code(), "invalid_spec");
  EXPECT_NE(message_of(fn).find("in-process C++ API"), std::string::npos) << fn.body;
  EXPECT_NE(message_of(fn).find("queue 'f'"), std::string::npos) << fn.body;
  auto hidden = put(port(), "/v1/queues/h",
                    R"({"ordering": {"mode": "key", "key": [{"header": "authorization"}]},
                        "store_headers": {"deny": ["authorization"]}})");
  EXPECT_EQ(hidden.status, 400u) << hidden.body;
  EXPECT_NE(message_of(hidden).find("'authorization'"), std::string::npos) << hidden.body;
  EXPECT_EQ(get(port(), "/v1/queues/f").status, 404u);
  EXPECT_EQ(get(port(), "/v1/queues/h").status, 404u);
}

// -- auth ----------------------------------------------------------------------------------------

const std::string acme_token = "acme-token-0123456789";
const std::string other_token = "other-token-0123456789";
const std::string admin_token = "admin-token-0123456789";

class http_topics_auth : public ::testing::Test {
 protected:
  in_process_server srv_{http_limits{},
                         {{acme_token, "acme"}, {other_token, "other"}, {admin_token, "*"}}};
  std::uint16_t port() const { return srv_.port(); }
};

TEST_F(http_topics_auth, topics_are_scoped_by_tenant_like_queues) {
  ASSERT_EQ(put(port(), "/v1/queues/a", "{}", acme_token).status, 201u);
  ASSERT_EQ(put(port(), "/v1/queues/b", "{}", acme_token).status, 201u);
  ASSERT_EQ(put(port(), "/v1/queues/jobs", "{}", other_token).status, 201u);
  EXPECT_EQ(put(port(), "/v1/topics/events", R"({"queues": ["a"]})").status, 401u);
  // Bare names are the token's tenant's, in the path and in the body.
  auto mine = put(port(), "/v1/topics/events", R"({"queues": ["a", "b"]})", acme_token);
  ASSERT_EQ(mine.status, 201u) << mine.body;
  EXPECT_EQ(str(mine.obj().at("name")), "acme/events");
  EXPECT_EQ(str(mine.obj().at("spec").as_object().at("queues").as_array()[1]), "acme/b");
  // Another tenant's queue in the body, or its topic in the path: 403, nothing created.
  auto theirs = put(port(), "/v1/topics/mixed", R"({"queues": ["a", "other/jobs"]})", acme_token);
  EXPECT_EQ(theirs.status, 403u) << theirs.body;
  EXPECT_EQ(
      put(port(), "/v1/topics/other%2Fevents", R"({"queues": ["other/jobs"]})", acme_token).status,
      403u);
  EXPECT_EQ(
      post(port(), "/v1/topics/acme%2Fevents/messages", R"({"body": "x"})", other_token).status,
      403u);
  auto sent = post(port(), "/v1/topics/events/messages", R"({"body": "x"})", acme_token);
  ASSERT_EQ(sent.status, 200u) << sent.body;
  EXPECT_TRUE(sent.obj().at("ids").as_object().contains("acme/a"));
  auto l_other = get(port(), "/v1/topics", other_token);
  ASSERT_EQ(l_other.status, 200u);
  EXPECT_TRUE(l_other.obj().at("topics").as_array().empty());
  auto l_admin = get(port(), "/v1/topics", admin_token);
  ASSERT_EQ(l_admin.status, 200u);
  EXPECT_EQ(l_admin.obj().at("topics").as_array().size(), 1u);
  EXPECT_EQ(del(port(), "/v1/topics/acme%2Fevents", other_token).status, 403u);
  EXPECT_EQ(get(port(), "/v1/topics/events", acme_token).status, 200u);
}

}  // namespace
}  // namespace laneq::server::test
