// Store failures (the in-memory precursor of G7): when the store cannot make a write durable,
// the producer gets storage_failed, nothing is delivered, and a failed redrive loses nothing.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using test::harness;
using test::msg;

TEST(store_failure, a_failed_append_is_never_acknowledged_or_delivered) {
  auto faults = std::make_shared<test::store_faults>();
  harness h{1, faults};
  auto q = h.create(queue_spec("orders").ordered_by({key::header("account")}));
  ASSERT_TRUE(q.ok());
  faults->fail_appends = true;
  auto ids = h.enqueue(q.value(), msg("lost?", {{"account", "A"}}));
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.err().code, errc::storage_failed);
  EXPECT_NE(ids.err().message.find("queue 'orders'"), std::string::npos) << ids.err().message;
  auto got = h.receive(q.value(), 10);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got.value().empty()) << "a message the store refused must not be delivered";
  auto s = h.stats(q.value());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value().enqueued, 0u);
  EXPECT_EQ(s.value().backlog, 0u);
  EXPECT_EQ(s.value().live_groups, 0u);

  faults->fail_appends = false;  // the store recovers: the queue works again
  ASSERT_TRUE(h.enqueue(q.value(), msg("kept", {{"account", "A"}})).ok());
  got = h.receive(q.value(), 10);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].msg.body, "kept");
}

TEST(store_failure, a_failed_redrive_keeps_the_dead_letters) {
  auto faults = std::make_shared<test::store_faults>();
  harness h{1, faults};
  auto q = h.create(queue_spec("orders").ordered().max_attempts(1));
  ASSERT_TRUE(q.ok());
  auto id = h.enqueue(q.value(), msg("poison"));
  ASSERT_TRUE(id.ok());
  auto got = h.receive(q.value());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().size(), 1u);
  ASSERT_TRUE(h.nack(q.value(), got.value()[0].lease).ok());  // max_attempts 1: dead letter
  ASSERT_EQ(h.dead_letters(q.value()).value().size(), 1u);

  faults->fail_appends = true;
  auto n = h.redrive(q.value(), {id.value()});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.err().code, errc::storage_failed);
  auto dls = h.dead_letters(q.value());
  ASSERT_TRUE(dls.ok());
  ASSERT_EQ(dls.value().size(), 1u) << "a failed redrive must not lose the dead letter";
  EXPECT_EQ(dls.value()[0].msg.id, id.value());
  EXPECT_TRUE(h.receive(q.value()).value().empty());

  faults->fail_appends = false;
  n = h.redrive(q.value(), {id.value()});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value(), 1u);
  got = h.receive(q.value());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].msg.id, id.value());
}

}  // namespace
}  // namespace laneq
