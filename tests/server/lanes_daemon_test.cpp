// Lanes end to end through a real laneqd process (issue 5 §8): one test per missing-key policy,
// each checking laneq_lane_key_missing_total in /metrics; a JSON-path key; a header key matched
// case-insensitively; dedupe across a restart; a topic fanning out to queues ordered per
// customer, per account and not at all; and the start-time checks of queues and topics in the
// config (an ordering key changed on a stored queue refuses to start, naming it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

/// A laneqd on a fresh data directory, with the calls these tests repeat.
class daemon_fixture : public daemon_test {
 protected:
  daemon_fixture() : daemon_test("lanes") {}

  void create(const std::string& name, const std::string& spec) {
    auto r = put(port_, "/v1/queues/" + name, spec);
    ASSERT_EQ(r.status, 201u) << r.body;
  }
  reply send(const std::string& name, const std::string& body) {
    return post(port_, "/v1/queues/" + name + "/messages", body);
  }
  /// Receives until `expect` messages arrived (long polls), then once more without waiting, so a
  /// message that should be held back shows up if it is not.
  json::array receive(const std::string& name, std::size_t expect) {
    json::array out;
    auto once = [&](int wait_ms) {
      auto r = post(port_, "/v1/queues/" + name + "/receive",
                    R"({"max": 100, "wait_ms": )" + std::to_string(wait_ms) + "}");
      EXPECT_EQ(r.status, 200u) << r.body;
      if (r.status != 200u) return false;
      for (const auto& m : r.obj().at("messages").as_array()) out.push_back(m);
      return true;
    };
    auto until = std::chrono::steady_clock::now() + 30s;
    while (out.size() < expect && std::chrono::steady_clock::now() < until)
      if (!once(1000)) return out;
    once(0);
    return out;
  }
  /// The value of `laneq_lane_key_missing_total{queue="<name>"}` in /metrics (-1: absent).
  std::int64_t key_missing(const std::string& name) {
    return metric("laneq_lane_key_missing_total", name);
  }
  std::int64_t metric(const std::string& series, const std::string& name) {
    auto r = get(port_, "/metrics");
    EXPECT_EQ(r.status, 200u) << r.body;
    auto prefix = series + "{queue=\"" + name + "\"} ";
    auto at = r.body.find("\n" + prefix);
    if (at == std::string::npos) return -1;
    at += 1 + prefix.size();
    return std::stoll(r.body.substr(at, r.body.find('\n', at) - at));
  }
  static std::string ordering_key(const json::value& m) {
    return std::string{m.as_object().at("ordering_key").as_string()};
  }
  static std::string body(const json::value& m) {
    return std::string{m.as_object().at("body").as_string()};
  }
};

TEST_F(daemon_fixture, policy_reject_answers_400_naming_the_component_and_counts_the_miss) {
  create("pay", R"({"ordering": {"mode": "key", "key": [{"header": "account"}],
                    "when_key_missing": "reject"}})");
  auto r = send("pay", R"({"body": "no account"})");
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.code(), "ordering_key_missing") << r.body;
  auto msg = std::string{r.obj().at("error").as_object().at("message").as_string()};
  EXPECT_NE(msg.find("header:account"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pay"), std::string::npos) << msg;
  auto ok = send("pay", R"({"body": "has one", "headers": {"account": "a1"}})");
  EXPECT_EQ(ok.status, 200u) << ok.body;
  EXPECT_EQ(key_missing("pay"), 1);
  auto got = receive("pay", 1);
  ASSERT_EQ(got.size(), 1u);  // the rejected message is stored nowhere
  EXPECT_EQ(body(got[0]), "has one");
  EXPECT_EQ(ordering_key(got[0]), "a1");
}

TEST_F(daemon_fixture, policy_unordered_delivers_keyless_messages_in_parallel_and_counts_them) {
  create("loose", R"({"ordering": {"mode": "key", "key": [{"header": "account"}],
                      "when_key_missing": "unordered"}})");
  auto r = send("loose", R"({"messages": [{"body": "x"}, {"body": "y"},
                                          {"body": "k1", "headers": {"account": "a"}},
                                          {"body": "k2", "headers": {"account": "a"}}]})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(key_missing("loose"), 2);
  // Both keyless messages at once (no lane holds them back); of lane "a" only its head.
  auto got = receive("loose", 3);
  std::multiset<std::string> bodies;
  for (const auto& m : got) bodies.insert(body(m));
  EXPECT_EQ(bodies, (std::multiset<std::string>{"x", "y", "k1"}));
  for (const auto& m : got)
    if (body(m) == "k1") {
      EXPECT_EQ(ordering_key(m), "a");
    }
}

