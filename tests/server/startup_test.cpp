// laneqd's start and its operator-facing lines, as a process: the line saying what it recovered
// (docs/operations.md "Starting and stopping"), the access log ("Access log") and tokens read from
// a file and reloaded on SIGHUP ("Tokens from a file"). The binary comes from LANEQD_BINARY.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "caf/io/all.hpp"

#include "caf_client.hpp"
#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/remote_client.hpp"
#include "laneqd_process.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

/// The receive's first lease, "" when it got nothing.
std::string first_lease(const reply& r) {
  const auto& msgs = r.obj().at("messages").as_array();
  if (msgs.empty()) return {};
  return std::string{msgs[0].as_object().at("lease").as_string()};
}

TEST(laneqd_start, prints_what_it_recovered) {
  auto dir = temp_dir("recovered");
  {
    laneqd_process p;
    auto port = start_and_read_port(p, dir);
    ASSERT_NE(port, 0);
    // A fresh store: nothing recovered.
    EXPECT_NE(p.output().find("laneqd: recovered 0 queues, 0 messages in 0 groups (0 dead "
                              "letters) in "),
              std::string::npos)
        << p.output();
    ASSERT_EQ(put(port, "/v1/queues/orders",
                  R"({"ordering": {"mode": "key", "key": [{"header": "account"}]},
                      "max_attempts": 1})")
                  .status,
              201u);
    ASSERT_EQ(put(port, "/v1/queues/jobs", "{}").status, 201u);
    // Three accounts, two messages each; one head dead-lettered (one attempt only), so each
    // account still holds a message.
    auto sent = post(port, "/v1/queues/orders/messages",
                     R"({"messages": [{"body": "a1", "headers": {"account": "a"}},
                                      {"body": "a2", "headers": {"account": "a"}},
                                      {"body": "b1", "headers": {"account": "b"}},
                                      {"body": "b2", "headers": {"account": "b"}},
                                      {"body": "c1", "headers": {"account": "c"}},
                                      {"body": "c2", "headers": {"account": "c"}}]})");
    ASSERT_EQ(sent.status, 200u) << sent.body;
    auto got = post(port, "/v1/queues/orders/receive", R"({"max": 1})");
    ASSERT_EQ(got.status, 200u) << got.body;
    auto lease = first_lease(got);
    ASSERT_FALSE(lease.empty()) << got.body;
    auto nacked = post(port, "/v1/queues/orders/nack",
                       R"({"lease": ")" + lease + R"(", "dead_letter": true})");
    ASSERT_EQ(nacked.status, 200u) << nacked.body;
    ASSERT_EQ(
        post(port, "/v1/queues/jobs/messages", R"({"messages": [{"body": "x"}, {"body": "y"}]})")
            .status,
        200u);
    EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  }
  laneqd_process p;
  auto port = start_and_read_port(p, dir);
  ASSERT_NE(port, 0);
  // 5 messages left in orders (one dead-lettered) in 3 groups, 2 unordered in jobs (no group).
  std::regex line{R"(laneqd: recovered 2 queues, 7 messages in 3 groups \(1 dead letters\) in )"
                  R"([0-9]+\.[0-9]{2} s)"};
  EXPECT_TRUE(std::regex_search(p.output(), line)) << p.output();
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

constexpr const char* acme_token = "acme-token-0123456789";
constexpr const char* admin_token = "admin-token-0123456789";

/// Starts laneqd with the config `fields` (JSON members after data_dir and the ports); returns the
/// HTTP port (0 on failure).
std::uint16_t start_with(laneqd_process& p, const std::filesystem::path& dir,
                         const std::string& fields) {
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                     << R"(", "http": {"port": 0}, "caf": {"port": 0})"
                     << (fields.empty() ? "" : ", ") << fields << "}";
  if (p.start({"--config", cfg.string()}) != "") return 0;
  return read_port(p);
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in{file};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string stamp = R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)";

