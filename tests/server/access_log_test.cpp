// The access log's line (apps/server/include/laneq/server/access_log.hpp): seven fields, the query
// string cut off, anything that could split or forge a line percent-encoded.
#include "laneq/server/access_log.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace laneq::server {
namespace {

TEST(access_log, a_line_has_seven_fields_without_the_query_string) {
  access_entry e;
  // 2026-12-06T15:58:30.123Z
  e.at = std::chrono::system_clock::time_point{std::chrono::milliseconds{1'796'572'710'123}};
  e.method = "GET";
  e.path = "/v1/queues/acme%2Forders/dead-letters?max=5&token=secret";
  e.status = 200;
  e.duration_ms = 1.5;
  e.tenant = "acme";
  e.bytes = 57;
  EXPECT_EQ(
      format_access_line(e),
      "2026-12-06T15:58:30.123Z GET /v1/queues/acme%2Forders/dead-letters 200 1.500 acme 57\n");
}

TEST(access_log, spaces_and_control_bytes_are_encoded_and_empty_fields_are_a_dash) {
  access_entry e;
  e.at = std::chrono::system_clock::time_point{};
  e.method = "-";
  e.path = "/a b\n1970-01-01T00:00:00.000Z GET /forged";
  e.status = 400;
  e.tenant = "";
  EXPECT_EQ(format_access_line(e),
            "1970-01-01T00:00:00.000Z - /a%20b%0A1970-01-01T00:00:00.000Z%20GET%20/forged 400 "
            "0.000 - 0\n");
}

}  // namespace
}  // namespace laneq::server
