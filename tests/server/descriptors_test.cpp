// laneqd's descriptor budget (apps/server/include/laneq/server/descriptors.hpp): the connection
// cap fits under RLIMIT_NOFILE next to laneqd's own descriptors and the store's table files, or
// laneqd refuses to start naming the limit.
#include "laneq/server/descriptors.hpp"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <limits>

namespace laneq::server {
namespace {

namespace bounds = descriptor_bounds;

http_limits configured(std::size_t connections, std::size_t reserve) {
  http_limits l;
  l.connections = connections;
  l.connections_reserve = reserve;
  return l;
}

// The case: ulimit -n 1024 under the default cap of 4,096.
TEST(descriptors, a_low_limit_lowers_the_cap_below_it_with_room_for_the_store) {
  auto p = plan_descriptors(1024, 4, false, configured(4096, 64));
  ASSERT_TRUE(p.ok()) << to_string(p.err());
  const auto& plan = p.value();
  EXPECT_EQ(plan.own, 4 + bounds::runtime);
  EXPECT_EQ(plan.store_files, (1024 - plan.own) / 4);
  EXPECT_EQ(plan.connections, 1024 - plan.own - plan.store_files);
  EXPECT_EQ(plan.own + plan.store_files + plan.connections, 1024u);
  EXPECT_EQ(plan.connections_reserve, 64u);  // below a quarter of the lowered cap
  EXPECT_EQ(plan.configured, 4096u);
  // Once raised to what it asks for, the configured cap fits.
  auto enough = plan_descriptors(plan.needed_for_configured, 4, false, configured(4096, 64));
  ASSERT_TRUE(enough.ok());
  EXPECT_EQ(enough.value().connections, 4096u);
  auto short_by_one =
      plan_descriptors(plan.needed_for_configured - 1, 4, false, configured(4096, 64));
  ASSERT_TRUE(short_by_one.ok());
  EXPECT_LT(short_by_one.value().connections, 4096u);
}

TEST(descriptors, the_reserve_follows_a_cap_the_limit_lowered) {
  auto p = plan_descriptors(200, 5, false, configured(4096, 64));
  ASSERT_TRUE(p.ok()) << to_string(p.err());
  EXPECT_EQ(p.value().store_files, bounds::store_files_min);
  EXPECT_EQ(p.value().connections, 200 - 5 - bounds::runtime - bounds::store_files_min);
  EXPECT_EQ(p.value().connections_reserve, p.value().connections / 4);
  // A configured cap the limit does not lower keeps its reserve, and the store takes the rest.
  auto small = plan_descriptors(1024, 5, false, configured(100, 90));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small.value().connections, 100u);
  EXPECT_EQ(small.value().connections_reserve, 90u);
  EXPECT_EQ(small.value().store_files, 1024 - 5 - bounds::runtime - 100);
}

TEST(descriptors, the_caf_port_keeps_descriptors_for_its_clients) {
  auto without = plan_descriptors(1024, 4, false, configured(4096, 64)).value();
  auto with = plan_descriptors(1024, 4, true, configured(4096, 64)).value();
  EXPECT_EQ(with.own, without.own + bounds::caf_clients);
  EXPECT_LT(with.connections, without.connections);
}

TEST(descriptors, a_high_or_unlimited_limit_keeps_the_configured_cap_and_bounds_the_store) {
  for (std::size_t limit : {std::size_t{1} << 20, std::numeric_limits<std::size_t>::max()}) {
    auto p = plan_descriptors(limit, 4, true, configured(4096, 64));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p.value().connections, 4096u);
    EXPECT_EQ(p.value().connections_reserve, 64u);
    EXPECT_EQ(p.value().store_files, bounds::store_files_max);
  }
}

TEST(descriptors, a_limit_too_low_to_serve_is_refused_naming_it_and_what_it_needs) {
  const std::size_t least = 4 + bounds::runtime + bounds::store_files_min + 8;
  EXPECT_TRUE(plan_descriptors(least, 4, false, configured(4096, 64)).ok());
  for (std::size_t limit : {least - 1, std::size_t{64}, std::size_t{0}}) {
    auto p = plan_descriptors(limit, 4, false, configured(4096, 64));
    ASSERT_FALSE(p.ok()) << limit;
    EXPECT_EQ(p.err().code, errc::invalid_argument);
    const auto& m = p.err().message;
    EXPECT_NE(m.find("RLIMIT_NOFILE"), std::string::npos) << m;
    EXPECT_NE(m.find("is " + std::to_string(limit) + ":"), std::string::npos) << m;
    EXPECT_NE(m.find("at least " + std::to_string(least)), std::string::npos) << m;
  }
}

TEST(descriptors, the_log_line_names_the_cap_the_configured_cap_and_the_limit) {
  descriptor_limit l;
  l.soft = 4096;
  l.original = 1024;
  l.hard = 4096;
  auto p = plan_descriptors(4096, 4, false, configured(4096, 64)).value();
  auto line = describe(p, l);
  EXPECT_NE(line.find("connection cap " + std::to_string(p.connections) +
                      " (configured 4096, descriptor limit 4096)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("raised from 1024"), std::string::npos) << line;
  EXPECT_NE(line.find("needs a descriptor limit of " + std::to_string(p.needed_for_configured)),
            std::string::npos)
      << line;
}

// The soft limit goes up to the hard one (the test process's own limit, restored after).
TEST(descriptors, the_soft_limit_is_raised_to_the_hard_limit) {
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  if (before.rlim_max == RLIM_INFINITY || before.rlim_max < 64)
    GTEST_SKIP() << "needs a finite hard limit of at least 64";
  rlimit lowered{before.rlim_max / 2, before.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  auto l = raise_descriptor_limit();
  rlimit after{};
  ::getrlimit(RLIMIT_NOFILE, &after);
  ::setrlimit(RLIMIT_NOFILE, &before);
  EXPECT_EQ(l.original, lowered.rlim_cur);
  EXPECT_EQ(l.soft, before.rlim_max);
  EXPECT_EQ(l.hard, before.rlim_max);
  EXPECT_EQ(after.rlim_cur, before.rlim_max);
  EXPECT_EQ(l.raise_failed, "");
  EXPECT_GE(open_descriptors(), 3u);
}

}  // namespace
}  // namespace laneq::server
