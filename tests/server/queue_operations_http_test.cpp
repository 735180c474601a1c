// The queue operations of the HTTP API (docs/api.md; docs/design/purge.md U-numbers) through a
// real socket: purge, peek, deleting dead letters, redrive into another queue, and deleting a
// queue that is not empty.
#include <gtest/gtest.h>

#include <algorithm>

#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

std::string str(const json::value& v) {
  return std::string{v.as_string()};
}

std::int64_t num(const json::object& o, std::string_view key) {
  return o.at(key).to_number<std::int64_t>();
}

class queue_operations_http : public ::testing::Test {
 protected:
  in_process_server srv_;
  std::uint16_t port() const { return srv_.port(); }

  void create(const std::string& name, const std::string& spec) {
    auto r = put(port(), "/v1/queues/" + name, spec);
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.body;
  }
  std::vector<std::string> send(const std::string& name, const std::string& body) {
    auto r = post(port(), "/v1/queues/" + name + "/messages", body);
    EXPECT_EQ(r.status, 200u) << r.body;
    std::vector<std::string> ids;
    if (r.status == 200)
      for (const auto& id : r.obj().at("ids").as_array()) ids.push_back(str(id));
    return ids;
  }
  json::array receive(const std::string& name, const std::string& body = R"({"max": 10})") {
    auto r = post(port(), "/v1/queues/" + name + "/receive", body);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.status == 200 ? r.obj().at("messages").as_array() : json::array{};
  }
  json::object stats(const std::string& name) {
    auto r = get(port(), "/v1/queues/" + name);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.status == 200 ? r.obj().at("stats").as_object() : json::object{};
  }
  reply del_with(const std::string& target, const std::string& body) {
    client c{port()};
    return c.call(http::verb::delete_, target, body);
  }
  /// Dead-letters every message of `name` now (one receive, a nack each).
  void dead_letter_all(const std::string& name) {
    for (const auto& m : receive(name, R"({"max": 100})")) {
      json::object nack{{"lease", m.at("lease")}, {"dead_letter", true}};
      auto r = post(port(), "/v1/queues/" + name + "/nack", json::serialize(nack));
      ASSERT_EQ(r.status, 200u) << r.body;
    }
  }
  std::vector<std::string> dead_ids(const std::string& name) {
    auto r = get(port(), "/v1/queues/" + name + "/dead-letters");
    EXPECT_EQ(r.status, 200u) << r.body;
    std::vector<std::string> out;
    if (r.status == 200)
      for (const auto& d : r.obj().at("dead_letters").as_array()) out.push_back(str(d.at("id")));
    return out;
  }
};

constexpr auto by_account = R"({"ordering": {"mode": "key", "key": [{"header": "account"}],
                                             "when_key_missing": "unordered"}})";

// U1, U3, U7: a purge of one group, then of the queue; the message in flight stays and acks.
TEST_F(queue_operations_http, purge_removes_waiting_messages_and_leaves_the_one_in_flight) {
  create("q", by_account);
  send("q", R"({"messages": [{"body": "a1", "headers": {"account": "a"}},
                             {"body": "a2", "headers": {"account": "a"}},
                             {"body": "b1", "headers": {"account": "b"}},
                             {"body": "b2", "headers": {"account": "b"}},
                             {"body": "u1"}]})");
  auto held = receive("q", R"({"max": 1})");
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(str(held[0].at("body")), "a1");
  auto group = post(port(), "/v1/queues/q/purge", R"({"group": "b"})");
  ASSERT_EQ(group.status, 200u) << group.body;
  EXPECT_EQ(num(group.obj(), "purged"), 2);
  client c{port()};
  auto all = c.call(http::verb::post, "/v1/queues/q/purge");  // no body: the whole queue
  ASSERT_EQ(all.status, 200u) << all.body;
  EXPECT_EQ(num(all.obj(), "purged"), 2) << "a2 and u1; a1 is in flight";
  EXPECT_TRUE(receive("q").empty());
  json::object ack{{"lease", held[0].at("lease")}};
  auto acked = post(port(), "/v1/queues/q/ack", json::serialize(ack));
  EXPECT_EQ(acked.status, 200u) << "the in-flight message's lease still acks: " << acked.body;
  auto s = stats("q");
  EXPECT_EQ(num(s, "purged"), 4);
  EXPECT_EQ(num(s, "backlog"), 0);
  auto bad = post(port(), "/v1/queues/q/purge", R"({"group": 7})");
  EXPECT_EQ(bad.status, 400u) << bad.body;
  auto unknown = post(port(), "/v1/queues/nope/purge", "{}");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_NE(unknown.body.find("nope"), std::string::npos) << unknown.body;
}

