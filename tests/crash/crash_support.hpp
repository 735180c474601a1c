// Shared pieces of the crash tests (tests/crash): a temporary directory (tests/support), an actor
// system on the normal threaded scheduler, and a blocking client that talks to the persistence
// actor only through the store protocol. The functions are compiled once, in crash_support.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "caf/all.hpp"

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/persistence.hpp"
#include "laneq/actors/protocol.hpp"
#include "temp_dir.hpp"

namespace laneq::test {

/// The actor system of a crash test: laneq's message types, the normal threaded scheduler.
struct crash_config : caf::actor_system_config {
  crash_config();
};

inline store_op put(std::string key, std::string value) {
  return store_op{store_op::kind::put, std::move(key), std::move(value)};
}
inline store_op erase(std::string key) {
  return store_op{store_op::kind::erase, std::move(key), {}};
}
inline store_op erase_range(std::string from, std::string to) {
  return store_op{store_op::kind::erase_range, std::move(from), std::move(to)};
}

/// A blocking client of one store actor. One per thread (it owns a blocking_self).
class store_client {
 public:
  static constexpr std::chrono::seconds timeout{60};

  store_client(caf::actor_system& sys, store_actor store) : self_(sys), store_(std::move(store)) {}

  status write(std::vector<store_op> ops, bool sync = true);

  result<std::vector<store_entry>> scan(std::string from, std::string to,
                                        std::uint32_t max = limits::store_scan_max);

  result<checkpoint_info> checkpoint(std::string dir);

  /// Every entry (keys in the tests are printable ASCII, below "\x7f").
  result<std::vector<store_entry>> scan_all() { return scan("", "\x7f"); }

  store_stats stats();

  /// Sends every write without waiting, then collects the answers in order: the writes queue up
  /// in the store's mailbox together, so they share batches.
  std::vector<status> write_many(std::vector<store_write> ws);

  blocking_self& self() { return self_; }
  const store_actor& store() const { return store_; }

 private:
  blocking_self self_;
  store_actor store_;
};

/// Stops the store actor and waits until it is gone (its database closed).
void stop(caf::actor_system& sys, const store_actor& store);

/// The seed of a randomized test: LANEQ_CRASH_SEED, or a fresh one.
inline std::uint64_t crash_seed() {
  if (const char* s = std::getenv("LANEQ_CRASH_SEED"); s && *s)
    return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

/// An integer from the environment, or `fallback`.
inline std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  if (const char* s = std::getenv(name); s && *s) return std::strtoull(s, nullptr, 10);
  return fallback;
}

}  // namespace laneq::test
