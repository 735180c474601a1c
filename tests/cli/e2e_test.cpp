// End-to-end: the `laneq` binary, the CAF examples and the README demo against a real laneqd
// process on loopback ports it binds itself (issue 4 §2, §4, §5).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "process.hpp"

#ifdef LANEQ_LANEQD_BIN

namespace json = boost::json;
using laneq::test::run_result;

namespace {

class cli_e2e : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = std::make_unique<laneq::test::daemon>(LANEQ_LANEQD_BIN, false);
    ASSERT_TRUE(d_->ready()) << d_->startup_error();
  }
  void TearDown() override {
    if (d_) {
      EXPECT_EQ(d_->stop(), 0) << "laneqd did not exit 0 on SIGTERM";
    }
  }
  run_result cli(std::vector<std::string> args) {
    args.insert(args.begin(), {LANEQ_CLI_BIN, "--url", d_->url()});
    return laneq::test::run(args, d_->dir());
  }
  json::value cli_json(std::vector<std::string> args) {
    args.push_back("--json");
    auto r = cli(args);
    EXPECT_EQ(r.rc, 0) << r.err;
    json::error_code ec;
    auto v = json::parse(r.out, ec);
    EXPECT_FALSE(ec) << "not JSON: " << r.out;
    return v;
  }
  std::unique_ptr<laneq::test::daemon> d_;
};

std::string str(const json::value& v) {
  return std::string(v.as_string());
}

}  // namespace

