// The blocking client (actors/include/laneq/actors/broker.hpp) on a real threaded actor system:
// every admin and queue call end to end, with no simulated time and no sleeps; and, repeated over
// real threads, that a receive sent after any answered change sees that change without waiting.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "caf/all.hpp"

#include "actor_test_helpers.hpp"
#include "laneq/actors/broker.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;

/// Long poll for the first message: answers as soon as one is deliverable.
constexpr receive_request one_waiting{1, 0, 5'000'000};

/// The value of `r`, or a test failure naming the error (and a default value).
template <class T>
T value_of(result<T> r, const char* what) {
  EXPECT_TRUE(r.ok()) << what << ": " << (r.ok() ? "" : to_string(r.err()));
  if (!r.ok()) return T{};
  return std::move(r).value();
}

/// A real threaded actor system with laneq's message types, `threads` scheduler threads.
struct threaded_system {
  explicit threaded_system(int threads) : sys{configured(cfg, threads)} {}
  static caf::actor_system_config& configured(caf::actor_system_config& c, int threads) {
    add_message_types(c);
    c.set("scheduler.max-threads", threads);
    return c;
  }
  caf::actor_system_config cfg;  // before the system, which it configures
  caf::actor_system sys;
};

/// A broker on such a system and a blocking admin on it; members stop in reverse order, so the
/// broker's actors before the system.
struct threaded_broker : threaded_system {
  using threaded_system::threaded_system;
  broker brk{sys};
  blocking_admin admin{sys, brk.admin(), 10s};
};

TEST(blocking_client, the_blocking_api_runs_a_queue_end_to_end_on_a_threaded_actor_system) {
  threaded_broker b{2};
  auto& sys = b.sys;
  auto& admin = b.admin;

  auto created = admin.create_queue(queue_spec("orders").ordered_by({key::header("account")}));
  ASSERT_TRUE(created.ok()) << to_string(created.err());
  auto again = admin.create_queue(queue_spec("orders").ordered_by({key::header("account")}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), created.value()) << "the same spec returns the same queue";
  auto conflict = admin.create_queue(queue_spec("orders").ordered());
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.err().code, errc::spec_conflict);
  EXPECT_EQ(value_of(admin.list_queues(), "list"), (strings{"orders"}));
  auto found = value_of(admin.lookup("orders"), "lookup");
  EXPECT_EQ(found, created.value());

  blocking_queue q{sys, found, 10s};
  auto ids = value_of(q.enqueue({in_account("A1", "A"), in_account("A2", "A")}), "enqueue");
  ASSERT_EQ(ids.size(), 2u);
  auto single = q.enqueue(msg("keyless"));
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.err().code, errc::ordering_key_missing);

  // A1: nacked once, then acked.
  auto first = value_of(q.receive(one_waiting), "receive A1");
  ASSERT_EQ(bodies(first), (strings{"A1"}));
  EXPECT_EQ(first[0].msg.id, ids[0]);
  EXPECT_EQ(first[0].ordering_key, "A");
  auto extended = value_of(q.extend(first[0].lease, 60s), "extend");
  EXPECT_GT(extended, first[0].deadline);
  ASSERT_TRUE(q.nack(first[0].lease).ok());
  auto retry = value_of(q.receive(one_waiting), "receive A1 again");
  ASSERT_EQ(bodies(retry), (strings{"A1"})) << "the group waits for A1";
  EXPECT_EQ(retry[0].msg.attempts, 2u);
  ASSERT_TRUE(q.ack(retry[0].lease).ok());
  auto stale = q.ack(first[0].lease);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.err().code, errc::lease_not_found);

  // A2: dead-lettered on request, redriven, then acked.
  auto second = value_of(q.receive(one_waiting), "receive A2");
  ASSERT_EQ(bodies(second), (strings{"A2"}));
  ASSERT_TRUE(q.dead_letter(second[0].lease).ok());
  auto dead = value_of(q.dead_letters(), "dead_letters");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].msg.id, ids[1]);
  EXPECT_EQ(dead[0].reason, dead_letter_reason::requested);
  EXPECT_EQ(value_of(q.redrive({ids[1]}), "redrive"), 1u);
  EXPECT_TRUE(value_of(q.dead_letters(), "dead_letters after redrive").empty());
  auto redriven = value_of(q.receive(one_waiting), "receive A2 redriven");
  ASSERT_EQ(bodies(redriven), (strings{"A2"}));
  EXPECT_EQ(redriven[0].msg.id, ids[1]);
  EXPECT_EQ(redriven[0].msg.attempts, 1u);
  auto blocked = value_of(q.groups(true), "groups");
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].state, group_status::in_flight);
  auto outcomes = value_of(q.ack(std::vector<lease_token>{redriven[0].lease}), "batch ack");
  EXPECT_TRUE(outcomes.empty());

  auto s = value_of(q.stats(), "stats");
  EXPECT_EQ(s.name, "orders");
  EXPECT_EQ(s.enqueued, 2u);
  EXPECT_EQ(s.delivered, 4u);
  EXPECT_EQ(s.acked, 2u);
  EXPECT_EQ(s.nacked, 2u) << "the retry and the dead-letter request";
  EXPECT_EQ(s.dead_lettered, 1u);
  EXPECT_EQ(s.redriven, 1u);
  EXPECT_EQ(s.key_missing, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.backlog, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.dead_letters, 0u);
  EXPECT_EQ(s.live_groups, 0u);

  auto described = value_of(admin.describe("orders"), "describe");
  EXPECT_EQ(described.stats.acked, 2u);
  ASSERT_TRUE(admin.delete_queue("orders").ok());
  auto gone = admin.lookup("orders");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.err().code, errc::queue_not_found);
  EXPECT_TRUE(value_of(admin.list_queues(), "list after delete").empty());
}

