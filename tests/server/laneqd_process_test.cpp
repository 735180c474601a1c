// laneqd as a process: it starts on a temporary data directory, serves, exits 0 on SIGTERM, and
// a restarted laneqd finds the message enqueued before; a broken config exits 2 naming every
// error. The binary comes from the LANEQD_BINARY definition (CMakeLists.txt).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <type_traits>

#include "caf/io/all.hpp"

#include "caf_client.hpp"
#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/remote_admin.hpp"
#include "laneq/held_message.hpp"
#include "laneq/message.hpp"
#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

TEST(laneqd_process, sigterm_exits_0_and_a_restart_finds_the_enqueued_message) {
  auto dir = temp_dir("restart");
  std::string id;
  {
    laneqd_process p;
    auto port = start_and_read_port(p, dir);
    ASSERT_NE(port, 0);
    auto created = put(port, "/v1/queues/orders", R"({"ordering": {"mode": "queue"}})");
    ASSERT_EQ(created.status, 201u) << created.body;
    auto sent = post(port, "/v1/queues/orders/messages", R"({"body": "survives"})");
    ASSERT_EQ(sent.status, 200u) << sent.body;
    id = std::string{sent.obj().at("ids").as_array()[0].as_string()};
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  {
    laneqd_process p;
    auto port = start_and_read_port(p, dir);
    ASSERT_NE(port, 0);
    auto s = get(port, "/v1/queues/orders");
    ASSERT_EQ(s.status, 200u) << s.body;
    EXPECT_EQ(s.obj().at("stats").as_object().at("recovered").to_number<std::int64_t>(), 1)
        << s.body;
    // Recovered group heads are offered asynchronously after the start: a long poll waits.
    auto r = post(port, "/v1/queues/orders/receive", R"({"max": 10, "wait_ms": 10000})");
    ASSERT_EQ(r.status, 200u) << r.body;
    const auto& msgs = r.obj().at("messages").as_array();
    ASSERT_EQ(msgs.size(), 1u) << r.body;
    EXPECT_EQ(msgs[0].as_object().at("id").as_string(), id);
    EXPECT_EQ(msgs[0].as_object().at("body").as_string(), "survives");
    EXPECT_EQ(p.stop(SIGINT), 0) << p.output(true);
  }
  std::filesystem::remove_all(dir);
}

TEST(laneqd_process, a_broken_config_exits_2_naming_every_error) {
  auto dir = temp_dir("config");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"http": {"port": "x"}, "tokens": [{"token": "short", "tenant": "a"}],
                          "colour": 1})";
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto code = p.wait();
  const auto& out = p.output(true);
  EXPECT_EQ(code, 2) << out;
  for (auto field : {"http.port", "tokens[0].token", "colour"})
    EXPECT_NE(out.find(field), std::string::npos) << field << " in:\n" << out;
  std::filesystem::remove_all(dir);
}

TEST(laneqd_process, configured_queues_exist_at_start) {
  auto dir = temp_dir("queues");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                     << R"(", "http": {"port": 0}, "caf": {"port": 0},
                          "queues": {"audit": {"ordering": {"mode": "queue"}}}})";
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto port_line = p.wait_line("laneqd http_port=", 60s);
  ASSERT_TRUE(port_line.has_value()) << p.output();
  ASSERT_TRUE(p.wait_line("laneqd ready", 60s).has_value()) << p.output();
  auto port = static_cast<std::uint16_t>(std::stoi(port_line->substr(port_line->find('=') + 1)));
  auto l = get(port, "/v1/queues");
  ASSERT_EQ(l.status, 200u);
  ASSERT_EQ(l.obj().at("queues").as_array().size(), 1u);
  EXPECT_EQ(l.obj().at("queues").as_array()[0].as_string(), "audit");
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

/// Starts laneqd with `windows` (config fields) and an ordered queue, enqueues 10 messages of
/// 1,000 bytes in one batch and returns the queue's window_bytes: what its one group holds.
std::uint64_t window_bytes_after_ten(const std::string& windows) {
  auto dir = temp_dir("windows");
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                     << R"(", "http": {"port": 0}, "caf": {"port": 0}, )" << windows
                     << R"(, "queues": {"q": {"ordering": {"mode": "queue"}}}})";
  laneqd_process p;
  EXPECT_EQ(p.start({"--config", cfg.string()}), "");
  auto port_line = p.wait_line("laneqd http_port=", 60s);
  EXPECT_TRUE(port_line.has_value() && p.wait_line("laneqd ready", 60s).has_value()) << p.output();
  std::uint64_t held = 0;
  if (port_line) {
    auto port = static_cast<std::uint16_t>(std::stoi(port_line->substr(port_line->find('=') + 1)));
    std::string batch = R"({"messages": [)";
    for (int i = 0; i < 10; ++i)
      batch += (i ? "," : "") + std::string{R"({"body": ")"} + std::string(1000, 'x') + "\"}";
    EXPECT_EQ(post(port, "/v1/queues/q/messages", batch + "]}").status, 200u);
    auto q = get(port, "/v1/queues/q");
    held = q.obj().at("stats").as_object().at("window_bytes").to_number<std::uint64_t>();
  }
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
  return held;
}