TEST(laneqd_start, the_access_log_has_a_line_per_request_without_queries_or_tokens) {
  auto dir = temp_dir("access");
  auto log = dir / "access.log";
  laneqd_process p;
  auto port = start_with(p, dir,
                         R"("access_log": ")" + log.string() + R"(", "tokens": [
                            {"token": ")" +
                             std::string{acme_token} + R"(", "tenant": "acme"},
                            {"token": ")" +
                             std::string{admin_token} + R"(", "tenant": "*"}])");
  ASSERT_NE(port, 0) << p.output();
  ASSERT_EQ(put(port, "/v1/queues/orders", "{}", acme_token).status, 201u);
  ASSERT_EQ(get(port, "/v1/queues/orders/dead-letters?max=5", acme_token).status, 200u);
  ASSERT_EQ(get(port, "/v1/queues", "not-a-valid-token-at-all").status, 401u);
  ASSERT_EQ(get(port, "/v1/queues", admin_token).status, 200u);
  auto text = read_text(log);
  auto has = [&](const std::string& rest) {
    return std::regex_search(text, std::regex{"(^|\n)" + stamp + " " + rest + "\n"});
  };
  EXPECT_TRUE(has(R"(PUT /v1/queues/orders 201 [0-9]+\.[0-9]{3} acme [0-9]+)")) << text;
  EXPECT_TRUE(has(R"(GET /v1/queues/orders/dead-letters 200 [0-9]+\.[0-9]{3} acme [0-9]+)"))
      << text;
  EXPECT_TRUE(has(R"(GET /v1/queues 401 [0-9]+\.[0-9]{3} - [0-9]+)")) << text;
  EXPECT_TRUE(has(R"(GET /v1/queues 200 [0-9]+\.[0-9]{3} \* [0-9]+)")) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;
  // Neither a token nor a query string reaches the log.
  for (auto secret : {acme_token, admin_token, "not-a-valid-token", "max=5"})
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in:\n" << text;
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

