// A tenant's admin calls over the CAF port (actors/src/tenant_admin.cpp, `spawn_tenant_admin`) on
// the real admin actor: names scoped as over HTTP (laneq/tenant.hpp), listings filtered, queue
// handles that are proxies of the tenant's own queues, and calls from another node refused.
#include "laneq/actors/remote_admin.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using test::harness;
using strings = std::vector<std::string>;

constexpr const char* ordered = R"({"ordering": {"mode": "queue"}})";

class tenant_admin : public ::testing::Test {
 protected:
  result<queue_api> create(const scoped_admin_actor& who, const std::string& name,
                           const std::string& spec = ordered) {
    h.post(who, create_atom_v, name, spec);
    h.run();
    std::optional<result<queue_api>> out;
    h.self()->receive([&](queue_api& q, bool) { out.emplace(q); },
                      [&](caf::error& e) { out.emplace(from_caf(e)); },
                      caf::after(std::chrono::seconds(0)) >> [] {});
    if (!out) return error{errc::unavailable, "no reply"};
    return std::move(*out);
  }

  /// The error code of a call expected to fail.
  template <class T, class... Ts>
  errc code_of(const scoped_admin_actor& who, Ts&&... xs) {
    auto r = h.ask<T>(who, std::forward<Ts>(xs)...);
    EXPECT_FALSE(r.ok());
    return r.ok() ? errc{} : r.err().code;
  }

  harness h;
  scoped_admin_actor acme =
      spawn_tenant_admin(h.system(), h.brk().admin(), "acme", h.system().node());
  scoped_admin_actor globex =
      spawn_tenant_admin(h.system(), h.brk().admin(), "globex", h.system().node());
};

TEST_F(tenant_admin, bare_names_are_the_tenants_own_and_other_tenants_queues_are_forbidden) {
  ASSERT_TRUE(create(acme, "orders").ok());
  ASSERT_TRUE(create(globex, "orders").ok());
  auto all = h.ask<strings>(h.brk().admin(), list_atom_v);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value(), (strings{"acme/orders", "globex/orders"}));

  EXPECT_EQ(h.ask<strings>(acme, list_atom_v).value(), strings{"acme/orders"});
  EXPECT_EQ(h.ask<strings>(globex, list_atom_v).value(), strings{"globex/orders"});
  auto mine = h.ask<queue_description>(acme, describe_atom_v, std::string{"acme/orders"});
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine.value().stats.name, "acme/orders");

  const std::string theirs = "globex/orders";
  EXPECT_EQ(create(acme, theirs).err().code, errc::forbidden);
  EXPECT_EQ(code_of<queue_api>(acme, lookup_atom_v, theirs), errc::forbidden);
  EXPECT_EQ(code_of<queue_description>(acme, describe_atom_v, theirs), errc::forbidden);
  EXPECT_EQ(code_of<caf::ok_atom>(acme, drop_atom_v, theirs), errc::forbidden);
  // globex's queue is still there.
  EXPECT_TRUE(h.ask<queue_api>(globex, lookup_atom_v, std::string{"orders"}).ok());
  // Dropping its own works.
  EXPECT_TRUE(h.ask<caf::ok_atom>(acme, drop_atom_v, std::string{"orders"}).ok());
  EXPECT_EQ(h.ask<strings>(acme, list_atom_v).value(), strings{});
}

TEST_F(tenant_admin, queue_handles_are_proxies_that_serve_the_tenants_queue) {
  auto q = create(acme, "jobs");
  ASSERT_TRUE(q.ok()) << to_string(q.err());
  auto direct = h.lookup("acme/jobs");
  ASSERT_TRUE(direct.ok());
  EXPECT_NE(q.value(), direct.value()) << "the tenant gets a proxy, not the queue actor";
  auto looked_up = h.ask<queue_api>(acme, lookup_atom_v, std::string{"jobs"});
  ASSERT_TRUE(looked_up.ok());
  EXPECT_EQ(looked_up.value(), q.value()) << "one proxy per queue and session";

  ASSERT_TRUE(h.enqueue(q.value(), test::msg("j1")).ok());
  auto got = h.receive(q.value());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].msg.body, "j1");
  EXPECT_TRUE(h.ack(q.value(), got.value()[0].lease).ok());
  auto s = h.stats(q.value());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value().name, "acme/jobs");
  EXPECT_EQ(s.value().acked, 1u);
}

TEST_F(tenant_admin, topics_are_scoped_as_queues_are) {
  ASSERT_TRUE(create(acme, "orders").ok());
  ASSERT_TRUE(create(globex, "orders").ok());
  auto made = h.ask<bool>(acme, topic_atom_v, create_atom_v, std::string{"payments"},
                          std::string{R"({"queues": ["orders"]})"});
  ASSERT_TRUE(made.ok()) << to_string(made.err());
  auto t = h.ask<topic_spec>(acme, topic_atom_v, describe_atom_v, std::string{"payments"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().name(), "acme/payments");
  EXPECT_EQ(t.value().queues(), strings{"acme/orders"});
  // A topic over another tenant's queue, or another tenant's topic: forbidden.
  EXPECT_EQ(code_of<bool>(acme, topic_atom_v, create_atom_v, std::string{"spy"},
                          std::string{R"({"queues": ["globex/orders"]})"}),
            errc::forbidden);
  EXPECT_EQ(code_of<bool>(globex, topic_atom_v, create_atom_v, std::string{"acme/t"},
                          std::string{R"({"queues": ["orders"]})"}),
            errc::forbidden);
  EXPECT_EQ(
      code_of<std::vector<topic_enqueued>>(globex, publish_atom_v, std::string{"acme/payments"},
                                           std::vector<outgoing_message>{test::msg("x")}),
      errc::forbidden);
  EXPECT_EQ(h.ask<std::vector<topic_spec>>(globex, topic_atom_v, list_atom_v).value().size(), 0u);
  EXPECT_EQ(h.ask<std::vector<topic_spec>>(acme, topic_atom_v, list_atom_v).value().size(), 1u);
  auto sent = h.ask<std::vector<topic_enqueued>>(acme, publish_atom_v, std::string{"payments"},
                                                 std::vector<outgoing_message>{test::msg("p")});
  ASSERT_TRUE(sent.ok()) << to_string(sent.err());
  EXPECT_EQ(sent.value().at(0).queue, "acme/orders");
}

// BASP lets a peer address any actor by its id: a session (and its queue handles) serves the node
// that logged in only. Here the session belongs to another node than the test's.
TEST_F(tenant_admin, a_session_serves_only_the_node_that_logged_in) {
  auto other = caf::make_node_id(4242, "0102030405060708090a0b0c0d0e0f1011121314");
  ASSERT_TRUE(other);
  auto stranger = spawn_tenant_admin(h.system(), h.brk().admin(), "acme", *other);
  EXPECT_EQ(create(stranger, "orders").err().code, errc::forbidden);
  EXPECT_EQ(code_of<strings>(stranger, list_atom_v), errc::forbidden);
  EXPECT_EQ(code_of<queue_api>(stranger, lookup_atom_v, std::string{"orders"}), errc::forbidden);
  EXPECT_EQ(h.ask<strings>(h.brk().admin(), list_atom_v).value(), strings{});
}

}  // namespace
}  // namespace laneq
