// laneqd's configuration (apps/server/include/laneq/server/config.hpp): defaults, every field,
// and every broken rule reported at once, each naming its field.
#include "laneq/server/config.hpp"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <boost/json.hpp>

namespace laneq::server {
namespace {

bool names(const parsed_config& p, std::string_view field) {
  for (const auto& e : p.errors)
    if (e.message.find(field) != std::string::npos) return true;
  return false;
}

std::string all(const parsed_config& p) {
  std::string out;
  for (const auto& e : p.errors) out += to_string(e) + "\n";
  return out;
}

TEST(config, an_empty_config_gives_the_documented_defaults) {
  auto p = parse_config("{}");
  ASSERT_TRUE(p.errors.empty()) << all(p);
  EXPECT_EQ(p.config.data_dir, "./laneq-data");
  EXPECT_EQ(p.config.http_host, "127.0.0.1");
  EXPECT_EQ(p.config.http_port, 7070);
  EXPECT_EQ(p.config.caf_host, "127.0.0.1");
  EXPECT_EQ(p.config.caf_port, 7071);
  EXPECT_TRUE(p.config.sync);
  EXPECT_EQ(p.config.group_window, 64u);
  EXPECT_EQ(p.config.group_window_max, 1024u);
  EXPECT_EQ(p.config.window_budget_bytes, std::size_t{256} << 20);
  EXPECT_TRUE(p.config.tokens.empty());
  EXPECT_TRUE(p.config.queues.empty());
  server_config defaults;
  EXPECT_EQ(p.config.limits.body_bytes, defaults.limits.body_bytes);
}

// caf.threads 0 leaves one core to the store thread, HTTP and RocksDB; a configured count wins.
TEST(config, actor_threads_default_to_one_fewer_than_the_cores) {
  EXPECT_EQ(actor_threads_for(0, 2), 1u);
  EXPECT_EQ(actor_threads_for(0, 8), 7u);
  EXPECT_EQ(actor_threads_for(0, 1), 1u);
  EXPECT_EQ(actor_threads_for(0, 0), 1u);  // hardware_concurrency() may not know
  EXPECT_EQ(actor_threads_for(4, 2), 4u);
  EXPECT_EQ(parse_config("{}").config.actor_threads, 0u);
}

TEST(config, every_field_is_read) {
  auto p = parse_config(R"({
    "data_dir": "/var/lib/laneq",
    "http": {"host": "0.0.0.0", "port": 8080, "threads": 2},
    "caf": {"host": "::1", "port": 0, "threads": 4, "allow_anonymous": true},
    "allow_anonymous": true,
    "access_log": "/var/log/laneq/access.log",
    "sync": false,
    "reclaim_grace_ms": 2500,
    "group_window": 128,
    "group_window_max": 4096,
    "window_budget_mb": 512,
    "limits": {"target_bytes": 1024, "header_count": 32, "header_bytes": 8192,
               "body_bytes": 65536, "batch": 100, "head_timeout_ms": 2000,
               "connections": 100, "connections_reserve": 10,
               "answer_bytes": 2097152},
    "tokens": [{"token": "acme-secret-token-1", "tenant": "acme"},
               {"token": "admin-secret-token-1", "tenant": "*"}],
    "queues": {"orders": {"ordering": {"mode": "queue"}, "lease_ms": 5000},
               "acme/events": {"max_attempts": 3}}
  })");
  ASSERT_TRUE(p.errors.empty()) << all(p);
  const auto& c = p.config;
  EXPECT_EQ(c.data_dir, "/var/lib/laneq");
  EXPECT_EQ(c.http_host, "0.0.0.0");
  EXPECT_EQ(c.http_port, 8080);
  EXPECT_EQ(c.http_threads, 2u);
  EXPECT_EQ(c.caf_host, "::1");
  EXPECT_EQ(c.caf_port, 0);
  EXPECT_EQ(c.actor_threads, 4u);
  EXPECT_TRUE(c.caf_allow_anonymous);
  EXPECT_TRUE(c.allow_anonymous);
  EXPECT_EQ(c.access_log, "/var/log/laneq/access.log");
  EXPECT_FALSE(c.sync);
  EXPECT_EQ(c.reclaim_grace, std::chrono::milliseconds{2500});
  EXPECT_EQ(c.group_window, 128u);
  EXPECT_EQ(c.group_window_max, 4096u);
  EXPECT_EQ(c.window_budget_bytes, std::size_t{512} << 20);
  EXPECT_EQ(c.limits.target_bytes, 1024u);
  EXPECT_EQ(c.limits.header_count, 32u);
  EXPECT_EQ(c.limits.header_bytes, 8192u);
  EXPECT_EQ(c.limits.body_bytes, 65536u);
  EXPECT_EQ(c.limits.batch, 100u);
  EXPECT_EQ(c.limits.head_timeout_ms, 2000u);
  EXPECT_EQ(c.limits.connections, 100u);
  EXPECT_EQ(c.limits.connections_reserve, 10u);
  EXPECT_EQ(c.limits.answer_bytes, 2097152u);
  ASSERT_EQ(c.tokens.size(), 2u);
  EXPECT_EQ(c.tokens[0].tenant, "acme");
  EXPECT_EQ(c.tokens[1].tenant, "*");
  ASSERT_EQ(c.queues.size(), 2u);
  EXPECT_EQ(c.queues[0].name(), "orders");
  EXPECT_EQ(c.queues[0].ordering(), ordering_mode::queue);
  EXPECT_EQ(c.queues[0].lease_duration(), std::chrono::milliseconds{5000});
  EXPECT_EQ(c.queues[1].name(), "acme/events");
  EXPECT_EQ(c.queues[1].attempts_max(), 3u);
}

TEST(config, every_error_is_reported_at_once_each_naming_its_field) {
  auto p = parse_config(R"({
    "data_dir": 5,
    "http": {"host": "not-an-ip", "port": 70000, "speed": 1},
    "caf": {"port": -1},
    "sync": "yes",
    "reclaim_grace_ms": 99999999999,
    "limits": {"body_bytes": 1, "batch": 0},
    "tokens": [{"token": "short", "tenant": "a/b"}, {"tenant": "x"}],
    "queues": {"q1": {"lease_ms": -5}},
    "colour": "blue"
  })");
  EXPECT_GE(p.errors.size(), 14u) << all(p);
  for (auto field : {"data_dir", "http.host", "http.port", "http.speed", "caf.port", "sync",
                     "reclaim_grace_ms", "limits.body_bytes", "limits.batch", "tokens[0].token",
                     "tokens[0].tenant", "tokens[1].token", "queues.q1", "colour"})
    EXPECT_TRUE(names(p, field)) << field << " not named in:\n" << all(p);
  for (const auto& e : p.errors)
    EXPECT_TRUE(e.code == errc::invalid_argument || e.code == errc::invalid_spec) << to_string(e);
}

