// The CLI's argument parsing, spec building and output rendering, and the HTTP client's URL and
// error parsing, without a server (issue 4 §4).
#include <chrono>
#include <sstream>

#include <gtest/gtest.h>
#include <boost/asio/ip/tcp.hpp>

#include "cli.hpp"
#include "laneq/limits.hpp"
#include "laneq/version.hpp"

namespace json = boost::json;
using namespace laneq;
using namespace laneq::cli;

namespace {

parsed parse_ok(std::vector<std::string> argv, std::map<std::string, std::string> env = {}) {
  auto r = parse(argv, env);
  if (auto* e = std::get_if<usage_error>(&r)) ADD_FAILURE() << "usage error: " << e->message;
  return std::get<parsed>(r);
}

std::string parse_err(std::vector<std::string> argv) {
  auto r = parse(argv, {});
  if (std::holds_alternative<parsed>(r)) {
    ADD_FAILURE() << "expected a usage error";
    return {};
  }
  return std::get<usage_error>(r).message;
}

json::object spec_of(std::vector<std::string> argv) {
  auto p = parse_ok(std::move(argv));
  auto s = spec_from_options(p);
  if (auto* e = std::get_if<usage_error>(&s)) ADD_FAILURE() << e->message;
  return std::get<json::object>(s);
}

}  // namespace

TEST(cli_parse, finds_two_word_commands_and_their_arguments) {
  auto p = parse_ok({"queue", "create", "orders", "--ordering", "queue"});
  ASSERT_NE(p.command, nullptr);
  EXPECT_EQ(p.command->words, "queue create");
  EXPECT_EQ(p.args, std::vector<std::string>{"orders"});
  EXPECT_EQ(p.value("ordering"), "queue");
}

TEST(cli_parse, global_options_go_anywhere_and_flags_beat_the_environment) {
  auto p = parse_ok({"--url", "http://h:1", "send", "q", "--json", "hello", "--token=t2"},
                    {{"LANEQ_URL", "http://env:2"}, {"LANEQ_TOKEN", "t1"}});
  EXPECT_EQ(p.command->words, "send");
  EXPECT_EQ(p.url, "http://h:1");
  EXPECT_EQ(p.token, "t2");
  EXPECT_TRUE(p.json);
  EXPECT_EQ(p.args, (std::vector<std::string>{"q", "hello"}));
}

TEST(cli_parse, environment_supplies_url_and_token) {
  auto p = parse_ok({"health"}, {{"LANEQ_URL", "http://env:2"}, {"LANEQ_TOKEN", "t1"}});
  EXPECT_EQ(p.url, "http://env:2");
  EXPECT_EQ(p.token, "t1");
}

