// Every endpoint of the HTTP API (docs/api.md) through a real socket: an in-process server on an
// ephemeral port over an in-memory broker, driven by a synchronous Beast client.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <set>
#include <thread>

#include "faulty_store.hpp"
#include "laneq/actors/memory_store.hpp"
#include "laneq/server/json_mapping.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

using namespace std::chrono_literals;

std::string str(const json::value& v) {
  return std::string{v.as_string()};
}

class http_api : public ::testing::Test {
 protected:
  in_process_server srv_;
  std::uint16_t port() const { return srv_.port(); }

  void create(const std::string& name, const std::string& spec = "{}") {
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
};

TEST_F(http_api, put_creates_201_then_200_when_identical_and_409_when_the_ordering_differs) {
  auto spec = R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}, "lease_ms": 5000})";
  auto a = put(port(), "/v1/queues/orders", spec);
  EXPECT_EQ(a.status, 201u) << a.body;
  EXPECT_TRUE(a.obj().at("created").as_bool());
  EXPECT_EQ(str(a.obj().at("name")), "orders");
  auto b = put(port(), "/v1/queues/orders", spec);
  EXPECT_EQ(b.status, 200u) << b.body;
  EXPECT_FALSE(b.obj().at("created").as_bool());
  auto c = put(port(), "/v1/queues/orders", R"({"ordering": {"mode": "queue"}})");
  EXPECT_EQ(c.status, 409u) << c.body;
  EXPECT_EQ(c.code(), "spec_conflict");
  EXPECT_EQ(c.number(), 2);
  auto bad = put(port(), "/v1/queues/broken", R"({"lease_ms": -1, "max_attempts": 0})");
  EXPECT_EQ(bad.status, 400u) << bad.body;
  EXPECT_EQ(bad.code(), "invalid_spec");
  EXPECT_EQ(get(port(), "/v1/queues/broken").status, 404u);
}

// docs/api.md "Change a queue's settings": PATCH merges the settings it names; a fixed field is
// refused naming it and changes nothing.
TEST_F(http_api, patch_changes_settings_in_place_and_refuses_a_fixed_field) {
  create("orders", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]},
                       "lease_ms": 30000, "throttles": [{"rate_per_s": 5, "burst": 10}]})");
  auto p = patch(port(), "/v1/queues/orders",
                 R"({"lease_ms": 5000, "throttles": [{"rate_per_s": 50, "burst": 10}]})");
  ASSERT_EQ(p.status, 200u) << p.body;
  const auto& spec = p.obj().at("spec").as_object();
  EXPECT_EQ(spec.at("lease_ms").to_number<std::int64_t>(), 5000);
  EXPECT_EQ(spec.at("throttles").as_array()[0].as_object().at("rate_per_s").to_number<double>(),
            50.0);
  EXPECT_EQ(str(spec.at("ordering").as_object().at("mode")), "key");
  auto g = get(port(), "/v1/queues/orders");
  EXPECT_EQ(g.obj().at("spec").as_object().at("lease_ms").to_number<std::int64_t>(), 5000);
  send("orders", R"({"body": "x", "headers": {"account": "A"}})");
  auto ds = receive("orders");
  ASSERT_EQ(ds.size(), 1u);
  auto fixed =
      patch(port(), "/v1/queues/orders", R"({"ordering": {"mode": "queue"}, "lease_ms": 1000})");
  EXPECT_EQ(fixed.status, 400u) << fixed.body;
  EXPECT_EQ(fixed.code(), "invalid_spec");
  EXPECT_NE(fixed.message().find("queue 'orders': ordering.mode: is fixed"), std::string::npos)
      << fixed.message();
  EXPECT_EQ(get(port(), "/v1/queues/orders")
                .obj()
                .at("spec")
                .as_object()
                .at("lease_ms")
                .to_number<std::int64_t>(),
            5000)
      << "a refused patch changes nothing";
  EXPECT_EQ(patch(port(), "/v1/queues/nope", "{}").status, 404u);
  auto not_object = patch(port(), "/v1/queues/orders", "[1]");
  EXPECT_EQ(not_object.status, 400u) << not_object.body;
}

// docs/api.md "Retention": the three fields are created, shown, changed in place with PATCH (null
// clears a period) and refused out of range naming the field.
TEST_F(http_api, retention_settings_are_created_shown_and_patched) {
  create("kept", R"({"retention_ms": 60000, "dead_letter_retention_ms": 86400000})");
  auto spec = [this] { return get(port(), "/v1/queues/kept").obj().at("spec").as_object(); };
  auto s = spec();
  EXPECT_EQ(s.at("retention_ms").to_number<std::int64_t>(), 60000);
  EXPECT_EQ(str(s.at("on_expiry")), "dead_letter") << "the default, shown with retention_ms";
  EXPECT_EQ(s.at("dead_letter_retention_ms").to_number<std::int64_t>(), 86400000);
  auto p =
      patch(port(), "/v1/queues/kept",
            R"({"retention_ms": 1000, "on_expiry": "drop", "dead_letter_retention_ms": null})");
  ASSERT_EQ(p.status, 200u) << p.body;
  s = spec();
  EXPECT_EQ(s.at("retention_ms").to_number<std::int64_t>(), 1000);
  EXPECT_EQ(str(s.at("on_expiry")), "drop");
  EXPECT_FALSE(s.contains("dead_letter_retention_ms")) << "cleared";
  auto bad = patch(port(), "/v1/queues/kept", R"({"retention_ms": 0})");
  EXPECT_EQ(bad.status, 400u) << bad.body;
  EXPECT_EQ(bad.code(), "invalid_spec");
  EXPECT_NE(bad.message().find("queue 'kept': retention_ms: must be between 1 and"),
            std::string::npos)
      << bad.message();
  EXPECT_EQ(spec().at("retention_ms").to_number<std::int64_t>(), 1000) << "nothing changed";
  auto action = put(port(), "/v1/queues/other", R"({"retention_ms": 5, "on_expiry": "archive"})");
  EXPECT_EQ(action.status, 400u) << action.body;
  EXPECT_EQ(action.code(), "invalid_spec");
  EXPECT_NE(action.message().find("on_expiry: 'archive' is not one of dead_letter, drop"),
            std::string::npos)
      << action.message();
  auto long_dead = put(port(), "/v1/queues/other", R"({"dead_letter_retention_ms": 31622400001})");
  EXPECT_EQ(long_dead.status, 400u) << long_dead.body;
  EXPECT_NE(long_dead.message().find("dead_letter_retention_ms: must be between 1 and 31622400000"),
            std::string::npos)
      << long_dead.message();
  // An identical PUT is 200; one that differs in retention names it (spec_conflict).
  EXPECT_EQ(put(port(), "/v1/queues/kept", R"({"retention_ms": 1000, "on_expiry": "drop"})").status,
            200u);
  auto conflict = put(port(), "/v1/queues/kept", R"({"retention_ms": 2000, "on_expiry": "drop"})");
  EXPECT_EQ(conflict.status, 409u) << conflict.body;
  EXPECT_NE(conflict.message().find("retention_ms (existing 1000, requested 2000)"),
            std::string::npos)
      << conflict.message();
}