TEST(config, the_connection_reserve_is_below_the_cap_and_follows_a_small_cap) {
  auto p = parse_config(R"({"limits": {"connections": 100, "connections_reserve": 100}})");
  ASSERT_EQ(p.errors.size(), 1u) << all(p);
  EXPECT_TRUE(names(p, "limits.connections_reserve")) << all(p);
  auto small = parse_config(R"({"limits": {"connections": 40}})");
  ASSERT_TRUE(small.errors.empty()) << all(small);
  EXPECT_EQ(small.config.limits.connections_reserve, 10u);
  EXPECT_EQ(parse_config("{}").config.limits.connections_reserve, 64u);
}

TEST(config, group_windows_are_bounded_and_the_maximum_is_not_below_the_window) {
  auto p = parse_config(R"({"group_window": 128, "group_window_max": 100})");
  ASSERT_EQ(p.errors.size(), 1u) << all(p);
  EXPECT_NE(p.errors[0].message.find("group_window_max: must be at least group_window (128)"),
            std::string::npos)
      << all(p);
  auto range = parse_config(
      R"({"group_window": 1, "group_window_max": 2000000, "window_budget_mb": 2000000})");
  EXPECT_EQ(range.errors.size(), 3u) << all(range);
  for (auto field : {"group_window:", "group_window_max:", "window_budget_mb:"})
    EXPECT_TRUE(names(range, field)) << field << " not named in:\n" << all(range);
  auto off = parse_config(R"({"group_window": 2000, "window_budget_mb": 0})");
  ASSERT_TRUE(off.errors.empty()) << all(off);
  EXPECT_EQ(off.config.window_budget_bytes, 0u) << "0 turns growing off";
  EXPECT_EQ(off.config.group_window_max, 1024u) << "below the window, the broker uses the window";
}