TEST_F(daemon_fixture, policy_keyless_lane_orders_keyless_messages_under_tenant_slash_queue) {
  create("kl", R"({"ordering": {"mode": "key", "key": [{"header": "account"}],
                   "when_key_missing": "keyless_lane"}})");
  auto r = send("kl", R"({"messages": [{"body": "first"}, {"body": "second"}]})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(key_missing("kl"), 2);
  auto got = receive("kl", 1);
  ASSERT_EQ(got.size(), 1u) << "the keyless lane is ordered: one in flight";
  EXPECT_EQ(body(got[0]), "first");
  EXPECT_EQ(ordering_key(got[0]), "default/kl");
  auto lease = std::string{got[0].as_object().at("lease").as_string()};
  auto acked = post(port_, "/v1/queues/kl/ack", R"({"lease": ")" + lease + R"("})");
  ASSERT_EQ(acked.status, 200u) << acked.body;
  got = receive("kl", 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(body(got[0]), "second");
  EXPECT_EQ(ordering_key(got[0]), "default/kl");
}

TEST_F(daemon_fixture, a_json_path_key_orders_by_the_value_in_the_body) {
  create("stripe", R"({"ordering": {"mode": "key", "key": [{"json": "data.object.customer"}]}})");
  auto event = [](const std::string& customer, int n) {
    return R"({"body": "{\"data\": {\"object\": {\"customer\": \")" + customer + R"(\", \"n\": )" +
           std::to_string(n) + R"(}}}"})";
  };
  ASSERT_EQ(send("stripe", event("cus_1", 1)).status, 200u);
  ASSERT_EQ(send("stripe", event("cus_1", 2)).status, 200u);
  ASSERT_EQ(send("stripe", event("cus_2", 3)).status, 200u);
  // A number where the path expects a string is a missing key: rejected.
  auto bad = send("stripe", R"({"body": "{\"data\": {\"object\": {\"customer\": 7}}}"})");
  EXPECT_EQ(bad.status, 400u) << bad.body;
  EXPECT_NE(bad.body.find("data.object.customer"), std::string::npos) << bad.body;
  EXPECT_EQ(key_missing("stripe"), 1);
  auto got = receive("stripe", 2);
  ASSERT_EQ(got.size(), 2u) << "one head per customer";
  std::set<std::string> keys;
  for (const auto& m : got) keys.insert(ordering_key(m));
  EXPECT_EQ(keys, (std::set<std::string>{"cus_1", "cus_2"}));
}

TEST_F(daemon_fixture, a_header_key_matches_the_header_name_case_insensitively) {
  create("acct", R"({"ordering": {"mode": "key", "key": [{"header": "Account"}]},
                     "store_headers": {"allow": ["account"]}})");
  auto r = send("acct", R"({"messages": [{"body": "1", "headers": {"ACCOUNT": "a-7"}},
                                         {"body": "2", "headers": {"account": "a-7"}},
                                         {"body": "3", "headers": {"aCcOuNt": "a-8"}}]})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(key_missing("acct"), 0);
  auto got = receive("acct", 2);
  ASSERT_EQ(got.size(), 2u) << "messages 1 and 2 share lane a-7";
  std::set<std::string> keys;
  for (const auto& m : got) keys.insert(ordering_key(m));
  EXPECT_EQ(keys, (std::set<std::string>{"a-7", "a-8"}));
}