TEST(cli_parse, repeatable_options_collect_every_value) {
  auto p = parse_ok({"send", "q", "--header", "a=1", "--header=b=2", "x", "y"});
  EXPECT_EQ(p.all("header"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(p.args, (std::vector<std::string>{"q", "x", "y"}));
}

TEST(cli_parse, a_double_dash_ends_the_options) {
  auto p = parse_ok({"send", "q", "--", "--not-an-option"});
  EXPECT_EQ(p.args, (std::vector<std::string>{"q", "--not-an-option"}));
}

TEST(cli_parse, rejects_unknown_commands_options_and_wrong_argument_counts) {
  EXPECT_NE(parse_err({"frobnicate"}).find("unknown command \"frobnicate\""), std::string::npos);
  EXPECT_EQ(parse_err({"frobnicate"}).find("did you mean"), std::string::npos) << "nothing near";
  EXPECT_NE(parse_err({"recieve", "q"}).find("(did you mean \"receive\"?)"), std::string::npos);
  EXPECT_NE(parse_err({"consme", "q"}).find("(did you mean \"consume\"?)"), std::string::npos);
  EXPECT_NE(parse_err({"queue", "delte", "q"}).find("(did you mean \"queue delete\"?)"),
            std::string::npos);
  EXPECT_NE(parse_err({"queue", "bake", "x"}).find("unknown command \"queue bake\""),
            std::string::npos);
  EXPECT_NE(parse_err({"queue"}).find("needs a sub-command"), std::string::npos);
  EXPECT_NE(parse_err({"receive", "q", "--bogus"}).find("unknown option --bogus"),
            std::string::npos);
  EXPECT_NE(parse_err({"receive"}).find("takes 1 argument"), std::string::npos);
  EXPECT_NE(parse_err({"ack", "q"}).find("at least 2"), std::string::npos);
  EXPECT_NE(parse_err({"receive", "q", "--max"}).find("--max needs a value"), std::string::npos);
  EXPECT_NE(parse_err({"receive", "q", "--max", "1", "--max", "2"}).find("given twice"),
            std::string::npos);
  EXPECT_NE(parse_err({"groups", "q", "--blocked=yes"}).find("takes no value"), std::string::npos);
}

TEST(cli_parse, help_anywhere_selects_help_for_the_command) {
  auto p = parse_ok({"nack", "--help"});
  EXPECT_TRUE(p.help);
  ASSERT_NE(p.command, nullptr);
  EXPECT_EQ(p.command->words, "nack");
  auto h = render_help(p.command);
  EXPECT_NE(h.find("--retry-after-ms"), std::string::npos);
  EXPECT_NE(h.find("--dead-letter"), std::string::npos);
  auto top = parse_ok({});
  EXPECT_TRUE(top.help);
  EXPECT_EQ(top.command, nullptr);
  auto text = render_help(nullptr);
  for (const auto& c : commands()) EXPECT_NE(text.find(std::string(c.words)), std::string::npos);
  auto via_help = parse_ok({"help", "dlq", "redrive"});
  ASSERT_NE(via_help.command, nullptr);
  EXPECT_EQ(via_help.command->words, "dlq redrive");
}

TEST(cli_parse, integers_are_checked_and_the_error_names_the_option) {
  EXPECT_EQ(std::get<std::int64_t>(parse_int("--max", "42", 1, 100)), 42);
  EXPECT_EQ(std::get<usage_error>(parse_int("--max", "0", 1, 100)).message,
            "--max wants a number from 1 to 100, got \"0\"");
  EXPECT_NE(std::get<usage_error>(parse_int("--max", "4x", 1, 100)).message.find("--max"),
            std::string::npos);
  EXPECT_TRUE(std::holds_alternative<usage_error>(parse_int("--n", "", 0, 1)));
  EXPECT_TRUE(std::holds_alternative<usage_error>(parse_int("--n", "99999999999999999999", 0, 1)));
}

TEST(cli_spec, builds_the_issue_4_spec_shape_from_options) {
  auto s =
      spec_of({"queue", "create", "payments", "--key", "header:account", "--key", "fairness_key",
               "--when-key-missing", "keyless_lane", "--lease-ms", "5000", "--max-attempts", "3",
               "--throttle", "5/10@header:account", "--durability", "durable"});
  auto expected = json::parse(R"({
    "ordering": {"mode": "key", "key": [{"header": "account"}, {"fairness_key": true}],
                 "when_key_missing": "keyless_lane"},
    "lease_ms": 5000, "max_attempts": 3,
    "throttles": [{"key": [{"header": "account"}], "rate_per_s": 5, "burst": 10}],
    "delivery_durability": "durable"})");
  EXPECT_EQ(json::value(s), expected) << json::serialize(s);
}

TEST(cli_spec, options_override_fields_of_a_given_spec) {
  auto s = spec_of({"queue", "create", "q", "--spec", R"({"lease_ms": 1, "max_attempts": 9})",
                    "--lease-ms", "2000", "--ordering", "queue"});
  EXPECT_EQ(json::value(s), json::parse(R"({"lease_ms": 2000, "max_attempts": 9,
                                           "ordering": {"mode": "queue"}})"));
  EXPECT_EQ(json::value(spec_of({"queue", "create", "q"})), json::parse("{}"));
}

TEST(cli_spec, rejects_contradictions_and_bad_values_naming_them) {
  auto err = [](std::vector<std::string> argv) {
    auto p = parse_ok(std::move(argv));
    auto s = spec_from_options(p);
    return std::holds_alternative<usage_error>(s) ? std::get<usage_error>(s).message
                                                  : std::string("(accepted)");
  };
  EXPECT_NE(err({"queue", "create", "q", "--ordering", "key"}).find("at least one --key"),
            std::string::npos);
  EXPECT_NE(err({"queue", "create", "q", "--ordering", "queue", "--key", "header:a"})
                .find("--key needs --ordering key"),
            std::string::npos);
  EXPECT_NE(err({"queue", "create", "q", "--ordering", "sorted"}).find("--ordering wants"),
            std::string::npos);
  EXPECT_NE(err({"queue", "create", "q", "--key", "cookie:x"}).find("bad key component"),
            std::string::npos);
  EXPECT_NE(err({"queue", "create", "q", "--spec", "{nope"}).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(err({"queue", "create", "q", "--throttle", "fast"}).find("--throttle rate"),
            std::string::npos);
  EXPECT_NE(err({"queue", "create", "q", "--durability", "forever"}).find("--durability"),
            std::string::npos);
}

TEST(cli_spec, queue_update_builds_a_merge_patch_of_the_settings_given) {
  auto patch_of = [](std::vector<std::string> argv) -> std::variant<json::object, usage_error> {
    return patch_from_options(parse_ok(std::move(argv)));
  };
  auto p = patch_of({"queue", "update", "q", "--patch", R"({"lease_ms": 1, "max_attempts": null})",
                     "--lease-ms", "2000", "--max-depth-messages", "10", "--throttle", "5/10"});
  ASSERT_TRUE(std::holds_alternative<json::object>(p));
  EXPECT_EQ(json::value(std::get<json::object>(p)), json::parse(R"({
    "lease_ms": 2000, "max_attempts": null, "max_depth": {"messages": 10},
    "throttles": [{"key": [], "rate_per_s": 5, "burst": 10}]})"));
  auto nothing = patch_of({"queue", "update", "q"});
  ASSERT_TRUE(std::holds_alternative<usage_error>(nothing));
  EXPECT_NE(std::get<usage_error>(nothing).message.find("nothing to change"), std::string::npos);
  auto bad = patch_of({"queue", "update", "q", "--patch", "[1]"});
  ASSERT_TRUE(std::holds_alternative<usage_error>(bad));
  EXPECT_EQ(std::get<usage_error>(bad).message, "the patch must be a JSON object");
  EXPECT_EQ(json::value(spec_of({"queue", "create", "q", "--max-depth-bytes", "4096"})),
            json::parse(R"({"max_depth": {"bytes": 4096}})"));
}

TEST(cli_spec, retention_options_set_the_three_fields_checked_against_the_limits) {
  EXPECT_EQ(json::value(spec_of({"queue", "create", "q", "--retention-ms", "60000", "--on-expiry",
                                 "drop", "--dead-letter-retention-ms", "86400000"})),
            json::parse(R"({"retention_ms": 60000, "on_expiry": "drop",
                            "dead_letter_retention_ms": 86400000})"));
  auto p = patch_from_options(parse_ok({"queue", "update", "q", "--retention-ms", "1"}));
  ASSERT_TRUE(std::holds_alternative<json::object>(p));
  EXPECT_EQ(json::value(std::get<json::object>(p)), json::parse(R"({"retention_ms": 1})"));
  auto bad = patch_from_options(parse_ok({"queue", "update", "q", "--on-expiry", "archive"}));
  ASSERT_TRUE(std::holds_alternative<usage_error>(bad));
  EXPECT_EQ(std::get<usage_error>(bad).message,
            "--on-expiry wants dead_letter or drop, got \"archive\"");
  for (const char* out_of_range : {"0", "31622400001"}) {
    auto e = parse_err({"queue", "create", "q", "--retention-ms", out_of_range});
    EXPECT_NE(e.find("--retention-ms"), std::string::npos) << e;
    e = parse_err({"queue", "update", "q", "--dead-letter-retention-ms", out_of_range});
    EXPECT_NE(e.find("--dead-letter-retention-ms"), std::string::npos) << e;
  }
}

TEST(cli_render, messages_show_id_attempt_key_lease_body_and_headers) {
  auto v = json::parse(R"({"messages": [{"id": "7", "lease": "L1", "attempt": 2,
      "body": "line1\nline2", "headers": {"account": "42"}, "fairness_key": "",
      "ordering_key": "account=42", "enqueued_at_ms": 1}]})");
  EXPECT_EQ(render_messages(v),
            "message 7  attempt 2  key account=42\n  lease: L1\n  body: line1\\nline2\n"
            "  headers: account=42\n");
  EXPECT_EQ(render_messages_quiet(v), "L1\taccount=42\tline1\\nline2\n");
  EXPECT_EQ(render_messages(json::parse(R"({"messages": []})")), "no messages\n");
  EXPECT_EQ(render_messages_quiet(json::parse(R"({"messages": []})")), "");
}