TEST(config, malformed_json_and_non_objects_are_errors) {
  auto bad = parse_config("{\"http\": ");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(bad.errors[0].message.find("not valid JSON"), std::string::npos);
  auto arr = parse_config("[]");
  ASSERT_EQ(arr.errors.size(), 1u);
  EXPECT_NE(arr.errors[0].message.find("must be a JSON object"), std::string::npos);
}

TEST(config, duplicate_tokens_and_clashing_ports_are_refused) {
  auto p = parse_config(R"({
    "http": {"port": 9000}, "caf": {"port": 9000},
    "tokens": [{"token": "same-token-123456789", "tenant": "a"},
               {"token": "same-token-123456789", "tenant": "b"}]
  })");
  EXPECT_TRUE(names(p, "caf.port")) << all(p);
  EXPECT_TRUE(names(p, "tokens[1].token")) << all(p);
}

// With tokens a CAF client logs in (docs/caf-client.md): beyond loopback the CAF port is exposed
// only without tokens, and only when it is published.
TEST(config, a_published_caf_port_beyond_loopback_is_exposed_only_without_tokens) {
  auto with_tokens = parse_config(R"({"caf": {"host": "0.0.0.0"},
    "tokens": [{"token": "admin-secret-token-1", "tenant": "*"}]})");
  ASSERT_TRUE(with_tokens.errors.empty()) << all(with_tokens);
  EXPECT_FALSE(anonymous_listener(with_tokens.config).has_value());
  EXPECT_FALSE(anonymous_caf_listener(with_tokens.config, true).has_value());
  auto p = parse_config(R"({"caf": {"host": "0.0.0.0"}})");
  ASSERT_TRUE(p.errors.empty()) << all(p);
  auto exposed = anonymous_caf_listener(p.config, true);
  ASSERT_TRUE(exposed.has_value());
  EXPECT_NE(exposed->find("0.0.0.0"), std::string::npos) << *exposed;
  EXPECT_FALSE(anonymous_caf_listener(p.config, false).has_value());
  EXPECT_FALSE(p.config.caf_allow_anonymous);
  for (const char* host : {"127.0.0.1", "::1", "127.0.0.2"}) {
    server_config c;
    c.caf_host = host;
    EXPECT_FALSE(anonymous_caf_listener(c, true).has_value()) << host;
  }
  EXPECT_TRUE(names(parse_config(R"({"caf": {"allow_anonymous": 1}})"), "caf.allow_anonymous"));
}