// The window settings reach the broker: with room in the budget the group holds up to
// group_window_max; with a budget of 0, only group_window.
TEST(laneqd_process, group_window_settings_reach_the_broker) {
  laneq::message m;
  m.body = std::string(1000, 'x');
  const auto each = laneq::held_message{m}.footprint();  // as a group's window holds it
  EXPECT_EQ(window_bytes_after_ten(R"("group_window": 2, "group_window_max": 5)"), 5 * each);
  EXPECT_EQ(
      window_bytes_after_ten(R"("group_window": 2, "group_window_max": 5, "window_budget_mb": 0)"),
      2 * each);
}

/// The port of laneqd's "laneqd <name>=N" line in what it printed so far; 0 when absent.
std::uint16_t port_in_output(laneqd_process& p, const std::string& name) {
  auto at = p.output().find("laneqd " + name + "=");
  if (at == std::string::npos) return 0;
  return static_cast<std::uint16_t>(std::stoi(p.output().substr(at + name.size() + 8)));
}

TEST(laneqd_process, the_remote_admin_actor_is_published_on_a_port_the_os_picks) {
  auto dir = temp_dir("caf");
  laneqd_process p;
  ASSERT_EQ(p.start({"--data-dir", (dir / "db").string(), "--http-port", "0", "--caf-port", "any"}),
            "");
  auto http_port = read_port(p);  // after "laneqd ready": every port line is in
  ASSERT_NE(http_port, 0) << p.output();
  auto caf_port = port_in_output(p, "caf_port");
  ASSERT_NE(caf_port, 0) << p.output();
  EXPECT_NE(caf_port, http_port);

  caf_client client;
  auto& sys = client.sys;
  {
    auto admin = sys.middleman().remote_actor<remote_admin_actor>("127.0.0.1", caf_port);
    ASSERT_TRUE(admin) << sys.render(admin.error());
    blocking_self self{sys};
    // A queue made over HTTP is listed over CAF.
    ASSERT_EQ(put(http_port, "/v1/queues/remote", "{}").status, 201u);
    std::vector<std::string> names;
    self->request(*admin, 30s, list_atom_v)
        .receive([&](std::vector<std::string>& got) { names = std::move(got); },
                 [&](caf::error& e) { FAIL() << to_string(from_caf(e)); });
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0], "remote");
  }
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