// U8-U10: a peek shows messages in group order without a lease, in-flight ones marked.
TEST_F(queue_operations_http, peek_shows_messages_without_a_lease) {
  create("q", by_account);
  send("q", R"({"messages": [{"body": "a1", "headers": {"account": "a"}},
                             {"body": "a2", "headers": {"account": "a"}},
                             {"body": "b1", "headers": {"account": "b"}}]})");
  auto held = receive("q", R"({"max": 1})");
  ASSERT_EQ(held.size(), 1u);
  auto p = get(port(), "/v1/queues/q/messages?limit=10&group=a");
  ASSERT_EQ(p.status, 200u) << p.body;
  const auto& ms = p.obj().at("messages").as_array();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(str(ms[0].at("body")), "a1");
  EXPECT_TRUE(ms[0].at("in_flight").as_bool());
  EXPECT_TRUE(ms[0].as_object().contains("lease_deadline_ms"));
  EXPECT_EQ(str(ms[1].at("body")), "a2");
  EXPECT_FALSE(ms[1].at("in_flight").as_bool());
  EXPECT_EQ(str(ms[1].at("ordering_key")), "a");
  EXPECT_EQ(ms[1].at("attempts").to_number<int>(), 0);
  auto limited = get(port(), "/v1/queues/q/messages?limit=1");
  ASSERT_EQ(limited.status, 200u) << limited.body;
  EXPECT_EQ(limited.obj().at("messages").as_array().size(), 1u);
  EXPECT_EQ(num(stats("q"), "delivered"), 1) << "a peek delivers nothing";
  EXPECT_EQ(get(port(), "/v1/queues/q/messages?limit=0").status, 400u);
  auto big = get(port(), "/v1/queues/q/messages?limit=1001");
  EXPECT_EQ(big.status, 400u);
  EXPECT_NE(big.body.find("1 to 1000"), std::string::npos) << big.body;
  EXPECT_EQ(get(port(), "/v1/queues/q/messages?max=3").status, 400u);
}

// U11, U12: dead letters deleted one by one, by a list, and all; an unknown id deletes nothing.
TEST_F(queue_operations_http, dead_letters_are_deleted_one_some_or_all) {
  create("q", "{}");
  send("q", R"({"messages": [{"body": "1"}, {"body": "2"}, {"body": "3"}, {"body": "4"},
                             {"body": "5"}]})");
  dead_letter_all("q");
  auto ids = dead_ids("q");
  ASSERT_EQ(ids.size(), 5u);
  auto one = del(port(), "/v1/queues/q/dead-letters/" + ids[0]);
  ASSERT_EQ(one.status, 200u) << one.body;
  EXPECT_EQ(num(one.obj(), "deleted"), 1);
  auto again = del(port(), "/v1/queues/q/dead-letters/" + ids[0]);
  EXPECT_EQ(again.status, 404u);
  EXPECT_EQ(again.code(), "dead_letter_not_found");
  EXPECT_NE(again.body.find("queue 'q'"), std::string::npos) << again.body;
  EXPECT_EQ(del(port(), "/v1/queues/q/dead-letters/x1").status, 400u);
  auto mixed = del_with("/v1/queues/q/dead-letters",
                        R"({"ids": [")" + ids[1] + R"(", ")" + ids[0] + R"("]})");
  EXPECT_EQ(mixed.status, 404u) << "one id is not a dead letter: " << mixed.body;
  EXPECT_EQ(dead_ids("q").size(), 4u) << "and then none is deleted";
  auto some = del_with("/v1/queues/q/dead-letters",
                       R"({"ids": [")" + ids[1] + R"(", ")" + ids[2] + R"("]})");
  ASSERT_EQ(some.status, 200u) << some.body;
  EXPECT_EQ(num(some.obj(), "deleted"), 2);
  EXPECT_EQ(del_with("/v1/queues/q/dead-letters", R"({"ids": []})").status, 400u);
  auto all = del(port(), "/v1/queues/q/dead-letters");
  ASSERT_EQ(all.status, 200u) << all.body;
  EXPECT_EQ(num(all.obj(), "deleted"), 2);
  EXPECT_TRUE(dead_ids("q").empty());
  EXPECT_EQ(num(stats("q"), "dead_letters_deleted"), 5);
}

