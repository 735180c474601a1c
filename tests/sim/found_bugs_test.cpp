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
// other seed tried): after the grace ends, the queue actor forgets which group an old token
// names (queue_actor_impl::owner_of looks in `reclaimable_`, which release_atom clears; the
// token's group id is from the previous run), so an ack, nack or extend of a reclaimed lease
// that is still running fails with lease_not_found, and the head is delivered again when the
// lease runs out.
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

}  // namespace
}  // namespace laneq