TEST(laneqd_process, the_remote_admin_serves_topics_over_caf) {
  auto dir = temp_dir("caf-topics");
  laneqd_process p;
  ASSERT_EQ(p.start({"--data-dir", (dir / "db").string(), "--http-port", "0", "--caf-port", "any"}),
            "");
  auto http_port = read_port(p);
  ASSERT_NE(http_port, 0) << p.output();
  auto caf_port = port_in_output(p, "caf_port");
  ASSERT_NE(caf_port, 0) << p.output();

  caf_client client;
  auto& sys = client.sys;
  {
    auto admin = sys.middleman().remote_actor<remote_admin_actor>("127.0.0.1", caf_port);
    ASSERT_TRUE(admin) << sys.render(admin.error());
    blocking_self self{sys};
    /// One request over the connection: the reply, or the laneq error it failed with.
    auto ask = [&]<class T>(std::type_identity<T>, auto&&... xs) -> result<T> {
      std::optional<result<T>> out;
      self->request(*admin, 30s, std::forward<decltype(xs)>(xs)...)
          .receive([&](T& x) { out.emplace(std::move(x)); },
                   [&](caf::error& e) { out.emplace(from_caf(e)); });
      return std::move(*out);
    };
    auto create_queue = [&](const std::string& name, const std::string& spec) {
      std::optional<error> err;
      self->request(*admin, 30s, create_atom_v, name, spec)
          .receive([](queue_api&, bool) {}, [&](caf::error& e) { err = from_caf(e); });
      EXPECT_FALSE(err) << to_string(*err);
    };
    create_queue("by-account", R"({"ordering": {"mode": "key", "key": [{"header": "account"}]}})");
    create_queue("audit", "{}");
    auto as_bool = std::type_identity<bool>{};
    const std::string spec = R"({"queues": ["by-account", "audit"]})";
    auto made = ask(as_bool, topic_atom_v, create_atom_v, std::string{"payments"}, spec);
    ASSERT_TRUE(made.ok()) << to_string(made.err());
    EXPECT_TRUE(made.value());
    auto again = ask(as_bool, topic_atom_v, create_atom_v, std::string{"payments"}, spec);
    ASSERT_TRUE(again.ok()) << to_string(again.err());
    EXPECT_FALSE(again.value());
    // Refusals, each named: a broken spec, a missing queue, other queues under the name.
    auto broken = ask(as_bool, topic_atom_v, create_atom_v, std::string{"t2"},
                      std::string{R"({"queues": [], "extra": 1})"});
    ASSERT_FALSE(broken.ok());
    EXPECT_EQ(broken.err().code, errc::invalid_spec);
    EXPECT_NE(broken.err().message.find("topic 't2'"), std::string::npos) << broken.err().message;
    auto not_json = ask(as_bool, topic_atom_v, create_atom_v, std::string{"t2"}, std::string{"{"});
    ASSERT_FALSE(not_json.ok());
    EXPECT_EQ(not_json.err().code, errc::invalid_spec);
    auto missing = ask(as_bool, topic_atom_v, create_atom_v, std::string{"t3"},
                       std::string{R"({"queues": ["nowhere"]})"});
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.err().code, errc::invalid_spec) << missing.err().message;
    EXPECT_NE(missing.err().message.find("no queue named 'nowhere'"), std::string::npos)
        << missing.err().message;
    auto conflict = ask(as_bool, topic_atom_v, create_atom_v, std::string{"payments"},
                        std::string{R"({"queues": ["audit"]})"});
    ASSERT_FALSE(conflict.ok());
    EXPECT_EQ(conflict.err().code, errc::spec_conflict) << conflict.err().message;

    auto listed = ask(std::type_identity<std::vector<topic_spec>>{}, topic_atom_v, list_atom_v);
    ASSERT_TRUE(listed.ok()) << to_string(listed.err());
    ASSERT_EQ(listed.value().size(), 1u);
    EXPECT_EQ(listed.value()[0].name(), "payments");
    auto described = ask(std::type_identity<topic_spec>{}, topic_atom_v, describe_atom_v,
                         std::string{"payments"});
    ASSERT_TRUE(described.ok()) << to_string(described.err());
    EXPECT_EQ(described.value().queues(), (std::vector<std::string>{"by-account", "audit"}));

    // Publish: one message into each queue, the ids per queue in the topic's order.
    std::vector<outgoing_message> batch(2);
    batch[0].body = "debit 10";
    batch[0].headers.push_back({"account", "a1"});
    batch[1].body = "credit 5";
    batch[1].headers.push_back({"account", "a2"});
    auto published = ask(std::type_identity<std::vector<topic_enqueued>>{}, publish_atom_v,
                         std::string{"payments"}, batch);
    ASSERT_TRUE(published.ok()) << to_string(published.err());
    ASSERT_EQ(published.value().size(), 2u);
    EXPECT_EQ(published.value()[0].queue, "by-account");
    EXPECT_EQ(published.value()[1].queue, "audit");
    EXPECT_EQ(published.value()[0].ids.size(), 2u);
    auto got = post(http_port, "/v1/queues/by-account/receive", R"({"max": 10, "wait_ms": 2000})");
    ASSERT_EQ(got.status, 200u) << got.body;
    EXPECT_EQ(got.obj().at("messages").as_array().size(), 2u) << got.body;  // two accounts
    auto audit = get(http_port, "/v1/queues/audit");
    EXPECT_EQ(audit.obj().at("stats").at("enqueued").as_int64(), 2) << audit.body;
    // All or nothing: a message by-account refuses (no account) stores nothing anywhere.
    std::vector<outgoing_message> bad(1);
    bad[0].body = "no account";
    auto refused = ask(std::type_identity<std::vector<topic_enqueued>>{}, publish_atom_v,
                       std::string{"payments"}, bad);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.err().code, errc::ordering_key_missing) << refused.err().message;
    audit = get(http_port, "/v1/queues/audit");
    EXPECT_EQ(audit.obj().at("stats").at("enqueued").as_int64(), 2) << audit.body;

    auto dropped =
        ask(std::type_identity<caf::ok_atom>{}, topic_atom_v, drop_atom_v, std::string{"payments"});
    ASSERT_TRUE(dropped.ok()) << to_string(dropped.err());
    auto gone = ask(std::type_identity<topic_spec>{}, topic_atom_v, describe_atom_v,
                    std::string{"payments"});
    ASSERT_FALSE(gone.ok());
    EXPECT_EQ(gone.err().code, errc::topic_not_found);
    EXPECT_EQ(get(http_port, "/v1/queues/audit").status, 200u);  // the queues stay
    auto unknown = ask(std::type_identity<std::vector<topic_enqueued>>{}, publish_atom_v,
                       std::string{"payments"}, batch);
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.err().code, errc::topic_not_found);
  }
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