// docs/design/retention.md RT1, RT2, RT9 through laneqd: a message past retention_ms is
// dead-lettered with reason expired, and the dead letter is deleted past
// dead_letter_retention_ms; both are counted. Real time: each step is awaited (up to 20 s).
TEST_F(http_api, an_expired_message_is_dead_lettered_then_its_dead_letter_deleted) {
  create("brief", R"({"retention_ms": 100, "dead_letter_retention_ms": 400})");
  ASSERT_EQ(post(port(), "/v1/queues/brief/messages", R"({"body": "x"})").status, 200u);
  auto await = [](const std::function<bool()>& done) {
    auto until = std::chrono::steady_clock::now() + 20s;
    while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
    return done();
  };
  auto letters = [this] {
    return get(port(), "/v1/queues/brief/dead-letters").obj().at("dead_letters").as_array();
  };
  auto stat = [this](const char* name) {
    return get(port(), "/v1/queues/brief")
        .obj()
        .at("stats")
        .as_object()
        .at(name)
        .to_number<std::int64_t>();
  };
  ASSERT_TRUE(await([&] { return letters().size() == 1; })) << "the message never expired";
  auto first = letters();
  EXPECT_EQ(str(first[0].as_object().at("reason")), "expired");
  EXPECT_EQ(str(first[0].as_object().at("body")), "x");
  EXPECT_EQ(stat("expired_dead_lettered"), 1);
  EXPECT_EQ(stat("backlog"), 0);
  auto got = post(port(), "/v1/queues/brief/receive", R"({"max": 10})");
  EXPECT_EQ(got.obj().at("messages").as_array().size(), 0u) << got.body;
  ASSERT_TRUE(await([&] { return letters().empty(); })) << "the dead letter was never deleted";
  EXPECT_EQ(stat("dead_letters_expired"), 1);
  EXPECT_EQ(stat("dead_letters_deleted"), 0);
}

// docs/api.md "Backpressure": 429 queue_full with Retry-After, the whole batch refused.
TEST_F(http_api, a_full_queue_answers_429_with_retry_after_and_stores_nothing) {
  create("bounded", R"({"max_depth": {"messages": 2}})");
  send("bounded", R"({"body": "a"})");
  auto full = post(port(), "/v1/queues/bounded/messages",
                   R"({"messages": [{"body": "b"}, {"body": "c"}]})");
  EXPECT_EQ(full.status, 429u) << full.body;
  EXPECT_EQ(full.code(), "queue_full");
  EXPECT_EQ(full.number(), 21);
  EXPECT_EQ(full.header("Retry-After"), "1");
  EXPECT_NE(full.message().find("queue 'bounded' is full: max_depth.messages is 2"),
            std::string::npos)
      << full.message();
  auto st = stats("bounded");
  EXPECT_EQ(st.at("backlog").to_number<std::int64_t>(), 1) << "nothing of the batch was stored";
  EXPECT_EQ(st.at("backlog_bytes").to_number<std::int64_t>(), 1);
  EXPECT_EQ(st.at("refused_full").to_number<std::int64_t>(), 1);
  // Raised with PATCH: the next enqueue fits.
  ASSERT_EQ(patch(port(), "/v1/queues/bounded", R"({"max_depth": {"messages": 3}})").status, 200u);
  send("bounded", R"({"messages": [{"body": "b"}, {"body": "c"}]})");
}

// An empty body is refused at every entry (docs/api.md "POST /v1/queues/{name}/messages").
TEST_F(http_api, an_enqueue_without_a_body_is_refused_naming_the_message) {
  create("q");
  for (const char* body : {R"({"headers": {"a": "1"}})", R"({"body": ""})",
                           R"({"messages": [{"body": "x"}, {"body_base64": ""}]})"}) {
    auto r = post(port(), "/v1/queues/q/messages", body);
    EXPECT_EQ(r.status, 400u) << body << ": " << r.body;
    EXPECT_EQ(r.code(), "invalid_argument");
    EXPECT_NE(r.message().find("body is empty"), std::string::npos) << r.message();
  }
  EXPECT_EQ(stats("q").at("backlog").to_number<std::int64_t>(), 0);
}

TEST_F(http_api, list_get_and_delete_queues) {
  create("a");
  create("b");
  auto l = get(port(), "/v1/queues");
  ASSERT_EQ(l.status, 200u);
  const auto& names = l.obj().at("queues").as_array();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(str(names[0]), "a");
  EXPECT_EQ(str(names[1]), "b");
  auto g = get(port(), "/v1/queues/a");
  ASSERT_EQ(g.status, 200u) << g.body;
  EXPECT_EQ(str(g.obj().at("name")), "a");
  EXPECT_TRUE(g.obj().at("summary").is_string());
  EXPECT_EQ(g.obj().at("stats").as_object().at("backlog").to_number<std::int64_t>(), 0);
  auto d = del(port(), "/v1/queues/a");
  EXPECT_EQ(d.status, 200u) << d.body;
  auto gone = get(port(), "/v1/queues/a");
  EXPECT_EQ(gone.status, 404u);
  EXPECT_EQ(gone.code(), "queue_not_found");
  EXPECT_EQ(gone.number(), 3);
  EXPECT_EQ(del(port(), "/v1/queues/a").status, 404u);
}

