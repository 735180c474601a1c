// The remote admin actor (actors/include/laneq/actors/remote_admin.hpp) on the real admin actor:
// JSON specs, every error named, and the in-process queue handle it returns.
#include "laneq/actors/remote_admin.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using test::harness;

class remote_admin : public ::testing::Test {
 protected:
  result<std::pair<queue_api, bool>> create(const std::string& name, const std::string& spec) {
    h.post(remote, create_atom_v, name, spec);
    h.run();
    std::optional<result<std::pair<queue_api, bool>>> out;
    h.self()->receive(
        [&](queue_api& q, bool created) {
          out.emplace(std::pair{q, created});
        },
        [&](caf::error& e) { out.emplace(from_caf(e)); },
        caf::after(std::chrono::seconds(0)) >> [] {});
    if (!out) return error{errc::unavailable, "no reply"};
    return std::move(*out);
  }

  harness h;
  scoped_admin_actor remote = spawn_remote_admin(h.system(), h.brk().admin());
};

TEST_F(remote_admin, creates_a_queue_from_its_json_spec_and_returns_the_queue_handle) {
  auto made =
      create("acme/orders", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  ASSERT_TRUE(made.ok()) << to_string(made.err());
  EXPECT_TRUE(made.value().second);
  auto again =
      create("acme/orders", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value().second);

  // The handle is the in-process queue API.
  auto q = made.value().first;
  auto id = h.enqueue(q, test::msg("a1", test::hdrs({{"account", "A"}})));
  ASSERT_TRUE(id.ok());
  auto got = h.receive(q);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].msg.body, "a1");

  auto names = h.ask<std::vector<std::string>>(remote, list_atom_v);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names.value(), std::vector<std::string>{"acme/orders"});
  auto found = h.ask<queue_api>(remote, lookup_atom_v, std::string{"acme/orders"});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value(), q);
  auto described = h.ask<queue_description>(remote, describe_atom_v, std::string{"acme/orders"});
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described.value().stats.enqueued, 1u);
}

TEST_F(remote_admin, a_different_ordering_is_a_conflict) {
  ASSERT_TRUE(create("audit", R"({"ordering": {"mode": "queue"}})").ok());
  auto other = create("audit", R"({})");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err().code, errc::spec_conflict);
}

TEST_F(remote_admin, reports_every_broken_rule_and_creates_nothing) {
  auto bad = create("q", R"({"lease_ms": 0, "max_attempts": "x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::invalid_spec);
  EXPECT_EQ(bad.err().message,
            "queue 'q': lease_ms: must be between 1 and 43200000; "
            "queue 'q': max_attempts: must be an integer");
  auto not_json = create("q", "{ordering");
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.err().code, errc::invalid_spec);
  EXPECT_NE(not_json.err().message.find("queue 'q': spec: is not valid JSON"), std::string::npos);
  auto names = h.ask<std::vector<std::string>>(remote, list_atom_v);
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names.value().empty());
}

// docs/caf-client.md: a remote update takes a JSON merge patch and answers the spec's JSON.
TEST_F(remote_admin, update_patches_the_settings_and_refuses_a_fixed_field) {
  ASSERT_TRUE(create("jobs", R"({"ordering": {"mode": "queue"}})").ok());
  auto up = h.ask<std::string>(remote, update_atom_v, std::string{"jobs"},
                               std::string{R"({"lease_ms": 1234, "max_depth": {"bytes": 99}})"});
  ASSERT_TRUE(up.ok()) << to_string(up.err());
  EXPECT_NE(up.value().find("\"lease_ms\":1234"), std::string::npos) << up.value();
  EXPECT_NE(up.value().find("\"max_depth\":{\"bytes\":99}"), std::string::npos) << up.value();
  auto fixed = h.ask<std::string>(remote, update_atom_v, std::string{"jobs"},
                                  std::string{R"({"ordering": {"mode": "none"}})"});
  ASSERT_FALSE(fixed.ok());
  EXPECT_EQ(fixed.err().code, errc::invalid_spec);
  EXPECT_NE(fixed.err().message.find("queue 'jobs': ordering.mode: is fixed"), std::string::npos)
      << fixed.err().message;
}

TEST_F(remote_admin, drop_deletes_the_queue) {
  ASSERT_TRUE(create("gone", "{}").ok());
  ASSERT_TRUE(h.ask<caf::ok_atom>(remote, drop_atom_v, std::string{"gone"}).ok());
  auto found = h.ask<queue_api>(remote, lookup_atom_v, std::string{"gone"});
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.err().code, errc::queue_not_found);
}

}  // namespace
}  // namespace laneq