// Listening beyond loopback with no token lets anyone on the network use every queue: laneqd
// refuses unless the config says allow_anonymous (caf.allow_anonymous for the CAF port, which
// has no tokens at all), and then says so loudly.
TEST(laneqd_process, a_non_loopback_listener_without_tokens_needs_allow_anonymous) {
  auto dir = temp_dir("anon");
  {
    laneqd_process p;
    ASSERT_EQ(p.start({"--data-dir", (dir / "db").string(), "--http-host", "0.0.0.0", "--http-port",
                       "0", "--caf-port", "0"}),
              "");
    auto code = p.wait();
    const auto& out = p.output(true);
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("0.0.0.0"), std::string::npos) << out;
    EXPECT_NE(out.find("allow_anonymous"), std::string::npos) << out;
    EXPECT_EQ(out.find("laneqd ready"), std::string::npos) << out;
  }
  auto write_config = [&](const std::string& name, const std::string& extra) {
    auto cfg = dir / name;
    std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                       << R"(", "http": {"host": "0.0.0.0", "port": 0}, "caf": {"port": 0})"
                       << extra << "}";
    return cfg.string();
  };
  {
    laneqd_process p;
    ASSERT_EQ(p.start({"--config", write_config("anon.json", R"(, "allow_anonymous": true)")}), "");
    ASSERT_NE(read_port(p), 0) << p.output();
    EXPECT_NE(p.output().find("WARNING"), std::string::npos) << p.output();
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  {
    laneqd_process p;
    ASSERT_EQ(p.start({"--config",
                       write_config("tokens.json", R"(, "tokens": [{"token": "a-token-0123456789",
                                                                  "tenant": "*"}])")}),
              "");
    ASSERT_NE(read_port(p), 0) << p.output();
    EXPECT_EQ(p.output().find("WARNING"), std::string::npos) << p.output();
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  // Without tokens the CAF port beyond loopback needs caf.allow_anonymous, and is then
  // announced with a WARNING; with tokens its clients log in and it starts without one.
  // Unpublished, its host is moot.
  auto caf_config = [&](const std::string& name, const std::string& caf,
                        const std::string& tokens = "") {
    auto cfg = dir / name;
    std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                       << R"(", "http": {"port": 0}, "caf": )" << caf << tokens << "}";
    return cfg.string();
  };
  {
    laneqd_process p;
    ASSERT_EQ(
        p.start({"--config",
                 caf_config("caf-tokens.json", R"({"host": "0.0.0.0"})",
                            R"(, "tokens": [{"token": "a-token-0123456789", "tenant": "*"}])"),
                 "--caf-port", "any"}),
        "");
    ASSERT_NE(read_port(p), 0) << p.output();
    EXPECT_EQ(p.output().find("WARNING"), std::string::npos) << p.output();
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  {
    laneqd_process p;
    ASSERT_EQ(p.start({"--config", caf_config("caf.json", R"({"host": "0.0.0.0"})"), "--caf-port",
                       "any"}),
              "");
    auto code = p.wait();
    const auto& out = p.output(true);
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("refusing to start: the CAF port is published on 0.0.0.0"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("caf": {"allow_anonymous": true})"), std::string::npos) << out;
    EXPECT_EQ(out.find("laneqd ready"), std::string::npos) << out;
  }
  {
    laneqd_process p;
    ASSERT_EQ(
        p.start({"--config",
                 caf_config("caf-allowed.json", R"({"host": "0.0.0.0", "allow_anonymous": true})"),
                 "--caf-port", "any"}),
        "");
    ASSERT_NE(read_port(p), 0) << p.output();
    EXPECT_NE(p.output().find("WARNING: the CAF port is published on 0.0.0.0"), std::string::npos)
        << p.output();
    EXPECT_EQ(p.output().find("laneqd caf_port=0\n"), std::string::npos) << p.output();
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  {
    laneqd_process p;
    ASSERT_EQ(
        p.start({"--config", caf_config("caf-off.json", R"({"host": "0.0.0.0", "port": 0})")}), "");
    ASSERT_NE(read_port(p), 0) << p.output();
    EXPECT_EQ(p.output().find("WARNING"), std::string::npos) << p.output();
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laneq::server::test