TEST_F(daemon_fixture, dedupe_answers_the_original_id_and_survives_a_restart) {
  create("once", R"({"dedupe": {"key": [{"header": "idempotency-key"}], "window_ms": 600000}})");
  auto first = send("once", R"({"body": "pay 10", "headers": {"idempotency-key": "k-1"}})");
  ASSERT_EQ(first.status, 200u) << first.body;
  auto id = std::string{first.obj().at("ids").as_array()[0].as_string()};
  auto again = send("once", R"({"body": "pay 10 again", "headers": {"idempotency-key": "k-1"}})");
  ASSERT_EQ(again.status, 200u) << again.body;
  EXPECT_EQ(again.obj().at("ids").as_array()[0].as_string(), id);
  EXPECT_EQ(metric("laneq_deduplicated_total", "once"), 1);
  auto before = receive("once", 1);
  ASSERT_EQ(before.size(), 1u) << "the duplicate is stored nowhere";
  EXPECT_EQ(body(before[0]), "pay 10");
  ASSERT_NO_FATAL_FAILURE(restart());
  auto after = send("once", R"({"body": "pay 10 after restart",
                              "headers": {"idempotency-key": "k-1"}})");
  ASSERT_EQ(after.status, 200u) << after.body;
  EXPECT_EQ(after.obj().at("ids").as_array()[0].as_string(), id);
  auto other = send("once", R"({"body": "pay 20", "headers": {"idempotency-key": "k-2"}})");
  ASSERT_EQ(other.status, 200u) << other.body;
  EXPECT_NE(other.obj().at("ids").as_array()[0].as_string(), id);
  // Two messages stored: "pay 10" (recovered) and "pay 20"; neither repeat was.
  auto s = get(port_, "/v1/queues/once");
  ASSERT_EQ(s.status, 200u) << s.body;
  EXPECT_EQ(s.obj().at("stats").as_object().at("backlog").to_number<std::int64_t>(), 2) << s.body;
}

TEST_F(daemon_fixture, a_topic_fans_out_to_queues_ordered_per_customer_per_account_and_not) {
  create("by-customer", R"({"ordering": {"mode": "key", "key": [{"json": "customer"}]}})");
  create("by-account", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  create("audit", R"({})");
  auto t =
      put(port_, "/v1/topics/payments", R"({"queues": ["by-customer", "by-account", "audit"]})");
  ASSERT_EQ(t.status, 201u) << t.body;
  // Two events of one customer on two accounts, then one of another customer on the first.
  auto r = post(port_, "/v1/topics/payments/messages",
                R"({"messages": [
                  {"body": "{\"customer\": \"c1\", \"n\": 1}", "headers": {"account": "a1"}},
                  {"body": "{\"customer\": \"c1\", \"n\": 2}", "headers": {"account": "a2"}},
                  {"body": "{\"customer\": \"c2\", \"n\": 3}", "headers": {"account": "a1"}}]})");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto& ids = r.obj().at("ids").as_object();
  ASSERT_EQ(ids.size(), 3u) << r.body;
  for (auto q : {"by-customer", "by-account", "audit"})
    EXPECT_EQ(ids.at(q).as_array().size(), 3u) << q << ": " << r.body;

  auto keys_of = [&](const std::string& q) {
    std::multiset<std::string> keys;
    for (const auto& m : receive(q, 2)) keys.insert(ordering_key(m));
    return keys;
  };
  // Per customer: c1's second event waits behind its first.
  EXPECT_EQ(keys_of("by-customer"), (std::multiset<std::string>{"c1", "c2"}));
  // Per account: a1's second event (c2) waits behind its first.
  EXPECT_EQ(keys_of("by-account"), (std::multiset<std::string>{"a1", "a2"}));
  // Unordered: all three at once.
  EXPECT_EQ(receive("audit", 3).size(), 3u);

  // The topic survives a restart and still fans out.
  ASSERT_NO_FATAL_FAILURE(restart());
  auto g = get(port_, "/v1/topics/payments");
  ASSERT_EQ(g.status, 200u) << g.body;
  auto again = post(port_, "/v1/topics/payments/messages",
                    R"({"body": "{\"customer\": \"c3\"}", "headers": {"account": "a3"}})");
  ASSERT_EQ(again.status, 200u) << again.body;
  EXPECT_EQ(again.obj().at("ids").as_object().size(), 3u);
}

