// A group's next head waits for the store (G1, G3, G4 through the broker): after an ack or a
// dead-letter nack, the group must not offer its next message before the writes that end the
// current one are durable. Otherwise a power loss brings back the message whose ack was in flight
// after its successor was already delivered: the successor ran first. The fault file system holds
// every sync, so the test acts while the ack's write waits for its sync, then cuts the power.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "crash_support.hpp"
#include "fault_fs.hpp"
#include "laneq/actors/broker.hpp"

namespace laneq::test {
namespace {

using namespace std::chrono_literals;

class SettleDurability : public ::testing::TestWithParam<bool> {
 protected:
  broker_options options(bool faulty) {
    broker_options opts;
    opts.data_dir = dir_.sub("db");
    opts.reclaim_grace = duration{0};
    if (faulty) opts.persistence.env = make_env(fs_);
    return opts;
  }

  /// Waits until a sync is held by the file system (the write has reached its sync).
  /// The 30 s are a hang guard, not a speed requirement.
  bool wait_for_held_sync() {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds{30};
         fs_->syncs_waiting() == 0 && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(1ms);
    return fs_->syncs_waiting() > 0;
  }

  temp_dir dir_;
  std::shared_ptr<fault_fs> fs_ = std::make_shared<fault_fs>();
  crash_config cfg_;
  caf::actor_system sys_{cfg_};
};

// The parameter: true ends the head with an ack, false with a dead-letter nack.
TEST_P(SettleDurability, the_next_head_waits_until_the_end_of_the_current_one_is_durable) {
  const bool by_ack = GetParam();
  std::vector<std::string> delivered;  // bodies, in delivery order, across the power loss
  {
    auto opened = broker::open(sys_, options(true));
    ASSERT_TRUE(opened.ok()) << opened.err().message;
    blocking_admin admin{sys_, opened.value()->admin()};
    auto q = admin.create_queue(queue_spec("ledger").ordered());
    ASSERT_TRUE(q.ok()) << q.err().message;
    blocking_queue client{sys_, q.value(), 5s};
    for (const char* body : {"m0", "m1"}) {
      outgoing_message m;
      m.body = body;
      ASSERT_TRUE(client.enqueue(std::move(m)).ok());
    }
    auto first = client.receive({1, 0, 0});
    ASSERT_TRUE(first.ok() && first.value().size() == 1u);
    delivered.push_back(first.value()[0].msg.body);
    fs_->hold_syncs();
    auto lease = first.value()[0].lease;
    auto ended = std::async(std::launch::async, [&] {
      blocking_queue c{sys_, q.value(), 5s};
      return by_ack ? c.ack(lease) : c.dead_letter(lease);
    });
    ASSERT_TRUE(wait_for_held_sync()) << "the end of m0 never reached a sync";
    // While m0's end waits for its sync, its successor must not be handed out.
    auto next = client.receive({1, 0, 300'000});
    ASSERT_TRUE(next.ok()) << next.err().message;
    for (auto& d : next.value()) delivered.push_back(d.msg.body);
    fs_->lose_power();
    fs_->release_syncs();
    auto st = ended.get();
    EXPECT_FALSE(st.ok()) << "the end of m0 was confirmed although its sync failed";
  }  // the broker goes; its shutdown writes nothing: the power is out
  fs_->drop_unsynced();
  auto reopened = broker::open(sys_, options(false));
  ASSERT_TRUE(reopened.ok()) << reopened.err().message;
  blocking_admin admin{sys_, reopened.value()->admin()};
  auto q = admin.lookup("ledger");
  ASSERT_TRUE(q.ok());
  blocking_queue client{sys_, q.value(), 5s};
  // Until m0 and m1 came back after the restart, with long polls (answered as soon as the
  // recovered group offers its head, so a slow recovery does not end the drain early).
  std::set<std::string> after;
  for (int round = 0; round < 10 && !(after.count("m0") && after.count("m1")); ++round) {
    auto ds = client.receive({1, 0, 20'000'000});
    ASSERT_TRUE(ds.ok());
    if (ds.value().empty()) break;
    delivered.push_back(ds.value()[0].msg.body);
    after.insert(ds.value()[0].msg.body);
    ASSERT_TRUE(client.ack(ds.value()[0].lease).ok());
  }
  // m0's end was never confirmed, so m0 comes back; then m1 must not have run before it.
  std::string order;
  for (auto& b : delivered) order += b + " ";
  ASSERT_GE(delivered.size(), 2u) << order;
  EXPECT_EQ(delivered[0], "m0") << order;
  EXPECT_EQ(delivered[1], "m0") << "m1 was delivered while the end of m0 was not durable, and m0 "
                                   "came back after the power loss: "
                                << order;
}

INSTANTIATE_TEST_SUITE_P(Ends, SettleDurability, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string{"ack"} : std::string{"dead_letter"};
                         });

}  // namespace
}  // namespace laneq::test
