// The harness's stores (tests/support/harness.hpp, harness_store): the simulation's store,
// rocksdb_mem, is the real persistence actor on RocksDB in memory, its restart is a power loss
// (tests/support/sim_store.hpp: what was synced survives, the write a crash lands on and unsynced
// writes do not), and a run on it is the same for the same seed and job order.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include "actor_test_helpers.hpp"

namespace laneq {
namespace {

using namespace std::chrono_literals;
using namespace test::actor_helpers;
using test::harness_store;
using test::with_grace;

queue_spec by_account(std::string name) {
  return queue_spec(std::move(name)).ordered_by({key::header("account")});
}

/// The live messages of the queue named `name` after a restart of `h` (which must bring back
/// exactly one queue).
std::uint64_t backlog_after_restart(harness& h, const std::string& name) {
  auto n = h.restart(with_grace(0s));
  EXPECT_TRUE(n.ok() && n.value() == 1) << (n.ok() ? "" : to_string(n.err()));
  auto q = h.lookup(name);
  EXPECT_TRUE(q.ok());
  if (!q.ok()) return 0;
  auto s = h.stats(q.value());
  EXPECT_TRUE(s.ok());
  return s.ok() ? s.value().backlog : 0;
}

TEST(HarnessStore, rocksdb_mem_is_the_persistence_actor_and_a_restart_recovers_through_it) {
  harness h{1, with_grace(0s), harness_store::rocksdb_mem};
  auto q = make_queue(h, by_account("q"));
  for (auto b : {"a1", "a2", "a3"}) put(h, q, in_account(b, "A"));
  put(h, q, in_account("b1", "B"));
  // A checkpoint is RocksDB's (the in-memory store has none); it also flushes the memtable, so
  // the restart reads table files as well as the WAL written after it.
  auto cp = h.ask<checkpoint_info>(h.brk().admin(), checkpoint_atom_v, "/laneq-sim/backup");
  ASSERT_TRUE(cp.ok()) << to_string(cp.err());
  EXPECT_GT(cp.value().files, 0u);
  auto first = take(h, q, 1, 60s);
  ASSERT_EQ(bodies(first), strings{"a1"});
  EXPECT_TRUE(h.ack(q, first.front().lease).ok());
  put(h, q, in_account("a4", "A"));

  EXPECT_EQ(backlog_after_restart(h, "q"), 4u);
  auto q2 = h.lookup("q").value();
  auto all = take(h, q2, 10, 60s);
  EXPECT_EQ(bodies(all), (strings{"a2", "b1"}));  // one in flight per group, in group order
}

TEST(HarnessStore, a_crash_loses_the_write_it_lands_on_on_rocksdb_mem_not_on_memory) {
  for (auto kind : {harness_store::rocksdb_mem, harness_store::memory}) {
    harness h{1, with_grace(0s), kind};
    auto q = make_queue(h, by_account("q"));
    put(h, q, in_account("answered", "A"));
    h.post(q, enqueue_atom_v, std::vector<outgoing_message>{in_account("in flight", "A")});
    // The crash comes before the enqueue is run: the queue takes it while the broker stops, and
    // its write reaches a store whose power is gone (rocksdb_mem), or one that outlives the
    // broker and commits it anyway (memory).
    bool real = kind == harness_store::rocksdb_mem;
    EXPECT_EQ(backlog_after_restart(h, "q"), real ? 1u : 2u) << (real ? "rocksdb_mem" : "memory");
  }
}

TEST(HarnessStore, a_crash_on_rocksdb_mem_is_a_power_loss_that_drops_unsynced_writes) {
  for (bool sync : {true, false}) {
    harness h{1, with_grace(0s), harness_store::rocksdb_mem};
    auto q = make_queue(h, by_account("q").sync_writes(sync));
    put(h, q, in_account("m1", "A"));
    put(h, q, in_account("m2", "B"));
    // Answered either way; only a synced write is on the disk when the power goes.
    EXPECT_EQ(backlog_after_restart(h, "q"), sync ? 2u : 0u) << "sync_writes " << sync;
  }
}

/// What a client sees in a short scripted run with the job order drawn from `seed`: ids, bodies,
/// lease tokens and deadlines, before and after a restart.
std::string script(std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  harness h{seed, with_grace(0s), harness_store::rocksdb_mem};
  h.shuffle_jobs(&rng);
  std::ostringstream out;
  auto q = make_queue(h, by_account("q"));
  for (int i = 0; i < 12; ++i)
    put(h, q, in_account("m" + std::to_string(i), "g" + std::to_string(i % 4)));
  auto log = [&out](const std::vector<delivery>& ds) {
    for (const auto& d : ds)
      out << d.msg.id.value << ':' << d.msg.body << ':' << d.lease.nonce << ':' << d.deadline.us
          << ' ';
    out << '|';
  };
  auto got = take(h, q, 3, 30s);
  log(got);
  if (!got.empty()) {
    EXPECT_TRUE(h.ack(q, got.front().lease).ok());
  }
  backlog_after_restart(h, "q");
  auto q2 = h.lookup("q").value();
  log(take(h, q2, 12, 30s));
  return out.str();
}

TEST(HarnessStore, rocksdb_mem_runs_the_same_for_the_same_seed) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    auto a = script(seed);
    EXPECT_EQ(a, script(seed)) << "seed " << seed;
    EXPECT_NE(a.find("m0"), std::string::npos) << a;
  }
}

}  // namespace
}  // namespace laneq