// The shard engine answers an enqueue, a nack, a dead letter, a redrive and a topic's publish
// only once what the answer confirms can be delivered: the messages routed to their groups, and a
// group's next head handed to the scheduler in the step where the write that ended the previous
// one became durable (docs/design/persistence.md P10). So a receive that does not wait (wait 0),
// sent after the answer, must find the head every time. Repeated because a missing step shows
// only in some thread interleavings of the client, the shard actor and the store (four workers on
// this host's cores).
TEST(blocking_client, a_receive_sent_after_an_answer_sees_what_the_answer_confirmed) {
  threaded_broker b{4};
  auto& sys = b.sys;
  auto& admin = b.admin;
  auto by_account = [](const char* name) {
    return queue_spec(name).ordered_by({key::header("account")});
  };
  blocking_queue q{sys, value_of(admin.create_queue(by_account("orders")), "create orders"), 10s};
  blocking_queue audit{sys, value_of(admin.create_queue(by_account("audit")), "create audit"), 10s};
  ASSERT_TRUE(admin.create_topic(topic_spec("orders-and-audit").fan_out({"orders", "audit"})).ok());
  constexpr receive_request at_once{1, 0, 0};
  auto next_body = [](blocking_queue& from, delivery& into) {
    auto got = value_of(from.receive(at_once), "receive");
    if (got.size() != 1) return std::string{"(nothing)"};
    into = std::move(got[0]);
    return into.msg.body;
  };
  constexpr int rounds = 300;
  for (int i = 0; i < rounds; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    // A new account each round: the enqueue also makes its group.
    auto account = "A" + std::to_string(i);
    auto ids = value_of(q.enqueue({in_account("first", account), in_account("second", account)}),
                        "enqueue");
    ASSERT_EQ(ids.size(), 2u);
    delivery d;
    ASSERT_EQ(next_body(q, d), "first") << "after the enqueue";
    ASSERT_TRUE(q.nack(d.lease).ok());
    ASSERT_EQ(next_body(q, d), "first") << "after a nack with no retry delay";
    ASSERT_TRUE(q.dead_letter(d.lease).ok());
    ASSERT_EQ(next_body(q, d), "second") << "after the head was dead-lettered";
    ASSERT_TRUE(q.ack(d.lease).ok());
    ASSERT_EQ(value_of(q.redrive({ids[0]}), "redrive"), 1u);
    ASSERT_EQ(next_body(q, d), "first") << "after the redrive";
    ASSERT_TRUE(q.ack(d.lease).ok());
    auto published =
        value_of(admin.publish("orders-and-audit", {in_account("fanned", account)}), "publish");
    ASSERT_EQ(published.size(), 2u);
    for (auto* each : {&q, &audit}) {
      ASSERT_EQ(next_body(*each, d), "fanned") << "after the topic enqueue";
      ASSERT_TRUE(each->ack(d.lease).ok());
    }
  }
  auto s = value_of(q.stats(), "stats");
  EXPECT_EQ(s.acked, 3u * rounds);
  EXPECT_EQ(s.backlog, 0u);
}