TEST_F(cli_e2e, queue_create_get_list_delete) {
  auto r = cli({"queue", "create", "orders", "--key", "header:account"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "created queue orders\n");
  r = cli({"queue", "create", "orders", "--key", "header:account"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("already exists"), std::string::npos) << r.out;
  r = cli({"queue", "create", "orders", "--key", "header:region"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("spec_conflict"), std::string::npos) << r.err;
  EXPECT_EQ(cli({"queue", "create", "acme/orders"}).rc, 0);
  r = cli({"queue", "list"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "acme/orders\norders\n");
  r = cli({"queue", "get", "acme/orders"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("backlog: 0"), std::string::npos) << r.out;
  EXPECT_EQ(cli({"queue", "delete", "acme/orders"}).rc, 0);
  r = cli({"queue", "get", "acme/orders"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("queue_not_found"), std::string::npos) << r.err;
  r = cli({"queue", "create", "bad", "--spec", R"({"lease_ms": "soon"})"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("invalid_spec"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lease_ms"), std::string::npos) << r.err;
}

TEST_F(cli_e2e, queue_update_changes_settings_and_a_full_queue_refuses_sends) {
  ASSERT_EQ(cli({"queue", "create", "bounded", "--key", "header:k"}).rc, 0);
  auto r = cli({"queue", "update", "bounded", "--lease-ms", "45000", "--max-depth-messages", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("updated queue bounded"), std::string::npos) << r.out;
  auto spec = cli_json({"queue", "get", "bounded"}).at("spec");
  EXPECT_EQ(spec.at("lease_ms").to_number<std::int64_t>(), 45000) << spec;
  EXPECT_EQ(spec.at("max_depth").at("messages").to_number<std::int64_t>(), 2) << spec;
  ASSERT_EQ(cli({"send", "bounded", "a", "b", "--header", "k=1"}).rc, 0);
  r = cli({"send", "bounded", "c", "--header", "k=1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("queue_full"), std::string::npos) << r.err;
  r = cli({"queue", "update", "bounded", "--patch", R"({"ordering": {"mode": "queue"}})"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("invalid_spec"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ordering"), std::string::npos) << r.err;
  EXPECT_EQ(cli({"queue", "update", "bounded"}).rc, 2);
}

TEST_F(cli_e2e, purge_peek_dead_letters_and_a_forced_delete) {
  ASSERT_EQ(cli({"queue", "create", "ops", "--key", "header:k", "--max-attempts", "1"}).rc, 0);
  ASSERT_EQ(cli({"queue", "create", "other"}).rc, 0);
  ASSERT_EQ(cli({"send", "ops", "a1", "a2", "--header", "k=a"}).rc, 0);
  ASSERT_EQ(cli({"send", "ops", "b1", "--header", "k=b"}).rc, 0);
  auto peeked = cli_json({"peek", "ops", "--group", "a"}).at("messages").as_array();
  ASSERT_EQ(peeked.size(), 2u);
  EXPECT_EQ(str(peeked[0].at("body")), "a1");
  auto r = cli({"peek", "ops", "--limit", "1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("lease:"), std::string::npos) << "a peek takes no lease: " << r.out;
  r = cli({"queue", "purge", "ops", "--group", "b"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "purged 1 waiting message(s) of ops, group b\n");
  // a1 dead-letters at its first failure (max attempts 1), then goes to another queue.
  auto lease = cli({"receive", "ops", "--quiet"}).out;
  lease = lease.substr(0, lease.find('\t'));
  ASSERT_EQ(cli({"nack", "ops", lease, "--dead-letter"}).rc, 0);
  auto dead = cli_json({"dlq", "list", "ops"}).at("dead_letters").as_array();
  ASSERT_EQ(dead.size(), 1u);
  auto id = str(dead[0].at("id"));
  EXPECT_EQ(cli({"dlq", "delete", "ops"}).rc, 2) << "no ids and no --all is refused";
  r = cli({"dlq", "redrive", "ops", id, "--to", "other"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("into other"), std::string::npos) << r.out;
  EXPECT_EQ(cli_json({"peek", "other"}).at("messages").as_array().size(), 1u);
  r = cli({"queue", "delete", "ops"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("queue_not_empty"), std::string::npos) << r.err;
  EXPECT_EQ(cli({"queue", "delete", "ops", "--force"}).rc, 0);
  r = cli({"dlq", "delete", "other", "--all"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "deleted 0 dead letter(s) of other\n");
}

TEST_F(cli_e2e, queue_create_and_update_set_retention) {
  auto r = cli({"queue", "create", "kept", "--retention-ms", "60000", "--dead-letter-retention-ms",
                "3600000"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto spec = cli_json({"queue", "get", "kept"}).at("spec");
  EXPECT_EQ(spec.at("retention_ms").to_number<std::int64_t>(), 60000) << spec;
  EXPECT_EQ(spec.at("on_expiry").as_string(), "dead_letter") << spec;
  EXPECT_EQ(spec.at("dead_letter_retention_ms").to_number<std::int64_t>(), 3600000) << spec;
  r = cli({"queue", "update", "kept", "--retention-ms", "5000", "--on-expiry", "drop", "--patch",
           R"({"dead_letter_retention_ms": null})"});
  ASSERT_EQ(r.rc, 0) << r.err;
  spec = cli_json({"queue", "get", "kept"}).at("spec");
  EXPECT_EQ(spec.at("retention_ms").to_number<std::int64_t>(), 5000) << spec;
  EXPECT_EQ(spec.at("on_expiry").as_string(), "drop") << spec;
  EXPECT_FALSE(spec.as_object().contains("dead_letter_retention_ms")) << spec;
  EXPECT_EQ(cli({"queue", "update", "kept", "--on-expiry", "keep"}).rc, 2);
  EXPECT_EQ(cli({"queue", "update", "kept", "--retention-ms", "0"}).rc, 2);
  auto stats = cli_json({"stats"});
  EXPECT_EQ(stats.at("kept").at("expired_dropped").to_number<std::int64_t>(), 0) << stats;
}

TEST_F(cli_e2e, send_receive_ack_round_trip_and_a_stale_lease_fails) {
  ASSERT_EQ(cli({"queue", "create", "jobs"}).rc, 0);
  auto sent = cli_json({"send", "jobs", "one", "two", "--header", "k=v", "--fairness-key", "t1"});
  ASSERT_EQ(sent.at("ids").as_array().size(), 2u);
  auto got = cli_json({"receive", "jobs", "--max", "10"});
  const auto& msgs = got.at("messages").as_array();
  ASSERT_EQ(msgs.size(), 2u);
  std::set<std::string> bodies{str(msgs[0].at("body")), str(msgs[1].at("body"))};
  EXPECT_EQ(bodies, (std::set<std::string>{"one", "two"}));
  EXPECT_EQ(str(msgs[0].at("headers").at("k")), "v");
  auto lease0 = str(msgs[0].at("lease"));
  auto lease1 = str(msgs[1].at("lease"));
  auto r = cli({"ack", "jobs", lease0, lease1});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "acked 2 of 2 leases\n");
  r = cli({"ack", "jobs", lease0});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.err.find("lease_not_found") != std::string::npos ||
              r.err.find("lease_expired") != std::string::npos)
      << r.err;
  r = cli({"receive", "jobs"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "no messages\n");
  auto stats = cli_json({"stats", "jobs"});
  EXPECT_EQ(stats.at("jobs").at("acked").as_int64(), 2);
  EXPECT_EQ(stats.at("jobs").at("backlog").as_int64(), 0);
}

TEST_F(cli_e2e, retry_after_holds_the_group_and_a_dead_letter_is_redriven) {
  ASSERT_EQ(cli({"queue", "create", "pay", "--key", "header:account"}).rc, 0);
  ASSERT_EQ(cli({"send", "pay", "--header", "account=a", "a1", "a2"}).rc, 0);
  ASSERT_EQ(cli({"send", "pay", "--header", "account=b", "b1", "b2"}).rc, 0);
  auto first = cli({"receive", "pay", "--max", "10", "-q"});
  ASSERT_EQ(first.rc, 0) << first.err;
  // Quiet lines: LEASE \t KEY \t BODY; one per group.
  std::map<std::string, std::string> lease_of;
  std::istringstream lines(first.out);
  std::string line;
  while (std::getline(lines, line)) {
    auto t1 = line.find('\t');
    auto t2 = line.rfind('\t');
    lease_of[line.substr(t2 + 1)] = line.substr(0, t1);
  }
  ASSERT_EQ(lease_of.size(), 2u) << first.out;
  ASSERT_TRUE(lease_of.count("a1") && lease_of.count("b1")) << first.out;
  auto r = cli({"nack", "pay", lease_of["a1"], "--retry-after-ms", "60000"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(cli({"ack", "pay", lease_of["b1"]}).rc, 0);
  auto next = cli_json({"receive", "pay", "--max", "10"});
  const auto& msgs = next.at("messages").as_array();
  ASSERT_EQ(msgs.size(), 1u) << json::serialize(next);
  EXPECT_EQ(str(msgs[0].at("body")), "b2");
  auto groups = cli({"groups", "pay", "--blocked"});
  EXPECT_EQ(groups.rc, 0) << groups.err;
  EXPECT_NE(groups.out.find("retry_wait"), std::string::npos) << groups.out;
  r = cli({"nack", "pay", str(msgs[0].at("lease")), "--dead-letter"});
  EXPECT_EQ(r.rc, 0) << r.err;
  auto dl = cli_json({"dlq", "list", "pay"});
  ASSERT_EQ(dl.at("dead_letters").as_array().size(), 1u);
  EXPECT_EQ(str(dl.at("dead_letters").as_array()[0].at("body")), "b2");
  r = cli({"dlq", "redrive", "pay"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("redrove 1"), std::string::npos) << r.out;
  auto again = cli_json({"receive", "pay", "--max", "10"});
  ASSERT_EQ(again.at("messages").as_array().size(), 1u);
  EXPECT_EQ(str(again.at("messages").as_array()[0].at("body")), "b2");
}

// Ordered batches through the CLI (docs/design/ordering.md O12): receive --batch, ack --count,
// nack --from.
TEST_F(cli_e2e, a_batch_is_received_acked_in_part_and_nacked_from_a_message) {
  ASSERT_EQ(cli({"queue", "create", "pay", "--key", "header:account"}).rc, 0);
  ASSERT_EQ(cli({"send", "pay", "--header", "account=a", "a1", "a2", "a3", "a4"}).rc, 0);
  auto got = cli_json({"receive", "pay", "--max", "10", "--batch", "4"});
  const auto& msgs = got.at("messages").as_array();
  ASSERT_EQ(msgs.size(), 4u) << json::serialize(got);
  auto lease = str(msgs[0].at("lease"));
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_EQ(str(msgs[i].at("lease")), lease);
    EXPECT_EQ(msgs[i].at("batch_index").as_int64(), static_cast<std::int64_t>(i));
  }
  auto r = cli({"ack", "pay", lease, "--count", "2"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("acked 2 more"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 still held"), std::string::npos) << r.out;
  r = cli({"ack", "pay", lease, "--count", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("invalid_argument"), std::string::npos) << r.err;
  r = cli({"nack", "pay", lease, "--from", "3", "--retry-after-ms", "0"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("message 3 of the batch"), std::string::npos) << r.out;
  auto again = cli_json({"receive", "pay", "--max", "10", "--batch", "4"});
  const auto& rest = again.at("messages").as_array();
  ASSERT_EQ(rest.size(), 1u) << json::serialize(again);
  EXPECT_EQ(str(rest[0].at("body")), "a4");
  EXPECT_EQ(rest[0].at("attempt").as_int64(), 2);
  auto stats = cli_json({"stats", "pay"});
  EXPECT_EQ(stats.at("pay").at("acked").as_int64(), 3);
}

// `laneq consume` (issue 25 §2): one command per message, in order per group, with the message
// in its input and environment; exit 0 acks, another code retries, --dead-letter-on dead-letters.
TEST_F(cli_e2e, consume_runs_a_command_per_message_and_acks_or_retries_by_its_exit_status) {
  ASSERT_EQ(cli({"queue", "create", "pay", "--key", "header:account", "--max-attempts", "3"}).rc,
            0);
  ASSERT_EQ(cli({"send", "pay", "--header", "account=a", "--header", "X-Trace=t1", "a1", "a2"}).rc,
            0);
  ASSERT_EQ(cli({"send", "pay", "--header", "account=b", "b1"}).rc, 0);
  auto log = (d_->dir().path() / "handled").string();
  // Each run appends "key attempt trace body"; the second run of all fails once.
  auto script =
      "line=\"$LANEQ_ORDERING_KEY $LANEQ_ATTEMPT $LANEQ_HEADER_X_TRACE $(cat)\"; "
      "echo \"$line\" >> " +
      log + "; [ \"$(wc -l < " + log + ")\" -ne 2 ]";
  auto r = cli({"consume", "pay", "--until-empty", "--wait-ms", "200", "--", "sh", "-c", script});
  EXPECT_EQ(r.rc, 0) << r.err;
  auto lines = laneq::test::slurp(log);
  // a2 failed once and came back before anything behind it in its group; b is apart.
  std::regex a_order{"a 1 t1 a1\n(b 1  b1\n)?a 1 t1 a2\n(b 1  b1\n)?a 2 t1 a2\n(b 1  b1\n)?"};
  EXPECT_TRUE(std::regex_match(lines, a_order)) << lines;
  EXPECT_NE(lines.find("b 1  b1"), std::string::npos) << lines;
  EXPECT_NE(r.err.find("gave 2 back for a retry in 0 ms (exit 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("4 messages handled"), std::string::npos) << r.err;
  auto stats = cli_json({"stats", "pay"});
  EXPECT_EQ(stats.at("pay").at("acked").as_int64(), 3);
  EXPECT_EQ(stats.at("pay").at("backlog").as_int64(), 0);
}

TEST_F(cli_e2e, consume_extends_the_lease_of_a_slow_command_and_dead_letters_on_request) {
  ASSERT_EQ(cli({"queue", "create", "jobs", "--lease-ms", "600"}).rc, 0);
  ASSERT_EQ(cli({"send", "jobs", "slow"}).rc, 0);
  auto r = cli(
      {"consume", "jobs", "--max-messages", "1", "--", "sh", "-c", "cat > /dev/null; sleep 1.5"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("acked 1 (exit 0"), std::string::npos) << r.err;
  auto stats = cli_json({"stats", "jobs"});
  EXPECT_EQ(stats.at("jobs").at("lease_expired").as_int64(), 0) << "the lease was extended";
  EXPECT_EQ(stats.at("jobs").at("delivered").as_int64(), 1);

  ASSERT_EQ(cli({"send", "jobs", "poison"}).rc, 0);
  r = cli({"consume", "jobs", "--until-empty", "--wait-ms", "0", "--dead-letter-on", "100", "--",
           "sh", "-c", "exit 100"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("dead-lettered 2 (exit 100"), std::string::npos) << r.err;
  auto dead = cli_json({"dlq", "list", "jobs"});
  ASSERT_EQ(dead.at("dead_letters").as_array().size(), 1u);
  EXPECT_EQ(str(dead.at("dead_letters").as_array()[0].at("body")), "poison");

  r = cli({"consume", "nosuch", "--", "true"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("queue_not_found"), std::string::npos) << r.err;
}

TEST_F(cli_e2e, consume_stops_on_sigterm_after_the_message_in_hand) {
  ASSERT_EQ(cli({"queue", "create", "jobs"}).rc, 0);
  ASSERT_EQ(cli({"send", "jobs", "one", "two"}).rc, 0);
  const auto& dir = d_->dir().path();
  auto started = dir / "started";
  auto pid = laneq::test::spawn({LANEQ_CLI_BIN, "--url", d_->url(), "consume", "jobs", "--", "sh",
                                 "-c", "touch " + started.string() + "; sleep 1; cat"},
                                dir / "consume.out", dir / "consume.err");
  for (int i = 0; i < 500 && !std::filesystem::exists(started); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  ASSERT_TRUE(std::filesystem::exists(started)) << laneq::test::slurp(dir / "consume.err");
  kill(pid, SIGTERM);  // while the first message's command runs
  EXPECT_EQ(laneq::test::wait_exit(pid), 0);
  auto err = laneq::test::slurp(dir / "consume.err");
  EXPECT_NE(err.find("acked 1 (exit 0"), std::string::npos) << err;
  EXPECT_NE(err.find("1 message handled"), std::string::npos) << err;
  auto stats = cli_json({"stats", "jobs"});
  EXPECT_EQ(stats.at("jobs").at("acked").as_int64(), 1);
  EXPECT_EQ(stats.at("jobs").at("backlog").as_int64(), 1) << "the second was not taken";
}

// Topic commands (issue 25 §2): create over existing queues, list, publish into every queue of
// the topic at once, delete (the queues stay).
TEST_F(cli_e2e, topic_commands_create_list_publish_and_delete) {
  ASSERT_EQ(cli({"queue", "create", "by-account", "--key", "header:account"}).rc, 0);
  ASSERT_EQ(cli({"queue", "create", "audit"}).rc, 0);
  auto r = cli({"topic", "create", "payments", "by-account", "audit"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "created topic payments\n");
  r = cli({"topic", "create", "payments", "audit"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("spec_conflict"), std::string::npos) << r.err;
  r = cli({"topic", "list"});
  EXPECT_EQ(r.out, "payments: by-account, audit\n") << r.err;
  auto published = cli_json({"topic", "publish", "payments", "--header", "account=7", "a", "b"});
  ASSERT_EQ(published.at("ids").at("by-account").as_array().size(), 2u);
  ASSERT_EQ(published.at("ids").at("audit").as_array().size(), 2u);
  auto got = cli_json({"receive", "audit", "--max", "10"});
  EXPECT_EQ(got.at("messages").as_array().size(), 2u);
  r = cli({"topic", "delete", "payments"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(cli({"topic", "list"}).out, "no topics\n");
  r = cli({"topic", "publish", "payments", "x"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("topic_not_found"), std::string::npos) << r.err;
  EXPECT_EQ(cli_json({"stats", "by-account"}).at("by-account").at("backlog").as_int64(), 2)
      << "a topic's deletion leaves its queues and their messages";
}

TEST_F(cli_e2e, errors_name_the_problem_with_distinct_exit_codes) {
  auto r = cli({"send", "nowhere", "x"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("queue_not_found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("HTTP 404"), std::string::npos) << r.err;
  r = cli({"ack", "nowhere"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(cli({"queue", "create", "q"}).rc, 0);
  r = cli({"ack", "q", "not-a-lease"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("lease"), std::string::npos) << r.err;
  auto health = cli({"health"});
  EXPECT_EQ(health.rc, 0) << health.err;
  EXPECT_EQ(health.out.rfind("healthy", 0), 0u) << health.out;
  auto unreachable =
      laneq::test::run({LANEQ_CLI_BIN, "--url", "http://127.0.0.1:1", "health"}, d_->dir());
  EXPECT_EQ(unreachable.rc, 3);
  EXPECT_NE(unreachable.err.find("127.0.0.1:1"), std::string::npos) << unreachable.err;
}

TEST_F(cli_e2e, backup_writes_a_checkpoint_that_a_second_laneqd_serves) {
  ASSERT_EQ(cli({"queue", "create", "jobs", "--key", "header:account"}).rc, 0);
  ASSERT_EQ(cli({"send", "jobs", "--header", "account=7", "one", "two", "three"}).rc, 0);
  auto backup = (d_->dir().path() / "backup").string();
  auto r = cli({"backup", backup});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("checkpoint written to " + backup + ": ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" bytes in "), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(backup) / "CURRENT"));
  // --json: the API's answer.
  auto second = (d_->dir().path() / "backup2").string();
  auto j = cli_json({"backup", second});
  EXPECT_EQ(str(j.at("dir")), second);
  EXPECT_GT(j.at("bytes").to_number<std::int64_t>(), 0);
  EXPECT_GT(j.at("files").to_number<std::int64_t>(), 0);
  EXPECT_GE(j.at("ms").as_int64(), 0);
  // Refusals: exit 1 naming the error; no DIR is a usage error (exit 2, nothing sent).
  r = cli({"backup", backup});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("already_exists (18, HTTP 409)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(backup), std::string::npos) << r.err;
  r = cli({"backup", "relative/dir"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("invalid_argument (8, HTTP 400)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("absolute"), std::string::npos) << r.err;
  EXPECT_EQ(cli({"backup"}).rc, 2);
  // Restore: a laneqd on the checkpoint serves the messages (a recovered group head waits out
  // the reclaim grace, 10 s, first: a long poll).
  laneq::test::daemon restored(LANEQ_LANEQD_BIN, false, backup);
  ASSERT_TRUE(restored.ready()) << restored.startup_error();
  auto got = laneq::test::run({LANEQ_CLI_BIN, "--url", restored.url(), "receive", "jobs", "--max",
                               "10", "--wait-ms", "15000", "--json"},
                              d_->dir());
  ASSERT_EQ(got.rc, 0) << got.err;
  auto v = json::parse(got.out);
  const auto& msgs = v.at("messages").as_array();
  ASSERT_EQ(msgs.size(), 1u) << got.out;  // one group: its head only
  EXPECT_EQ(str(msgs[0].at("body")), "one");
  EXPECT_EQ(restored.stop(), 0);
}

#if defined(LANEQ_EXAMPLE_PRODUCER_BIN) && defined(LANEQ_EXAMPLE_WORKER_BIN)
// The CAF examples against laneqd's CAF port: every message acked once, in order per account.
TEST(caf_examples, worker_acks_every_message_in_order_per_account) {
  laneq::test::daemon d(LANEQ_LANEQD_BIN, true);
  ASSERT_TRUE(d.ready()) << d.startup_error();
  const int count = 300;
  const int accounts = 7;
  auto port = "--port=" + std::to_string(d.caf_port());
  auto p = laneq::test::run(
      {LANEQ_EXAMPLE_PRODUCER_BIN, port, "--queue=caf-orders", "--count=" + std::to_string(count),
       "--accounts=" + std::to_string(accounts), "--batch=40"},
      d.dir());
  ASSERT_EQ(p.rc, 0) << p.err;
  EXPECT_EQ(p.out, "sent 300\n");
  auto w = laneq::test::run({LANEQ_EXAMPLE_WORKER_BIN, port, "--queue=caf-orders",
                             "--expect=" + std::to_string(count), "--max=5"},
                            d.dir());
  ASSERT_EQ(w.rc, 0) << w.err;
  std::map<std::string, int> next;  // account -> next sequence number expected
  std::istringstream lines(w.out);
  std::string line;
  int total = 0;
  std::regex shape(R"(^([^\t]*)\t(account-\d+) (\d+)$)");
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, shape)) << "unexpected worker line: " << line;
    auto account = m[2].str();
    auto seq = std::stoi(m[3].str());
    EXPECT_NE(m[1].str().find(account), std::string::npos)
        << "ordering key " << m[1] << " should name " << account;
    EXPECT_EQ(seq, next[account]) << account << " acked out of order";
    next[account] = seq + 1;
    ++total;
  }
  EXPECT_EQ(total, count);
  EXPECT_EQ(static_cast<int>(next.size()), accounts);
  EXPECT_EQ(d.stop(), 0);
}

// With tokens the examples log in with --token (or $LANEQ_TOKEN): a tenant's queue, and without
// a token or with an unknown one nothing is done.
TEST(caf_examples, with_tokens_the_examples_log_in_with_their_token) {
  laneq::test::temp_dir config_dir;
  auto config = config_dir.path() / "laneqd.json";
  std::ofstream{config} << R"({"tokens": [{"token": "acme-token-0123456789", "tenant": "acme"}]})";
  laneq::test::daemon d(LANEQ_LANEQD_BIN, true, {}, {"--config", config.string()});
  ASSERT_TRUE(d.ready()) << d.startup_error();
  auto port = "--port=" + std::to_string(d.caf_port());
  const std::string token = "--token=acme-token-0123456789";
  auto p = laneq::test::run({LANEQ_EXAMPLE_PRODUCER_BIN, port, token, "--queue=caf-orders",
                             "--count=20", "--accounts=3", "--batch=10"},
                            d.dir());
  ASSERT_EQ(p.rc, 0) << p.err;
  EXPECT_EQ(p.out, "sent 20\n");
  auto w = laneq::test::run(
      {LANEQ_EXAMPLE_WORKER_BIN, port, token, "--queue=caf-orders", "--expect=20", "--max=5"},
      d.dir());
  ASSERT_EQ(w.rc, 0) << w.err;
  EXPECT_EQ(std::count(w.out.begin(), w.out.end(), '\n'), 20) << w.out;
  auto anonymous = laneq::test::run(
      {LANEQ_EXAMPLE_PRODUCER_BIN, port, "--queue=caf-orders", "--count=1"}, d.dir());
  EXPECT_NE(anonymous.rc, 0);
  EXPECT_NE(anonymous.err.find("unauthorized"), std::string::npos) << anonymous.err;
  auto unknown = laneq::test::run(
      {LANEQ_EXAMPLE_WORKER_BIN, port, "--token=not-a-token-0123456789", "--queue=caf-orders"},
      d.dir());
  EXPECT_NE(unknown.rc, 0);
  EXPECT_NE(unknown.err.find("unauthorized"), std::string::npos) << unknown.err;
  EXPECT_EQ(d.stop(), 0);
}
#endif

#ifdef LANEQ_LOADGEN_BIN
// The load generator against a real laneqd, over both transports and with both ack modes: every
// message acked once, in order per group, and its JSON report consistent with that.
TEST(loadgen, drives_laneqd_over_http_and_caf_with_sync_and_async_acks) {
  laneq::test::daemon d(LANEQ_LANEQD_BIN, true);
  ASSERT_TRUE(d.ready()) << d.startup_error();
  const std::int64_t messages = 3000;
  for (std::string transport : {"http", "caf"}) {
    for (std::string ack : {"sync", "async"}) {
      SCOPED_TRACE(transport + ", ack " + ack);
      auto r = laneq::test::run(
          {LANEQ_LOADGEN_BIN, "--transport=" + transport, "--url=" + d.url(),
           "--caf-port=" + std::to_string(d.caf_port()), "--messages=" + std::to_string(messages),
           "--groups=20", "--consumers=3", "--batch=50", "--receive-max=40", "--in-flight=2",
           "--ack=" + ack, "--no-progress"},
          d.dir());
      ASSERT_EQ(r.rc, 0) << r.out << r.err;
      json::error_code ec;
      auto v = json::parse(r.out, ec);
      ASSERT_FALSE(ec) << "not JSON: " << r.out;
      const auto& o = v.as_object();
      EXPECT_TRUE(o.at("ok").as_bool());
      EXPECT_EQ(str(o.at("ack")), ack);
      EXPECT_EQ(o.at("acked").to_number<std::int64_t>(), messages);
      EXPECT_EQ(o.at("duplicates").to_number<std::int64_t>(), 0);
      EXPECT_EQ(o.at("order_violations").to_number<std::int64_t>(), 0);
      const auto& calls = o.at("calls").as_object();
      auto count = [&](const char* call) {
        return calls.at(call).as_object().at("count").to_number<std::int64_t>();
      };
      EXPECT_EQ(count("enqueue"), messages / 50) << "one call per batch of 50";
      EXPECT_EQ(count("ack"), count("receive")) << "every receive that brought messages is acked";
      auto per_receive = calls.at("messages_per_receive").to_number<double>();
      EXPECT_GT(per_receive, 0.0);
      EXPECT_LE(per_receive, 40.0);
      EXPECT_NEAR(per_receive * static_cast<double>(count("receive")),
                  static_cast<double>(messages), 0.5)
          << "nothing was redelivered, so the receives brought each message once";
      const auto& self = o.at("loadgen").as_object();
      EXPECT_NEAR(self.at("cpu_us_per_message").to_number<double>(),
                  self.at("cpu_s").to_number<double>() * 1e6 / static_cast<double>(messages), 1e-6);
      const auto& machine = o.at("machine").as_object();
      EXPECT_GT(machine.at("cpu_loop_ns").to_number<double>(), 0.0);
      EXPECT_GT(machine.at("thread_round_trip_us").to_number<double>(), 0.0);
    }
  }
  EXPECT_EQ(d.stop(), 0);
}

// A CAF call of the load generator has no timeout of its own, so a laneqd that stops answering
// (frozen with SIGSTOP, its connections open) must still end the run: the stall check fails it,
// the unanswered calls are abandoned, and the report says so with exit code 1. The stall check
// is 5 s, not 1: on a loaded machine a running laneqd can go a second without an ack (a slow
// sync), which would end the run before the freeze and prove nothing.
TEST(loadgen, a_laneqd_that_stops_answering_fails_the_run_instead_of_hanging_it) {
  laneq::test::daemon d(LANEQ_LANEQD_BIN, true);
  ASSERT_TRUE(d.ready()) << d.startup_error();
  auto out = d.dir().path() / "loadgen.out";
  auto err = d.dir().path() / "loadgen.err";
  auto pid = laneq::test::spawn({LANEQ_LOADGEN_BIN, "--transport=caf", "--url=" + d.url(),
                                 "--caf-port=" + std::to_string(d.caf_port()), "--messages=2000000",
                                 "--groups=20", "--stall-s=5"},
                                out, err);
  // Freeze laneqd once the run is under way: the progress line has counted an ack.
  const std::regex acking{"acked [1-9]"};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::regex_search(laneq::test::slurp(err), acking) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  d.signal(SIGSTOP);
  int rc = laneq::test::wait_exit(pid);
  d.signal(SIGCONT);
  auto report = laneq::test::slurp(out);
  EXPECT_EQ(rc, 1) << report << laneq::test::slurp(err);
  json::error_code ec;
  auto v = json::parse(report, ec);
  ASSERT_FALSE(ec) << "not JSON: " << report;
  const auto& o = v.as_object();
  EXPECT_FALSE(o.at("ok").as_bool());
  EXPECT_NE(str(o.at("error")).find("stalled: no ack for 5 s"), std::string::npos) << report;
  EXPECT_NE(str(o.at("error")).find("still unanswered"), std::string::npos) << report;
  EXPECT_GT(o.at("acked").to_number<std::int64_t>(), 0);
  EXPECT_EQ(d.stop(), 0) << "laneqd resumed and stopped cleanly after its client vanished";
}
#endif

// The README's demo (scripts/run-demo.sh without the install and build) against the built
// binaries: its own checks fail the script when laneq does not behave as it tells.
TEST(readme_demo, runs_and_passes_its_checks) {
  laneq::test::temp_dir dir;
  auto bin = std::filesystem::path(LANEQ_LANEQD_BIN).parent_path().string();
  auto r = laneq::test::run({"/bin/bash", LANEQ_SOURCE_DIR "/scripts/run-demo.sh"}, dir,
                            {{"LANEQ_DEMO_BIN_DIR", bin},
                             {"LANEQ_DEMO_DATA_DIR", (dir.path() / "data").string()},
                             {"LANEQ_DEMO_HTTP_PORT", "0"},
                             {"LANEQ_DEMO_CAF_PORT", "0"}});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("run-demo.sh: demo PASSED"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("laneqd stopped cleanly"), std::string::npos) << r.out;
}

#endif  // LANEQ_LANEQD_BIN