TEST_F(http_api, enqueue_receive_and_ack_round_trip_with_every_field) {
  create("q");
  auto ids = send("q", R"({"body": "hello", "headers": {"account": "a1"}, "fairness_key": "t1"})");
  ASSERT_EQ(ids.size(), 1u);
  auto more = send("q", R"({"messages": [{"body": "two"}, {"body_base64": "AP8="}]})");
  ASSERT_EQ(more.size(), 2u);
  auto msgs = receive("q");
  ASSERT_EQ(msgs.size(), 3u);
  const auto& m = msgs[0].as_object();
  EXPECT_EQ(str(m.at("id")), ids[0]);
  EXPECT_EQ(str(m.at("body")), "hello");
  EXPECT_EQ(str(m.at("headers").as_object().at("account")), "a1");
  EXPECT_EQ(str(m.at("fairness_key")), "t1");
  EXPECT_EQ(m.at("attempt").to_number<std::int64_t>(), 1);
  EXPECT_TRUE(m.at("lease").is_string());
  EXPECT_TRUE(m.at("ordering_key").is_string());
  EXPECT_GT(m.at("enqueued_at_ms").to_number<std::int64_t>(), 0);
  const auto& bin = msgs[2].as_object();
  EXPECT_EQ(str(bin.at("body_base64")), "AP8=");

  auto ack = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + str(m.at("lease")) + R"("})");
  EXPECT_EQ(ack.status, 200u) << ack.body;
  EXPECT_EQ(ack.obj().at("acked").to_number<std::int64_t>(), 1);
  auto again = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + str(m.at("lease")) + R"("})");
  EXPECT_EQ(again.status, 404u) << again.body;
  EXPECT_EQ(again.code(), "lease_not_found");
  // The error names the lease as it was sent, not in the broker's own text form.
  EXPECT_NE(again.body.find(str(m.at("lease"))), std::string::npos) << again.body;

  auto batch =
      post(port(), "/v1/queues/q/ack",
           R"({"leases": [")" + str(msgs[1].as_object().at("lease")) + R"(", ")" +
               str(msgs[2].as_object().at("lease")) + R"(", ")" + str(m.at("lease")) + R"("]})");
  ASSERT_EQ(batch.status, 200u) << batch.body;
  EXPECT_EQ(batch.obj().at("acked").to_number<std::int64_t>(), 2);
  ASSERT_EQ(batch.obj().at("failed").as_array().size(), 1u);
  const auto& f = batch.obj().at("failed").as_array()[0].as_object();
  EXPECT_EQ(str(f.at("lease")), str(m.at("lease")));
  EXPECT_EQ(str(f.at("error").as_object().at("code")), "lease_not_found");
  EXPECT_NE(str(f.at("error").as_object().at("message")).find(str(m.at("lease"))),
            std::string::npos)
      << batch.body;
  auto s = stats("q");
  EXPECT_EQ(s.at("acked").to_number<std::int64_t>(), 3);
  EXPECT_EQ(s.at("backlog").to_number<std::int64_t>(), 0);
}

TEST_F(http_api, nack_retries_then_dead_letters_and_redrive_brings_it_back) {
  create("q", R"({"max_attempts": 5})");
  auto ids = send("q", R"({"body": "x"})");
  auto first = receive("q");
  ASSERT_EQ(first.size(), 1u);
  auto lease = str(first[0].as_object().at("lease"));
  auto nack =
      post(port(), "/v1/queues/q/nack", R"({"lease": ")" + lease + R"(", "retry_after_ms": 0})");
  EXPECT_EQ(nack.status, 200u) << nack.body;
  auto second = receive("q");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].as_object().at("attempt").to_number<std::int64_t>(), 2);
  // The old lease is stale now.
  auto stale = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + lease + R"("})");
  EXPECT_EQ(stale.status, 404u) << stale.body;
  EXPECT_TRUE(stale.code() == "lease_not_found" || stale.code() == "lease_expired") << stale.body;
  EXPECT_NE(stale.body.find(lease), std::string::npos) << stale.body;
  auto late =
      post(port(), "/v1/queues/q/extend", R"({"lease": ")" + lease + R"(", "lease_ms": 1000})");
  EXPECT_NE(late.body.find(lease), std::string::npos) << late.body;

  auto dead = post(
      port(), "/v1/queues/q/nack",
      R"({"lease": ")" + str(second[0].as_object().at("lease")) + R"(", "dead_letter": true})");
  EXPECT_EQ(dead.status, 200u) << dead.body;
  auto dl = get(port(), "/v1/queues/q/dead-letters");
  ASSERT_EQ(dl.status, 200u) << dl.body;
  const auto& letters = dl.obj().at("dead_letters").as_array();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(str(letters[0].as_object().at("id")), ids[0]);
  EXPECT_EQ(str(letters[0].as_object().at("reason")), "requested");
  EXPECT_EQ(str(letters[0].as_object().at("body")), "x");

  auto missing = post(port(), "/v1/queues/q/dead-letters/redrive", R"({"ids": ["999999"]})");
  EXPECT_EQ(missing.status, 404u) << missing.body;
  EXPECT_EQ(missing.code(), "dead_letter_not_found");
  auto redrive =
      post(port(), "/v1/queues/q/dead-letters/redrive", R"({"ids": [")" + ids[0] + R"("]})");
  ASSERT_EQ(redrive.status, 200u) << redrive.body;
  EXPECT_EQ(redrive.obj().at("redriven").to_number<std::int64_t>(), 1);
  auto back = receive("q");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(str(back[0].as_object().at("id")), ids[0]);
  auto all = post(port(), "/v1/queues/q/dead-letters/redrive", "{}");
  EXPECT_EQ(all.status, 200u);
  EXPECT_EQ(all.obj().at("redriven").to_number<std::int64_t>(), 0);
}