TEST(blocking_client, one_blocking_queue_serves_calls_from_several_threads_at_once) {
  // A call takes the actor the last call kept, or makes its own while another thread holds it
  // (blocking_caller): every call on every thread is answered, each with its own answer.
  threaded_broker b{2};
  auto& sys = b.sys;
  auto& admin = b.admin;
  blocking_queue q{sys, value_of(admin.create_queue(queue_spec("shared")), "create"), 10s};
  constexpr int threads = 4;
  constexpr int calls = 200;
  std::vector<std::thread> callers;
  std::vector<std::vector<message_id>> ids(threads);
  for (int t = 0; t < threads; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        auto r = q.enqueue(msg("t" + std::to_string(t)));
        if (r.ok()) ids[static_cast<std::size_t>(t)].push_back(r.value());
      }
    });
  for (auto& c : callers) c.join();
  std::set<message_id> distinct;
  for (const auto& each : ids) {
    EXPECT_EQ(each.size(), std::size_t{calls}) << "every call answered ok";
    distinct.insert(each.begin(), each.end());
  }
  EXPECT_EQ(distinct.size(), std::size_t{threads * calls}) << "each call got its own answer";
  EXPECT_EQ(value_of(q.stats(), "stats").backlog, std::uint64_t{threads * calls});
}

/// A queue that holds every enqueue's answer until it is told to answer (ok_atom), then answers
/// the held ones and every later one at once. Class-based on `tsan_visible` like every laneq
/// actor, so ThreadSanitizer sees CAF hand it between threads (actor_base.hpp).
class holding_queue : public tsan_visible<caf::event_based_actor> {
 public:
  using tsan_visible::tsan_visible;

  caf::behavior make_behavior() override {
    return {
        [this](enqueue_atom, std::vector<outgoing_message>& batch) {
          auto p = make_response_promise();
          if (answering_)
            p.deliver(std::vector<message_id>(batch.size()));
          else
            held_.push_back(p);
          return p;
        },
        [this](caf::ok_atom) {
          answering_ = true;
          for (auto& p : held_) p.deliver(std::vector<message_id>{});
          held_.clear();
        },
    };
  }

 private:
  std::vector<caf::response_promise> held_;
  bool answering_ = false;
};

TEST(blocking_client, a_call_not_answered_within_its_timeout_fails_unavailable_and_the_next_works) {
  threaded_system ts{2};
  auto& sys = ts.sys;
  auto holder = sys.spawn<holding_queue>();
  blocking_queue q{sys, caf::actor_cast<queue_api>(holder), 100ms};

  auto started = std::chrono::steady_clock::now();
  auto late = q.enqueue(msg("held"));
  auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(late.ok()) << "the queue never answered";
  EXPECT_EQ(late.err().code, errc::unavailable);
  EXPECT_NE(late.err().message.find("request_timeout"), std::string::npos) << late.err().message;
  EXPECT_GE(waited, 100ms) << "the call waits its whole timeout";
  EXPECT_LT(waited, 10s) << "and not much longer";

  // The held answer now goes to a caller that is gone; the next call is answered as usual.
  caf::anon_send(holder, caf::ok_atom_v);
  auto answered = q.enqueue({msg("a"), msg("b")});
  ASSERT_TRUE(answered.ok()) << to_string(answered.err());
  EXPECT_EQ(answered.value().size(), 2u);
  caf::anon_send_exit(holder, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace laneq