// A tokens file (docs/operations.md, "Tokens from a file") is checked as the config's tokens
// are, must hold one token at least, and cannot be combined with inline tokens.
TEST(config, a_tokens_file_is_checked_as_tokens_are) {
  std::vector<token_config> tokens;
  auto ok = parse_tokens_file(R"(// rotated monthly
    {"tokens": [{"token": "acme-secret-token-1", "tenant": "acme"},
                {"token": "admin-secret-token-1", "tenant": "*"}]})",
                              tokens);
  EXPECT_TRUE(ok.empty());
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[1].tenant, "*");
  auto text_of = [](const std::vector<error>& errors) {
    std::string out;
    for (const auto& e : errors) out += e.message + "\n";
    return out;
  };
  for (const auto* broken :
       {R"({"tokens": []})", R"({"tokens": [{"token": "short", "tenant": "a/b"}]})",
        R"({"tokens": [{"token": "acme-secret-token-1", "tenant": "a"}], "extra": 1})",
        R"({"token": "x"})", "[", R"([{"token": "acme-secret-token-1", "tenant": "a"}])"}) {
    std::vector<token_config> kept{{"kept-token-0123456789", "k"}};
    auto errors = parse_tokens_file(broken, kept);
    EXPECT_FALSE(errors.empty()) << broken;
    EXPECT_EQ(kept.size(), 1u) << "a refused file leaves the tokens alone: " << broken;
  }
  auto short_token =
      parse_tokens_file(R"({"tokens": [{"token": "short", "tenant": "a/b"}]})", tokens);
  EXPECT_NE(text_of(short_token).find("tokens[0].token"), std::string::npos)
      << text_of(short_token);
  EXPECT_NE(text_of(short_token).find("tokens[0].tenant"), std::string::npos)
      << text_of(short_token);

  auto cfg = parse_config(R"({"tokens_file": "/etc/laneq/tokens.json"})");
  EXPECT_TRUE(cfg.errors.empty()) << all(cfg);
  EXPECT_EQ(cfg.config.tokens_file, "/etc/laneq/tokens.json");
  EXPECT_TRUE(names(parse_config(R"({"tokens_file": "/t.json",
    "tokens": [{"token": "acme-secret-token-1", "tenant": "acme"}]})"),
                    "tokens_file"));
  auto missing = read_tokens_file("/nonexistent/tokens.json", tokens);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].message.find("tokens_file /nonexistent/tokens.json"), std::string::npos)
      << missing[0].message;
}

// A config may say what it is for: // and /* */ comments are skipped, anything else still fails.
// TLS (docs/operations.md "TLS"): http.tls and caf.tls name their files; HTTP's client CA is
// optional, CAF's CA is required (its TLS is mutual); a missing or unknown field is named.
TEST(config, tls_sections_name_their_files_and_each_missing_one) {
  auto p = parse_config(R"({"http": {"tls": {"cert_file": "/c.pem", "key_file": "/k.pem"}},
      "caf": {"tls": {"cert_file": "/cc.pem", "key_file": "/ck.pem", "ca_file": "/ca.pem"}}})");
  ASSERT_TRUE(p.errors.empty()) << all(p);
  EXPECT_TRUE(p.config.http_tls.enabled());
  EXPECT_EQ(p.config.http_tls.cert_file, "/c.pem");
  EXPECT_EQ(p.config.http_tls.key_file, "/k.pem");
  EXPECT_EQ(p.config.http_tls.ca_file, "");
  EXPECT_EQ(p.config.caf_tls.ca_file, "/ca.pem");
  EXPECT_FALSE(parse_config("{}").config.http_tls.enabled());
  EXPECT_FALSE(parse_config("{}").config.caf_tls.enabled());
  auto c =
      parse_config(R"({"http": {"tls": {"cert_file": "/c.pem", "client_ca_file": "/ca.pem"}}})");
  EXPECT_EQ(c.config.http_tls.ca_file, "");
  EXPECT_FALSE(c.config.http_tls.enabled());
  auto bad = parse_config(R"({"http": {"tls": {"cert_file": "", "ca_file": "/x", "key_file": 3}},
      "caf": {"tls": {"cert_file": "/c", "key_file": "/k"}}})");
  EXPECT_TRUE(names(bad, "http.tls.cert_file: must not be empty")) << all(bad);
  EXPECT_TRUE(names(bad, "http.tls.ca_file: is not a known field")) << all(bad);
  EXPECT_TRUE(names(bad, "http.tls.key_file: must be a string")) << all(bad);
  EXPECT_TRUE(names(bad, "caf.tls.ca_file: is required")) << all(bad);
  auto missing = parse_config(R"({"http": {"tls": {}}, "caf": {"tls": []}})");
  EXPECT_TRUE(names(missing, "http.tls.cert_file: is required")) << all(missing);
  EXPECT_TRUE(names(missing, "http.tls.key_file: is required")) << all(missing);
  EXPECT_TRUE(names(missing, "caf.tls: must be an object")) << all(missing);
}