TEST_F(http_api, extend_moves_the_deadline_and_a_stale_lease_is_404) {
  create("q");
  send("q", R"({"body": "x"})");
  auto msgs = receive("q", R"({"max": 1, "lease_ms": 1000})");
  ASSERT_EQ(msgs.size(), 1u);
  auto lease = str(msgs[0].as_object().at("lease"));
  auto before = msgs[0].as_object().at("lease_deadline_ms").to_number<std::int64_t>();
  auto ext =
      post(port(), "/v1/queues/q/extend", R"({"lease": ")" + lease + R"(", "lease_ms": 60000})");
  ASSERT_EQ(ext.status, 200u) << ext.body;
  EXPECT_GT(ext.obj().at("lease_deadline_ms").to_number<std::int64_t>(), before);
  lease_token forged = *decode_lease(lease);
  forged.nonce ^= 1;
  auto bad = post(port(), "/v1/queues/q/extend",
                  R"({"lease": ")" + encode_lease(forged) + R"(", "lease_ms": 1000})");
  EXPECT_EQ(bad.status, 404u) << bad.body;
}

// Ordered batches (docs/design/ordering.md O12, docs/api.md "receive", "ack", "nack").
TEST_F(http_api, a_batch_shares_a_lease_with_batch_indexes_and_acks_a_prefix) {
  create("q", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  send("q", R"({"messages": [{"body": "a1", "headers": {"account": "a"}},
                             {"body": "a2", "headers": {"account": "a"}},
                             {"body": "a3", "headers": {"account": "a"}},
                             {"body": "b1", "headers": {"account": "b"}}]})");
  auto msgs = receive("q", R"({"max": 10, "batch": 3})");
  ASSERT_EQ(msgs.size(), 4u);
  std::vector<std::pair<std::string, std::int64_t>> got;
  for (const auto& m : msgs)
    got.emplace_back(str(m.as_object().at("body")),
                     m.as_object().at("batch_index").to_number<std::int64_t>());
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::int64_t>>{
                     {"a1", 0}, {"a2", 1}, {"a3", 2}, {"b1", 0}}));
  auto lease = str(msgs[0].as_object().at("lease"));
  EXPECT_EQ(str(msgs[2].as_object().at("lease")), lease);
  EXPECT_EQ(lease.size(), 43u);
  EXPECT_EQ(str(msgs[3].as_object().at("lease")).size(), 38u) << "a batch of one: a plain lease";

  auto part = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + lease + R"(", "count": 2})");
  ASSERT_EQ(part.status, 200u) << part.body;
  EXPECT_EQ(part.obj().at("acked").to_number<std::int64_t>(), 2);
  EXPECT_EQ(part.obj().at("remaining").to_number<std::int64_t>(), 1);
  auto again = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + lease + R"(", "count": 2})");
  EXPECT_EQ(again.status, 400u) << again.body;
  EXPECT_EQ(again.code(), "invalid_argument");
  EXPECT_NE(again.body.find("count 2"), std::string::npos) << again.body;
  auto past = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + lease + R"(", "count": 4})");
  EXPECT_EQ(past.status, 400u) << past.body;
  auto ext =
      post(port(), "/v1/queues/q/extend", R"({"lease": ")" + lease + R"(", "lease_ms": 60000})");
  EXPECT_EQ(ext.status, 200u) << ext.body;
  auto rest = post(port(), "/v1/queues/q/ack", R"({"lease": ")" + lease + R"("})");
  ASSERT_EQ(rest.status, 200u) << rest.body;
  EXPECT_EQ(stats("q").at("acked").to_number<std::int64_t>(), 3);
}

TEST_F(http_api, a_nack_from_i_acks_those_before_and_returns_the_rest_in_order) {
  create("q", R"({"ordering": {"mode": "queue"}})");
  send("q", R"({"messages": [{"body": "x1"}, {"body": "x2"}, {"body": "x3"}, {"body": "x4"}]})");
  auto msgs = receive("q", R"({"max": 10, "batch": 4})");
  ASSERT_EQ(msgs.size(), 4u);
  auto lease = str(msgs[0].as_object().at("lease"));
  auto bad = post(port(), "/v1/queues/q/nack", R"({"lease": ")" + lease + R"(", "from": 4})");
  EXPECT_EQ(bad.status, 400u) << bad.body;
  EXPECT_EQ(bad.code(), "invalid_argument");
  EXPECT_NE(bad.body.find("from 4"), std::string::npos) << bad.body;
  auto too_big = post(port(), "/v1/queues/q/receive", R"({"batch": 101})");
  EXPECT_EQ(too_big.status, 400u) << too_big.body;
  EXPECT_NE(too_big.body.find("batch"), std::string::npos) << too_big.body;
  auto nack = post(port(), "/v1/queues/q/nack",
                   R"({"lease": ")" + lease + R"(", "from": 2, "retry_after_ms": 0})");
  ASSERT_EQ(nack.status, 200u) << nack.body;
  auto again = receive("q", R"({"max": 10, "batch": 4})");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(str(again[0].as_object().at("body")), "x3");
  EXPECT_EQ(again[0].as_object().at("attempt").to_number<std::int64_t>(), 2);
  EXPECT_EQ(str(again[1].as_object().at("body")), "x4");
  EXPECT_EQ(again[1].as_object().at("attempt").to_number<std::int64_t>(), 1);
  auto dead = post(port(), "/v1/queues/q/nack",
                   R"({"lease": ")" + str(again[0].as_object().at("lease")) +
                       R"(", "from": 1, "dead_letter": true})");
  ASSERT_EQ(dead.status, 200u) << dead.body;
  auto dl = get(port(), "/v1/queues/q/dead-letters");
  ASSERT_EQ(dl.status, 200u);
  ASSERT_EQ(dl.obj().at("dead_letters").as_array().size(), 1u);
  EXPECT_EQ(str(dl.obj().at("dead_letters").as_array()[0].as_object().at("body")), "x4");
  auto s = stats("q");
  EXPECT_EQ(s.at("acked").to_number<std::int64_t>(), 3);
  EXPECT_EQ(s.at("backlog").to_number<std::int64_t>(), 0);
}