// -- config at start ----------------------------------------------------------------------------

/// Writes `text` as a config next to the data directory; returns its path.
std::filesystem::path write_config(const std::filesystem::path& dir, const std::string& text) {
  auto path = dir / "laneqd.json";
  std::ofstream{path} << text;
  return path;
}

std::string config_with(const std::filesystem::path& dir, const std::string& queues,
                        const std::string& topics = "{}") {
  return R"({"data_dir": ")" + (dir / "db").string() +
         R"(", "http": {"port": 0}, "caf": {"port": 0}, "queues": )" + queues + R"(, "topics": )" +
         topics + "}";
}

TEST(laneqd_lanes_config, configured_topics_are_created_after_their_queues) {
  auto dir = temp_dir("topic-config");
  auto cfg = write_config(
      dir, config_with(dir,
                       R"({"by-customer": {"ordering": {"mode": "key", "key": [{"json": "c"}]}},
                           "audit": {}})",
                       R"({"events": {"queues": ["by-customer", "audit"]}})"));
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto port = read_port(p);
  ASSERT_NE(port, 0) << p.output();
  auto l = get(port, "/v1/topics");
  ASSERT_EQ(l.status, 200u) << l.body;
  ASSERT_EQ(l.obj().at("topics").as_array().size(), 1u) << l.body;
  auto r = post(port, "/v1/topics/events/messages", R"({"body": "{\"c\": \"x\"}"})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.obj().at("ids").as_object().size(), 2u) << r.body;
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

TEST(laneqd_lanes_config, a_changed_ordering_key_on_a_stored_queue_refuses_to_start_naming_it) {
  auto dir = temp_dir("changed-key");
  {
    auto cfg = write_config(dir, config_with(dir, R"({"pay": {"ordering": {"mode": "key",
                                                       "key": [{"header": "account"}]}}})"));
    laneqd_process p;
    ASSERT_EQ(p.start({"--config", cfg.string()}), "");
    ASSERT_NE(read_port(p), 0) << p.output();
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  auto cfg = write_config(dir, config_with(dir, R"({"pay": {"ordering": {"mode": "key",
                                                     "key": [{"header": "customer"}]}}})",
                                           R"({"pay-events": {"queues": ["pay", "missing"]}})"));
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto code = p.wait();
  const auto& out = p.output(true);
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("queue pay:"), std::string::npos) << out;
  EXPECT_NE(out.find("spec_conflict"), std::string::npos) << out;
  EXPECT_NE(out.find("topic pay-events:"), std::string::npos) << out;
  EXPECT_NE(out.find("'missing'"), std::string::npos) << out;
  EXPECT_EQ(out.find("laneqd ready"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(laneqd_lanes_config, every_broken_lane_rule_in_the_config_is_named_and_exits_2) {
  auto dir = temp_dir("lane-rules");
  auto cfg = write_config(
      dir, config_with(dir,
                       R"({"a": {"ordering": {"mode": "key", "key": [{"colour": "x"}]}},
                           "b": {"ordering": {"mode": "key", "key": [{"function": "f"}]}},
                           "c": {"ordering": {"mode": "key", "key": [{"json": ""}]}}})",
                       R"({"t": {"queues": []}})"));
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto code = p.wait();
  const auto& out = p.output(true);
  EXPECT_EQ(code, 2) << out;
  for (auto want : {"queues.a", "ordering.key[0].colour", "queues.b", "in-process C++ API",
                    "queues.c", "JSON path is empty", "topics.t"})
    EXPECT_NE(out.find(want), std::string::npos) << want << " in:\n" << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laneq::server::test
