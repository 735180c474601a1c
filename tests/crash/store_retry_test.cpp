// Failed store writes are sent again, not dropped (G1, G7 through the broker): with the disk
// failing (injected I/O errors), an ack's erase and a dead-letter move fail; the group holds its
// next head meanwhile, and once the store is back its writes are retried every
// store_reopen_interval until they are durable, so after a restart the acked message is gone and
// the dead letter is a dead letter.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "fault_broker.hpp"

namespace laneq::test {
namespace {

using namespace std::chrono_literals;

class StoreRetry : public fault_broker_test<> {};

TEST_F(StoreRetry, failed_writes_are_sent_again_once_the_store_is_back) {
  {
    auto opened = broker::open(sys_, options());
    ASSERT_TRUE(opened.ok()) << opened.err().message;
    blocking_admin admin{sys_, opened.value()->admin()};
    auto q = admin.create_queue(queue_spec("ledger").ordered());
    ASSERT_TRUE(q.ok()) << q.err().message;
    blocking_queue client{sys_, q.value(), 10s};
    for (const char* body : {"m0", "m1", "m2"}) {
      outgoing_message m;
      m.body = body;
      ASSERT_TRUE(client.enqueue(std::move(m)).ok());
    }
    auto d0 = client.receive({1, 0, 0});
    ASSERT_TRUE(d0.ok() && d0.value().size() == 1u);

    // The ack's erase fails: the ack is not confirmed, and m1 waits for the erase.
    fs_->inject(fault_kind::io_error);
    auto acked = client.ack(d0.value()[0].lease);
    ASSERT_FALSE(acked.ok());
    EXPECT_EQ(acked.err().code, errc::storage_failed);
    auto held = client.receive({1, 0, 100'000});
    ASSERT_TRUE(held.ok());
    EXPECT_TRUE(held.value().empty()) << "m1 was delivered before the erase of m0 was durable";
    fs_->clear_fault();
    // The group retries the erase (every second), then offers m1. The long poll is answered as
    // soon as it does; the most a receive may wait (20 s) keeps a slow machine from failing it.
    auto d1 = client.receive({1, 0, 20'000'000});
    ASSERT_TRUE(d1.ok() && d1.value().size() == 1u) << "m1 never came: the erase was not retried";
    EXPECT_EQ(d1.value()[0].msg.body, "m1");

    // The dead-letter move fails: the nack waits for it, and m2 waits too.
    auto failures = fs_->injected_failures();
    fs_->inject(fault_kind::io_error);
    auto lease = d1.value()[0].lease;
    auto dead = std::async(std::launch::async, [&] {
      blocking_queue c{sys_, q.value(), 60s};
      return c.dead_letter(lease);
    });
    auto still_held = client.receive({1, 0, 100'000});
    ASSERT_TRUE(still_held.ok());
    EXPECT_TRUE(still_held.value().empty()) << "m2 was delivered before m1's move was durable";
    for (auto until = std::chrono::steady_clock::now() + 30s;  // a hang guard
         fs_->injected_failures() == failures && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(1ms);
    ASSERT_GT(fs_->injected_failures(), failures) << "the move never reached the disk";
    fs_->clear_fault();
    auto moved = dead.get();
    EXPECT_TRUE(moved.ok()) << "the dead-letter move was not retried: "
                            << (moved.ok() ? std::string{} : moved.err().message);
    auto d2 = client.receive({1, 0, 20'000'000});
    ASSERT_TRUE(d2.ok() && d2.value().size() == 1u);
    EXPECT_EQ(d2.value()[0].msg.body, "m2");
  }  // a clean stop, with m2 unacked
  auto reopened = broker::open(sys_, options());
  ASSERT_TRUE(reopened.ok()) << reopened.err().message;
  blocking_admin admin{sys_, reopened.value()->admin()};
  auto q = admin.lookup("ledger");
  ASSERT_TRUE(q.ok());
  blocking_queue client{sys_, q.value(), 10s};
  auto live = client.receive({10, 0, 20'000'000});  // answered once the group offers its head
  ASSERT_TRUE(live.ok());
  std::string bodies;
  for (auto& d : live.value()) bodies += d.msg.body + " ";
  EXPECT_EQ(bodies, "m2 ") << "m0's erase or m1's move was lost";
  auto dls = client.dead_letters();
  ASSERT_TRUE(dls.ok());
  ASSERT_EQ(dls.value().size(), 1u) << "m1's move was lost";
  EXPECT_EQ(dls.value()[0].msg.body, "m1");
}

}  // namespace
}  // namespace laneq::test