TEST_F(http_api, groups_report_blocked_groups_with_state_and_head) {
  create("q", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  auto ids = send("q", R"({"messages": [{"body": "1", "headers": {"account": "a"}},
                                         {"body": "2", "headers": {"account": "a"}},
                                         {"body": "3", "headers": {"account": "b"}}]})");
  // Either group's head may be offered first; the blocked group is the one delivered. A receive
  // without a wait sees what the enqueue's answer confirmed (docs/api.md).
  auto msgs = receive("q", R"({"max": 1})");
  ASSERT_EQ(msgs.size(), 1u);
  const auto& got = msgs[0].as_object();
  bool from_a = str(got.at("body")) == "1";
  EXPECT_EQ(str(got.at("id")), from_a ? ids[0] : ids[2]);
  auto all = get(port(), "/v1/queues/q/groups");
  ASSERT_EQ(all.status, 200u) << all.body;
  EXPECT_EQ(all.obj().at("groups").as_array().size(), 2u);
  auto blocked = get(port(), "/v1/queues/q/groups?state=blocked");
  ASSERT_EQ(blocked.status, 200u) << blocked.body;
  const auto& gs = blocked.obj().at("groups").as_array();
  ASSERT_EQ(gs.size(), 1u);
  const auto& g = gs[0].as_object();
  EXPECT_EQ(str(g.at("state")), "in_flight");
  EXPECT_EQ(g.at("backlog").to_number<std::int64_t>(), from_a ? 2 : 1);
  EXPECT_EQ(str(g.at("head")), str(got.at("id")));
  EXPECT_GT(g.at("until_ms").to_number<std::int64_t>(), 0);
  EXPECT_TRUE(g.contains("key") && g.contains("since_ms"));
  EXPECT_EQ(get(port(), "/v1/queues/q/groups?state=weird").status, 400u);
  EXPECT_EQ(get(port(), "/v1/queues/q/groups?colour=red").status, 400u);
}

// Issue 22 §5: one unpaged listing of every group froze the broker. 3,000 groups answer in pages
// of the default 1,000, each with a next_cursor but the last; paging lists each group once.
TEST_F(http_api, groups_come_in_pages_that_list_each_group_exactly_once) {
  create("q", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  constexpr int groups = 3000;
  for (int batch = 0; batch < groups / 1000; ++batch) {
    std::string body = R"({"messages": [)";
    for (int i = 0; i < 1000; ++i)
      body += std::string{i ? "," : ""} + R"({"body": "x", "headers": {"account": "a)" +
              std::to_string(batch * 1000 + i) + R"("}})";
    ASSERT_EQ(send("q", body + "]}").size(), 1000u);
  }
  auto first = get(port(), "/v1/queues/q/groups");
  ASSERT_EQ(first.status, 200u) << first.body.substr(0, 200);
  EXPECT_EQ(first.obj().at("groups").as_array().size(), 1000u) << "the default limit";
  EXPECT_TRUE(first.obj().contains("next_cursor")) << "more groups follow";
  std::set<std::string> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto r =
        get(port(), "/v1/queues/q/groups?limit=700" + (cursor.empty() ? "" : "&cursor=" + cursor));
    ASSERT_EQ(r.status, 200u) << r.body.substr(0, 200);
    for (const auto& g : r.obj().at("groups").as_array())
      EXPECT_TRUE(seen.insert(str(g.as_object().at("key"))).second) << "listed twice";
    cursor = r.obj().contains("next_cursor") ? str(r.obj().at("next_cursor")) : "";
    ASSERT_LE(++pages, 5);
  } while (!cursor.empty());
  EXPECT_EQ(pages, 5) << "700 + 700 + 700 + 700 + 200";
  EXPECT_EQ(seen.size(), std::size_t{groups});
}