TEST(cli_render, a_batchs_messages_show_their_batch_index) {
  auto v = json::parse(R"({"messages": [
      {"id": "7", "lease": "L1", "batch_index": 0, "attempt": 1, "body": "a1"},
      {"id": "8", "lease": "L1", "batch_index": 1, "attempt": 1, "body": "a2"},
      {"id": "9", "lease": "L2", "batch_index": 0, "attempt": 1, "body": "s1"}]})");
  EXPECT_EQ(render_messages(v),
            "message 7  attempt 1  batch_index 0\n  lease: L1\n  body: a1\n"
            "message 8  attempt 1  batch_index 1\n  lease: L1\n  body: a2\n"
            "message 9  attempt 1\n  lease: L2\n  body: s1\n");
}

TEST(cli_run, batch_count_and_from_are_checked_before_anything_is_sent) {
  std::ostringstream out, err;
  std::istringstream in;
  const std::string url = "http://127.0.0.1:1";  // were anything sent, the exit code would be 3
  EXPECT_EQ(run({"--url", url, "receive", "q", "--batch", "101"}, {}, out, err, in), exit_usage);
  EXPECT_NE(err.str().find("--batch wants"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(run({"--url", url, "ack", "q", "L1", "L2", "--count", "2"}, {}, out, err, in),
            exit_usage);
  EXPECT_NE(err.str().find("--count goes with one lease"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(run({"--url", url, "ack", "q", "L1", "--count", "0"}, {}, out, err, in), exit_usage);
  EXPECT_NE(err.str().find("--count wants"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(run({"--url", url, "nack", "q", "L1", "--from", "x"}, {}, out, err, in), exit_usage);
  EXPECT_NE(err.str().find("--from wants"), std::string::npos) << err.str();
}

// --version prints the project version (laneq/version.hpp) and sends nothing, even after a
// command; --help lists it.
TEST(cli_run, version_prints_the_project_version_and_sends_nothing) {
  std::ostringstream out, err;
  std::istringstream in;
  const std::string url = "http://127.0.0.1:1";  // were anything sent, the exit code would be 3
  EXPECT_EQ(run({"--version"}, {}, out, err, in), exit_ok);
  EXPECT_EQ(out.str(), std::string{"laneq "} + LANEQ_VERSION + "\n");
  EXPECT_EQ(err.str(), "");
  out.str("");
  EXPECT_EQ(run({"--url", url, "stats", "--version"}, {}, out, err, in), exit_ok);
  EXPECT_EQ(out.str(), std::string{"laneq "} + laneq::version_string + "\n");
  out.str("");
  EXPECT_EQ(run({"--help"}, {}, out, err, in), exit_ok);
  EXPECT_NE(out.str().find("--version"), std::string::npos) << out.str();
}

TEST(cli_render, groups_and_dead_letters_are_aligned_tables) {
  auto g = json::parse(R"({"groups": [
      {"key": "a", "backlog": 3, "state": "retry_wait", "since_ms": 1, "until_ms": 2, "head": "9"},
      {"key": "bbbbbb", "backlog": 1, "state": "idle", "since_ms": 1, "until_ms": 0, "head": "10"}]})");
  auto t = render_groups(g);
  auto header = t.substr(0, t.find('\n'));
  EXPECT_EQ(header.substr(0, header.find("SINCE")), "KEY     STATE       BACKLOG  HEAD  ") << t;
  EXPECT_NE(t.find("a       retry_wait  3        9     1970-01-01T00:00:00.001Z ("),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("bbbbbb  idle        1        10    1970-01-01T00:00:00.001Z ("),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("UNTIL_MS"), std::string::npos) << "times are named without their unit";
  EXPECT_TRUE(t.ends_with("  -\n")) << "until 0 is none: " << t;
  EXPECT_EQ(render_groups(json::parse(R"({"groups": []})")), "no groups\n");
  auto more = render_groups(json::parse(R"({"groups": [], "next_cursor": "00ff"})"));
  EXPECT_EQ(more, "no groups\nmore groups: --cursor 00ff\n") << "a short page says how to go on";
  auto d = render_dead_letters(json::parse(
      R"({"dead_letters": [{"id": "4", "reason": "nacked", "attempts": 1, "body": "x"}]})"));
  EXPECT_NE(d.find("ID  REASON  ATTEMPTS  BODY"), std::string::npos) << d;
  EXPECT_EQ(render_dead_letters(json::parse(R"({"dead_letters": []})")), "no dead letters\n");
}

TEST(cli_render, times_are_iso_8601_utc_and_relative_to_now) {
  constexpr std::int64_t t = 1796577212210;  // 2026-12-06T17:13:32.210Z
  EXPECT_EQ(render_time(t, t), "2026-12-06T17:13:32.210Z (now)");
  EXPECT_EQ(render_time(t, t - 4'500), "2026-12-06T17:13:32.210Z (in 4s)");
  EXPECT_EQ(render_time(t, t + 125'000), "2026-12-06T17:13:32.210Z (2m ago)");
  EXPECT_EQ(render_time(t, t - 3 * 3'600'000), "2026-12-06T17:13:32.210Z (in 3h)");
  EXPECT_EQ(render_time(t, t + 2 * 86'400'000 + 5), "2026-12-06T17:13:32.210Z (2d ago)");
  EXPECT_EQ(render_time(0, t), "-") << "0 is no time";
  EXPECT_TRUE(is_time_field("enqueued_at_ms"));
  EXPECT_TRUE(is_time_field("lease_deadline_ms"));
  EXPECT_TRUE(is_time_field("until_ms"));
  EXPECT_FALSE(is_time_field("lease_ms")) << "a duration, not a point in time";
  EXPECT_FALSE(is_time_field("retry_after_ms"));
}

TEST(cli_render, stats_are_one_row_per_queue) {
  auto all = json::parse(R"({"a": {"backlog": 2, "acked": 5, "redriven": 1, "fairness_backlog": []},
                            "bbb": {"backlog": 10, "acked": 0, "redriven": 0}})")
                 .as_object();
  auto t = render_stats(all, false);
  EXPECT_EQ(t, "QUEUE  BACKLOG  ACKED\na      2        5\nbbb    10       0\n");
  auto wide = render_stats(all, true);
  EXPECT_NE(wide.find("REDRIVEN"), std::string::npos) << wide;
  EXPECT_EQ(wide.find("FAIRNESS_BACKLOG"), std::string::npos) << "lists stay in --json";
  // Expired messages show beside the dead-lettered ones (docs/api.md "Retention").
  auto expired = json::parse(R"({"r": {"dead_lettered": 3, "expired_dead_lettered": 2,
                                       "expired_dropped": 4, "dead_letters_expired": 1}})")
                     .as_object();
  EXPECT_EQ(render_stats(expired, false),
            "QUEUE  DEAD_LETTERED  EXPIRED_DEAD_LETTERED  EXPIRED_DROPPED\n"
            "r      3              2                      4\n");
}

TEST(cli_render, trees_and_lists_and_escapes) {
  EXPECT_EQ(render_tree(json::parse(R"({"name": "q", "stats": {"backlog": 2}, "tags": [1, 2]})")),
            "name: q\nstats:\n  backlog: 2\ntags: [1,2]\n");
  EXPECT_EQ(render_queue_list(json::parse(R"({"queues": ["a", "t/b"]})")), "a\nt/b\n");
  EXPECT_EQ(render_queue_list(json::parse(R"({"queues": []})")), "no queues\n");
  EXPECT_EQ(one_line("a\tb\\c\x01"), "a\\tb\\\\c\\x01");
}

TEST(cli_exit, each_failure_kind_has_its_own_exit_code) {
  using client::failure_kind;
  EXPECT_EQ(exit_code_for({failure_kind::server, 404, "queue_not_found", 3, "x"}),
            exit_server_error);
  EXPECT_EQ(exit_code_for({failure_kind::unreachable, 0, {}, 0, "x"}), exit_unreachable);
  EXPECT_EQ(exit_code_for({failure_kind::protocol, 200, {}, 0, "x"}), exit_bad_answer);
  EXPECT_EQ(exit_code_for({failure_kind::usage, 0, {}, 0, "x"}), exit_usage);
  std::set<int> codes{exit_ok, exit_server_error, exit_usage, exit_unreachable, exit_bad_answer};
  EXPECT_EQ(codes.size(), 5u);
}

TEST(cli_run, usage_errors_exit_2_and_send_nothing) {
  std::ostringstream out, err;
  std::istringstream in;
  // Port 1 on loopback: were anything sent, the exit code would be 3 (unreachable).
  EXPECT_EQ(run({"--url", "http://127.0.0.1:1", "receive", "q", "--max", "zero"}, {}, out, err, in),
            exit_usage);
  EXPECT_NE(err.str().find("--max wants"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(
      run({"--url", "http://127.0.0.1:1", "groups", "q", "--limit", "10001"}, {}, out, err, in),
      exit_usage);
  EXPECT_NE(err.str().find("--limit wants"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(run({"--url", "ftp://x", "health"}, {}, out, err, in), exit_usage);
  EXPECT_NE(err.str().find("must start with http://"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(run({"--url", "http://127.0.0.1:1", "send", "q"}, {}, out, err, in), exit_usage);
  EXPECT_NE(err.str().find("nothing to send"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(run({"--url", "http://127.0.0.1:1", "consume", "q"}, {}, out, err, in), exit_usage);
  EXPECT_NE(err.str().find("QUEUE -- CMD"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(
      run({"--url", "http://127.0.0.1:1", "consume", "q", "--dead-letter-on", "0", "--", "true"},
          {}, out, err, in),
      exit_usage);
  EXPECT_NE(err.str().find("--dead-letter-on wants"), std::string::npos) << err.str();
}

TEST(cli_run, an_unreachable_server_exits_3_naming_the_address) {
  std::ostringstream out, err;
  std::istringstream in;
  EXPECT_EQ(run({"--url", "http://127.0.0.1:1", "health"}, {}, out, err, in), exit_unreachable);
  EXPECT_NE(err.str().find("127.0.0.1:1"), std::string::npos) << err.str();
}

TEST(http_client, parses_urls_and_rejects_what_it_cannot_use) {
  auto a = client::parse_url("http://localhost:7070");
  ASSERT_TRUE(a);
  EXPECT_EQ(a.value().host, "localhost");
  EXPECT_EQ(a.value().port, "7070");
  EXPECT_EQ(a.value().prefix, "");
  auto b = client::parse_url("http://[::1]:8080/laneq/");
  ASSERT_TRUE(b);
  EXPECT_EQ(b.value().host, "::1");
  EXPECT_EQ(b.value().prefix, "/laneq");
  auto c = client::parse_url("http://example");
  ASSERT_TRUE(c);
  EXPECT_EQ(c.value().port, "80");
  EXPECT_FALSE(c.value().tls);
  auto d = client::parse_url("https://laneq.example");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d.value().tls);
  EXPECT_EQ(d.value().port, "443");
  EXPECT_EQ(client::to_url(d.value()), "https://laneq.example:443");
  auto e = client::parse_url("https://[::1]:7443");
  ASSERT_TRUE(e);
  EXPECT_EQ(client::to_url(e.value()), "https://[::1]:7443");
  for (auto bad : {"ftp://x", "x:1", "http://", "https://", "http://h:0", "http://h:70000",
                   "http://h:ab", "http://u@h:1"})
    EXPECT_FALSE(client::parse_url(bad)) << bad;
}

// The TLS options are global and reach the client; they take no name a command's option has
// (`queue create --key` is the ordering key, not a client key).
TEST(cli_parse, tls_options_are_global_and_leave_command_options_alone) {
  auto p = parse_ok({"--url", "https://h:1", "--cacert", "/ca.pem", "--insecure", "--client-cert",
                     "/c.pem", "--client-key", "/c.key", "queue", "create", "q", "--key",
                     "header:account"});
  EXPECT_EQ(p.cacert, "/ca.pem");
  EXPECT_TRUE(p.insecure);
  EXPECT_EQ(p.cert, "/c.pem");
  EXPECT_EQ(p.key, "/c.key");
  auto s = spec_from_options(p);
  ASSERT_TRUE(std::holds_alternative<json::object>(s));
  auto ordering = json::serialize(std::get<json::object>(s).at("ordering"));
  EXPECT_NE(ordering.find(R"({"header":"account"})"), std::string::npos) << ordering;
  EXPECT_EQ(parse_ok({"health"}, {{"LANEQ_CACERT", "/env.pem"}}).cacert, "/env.pem");
  for (const auto& g : global_options())
    for (const auto& c : commands())
      for (const auto& o : c.options)
        EXPECT_NE(std::string(g.name), std::string(o.name))
            << "--" << g.name << " is global and an option of \"" << c.words << "\"";
}

// A server that accepts connections and never answers (nor handshakes): each request fails
// within the client's timeout, over http and https, instead of waiting for good.
TEST(http_client, a_server_that_never_answers_fails_within_the_timeout) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent{
      io, {boost::asio::ip::make_address("127.0.0.1"), 0}};  // listens; accepts nothing
  const auto port = std::to_string(silent.local_endpoint().port());
  for (const std::string scheme : {"http", "https"}) {
    auto ep = client::parse_url(scheme + "://127.0.0.1:" + port);
    ASSERT_TRUE(ep);
    client::client_options o;
    o.timeout = std::chrono::milliseconds(300);
    o.insecure = true;
    client::http_client c{ep.value(), o};
    auto t0 = std::chrono::steady_clock::now();
    auto r = c.list_queues();
    auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(r) << scheme;
    EXPECT_EQ(r.err().kind, client::failure_kind::unreachable) << scheme;
    EXPECT_NE(r.err().message.find("timeout"), std::string::npos) << r.err().message;
    EXPECT_LT(took, std::chrono::seconds(5)) << scheme;
  }
}

// The TLS options are for https URLs; a CA file that does not load is a usage error naming it.
TEST(cli, tls_options_need_an_https_url_and_a_loadable_ca_file) {
  std::ostringstream out, err;
  std::istringstream in;
  EXPECT_EQ(run({"--url", "http://127.0.0.1:1", "--insecure", "health"}, {}, out, err, in),
            exit_usage);
  EXPECT_NE(err.str().find("https://"), std::string::npos) << err.str();
  std::ostringstream err2;
  EXPECT_EQ(run({"--url", "https://127.0.0.1:1", "health"}, {{"LANEQ_CACERT", "/nonexistent.pem"}},
                out, err2, in),
            exit_usage);
  EXPECT_NE(err2.str().find("cannot load the CA file /nonexistent.pem"), std::string::npos)
      << err2.str();
}

TEST(http_client, encodes_a_tenant_queue_name_as_one_path_segment) {
  EXPECT_EQ(client::encode_segment("acme/orders"), "acme%2Forders");
  EXPECT_EQ(client::encode_segment("a b~_.-"), "a%20b~_.-");
}

TEST(http_client, reads_the_api_error_shape_and_survives_other_bodies) {
  auto e = client::error_from_answer(
      {404, R"({"error": {"code": "queue_not_found", "number": 3, "message": "no queue q"}})"});
  EXPECT_EQ(e.code, "queue_not_found");
  EXPECT_EQ(e.number, 3);
  EXPECT_EQ(e.http_status, 404u);
  EXPECT_EQ(client::to_string(e), "queue_not_found (3, HTTP 404): no queue q");
  auto odd = client::error_from_answer({502, "<html>bad gateway</html>"});
  EXPECT_EQ(odd.code, "");
  EXPECT_NE(odd.message.find("502"), std::string::npos);
}

// Every number option is checked while parsing against the bound laneqd applies
// (laneq/limits.hpp), and the error names the option, the value and the range; nothing is sent.
TEST(cli_parse, number_options_are_checked_against_the_servers_bounds) {
  auto lease_ms_max = std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_max);
  auto wait_ms_max =
      std::chrono::duration_cast<std::chrono::milliseconds>(limits::receive_wait_max).count();
  EXPECT_EQ(parse_err({"receive", "q", "--max", std::to_string(limits::receive_batch_max + 1)}),
            "--max wants a number from 1 to " + std::to_string(limits::receive_batch_max) +
                ", got \"" + std::to_string(limits::receive_batch_max + 1) + "\"");
  EXPECT_EQ(
      parse_ok({"receive", "q", "--max", std::to_string(limits::receive_batch_max)}).number("max"),
      limits::receive_batch_max);
  auto too_long = std::to_string(lease_ms_max.count() + 1);
  EXPECT_EQ(parse_err({"extend", "q", "L", "--lease-ms", too_long}),
            "--lease-ms wants a number from 1 to " + std::to_string(lease_ms_max.count()) +
                ", got \"" + too_long + "\"");
  EXPECT_NE(parse_err({"consume", "q", "--wait-ms", std::to_string(wait_ms_max + 1), "--", "true"})
                .find("--wait-ms wants a number from 0 to " + std::to_string(wait_ms_max)),
            std::string::npos);
  EXPECT_NE(parse_err({"queue", "create", "q", "--max-attempts", "1001"})
                .find("--max-attempts wants a number from 1 to " +
                      std::to_string(limits::max_attempts_max) + ", got \"1001\""),
            std::string::npos);
  EXPECT_NE(parse_err({"send", "q", "x", "--batch", "0"}).find("--batch wants a number from 1 to "),
            std::string::npos);
  EXPECT_NE(parse_err({"nack", "q", "L", "--retry-after-ms", "-1"}).find("got \"-1\""),
            std::string::npos);
  EXPECT_NE(parse_err({"--timeout-ms", "0", "health"}).find("--timeout-ms wants"),
            std::string::npos)
      << "a global option too";
  EXPECT_NE(parse_err({"groups", "q", "--limit", "many"}).find("--limit wants a whole number"),
            std::string::npos);
}

// The table's number options carry a range, and `--help` shows it.
TEST(cli_parse, every_number_option_has_a_range_that_help_shows) {
  std::size_t numbers = 0;
  for (const auto& c : commands())
    for (const auto& o : c.options)
      if (o.number) {
        ++numbers;
        EXPECT_LE(o.min, o.max) << c.words << " --" << o.name;
        EXPECT_NE(render_help(&c).find("--" + std::string(o.name) + " N"), std::string::npos);
      }
  EXPECT_GE(numbers, 15u);
  for (const auto& c : commands()) {
    if (c.words != "receive") continue;
    EXPECT_NE(render_help(&c).find("(1 to " + std::to_string(limits::ordered_batch_max) + ")"),
              std::string::npos)
        << render_help(&c);
  }
}

TEST(cli_parse, a_group_alone_or_with_help_shows_help_and_a_group_needs_a_sub_command) {
  EXPECT_TRUE(parse_ok({"queue", "--help"}).help);
  EXPECT_TRUE(parse_ok({"-h"}).help);
  EXPECT_EQ(parse_ok({"help"}).command, nullptr);
  EXPECT_NE(parse_err({"dlq"}).find("\"dlq\" needs a sub-command"), std::string::npos);
  EXPECT_NE(parse_err({"receive", "q", "-x"}).find("unknown option -x"), std::string::npos);
  auto p = parse_ok({"consume", "q", "--max-messages", "2", "--", "sh", "-c", "exit 3", "--json"});
  EXPECT_EQ(p.args, (std::vector<std::string>{"q", "sh", "-c", "exit 3", "--json"}));
  EXPECT_FALSE(p.json) << "after --, --json is the command's argument";
  EXPECT_EQ(parse_ok({"send", "q", "stats", "-q"}).args, (std::vector<std::string>{"q", "stats"}))
      << "a body that names a command is a body";
  EXPECT_TRUE(parse_ok({"send", "q", "x", "-q"}).flag("quiet"));
}

// The man page and the completion are made from the app: every command and option is in them.
TEST(cli_generate, man_page_and_completion_name_every_command_and_option) {
  auto man = render_man_page();
  auto completion = render_bash_completion();
  auto roff = [](std::string_view name) {
    std::string out;
    for (char ch : name) out += ch == '-' ? std::string("\\-") : std::string(1, ch);
    return out;
  };
  for (const auto& c : commands()) {
    EXPECT_FALSE(c.summary.empty()) << c.words << " has no description";
    for (const auto& o : c.options) EXPECT_FALSE(o.help.empty()) << c.words << " --" << o.name;
    EXPECT_NE(man.find(".SS \"" + std::string(c.words)), std::string::npos) << c.words;
    auto last = std::string(c.words.substr(c.words.rfind(' ') + 1));
    EXPECT_NE(completion.find(last), std::string::npos) << c.words;
    for (const auto& o : c.options) {
      EXPECT_NE(man.find("\\fB\\-\\-" + roff(o.name) + "\\fR"), std::string::npos) << o.name;
      EXPECT_NE(completion.find("--" + std::string(o.name)), std::string::npos) << o.name;
    }
  }
  for (const auto& g : global_options())
    EXPECT_NE(man.find("\\-\\-" + roff(g.name)), std::string::npos) << g.name;
  for (auto env : {"LANEQ_URL", "LANEQ_TOKEN", "LANEQ_CACERT"})
    EXPECT_NE(man.find(env), std::string::npos) << env;
  EXPECT_NE(man.find(".SH EXIT STATUS"), std::string::npos);
  EXPECT_EQ(render_help(nullptr).find("completion"), std::string::npos) << "a hidden command";
}

TEST(cli_run, completion_and_man_need_no_server) {
  std::ostringstream out, err;
  std::istringstream in;
  const std::string url = "http://127.0.0.1:1";  // were anything sent, the exit code would be 3
  EXPECT_EQ(run({"--url", url, "completion", "bash"}, {}, out, err, in), exit_ok) << err.str();
  EXPECT_NE(out.str().find("complete -F _laneq laneq"), std::string::npos);
  EXPECT_EQ(run({"completion", "fish"}, {}, out, err, in), exit_usage);
  out.str("");
  EXPECT_EQ(run({"man"}, {}, out, err, in), exit_ok);
  EXPECT_EQ(out.str().rfind(".TH LANEQ 1", 0), 0u);
}

// A throttle's rate is a decimal within laneqd's bounds (limits::throttle_rate_per_s_min/max);
// its burst within limits::throttle_burst_max.
TEST(cli_spec, throttle_rates_take_decimals_within_the_servers_bounds) {
  auto s = spec_of({"queue", "create", "q", "--throttle", "0.5/2@header:a"});
  EXPECT_EQ(json::value(s.at("throttles")),
            json::parse(R"([{"key": [{"header": "a"}], "rate_per_s": 0.5, "burst": 2}])"));
  auto err = [](std::string throttle) {
    auto p = parse_ok({"queue", "create", "q", "--throttle", throttle});
    auto r = spec_from_options(p);
    return std::holds_alternative<usage_error>(r) ? std::get<usage_error>(r).message : "";
  };
  EXPECT_EQ(err("0.0001"), "--throttle rate wants a number from 0.001 to 1000000, got \"0.0001\"");
  EXPECT_NE(err("1000001").find("--throttle rate"), std::string::npos);
  EXPECT_NE(err("5/" + std::to_string(limits::throttle_burst_max + 1)).find("--throttle burst"),
            std::string::npos);
  EXPECT_EQ(err("1000000/" + std::to_string(limits::throttle_burst_max)), "");
}