// U13-U15: a redrive into another queue; the existing redrive body is unchanged.
TEST_F(queue_operations_http, a_redrive_into_another_queue_moves_the_chosen_dead_letters) {
  create("src", "{}");
  create("dst", "{}");
  send("src", R"({"messages": [{"body": "x"}, {"body": "y"}]})");
  dead_letter_all("src");
  auto ids = dead_ids("src");
  ASSERT_EQ(ids.size(), 2u);
  auto missing = post(port(), "/v1/queues/src/dead-letters/redrive", R"({"to": "nowhere"})");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.code(), "queue_not_found");
  EXPECT_NE(missing.body.find("'nowhere'"), std::string::npos) << missing.body;
  EXPECT_NE(missing.body.find("'src'"), std::string::npos) << missing.body;
  EXPECT_EQ(post(port(), "/v1/queues/src/dead-letters/redrive", R"({"to": ""})").status, 400u);
  auto moved = post(port(), "/v1/queues/src/dead-letters/redrive",
                    R"({"ids": [")" + ids[1] + R"("], "to": "dst"})");
  ASSERT_EQ(moved.status, 200u) << moved.body;
  EXPECT_EQ(num(moved.obj(), "redriven"), 1);
  EXPECT_EQ(dead_ids("src"), (std::vector<std::string>{ids[0]}));
  auto got = receive("dst");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(str(got[0].at("id")), ids[1]) << "a new message of the target, with its own id";
  auto back = post(port(), "/v1/queues/src/dead-letters/redrive", "{}");
  ASSERT_EQ(back.status, 200u) << back.body;
  EXPECT_EQ(num(back.obj(), "redriven"), 1) << "without `to`, into the queue itself";
}

// U16: a queue that is not empty is deleted only with force=true.
TEST_F(queue_operations_http, a_queue_that_is_not_empty_is_deleted_only_with_force) {
  create("q", "{}");
  send("q", R"({"body": "left"})");
  auto refused = del(port(), "/v1/queues/q");
  EXPECT_EQ(refused.status, 409u) << refused.body;
  EXPECT_EQ(refused.code(), "queue_not_empty");
  EXPECT_EQ(refused.number(), 22);
  EXPECT_NE(refused.body.find("queue 'q' is not empty"), std::string::npos) << refused.body;
  EXPECT_EQ(get(port(), "/v1/queues/q").status, 200u) << "nothing changed";
  EXPECT_EQ(del(port(), "/v1/queues/q?force=maybe").status, 400u);
  EXPECT_EQ(del(port(), "/v1/queues/q?force=false").status, 409u);
  auto forced = del(port(), "/v1/queues/q?force=true");
  ASSERT_EQ(forced.status, 200u) << forced.body;
  EXPECT_EQ(get(port(), "/v1/queues/q").status, 404u);
  create("empty", "{}");
  EXPECT_EQ(del(port(), "/v1/queues/empty").status, 200u);
}

}  // namespace
}  // namespace laneq::server::test