// A limit out of 1..10000 and a cursor that no page gave are 400 invalid_argument, naming the
// parameter.
TEST_F(http_api, groups_refuse_a_bad_limit_or_cursor_naming_the_parameter) {
  create("q", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  for (const char* query : {"limit=0", "limit=10001", "limit=ten", "limit=-1", "cursor=zz",
                            "cursor=0123456789ABCDEF0123456789abcdef", "cursor="}) {
    auto r = get(port(), std::string{"/v1/queues/q/groups?"} + query);
    EXPECT_EQ(r.status, 400u) << query;
    EXPECT_EQ(str(r.obj().at("error").as_object().at("code")), "invalid_argument") << query;
    std::string param{query, std::string_view{query}.find('=')};
    EXPECT_NE(r.body.find(param), std::string::npos) << query << ": " << r.body;
  }
  EXPECT_EQ(get(port(), "/v1/queues/q/groups?limit=10000").status, 200u);
}

TEST_F(http_api, a_long_poll_waits_without_holding_the_only_http_thread) {
  create("q");
  // The server has one HTTP thread. While the receive below waits in the broker, the stats reads
  // and the enqueue are served on that thread, and the enqueue wakes the receive: a long poll
  // that waits out its time is answered empty, so an answer holding "wake" can only come from
  // the enqueue. (The wait is the longest allowed, so that a slow machine does not see it end.)
  auto waiting = std::async(std::launch::async, [this] {
    return post(port(), "/v1/queues/q/receive", R"({"max": 1, "wait_ms": 20000})");
  });
  auto waiting_receives = [this] {
    return stats("q").at("waiting_receives").to_number<std::int64_t>();
  };
  // Until the broker holds the receive (a hang guard, not a speed requirement).
  auto until = std::chrono::steady_clock::now() + 15s;
  while (waiting_receives() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(waiting_receives(), 1) << "the receive never waited in the broker";
  send("q", R"({"body": "wake"})");
  auto r = waiting.get();
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_EQ(r.obj().at("messages").as_array().size(), 1u) << "the enqueue did not wake the receive";
  EXPECT_EQ(str(r.obj().at("messages").as_array()[0].as_object().at("body")), "wake");
  EXPECT_EQ(waiting_receives(), 0);

  auto started = std::chrono::steady_clock::now();
  auto empty = post(port(), "/v1/queues/q/receive", R"({"max": 1, "wait_ms": 150})");
  EXPECT_EQ(empty.status, 200u);
  EXPECT_TRUE(empty.obj().at("messages").as_array().empty());
  EXPECT_GE(std::chrono::steady_clock::now() - started, 140ms);
}

TEST_F(http_api, keep_alive_serves_many_requests_on_one_connection) {
  create("q");
  client c{port()};
  for (int i = 0; i < 20; ++i) {
    auto r = c.call(http::verb::post, "/v1/queues/q/messages", R"({"body": "k"})");
    ASSERT_EQ(r.status, 200u) << r.body;
  }
  EXPECT_EQ(stats("q").at("enqueued").to_number<std::int64_t>(), 20);
}

// Requests and answers several times the connection's read buffer (64 KiB) arrive whole, one
// after the other on one connection: the parser gets the body across many reads.
TEST_F(http_api, batches_larger_than_the_read_buffer_round_trip_intact) {
  create("q");
  client c{port()};
  auto body_of = [](int i) {
    std::string b(3000, static_cast<char>('a' + i % 26));
    b += std::to_string(i);
    return b;
  };
  for (int batch = 0; batch < 2; ++batch) {
    json::array msgs;
    for (int i = 0; i < 50; ++i) msgs.push_back(json::object{{"body", body_of(batch * 50 + i)}});
    auto text = json::serialize(json::object{{"messages", std::move(msgs)}});
    ASSERT_GT(text.size(), 2 * http_bounds::read_buffer_bytes);
    auto r = c.call(http::verb::post, "/v1/queues/q/messages", text);
    ASSERT_EQ(r.status, 200u) << r.message();
    ASSERT_EQ(r.obj().at("ids").as_array().size(), 50u);
  }
  auto got = c.call(http::verb::post, "/v1/queues/q/receive", R"({"max": 100})");
  ASSERT_EQ(got.status, 200u) << got.message();
  ASSERT_GT(got.body.size(), 2 * http_bounds::read_buffer_bytes);
  const auto& arr = got.obj().at("messages").as_array();
  ASSERT_EQ(arr.size(), 100u);
  std::set<std::string> bodies;
  for (const auto& m : arr) bodies.insert(std::string{m.as_object().at("body").as_string()});
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(bodies.count(body_of(i))) << "message " << i;
}

TEST_F(http_api, bad_requests_get_numbered_errors_and_change_nothing) {
  create("q");
  auto unknown = get(port(), "/v2/nothing");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(unknown.code(), "route_not_found");
  EXPECT_EQ(unknown.number(), 17);
  auto method = del(port(), "/v1/queues/q/messages");
  EXPECT_EQ(method.status, 405u);
  EXPECT_EQ(method.code(), "route_not_found");
  EXPECT_EQ(method.header("Allow"), "POST, GET");
  auto malformed = post(port(), "/v1/queues/q/messages", R"({"body": )");
  EXPECT_EQ(malformed.status, 400u);
  EXPECT_EQ(malformed.code(), "invalid_argument");
  EXPECT_EQ(malformed.number(), 8);
  auto field = post(port(), "/v1/queues/q/messages", R"({"body": "x", "priority": 1})");
  EXPECT_EQ(field.status, 400u);
  EXPECT_NE(field.body.find("priority"), std::string::npos);
  auto lease = post(port(), "/v1/queues/q/ack", R"({"lease": "garbage"})");
  EXPECT_EQ(lease.status, 400u);
  auto missing = post(port(), "/v1/queues/nope/messages", R"({"body": "x"})");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.code(), "queue_not_found");
  auto escape = get(port(), "/v1/queues/bad%zz");
  EXPECT_EQ(escape.status, 400u);
  EXPECT_EQ(stats("q").at("enqueued").to_number<std::int64_t>(), 0);
}

TEST_F(http_api, a_percent_encoded_slash_names_a_tenant_queue) {
  auto r = put(port(), "/v1/queues/acme%2Forders", "{}");
  ASSERT_EQ(r.status, 201u) << r.body;
  EXPECT_EQ(str(r.obj().at("name")), "acme/orders");
  send("acme%2Forders", R"({"body": "x"})");
  auto l = get(port(), "/v1/queues");
  EXPECT_EQ(str(l.obj().at("queues").as_array()[0]), "acme/orders");
  EXPECT_EQ(stats("acme%2Forders").at("enqueued").to_number<std::int64_t>(), 1);
}

TEST_F(http_api, metrics_expose_the_named_series) {
  create("q", R"({"ordering": {"mode": "key", "key": [{"header": "account"}],
                  "when_key_missing": "unordered"}})");
  send("q", R"({"messages": [{"body": "1", "headers": {"account": "a"}}, {"body": "2"}]})");
  auto msgs = receive("q", R"({"max": 2})");  // no wait: both heads are offered already
  ASSERT_EQ(msgs.size(), 2u);
  post(port(), "/v1/queues/q/ack",
       R"({"lease": ")" + str(msgs[0].as_object().at("lease")) + R"("})");
  send("q", R"({"body": "3", "fairness_key": "tenant-7"})");
  auto m = get(port(), "/metrics");
  ASSERT_EQ(m.status, 200u);
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u);
  for (const std::string series :
       {"laneq_enqueued_total{queue=\"q\"} 3",
        "laneq_delivered_total{queue=\"q\"} 2",
        "laneq_acked_total{queue=\"q\"} 1",
        "laneq_nacked_total{queue=\"q\"} 0",
        "laneq_lease_expired_total{queue=\"q\"} 0",
        "laneq_dead_lettered_total{queue=\"q\"} 0",
        "laneq_redriven_total{queue=\"q\"} 0",
        "laneq_lane_key_missing_total{queue=\"q\"} 2",
        "laneq_window_reads_total{queue=\"q\"} 0",
        "laneq_window_read_messages_total{queue=\"q\"} 0",
        "# TYPE laneq_window_bytes gauge",
        "laneq_window_bytes{queue=\"q\"} ",
        "laneq_backlog{queue=\"q\"} 2",
        "laneq_in_flight{queue=\"q\"} 1",
        "laneq_live_groups{queue=\"q\"}",
        "# TYPE laneq_store_batch_writes histogram",
        "laneq_store_batch_writes_bucket{le=\"+Inf\"}",
        "# TYPE laneq_store_commit_seconds histogram",
        "laneq_store_commit_seconds_bucket{le=\"0.0005\"}",
        "laneq_http_request_duration_seconds_bucket{route=\"enqueue\",le=\"0.001\"}",
        "laneq_http_request_duration_seconds_count{route=\"receive\"} 1",
        "laneq_enqueue_to_delivery_seconds_count{queue=\"q\"} 2",
        "laneq_fairness_key_backlog{queue=\"q\",fairness_key=\"tenant-7\"} 1"})
    EXPECT_NE(m.body.find(series), std::string::npos) << series << "\n" << m.body;
  // The unordered message waiting holds memory in its class's window (persistence.md P12).
  EXPECT_EQ(m.body.find("laneq_window_bytes{queue=\"q\"} 0\n"), std::string::npos) << m.body;
}