TEST(config, comments_are_allowed) {
  auto p = parse_config(
      "// laneqd for the tests\n{\n  /* where */ \"data_dir\": \"/tmp/q\", // data\n"
      "  \"sync\": false\n}\n");
  ASSERT_TRUE(p.errors.empty()) << all(p);
  EXPECT_EQ(p.config.data_dir, "/tmp/q");
  EXPECT_FALSE(p.config.sync);
  EXPECT_TRUE(names(parse_config("# not a comment\n{}"), "not valid JSON"));
}

std::string read_source_file(const std::string& relative) {
  std::ifstream in{std::string{LANEQ_SOURCE_DIR} + "/" + relative};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every field path of `v` ("http.port", "limits.batch", "tokens"), objects walked into.
void field_paths(const boost::json::object& o, const std::string& prefix,
                 std::vector<std::string>& out) {
  for (const auto& kv : o) {
    auto path = prefix + std::string{kv.key()};
    if (const auto* inner = kv.value().if_object(); inner != nullptr && !inner->empty())
      field_paths(*inner, path + ".", out);
    else
      out.push_back(path);
  }
}

// packaging/laneqd.json, installed as /etc/laneq/laneqd.json by the Debian package, is valid,
// keeps the data in the systemd unit's state directory and holds every other field at its default
// (so the sample documents the defaults and cannot drift from them).
TEST(config, the_packaged_sample_holds_the_defaults) {
  auto text = read_source_file("packaging/laneqd.json");
  ASSERT_FALSE(text.empty());
  auto p = parse_config(text);
  ASSERT_TRUE(p.errors.empty()) << all(p);
  server_config d;
  const auto& c = p.config;
  EXPECT_EQ(c.data_dir, "/var/lib/laneq");
  EXPECT_EQ(c.http_host, d.http_host);
  EXPECT_EQ(c.http_port, d.http_port);
  EXPECT_EQ(c.http_threads, d.http_threads);
  EXPECT_EQ(c.caf_host, d.caf_host);
  EXPECT_EQ(c.caf_port, d.caf_port);
  EXPECT_EQ(c.actor_threads, d.actor_threads);
  EXPECT_EQ(c.caf_allow_anonymous, d.caf_allow_anonymous);
  EXPECT_EQ(c.sync, d.sync);
  EXPECT_EQ(c.reclaim_grace, d.reclaim_grace);
  EXPECT_EQ(c.group_window, d.group_window);
  EXPECT_EQ(c.group_window_max, d.group_window_max);
  EXPECT_EQ(c.window_budget_bytes, d.window_budget_bytes);
  EXPECT_EQ(c.limits.target_bytes, d.limits.target_bytes);
  EXPECT_EQ(c.limits.header_count, d.limits.header_count);
  EXPECT_EQ(c.limits.header_bytes, d.limits.header_bytes);
  EXPECT_EQ(c.limits.body_bytes, d.limits.body_bytes);
  EXPECT_EQ(c.limits.batch, d.limits.batch);
  EXPECT_EQ(c.limits.head_timeout_ms, d.limits.head_timeout_ms);
  EXPECT_EQ(c.limits.connections, d.limits.connections);
  EXPECT_EQ(c.limits.connections_reserve, d.limits.connections_reserve);
  EXPECT_EQ(c.limits.answer_bytes, d.limits.answer_bytes);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(c.allow_anonymous, d.allow_anonymous);
  EXPECT_TRUE(c.queues.empty());
  EXPECT_TRUE(c.topics.empty());
  EXPECT_FALSE(c.http_tls.enabled());
  EXPECT_FALSE(c.caf_tls.enabled());
}

// Every field the sample sets is named in docs/operations.md ("Configuration"), in backticks.
TEST(config, every_field_of_the_packaged_sample_is_documented) {
  boost::json::parse_options options;
  options.allow_comments = true;
  auto sample = boost::json::parse(read_source_file("packaging/laneqd.json"), {}, options);
  std::vector<std::string> paths;
  field_paths(sample.as_object(), "", paths);
  EXPECT_GE(paths.size(), 25u);
  auto docs = read_source_file("docs/operations.md");
  for (const auto& path : paths)
    EXPECT_NE(docs.find("`" + path + "`"), std::string::npos)
        << path << " is not documented in docs/operations.md";
}

}  // namespace
}  // namespace laneq::server
