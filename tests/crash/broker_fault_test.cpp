// Storage faults seen from a client of the whole broker (RELIABILITY.md T5, G7): with the disk
// full or failing, enqueues, acks and redrives get storage_failed and never an answer that
// claims a write; the broker reports degraded, keeps serving what it holds, and recovers by
// reopening the store; after a restart every acknowledged enqueue is there and no confirmed ack
// comes back.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "fault_broker.hpp"

namespace laneq::test {
namespace {

using namespace std::chrono_literals;

outgoing_message in_account(std::string body, std::string account) {
  outgoing_message m;
  m.body = std::move(body);
  m.headers.push_back(header_field{"account", std::move(account)});
  return m;
}

queue_spec ledger_spec() {
  return queue_spec("ledger").ordered_by({key::header("account")});
}

class BrokerFault : public fault_broker_test<::testing::TestWithParam<fault_kind>> {};

TEST_P(BrokerFault, no_write_is_acknowledged_while_the_disk_fails_and_the_broker_recovers) {
  std::set<std::string> acknowledged;  // bodies whose enqueue was answered with ids
  {
    auto opened = broker::open(sys_, options());
    ASSERT_TRUE(opened.ok()) << opened.err().message;
    auto& brk = *opened.value();
    blocking_admin admin{sys_, brk.admin()};
    auto q = admin.create_queue(ledger_spec());
    ASSERT_TRUE(q.ok()) << q.err().message;
    blocking_queue client{sys_, q.value()};
    for (int i = 0; i < 10; ++i) {
      auto body = "a" + std::to_string(i);
      ASSERT_TRUE(client.enqueue(in_account(body, "A")).ok());
      acknowledged.insert(body);
    }
    auto first = client.receive({1, 0, 0});
    ASSERT_TRUE(first.ok());
    ASSERT_EQ(first.value().size(), 1u);

    fs_->inject(GetParam());
    auto failed = client.enqueue(in_account("lost", "B"));
    ASSERT_FALSE(failed.ok()) << "an enqueue was acknowledged although the disk fails";
    EXPECT_EQ(failed.err().code, errc::storage_failed);
    EXPECT_NE(failed.err().message.find("ledger"), std::string::npos) << failed.err().message;
    auto ack = client.ack(first.value()[0].lease);
    ASSERT_FALSE(ack.ok()) << "an ack was confirmed although its erase was not stored";
    EXPECT_EQ(ack.err().code, errc::storage_failed);
    auto health = brk.storage_stats();
    ASSERT_TRUE(health.ok());
    EXPECT_TRUE(health.value().degraded);
    EXPECT_FALSE(health.value().reason.empty());
    if (GetParam() == fault_kind::no_space) {
      EXPECT_NE(health.value().reason.find("out of space"), std::string::npos)
          << health.value().reason;
    }
    // Receives are still served; group A's next head waits until the erase of a0, retried by
    // its group, is durable (a power loss must not bring a0 back after a1 ran).
    auto next = client.receive({1, 0, 0});
    ASSERT_TRUE(next.ok()) << next.err().message;
    EXPECT_TRUE(next.value().empty()) << "a1 was delivered before the erase of a0 was durable";

    fs_->clear_fault();
    // The store reopens by itself (every 50 ms here); then writes are acknowledged again. The
    // 30 s are a hang guard, not a speed requirement.
    bool recovered = false;
    for (auto until = std::chrono::steady_clock::now() + 30s;
         !recovered && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(20ms);
      auto h = brk.storage_stats();
      recovered = h.ok() && !h.value().degraded && h.value().reopens >= 1;
    }
    ASSERT_TRUE(recovered) << "the store did not reopen after the fault cleared";
    ASSERT_TRUE(client.enqueue(in_account("later", "B")).ok());
    acknowledged.insert("later");
  }  // the broker and the store close
  auto reopened = broker::open(sys_, options());
  ASSERT_TRUE(reopened.ok()) << reopened.err().message;
  blocking_admin admin{sys_, reopened.value()->admin()};
  auto q = admin.lookup("ledger");
  ASSERT_TRUE(q.ok());
  blocking_queue client{sys_, q.value()};
  std::set<std::string> seen;
  std::string last_a;
  // Until every acknowledged enqueue came back (a0 may not: see below). Long polls of up to
  // 20 s: a recovered group offers its head asynchronously, so an immediate or short receive can
  // come back empty before every group is ready (seen once in CI with 200 ms: group A "lost");
  // a receive is answered as soon as a message is there, so the wait costs nothing when the
  // messages come.
  auto missing = [&] {
    for (const auto& body : acknowledged)
      if (!seen.count(body) && body != "a0") return true;
    return false;
  };
  for (int round = 0; round < 100 && missing(); ++round) {
    auto ds = client.receive({100, 0, 20'000'000});
    ASSERT_TRUE(ds.ok());
    if (ds.value().empty()) break;
    for (const auto& d : ds.value()) {
      seen.insert(d.msg.body);
      if (d.msg.body[0] == 'a') {
        EXPECT_GT(d.msg.body, last_a) << "group A out of order";  // a0..a9 sort as strings
        last_a = d.msg.body;
      }
      ASSERT_TRUE(client.ack(d.lease).ok());
    }
  }
  // a0's ack was answered storage_failed, but its group retries the erase once the store is
  // back: like an ack that was never answered, it may have taken effect.
  for (const auto& body : acknowledged)
    EXPECT_TRUE(seen.count(body) || body == "a0")
        << "acknowledged enqueue '" << body << "' was lost";
  for (const auto& body : seen)
    EXPECT_TRUE(acknowledged.count(body) || body == "lost") << "unexpected '" << body << "'";
}

INSTANTIATE_TEST_SUITE_P(Faults, BrokerFault,
                         ::testing::Values(fault_kind::no_space, fault_kind::io_error),
                         [](const ::testing::TestParamInfo<fault_kind>& p) {
                           return p.param == fault_kind::no_space ? std::string{"no_space"}
                                                                  : std::string{"io_error"};
                         });

}  // namespace
}  // namespace laneq::test