TEST_F(http_api, healthz_is_ok_on_a_healthy_store) {
  auto h = get(port(), "/healthz");
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(str(h.obj().at("status")), "ok");
}

/// A store that answers stats as degraded (and keeps everything in memory otherwise).
class degraded_store : public actor_base<store_actor> {
 public:
  explicit degraded_store(caf::actor_config& cfg) : actor_base<store_actor>(cfg) {}
  behavior_type make_behavior() override {
    inner_ = spawn<memory_store_impl>();
    return {
        [this](write_atom, store_write& w) { return delegate(inner_, write_atom_v, std::move(w)); },
        [this](scan_atom, std::string& from, std::string& to, std::uint32_t max) {
          return delegate(inner_, scan_atom_v, std::move(from), std::move(to), max);
        },
        [](stats_atom) {
          store_stats s;
          s.degraded = true;
          s.reason = "injected: the disk is full";
          return s;
        },
        [](checkpoint_atom, const std::string& dir) -> caf::result<checkpoint_info> {
          return to_caf(
              error{errc::storage_failed,
                    "checkpoint '" + dir + "': store degraded: injected: the disk is full"});
        },
        [](commit_atom, std::uint64_t) {},
        [](reopen_atom) {},
    };
  }
  void on_exit() override {
    anon_send_exit(inner_, caf::exit_reason::user_shutdown);
    inner_ = nullptr;
  }

 private:
  store_actor inner_;
};

TEST(http_health, healthz_is_503_with_the_reason_when_the_store_is_degraded) {
  in_process_server srv{[](caf::actor_system& sys) { return sys.spawn<degraded_store>(); },
                        http_limits{}};
  auto h = get(srv.port(), "/healthz");
  EXPECT_EQ(h.status, 503u);
  EXPECT_EQ(str(h.obj().at("status")), "degraded");
  EXPECT_EQ(str(h.obj().at("reason")), "injected: the disk is full");
  auto m = get(srv.port(), "/metrics");
  EXPECT_NE(m.body.find("laneq_store_degraded 1"), std::string::npos);
}

TEST(http_call_timeout, a_call_the_broker_never_answers_fails_with_503_unavailable) {
  auto faults = std::make_shared<laneq::test::store_faults>();
  in_process_server srv{
      [faults](caf::actor_system& sys) { return sys.spawn<laneq::test::faulty_store>(faults); },
      http_limits{}, std::chrono::milliseconds{300}};
  ASSERT_EQ(put(srv.port(), "/v1/queues/q", "{}").status, 201u);
  faults->hold_appends = true;  // the store hangs
  client c{srv.port()};
  c.stream().expires_after(20s);  // a call that is never failed must not hang the test
  auto started = std::chrono::steady_clock::now();
  auto r = c.call(http::verb::post, "/v1/queues/q/messages", R"({"body": "hangs"})");
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.status, 503u) << r.body;
  EXPECT_EQ(r.code(), "unavailable");
  EXPECT_NE(r.message().find("did not answer within"), std::string::npos) << r.body;
  // The gateway's timeout answered (the message above), not before the call's 300 ms were up;
  // how soon after is the machine's business (the stream's 20 s expiry guards against a hang).
  EXPECT_GE(took, 300ms);
  // The connection and the broker serve on once the store answers again.
  faults->hold_appends = false;
  c.stream().expires_after(20s);
  auto ok = c.call(http::verb::post, "/v1/queues/q/messages", R"({"body": "goes"})");
  EXPECT_EQ(ok.status, 200u) << ok.body;
}

TEST(http_checkpoint, a_degraded_store_refuses_with_503_naming_the_path) {
  in_process_server srv{[](caf::actor_system& sys) { return sys.spawn<degraded_store>(); },
                        http_limits{}};
  auto r = post(srv.port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/laneq-never-written"})");
  EXPECT_EQ(r.status, 503u) << r.body;
  EXPECT_EQ(r.code(), "storage_failed");
  EXPECT_NE(r.message().find("/tmp/laneq-never-written"), std::string::npos) << r.body;
}

TEST(http_checkpoint, an_in_memory_broker_has_nothing_to_checkpoint) {
  in_process_server srv;
  auto r = post(srv.port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/laneq-never-written"})");
  EXPECT_EQ(r.status, 500u) << r.body;
  EXPECT_EQ(r.code(), "checkpoint_failed");
  EXPECT_EQ(r.number(), 19);
  EXPECT_NE(r.message().find("no data directory"), std::string::npos) << r.body;
  EXPECT_FALSE(std::filesystem::exists("/tmp/laneq-never-written"));
}

TEST(http_checkpoint, the_body_is_checked_before_the_store_is_asked) {
  in_process_server srv;
  auto relative = post(srv.port(), "/v1/admin/checkpoint", R"({"dir": "backups/today"})");
  EXPECT_EQ(relative.status, 400u) << relative.body;
  EXPECT_EQ(relative.code(), "invalid_argument");
  EXPECT_NE(relative.message().find("absolute"), std::string::npos) << relative.body;
  EXPECT_EQ(post(srv.port(), "/v1/admin/checkpoint", "{}").status, 400u);
  EXPECT_EQ(post(srv.port(), "/v1/admin/checkpoint", R"({"dir": 7})").status, 400u);
  auto extra = post(srv.port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/x", "force": true})");
  EXPECT_EQ(extra.status, 400u);
  EXPECT_NE(extra.message().find("force"), std::string::npos) << extra.body;
  auto nul = post(srv.port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/x\u0000y"})");
  EXPECT_EQ(nul.status, 400u) << nul.body;
  auto long_dir =
      post(srv.port(), "/v1/admin/checkpoint",
           R"({"dir": "/)" + std::string(limits::checkpoint_dir_bytes_max, 'a') + "\"}");
  EXPECT_EQ(long_dir.status, 400u) << long_dir.body;
  auto method = get(srv.port(), "/v1/admin/checkpoint");
  EXPECT_EQ(method.status, 405u);
  EXPECT_EQ(method.header("Allow"), "POST");
}

// -- limits --------------------------------------------------------------------------------------

http_limits small_limits() {
  http_limits l;
  l.body_bytes = 2048;
  l.header_count = 8;
  l.header_bytes = 1024;
  l.target_bytes = 128;
  l.batch = 3;
  return l;
}

