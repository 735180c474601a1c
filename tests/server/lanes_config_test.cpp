// The lane rules of laneqd's config, checked at start (issue 5 §7): each broken rule is reported
// with the queue or topic name and its field, all of them at once; topics are read in order.
// (An ordering key changed on a stored queue is a start-time check: lanes_daemon_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "laneq/server/config.hpp"

namespace laneq::server {
namespace {

/// The errors of a config whose `queues` (and `topics`) are the given JSON.
std::vector<std::string> errors_of(const std::string& queues, const std::string& topics = "{}") {
  auto parsed = parse_config(R"({"queues": )" + queues + R"(, "topics": )" + topics + "}");
  std::vector<std::string> out;
  for (const auto& e : parsed.errors) out.push_back(e.message);
  return out;
}

/// True when one error mentions every one of `parts`.
bool has_error(const std::vector<std::string>& errors, std::initializer_list<std::string> parts) {
  for (const auto& e : errors) {
    bool all = true;
    for (const auto& p : parts) all = all && e.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += e + "\n";
  return out;
}

TEST(lanes_config, an_unknown_key_component_is_named_with_its_queue) {
  auto e = errors_of(R"({"pay": {"ordering": {"mode": "key", "key": [{"colour": "red"}]}}})");
  EXPECT_TRUE(has_error(e, {"queues.pay", "ordering.key[0].colour", "unknown key component"}))
      << joined(e);
}

TEST(lanes_config, a_header_key_the_queue_does_not_store_is_named) {
  auto e = errors_of(R"({"pay": {"ordering": {"mode": "key", "key": [{"header": "account"}]},
                                 "store_headers": {"allow": ["region"]}}})");
  EXPECT_TRUE(has_error(e, {"queues.pay", "ordering.key[0]", "'account'", "does not store"}))
      << joined(e);
}

TEST(lanes_config, a_function_key_component_names_the_in_process_api) {
  auto e = errors_of(R"({"pay": {"dedupe": {"key": [{"function": "f"}], "window_ms": 60000}}})");
  EXPECT_TRUE(has_error(e, {"queues.pay", "dedupe.key[0].function", "in-process C++ API"}))
      << joined(e);
}

TEST(lanes_config, an_empty_json_path_is_named) {
  auto e = errors_of(R"({"pay": {"ordering": {"mode": "key", "key": [{"json": ""}]}}})");
  EXPECT_TRUE(has_error(e, {"queues.pay", "ordering.key[0]", "JSON path is empty"})) << joined(e);
  auto seg = errors_of(R"({"pay": {"ordering": {"mode": "key", "key": [{"json": "a..b"}]}}})");
  EXPECT_TRUE(has_error(seg, {"queues.pay", "empty segment"})) << joined(seg);
}

TEST(lanes_config, a_throttle_rate_or_burst_out_of_range_is_named) {
  auto rate = errors_of(
      R"({"pay": {"throttles": [{"key": [{"fairness_key": true}], "rate_per_s": 0, "burst": 1}]}})");
  EXPECT_TRUE(has_error(rate, {"queues.pay", "throttles[0].rate_per_s", "between"}))
      << joined(rate);
  auto burst = errors_of(
      R"({"pay": {"throttles": [{"key": [{"fairness_key": true}], "rate_per_s": 5, "burst": 0}]}})");
  EXPECT_TRUE(has_error(burst, {"queues.pay", "throttles[0].burst"})) << joined(burst);
}

TEST(lanes_config, every_broken_rule_of_every_queue_and_topic_is_reported_at_once) {
  auto e = errors_of(R"({"a": {"ordering": {"mode": "key", "key": [{"colour": 1}]}},
                         "b": {"ordering": {"mode": "key", "key": [{"json": ""}]},
                               "throttles": [{"rate_per_s": -1}]},
                         "ok": {}})",
                     R"({"t1": {"queues": []}, "t2": {"queues": ["ok"], "colour": 1},
                         "t3": {"queues": "ok"}})");
  EXPECT_TRUE(has_error(e, {"queues.a"})) << joined(e);
  EXPECT_TRUE(has_error(e, {"queues.b", "JSON path is empty"})) << joined(e);
  EXPECT_TRUE(has_error(e, {"queues.b", "rate_per_s"})) << joined(e);
  EXPECT_TRUE(has_error(e, {"topics.t1", "topic 't1'", "queues"})) << joined(e);
  EXPECT_TRUE(has_error(e, {"topics.t2", "colour"})) << joined(e);
  EXPECT_TRUE(has_error(e, {"topics.t3", "queues"})) << joined(e);
  EXPECT_FALSE(has_error(e, {"queues.ok"})) << joined(e);
}

TEST(lanes_config, topics_are_read_with_their_queues_in_order) {
  auto parsed = parse_config(R"({"queues": {"a": {}, "b": {}},
                                 "topics": {"events": {"queues": ["b", "a"]}}})");
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors.front().message;
  ASSERT_EQ(parsed.config.topics.size(), 1u);
  EXPECT_EQ(parsed.config.topics[0].name(), "events");
  EXPECT_EQ(parsed.config.topics[0].queues(), (std::vector<std::string>{"b", "a"}));
  auto bad = parse_config(R"({"topics": []})");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(bad.errors[0].message.find("topics"), std::string::npos);
}

}  // namespace
}  // namespace laneq::server