TEST(laneqd_start, nothing_is_logged_per_request_without_access_log) {
  auto dir = temp_dir("no-access");
  laneqd_process p;
  auto port = start_with(p, dir, "");
  ASSERT_NE(port, 0) << p.output();
  ASSERT_EQ(put(port, "/v1/queues/orders", "{}").status, 201u);
  ASSERT_EQ(get(port, "/v1/queues").status, 200u);
  EXPECT_EQ(p.stop(SIGTERM), 0);
  const auto& out = p.output(true);
  EXPECT_FALSE(std::regex_search(out, std::regex{stamp})) << out;
  EXPECT_EQ(out.find("/v1/queues"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

void write_tokens(const std::filesystem::path& file, const std::string& tokens) {
  auto tmp = file.string() + ".tmp";
  std::ofstream{tmp} << R"({"tokens": [)" << tokens << "]}";
  std::filesystem::rename(tmp, file);  // replaced whole, as an operator's editor or tool would
}

std::string token_entry(const std::string& token, const std::string& tenant) {
  return R"({"token": ")" + token + R"(", "tenant": ")" + tenant + R"("})";
}

/// Sends laneqd SIGHUP and waits for its line about the reload.
std::string hang_up(laneqd_process& p) {
  ::kill(p.pid(), SIGHUP);
  auto line = p.wait_line("laneqd: SIGHUP:", 30s);
  EXPECT_TRUE(line.has_value()) << p.output();
  return line.value_or("");
}

TEST(laneqd_start, sighup_reloads_the_tokens_file_for_http_and_caf) {
  const std::string old_token = "old-token-0123456789";
  const std::string new_token = "new-token-0123456789";
  auto dir = temp_dir("reload");
  auto tokens = dir / "tokens.json";
  write_tokens(tokens, token_entry(old_token, "acme"));
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                     << R"(", "http": {"port": 0}, "tokens_file": ")" << tokens.string() << R"("})";
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string(), "--caf-port", "any"}), "");
  auto port = read_port(p);
  ASSERT_NE(port, 0) << p.output();
  auto at = p.output().find("laneqd caf_port=");
  ASSERT_NE(at, std::string::npos);
  auto caf_port = static_cast<std::uint16_t>(std::stoi(p.output().substr(at + 16)));
  caf_client client;
  auto caf_login = [&](const std::string& token) {
    return connect_to_laneqd(client.sys, "127.0.0.1", caf_port, token);
  };

  EXPECT_EQ(get(port, "/v1/queues", old_token).status, 200u);
  EXPECT_EQ(get(port, "/v1/queues", new_token).status, 401u);
  auto old_session = caf_login(old_token);
  ASSERT_TRUE(old_session.ok()) << to_string(old_session.err());
  EXPECT_EQ(caf_login(new_token).err().code, errc::unauthorized);

  // The file now holds another token (and an admin's, for /metrics): SIGHUP puts it in force.
  write_tokens(tokens,
               token_entry(new_token, "acme") + "," + token_entry("admin-token-0123456789", "*"));
  EXPECT_NE(hang_up(p).find("2 token(s) from " + tokens.string() + " in force"), std::string::npos);
  EXPECT_EQ(get(port, "/v1/queues", old_token).status, 401u);
  EXPECT_EQ(get(port, "/v1/queues", new_token).status, 200u);
  EXPECT_EQ(caf_login(old_token).err().code, errc::unauthorized);
  auto new_session = caf_login(new_token);
  ASSERT_TRUE(new_session.ok()) << to_string(new_session.err());
  {
    // The old token's session has stopped: its calls fail (with an error, or unanswered: CAF
    // 0.17 does not always answer a request to a remote actor that has stopped).
    blocking_self self{client.sys};
    bool failed = false;
    self->request(old_session.value(), std::chrono::seconds(3), list_atom_v)
        .receive([](std::vector<std::string>&) {}, [&](caf::error&) { failed = true; });
    EXPECT_TRUE(failed);
  }

  // A broken file is refused: the tokens in force stay, the line names the error.
  write_tokens(tokens, token_entry("short", "acme"));
  auto refused = hang_up(p);
  EXPECT_NE(refused.find("the old tokens stay in force"), std::string::npos) << refused;
  EXPECT_NE(refused.find("tokens[0].token"), std::string::npos) << refused;
  EXPECT_EQ(get(port, "/v1/queues", new_token).status, 200u);
  EXPECT_TRUE(caf_login(new_token).ok());
  auto metrics = get(port, "/metrics", "admin-token-0123456789");
  ASSERT_EQ(metrics.status, 200u);
  EXPECT_NE(metrics.body.find("laneq_tokens_reload_total{result=\"ok\"} 1\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("laneq_tokens_reload_total{result=\"error\"} 1\n"), std::string::npos)
      << metrics.body;
  EXPECT_EQ(p.stop(SIGTERM), 0) << p.output(true);
  std::filesystem::remove_all(dir);
}

TEST(laneqd_start, a_broken_tokens_file_is_a_start_error) {
  auto dir = temp_dir("bad-tokens");
  auto tokens = dir / "tokens.json";
  write_tokens(tokens, token_entry("short", "a/b"));
  auto cfg = dir / "laneqd.json";
  std::ofstream{cfg} << R"({"data_dir": ")" << (dir / "db").string()
                     << R"(", "http": {"port": 0}, "caf": {"port": 0}, "tokens_file": ")"
                     << tokens.string() << R"("})";
  laneqd_process p;
  ASSERT_EQ(p.start({"--config", cfg.string()}), "");
  auto code = p.wait();
  const auto& out = p.output(true);
  EXPECT_EQ(code, 2) << out;
  const auto path = tokens.string();
  for (auto field : {"tokens[0].token", "tokens[0].tenant", path.c_str()})
    EXPECT_NE(out.find(field), std::string::npos) << field << " in:\n" << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laneq::server::test
