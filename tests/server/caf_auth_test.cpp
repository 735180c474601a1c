// laneqd's CAF port with tokens, as a process and a remote CAF client (docs/caf-client.md,
// "Tokens and tenants"): only a login is answered without one, an unknown token is refused, a
// tenant's session cannot reach another tenant's queue, and an admin token sees every queue.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "caf/io/all.hpp"

#include "caf_client.hpp"
#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/remote_client.hpp"
#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

using strings = std::vector<std::string>;

constexpr const char* acme_token = "acme-token-0123456789";
constexpr const char* globex_token = "globex-token-0123456789";
constexpr const char* admin_token = "admin-token-0123456789";

/// laneqd with three tokens (acme, globex, admin) and its CAF port on a port the OS picks.
class caf_auth : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("caf-auth");
    auto cfg = dir_ / "laneqd.json";
    std::ofstream{cfg} << R"({"data_dir": ")" << (dir_ / "db").string()
                       << R"(", "http": {"port": 0}, "tokens": [
                            {"token": ")"
                       << acme_token << R"(", "tenant": "acme"},
                            {"token": ")"
                       << globex_token << R"(", "tenant": "globex"},
                            {"token": ")"
                       << admin_token << R"(", "tenant": "*"}]})";
    ASSERT_EQ(p_.start({"--config", cfg.string(), "--caf-port", "any"}), "");
    ASSERT_NE(read_port(p_), 0) << p_.output();
    auto at = p_.output().find("laneqd caf_port=");
    ASSERT_NE(at, std::string::npos) << p_.output();
    caf_port_ = static_cast<std::uint16_t>(std::stoi(p_.output().substr(at + 16)));
  }
  void TearDown() override {
    EXPECT_EQ(p_.stop(SIGTERM), 0) << p_.output(true);
    std::filesystem::remove_all(dir_);
  }

  scoped_admin_actor login(const std::string& token) {
    auto a = connect_to_laneqd(client_.sys, "127.0.0.1", caf_port_, token);
    EXPECT_TRUE(a.ok()) << (a.ok() ? "" : to_string(a.err()));
    return a.ok() ? std::move(a).value() : scoped_admin_actor{};
  }

  /// The answer of a call, or its error.
  template <class T, class Handle, class... Ts>
  result<T> ask(const Handle& dest, Ts&&... xs) {
    blocking_self self{client_.sys};
    std::optional<result<T>> out;
    self->request(dest, std::chrono::seconds(30), std::forward<Ts>(xs)...)
        .receive([&](T& x) { out.emplace(std::move(x)); },
                 [&](caf::error& e) { out.emplace(from_caf(e)); });
    return std::move(*out);
  }

  result<queue_api> create(const scoped_admin_actor& who, const std::string& name) {
    blocking_self self{client_.sys};
    std::optional<result<queue_api>> out;
    self->request(who, std::chrono::seconds(30), create_atom_v, name, std::string{"{}"})
        .receive([&](queue_api& q, bool) { out.emplace(std::move(q)); },
                 [&](caf::error& e) { out.emplace(from_caf(e)); });
    return std::move(*out);
  }

  std::filesystem::path dir_;
  laneqd_process p_;
  std::uint16_t caf_port_ = 0;
  caf_client client_;
};

TEST_F(caf_auth, without_a_login_every_call_is_refused_and_an_unknown_token_too) {
  auto published = client_.sys.middleman().remote_actor<remote_admin_actor>("127.0.0.1", caf_port_);
  ASSERT_TRUE(published) << client_.sys.render(published.error());
  auto listed = ask<strings>(*published, list_atom_v);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.err().code, errc::unauthorized);
  auto looked_up = ask<queue_api>(*published, lookup_atom_v, std::string{"orders"});
  ASSERT_FALSE(looked_up.ok());
  EXPECT_EQ(looked_up.err().code, errc::unauthorized);
  blocking_self self{client_.sys};
  std::optional<error> created;
  self->request(*published, std::chrono::seconds(30), create_atom_v, std::string{"orders"},
                std::string{"{}"})
      .receive([&](queue_api&, bool) {}, [&](caf::error& e) { created = from_caf(e); });
  ASSERT_TRUE(created.has_value());
  EXPECT_EQ(created->code, errc::unauthorized);

  auto wrong = connect_to_laneqd(client_.sys, "127.0.0.1", caf_port_, "not-a-token-0123456789");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.err().code, errc::unauthorized);
  // Nothing was created.
  auto all = ask<strings>(login(admin_token), list_atom_v);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all.value().empty());
}

TEST_F(caf_auth, a_tenant_cannot_reach_another_tenants_queue) {
  auto acme = login(acme_token);
  auto globex = login(globex_token);
  auto theirs = create(globex, "orders");
  ASSERT_TRUE(theirs.ok()) << to_string(theirs.err());
  std::vector<outgoing_message> batch(1);
  batch[0].body = "globex's";
  ASSERT_TRUE(ask<std::vector<message_id>>(theirs.value(), enqueue_atom_v, batch).ok());

  const std::string name = "globex/orders";
  EXPECT_EQ(create(acme, name).err().code, errc::forbidden);
  EXPECT_EQ(ask<queue_api>(acme, lookup_atom_v, name).err().code, errc::forbidden);
  EXPECT_EQ(ask<queue_description>(acme, describe_atom_v, name).err().code, errc::forbidden);
  EXPECT_EQ(ask<caf::ok_atom>(acme, drop_atom_v, name).err().code, errc::forbidden);
  EXPECT_EQ(ask<strings>(acme, list_atom_v).value(), strings{});

  // acme's own "orders" is acme/orders: its enqueue, receive and stats never touch globex's.
  auto mine = create(acme, "orders");
  ASSERT_TRUE(mine.ok()) << to_string(mine.err());
  batch[0].body = "acme's";
  ASSERT_TRUE(ask<std::vector<message_id>>(mine.value(), enqueue_atom_v, batch).ok());
  auto got = ask<std::vector<delivery>>(mine.value(), receive_atom_v, receive_request{10, 0, 0});
  ASSERT_TRUE(got.ok()) << to_string(got.err());
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].msg.body, "acme's");
  auto s = ask<queue_stats>(mine.value(), stats_atom_v);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value().name, "acme/orders");
  EXPECT_EQ(ask<strings>(acme, list_atom_v).value(), strings{"acme/orders"});

  // globex's message is untouched, and an admin token sees both queues.
  auto theirs_stats = ask<queue_stats>(theirs.value(), stats_atom_v);
  ASSERT_TRUE(theirs_stats.ok());
  EXPECT_EQ(theirs_stats.value().enqueued, 1u);
  EXPECT_EQ(theirs_stats.value().delivered, 0u);
  EXPECT_EQ(ask<strings>(login(admin_token), list_atom_v).value(),
            (strings{"acme/orders", "globex/orders"}));
}

}  // namespace
}  // namespace laneq::server::test