TEST(http_limits_test, oversized_requests_get_413_with_a_numbered_error_and_change_nothing) {
  in_process_server srv{small_limits()};
  auto port = srv.port();
  ASSERT_EQ(put(port, "/v1/queues/q", "{}").status, 201u);
  auto big = post(port, "/v1/queues/q/messages", R"({"body": ")" + std::string(4096, 'x') + "\"}");
  EXPECT_EQ(big.status, 413u) << big.body;
  EXPECT_EQ(big.code(), "limit_exceeded");
  EXPECT_EQ(big.number(), 9);
  auto batch =
      post(port, "/v1/queues/q/messages",
           R"({"messages": [{"body": "1"}, {"body": "2"}, {"body": "3"}, {"body": "4"}]})");
  EXPECT_EQ(batch.status, 413u) << batch.body;
  auto many = post(port, "/v1/queues/q/receive", R"({"max": 4})");
  EXPECT_EQ(many.status, 413u) << many.body;
  auto target = get(port, "/v1/queues/" + std::string(200, 'q'));
  EXPECT_EQ(target.status, 413u) << target.body;

  {
    client c{port};
    std::string raw = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 20; ++i) raw += "X-Pad-" + std::to_string(i) + ": 1\r\n";
    raw += "\r\n";
    c.send_raw(raw);
    auto r = c.read();
    EXPECT_EQ(r.status, 413u) << r.body;
    EXPECT_EQ(r.code(), "limit_exceeded");
  }
  {
    client c{port};
    c.send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'y') + "\r\n\r\n");
    auto r = c.read();
    EXPECT_EQ(r.status, 413u) << r.body;
  }
  {
    client c{port};
    c.send_raw("NOT HTTP AT ALL\r\n\r\n");
    auto r = c.read();
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_EQ(r.code(), "invalid_argument");
  }
  auto s = get(port, "/v1/queues/q");
  EXPECT_EQ(s.obj().at("stats").as_object().at("enqueued").to_number<std::int64_t>(), 0);
}

// -- auth ----------------------------------------------------------------------------------------

const std::string acme_token = "acme-token-0123456789";
const std::string other_token = "other-token-0123456789";
const std::string admin_token = "admin-token-0123456789";

class http_auth : public ::testing::Test {
 protected:
  in_process_server srv_{http_limits{},
                         {{acme_token, "acme"}, {other_token, "other"}, {admin_token, "*"}}};
  std::uint16_t port() const { return srv_.port(); }
};

TEST_F(http_auth, a_request_without_a_valid_token_gets_401_and_changes_nothing) {
  auto none = put(port(), "/v1/queues/orders", "{}");
  EXPECT_EQ(none.status, 401u);
  EXPECT_EQ(none.code(), "unauthorized");
  EXPECT_EQ(none.number(), 15);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
  auto wrong = put(port(), "/v1/queues/orders", "{}", "not-a-token-at-all-xx");
  EXPECT_EQ(wrong.status, 401u);
  EXPECT_EQ(get(port(), "/metrics").status, 401u);
  auto l = get(port(), "/v1/queues", admin_token);
  ASSERT_EQ(l.status, 200u);
  EXPECT_TRUE(l.obj().at("queues").as_array().empty());
  EXPECT_EQ(get(port(), "/healthz").status, 200u);  // probes carry no token
}

TEST_F(http_auth, only_an_admin_token_may_take_a_checkpoint) {
  auto tenant = post(port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/laneq-x"})", acme_token);
  EXPECT_EQ(tenant.status, 403u) << tenant.body;
  EXPECT_EQ(tenant.code(), "forbidden");
  EXPECT_EQ(post(port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/laneq-x"})").status, 401u);
  // The admin token gets through to the store (here in memory, which has nothing to copy).
  auto admin = post(port(), "/v1/admin/checkpoint", R"({"dir": "/tmp/laneq-x"})", admin_token);
  EXPECT_EQ(admin.code(), "checkpoint_failed") << admin.body;
}

TEST_F(http_auth, a_tenant_token_uses_its_own_queues_only_and_bare_names_are_scoped) {
  auto mine = put(port(), "/v1/queues/orders", "{}", acme_token);
  ASSERT_EQ(mine.status, 201u) << mine.body;
  EXPECT_EQ(str(mine.obj().at("name")), "acme/orders");
  ASSERT_EQ(put(port(), "/v1/queues/other%2Fjobs", "{}", admin_token).status, 201u);

  auto sent = post(port(), "/v1/queues/orders/messages", R"({"body": "x"})", acme_token);
  EXPECT_EQ(sent.status, 200u) << sent.body;
  auto forbidden = post(port(), "/v1/queues/other%2Fjobs/messages", R"({"body": "x"})", acme_token);
  EXPECT_EQ(forbidden.status, 403u) << forbidden.body;
  EXPECT_EQ(forbidden.code(), "forbidden");
  EXPECT_EQ(forbidden.number(), 16);
  EXPECT_EQ(del(port(), "/v1/queues/other%2Fjobs", acme_token).status, 403u);
  EXPECT_EQ(put(port(), "/v1/queues/other%2Fnew", "{}", acme_token).status, 403u);
  EXPECT_EQ(get(port(), "/metrics", acme_token).status, 403u);

  auto l = get(port(), "/v1/queues", acme_token);
  ASSERT_EQ(l.status, 200u);
  ASSERT_EQ(l.obj().at("queues").as_array().size(), 1u);
  EXPECT_EQ(str(l.obj().at("queues").as_array()[0]), "acme/orders");

  // Nothing changed for the other tenant.
  auto s = get(port(), "/v1/queues/other%2Fjobs", admin_token);
  ASSERT_EQ(s.status, 200u);
  EXPECT_EQ(s.obj().at("stats").as_object().at("enqueued").to_number<std::int64_t>(), 0);
  auto all = get(port(), "/v1/queues", admin_token);
  EXPECT_EQ(all.obj().at("queues").as_array().size(), 2u);
  EXPECT_FALSE(get(port(), "/v1/queues/other%2Fnew", admin_token).status == 200u);
  EXPECT_EQ(get(port(), "/metrics", admin_token).status, 200u);
}

}  // namespace
}  // namespace laneq::server::test
