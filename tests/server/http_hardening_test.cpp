// The HTTP front end against hostile or careless clients (issue 22, parts 5 and 6): header names
// that are not tokens, HEAD and `Expect: 100-continue` framing, long polls whose client left,
// paged group listings, and connection bounds. An in-process server over an in-memory broker.
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

}  // namespace
}  // namespace laneq::server::test
