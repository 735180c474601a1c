// Regressions for production bugs the seeded simulation (sim_test.cpp) found, each reduced to a
// deterministic scenario on the harness (docs/design/recovery.md).
#include <gtest/gtest.h>

#include "harness.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;

using test::with_grace;

// R6: "a reclaimed lease runs for the queue's lease duration from the reclaim", as if there had
// been no restart. Found by the simulation (LANEQ_SIM_SEED=17 LANEQ_SIM_STEPS=6000, and every
// other seed tried) in the engine of one CAF actor per group: after the grace ended, the queue
// actor forgot which group an old token names (the token's group id is from the previous run),
// so an ack, nack or extend of a reclaimed lease that is still running failed with
// lease_not_found, and the head was delivered again when the lease ran out. The shard engine
// keeps `reclaimable_` until the group goes (shard_engine::owner_of).
TEST(SimFoundBugs, a_reclaimed_lease_can_be_acked_after_the_grace_until_its_deadline) {
  test::harness h(1, with_grace(1s));
  auto q = h.create(queue_spec("r").ordered().lease(5s));
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(h.enqueue(q.value(), test::msg("A1")).ok());
  auto first = h.receive(q.value(), 1);
  ASSERT_TRUE(first.ok() && first.value().size() == 1);
  auto token = first.value()[0].lease;
  ASSERT_TRUE(h.restart(with_grace(1s)).ok());
  auto q2 = h.lookup("r");
  ASSERT_TRUE(q2.ok());
  auto moved = h.extend(q2.value(), token, 3s);  // reclaims within the grace: runs to t + 3 s
  ASSERT_TRUE(moved.ok()) << to_string(moved.err());
  h.advance(2s);  // the grace is over; the reclaimed lease runs for 1 s more
  auto acked = h.ack(q2.value(), token);
  EXPECT_TRUE(acked.ok()) << to_string(acked.err());
  h.advance(2s);  // past the lease's deadline
  auto again = h.receive(q2.value(), 1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again.value().empty()) << "the head came back after its reclaimed lease was acked";
}

// R7: with durable delivery a lease is committed before the message goes out and honoured
// after a restart. Found by the simulation once it sent long polls (LANEQ_SIM_SEED=8
// LANEQ_SIM_STEPS=30000): a nack of an unordered message that a waiting long poll takes at
// once wrote the new lease before the nack's erase of the old one, and both are keyed by the
// message, so the erase removed the new lease; after a restart the message was no longer in
// flight and could go to a second consumer while the first still held it.
TEST(SimFoundBugs, a_durable_lease_taken_by_a_waiting_poll_on_a_nack_survives_a_restart) {
  test::harness h;
  auto q = h.create(queue_spec("d").delivery(delivery_durability::durable).lease(5s));
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(h.enqueue(q.value(), test::msg("A1")).ok());
  auto first = h.receive(q.value(), 1);
  ASSERT_TRUE(first.ok() && first.value().size() == 1);
  auto waiting = h.long_poll(q.value(), 1, 2s);
  ASSERT_FALSE(waiting) << "nothing else is ready: the poll waits";
  ASSERT_TRUE(h.nack(q.value(), first.value()[0].lease).ok());
  auto polled = h.collect<std::vector<delivery>>();
  ASSERT_TRUE(polled && *polled && polled->value().size() == 1) << "the poll takes the message";
  auto token = polled->value()[0].lease;
  ASSERT_TRUE(h.restart().ok());
  auto q2 = h.lookup("d");
  ASSERT_TRUE(q2.ok());
  auto stats = h.stats(q2.value());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats.value().in_flight, 1u) << "the poll's lease was lost at the restart";
  auto again = h.receive(q2.value(), 1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again.value().empty()) << "the message went out again under a live lease";
  EXPECT_TRUE(h.ack(q2.value(), token).ok());
}

}  // namespace
}  // namespace laneq
