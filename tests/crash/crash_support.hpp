// Shared pieces of the crash tests (tests/crash): a temporary directory (tests/support), an actor
// system on the normal threaded scheduler, and a blocking client that talks to the persistence
// actor only through the store protocol.
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

#include "laneq/actors/persistence.hpp"
#include "laneq/actors/protocol.hpp"
#include "temp_dir.hpp"

namespace laneq::test {

/// The actor system of a crash test: laneq's message types, the normal threaded scheduler.
struct crash_config : caf::actor_system_config {
  crash_config() {
    add_message_types<caf::id_block::laneq>();
    add_error_category(caf::atom("laneq"),
                       [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                         std::string out{to_string(static_cast<errc>(code))};
                         if (ctx.match_elements<std::string>())
                           out += ": " + ctx.get_as<std::string>(0);
                         return out;
                       });
    set("logger.verbosity", caf::atom("quiet"));
  }
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

/// A blocking client of one store actor. One per thread (it owns a scoped_actor).
class store_client {
 public:
  static constexpr std::chrono::seconds timeout{60};

  store_client(caf::actor_system& sys, store_actor store) : self_(sys), store_(std::move(store)) {}

  status write(std::vector<store_op> ops, bool sync = true) {
    status out = error{errc::unavailable, "no answer"};
    self_->request(store_, timeout, write_atom_v, store_write{std::move(ops), sync})
        .receive([&](caf::ok_atom) { out = ok_t{}; }, [&](caf::error& e) { out = from_caf(e); });
    return out;
  }

  result<std::vector<store_entry>> scan(std::string from, std::string to,
                                        std::uint32_t max = limits::store_scan_max) {
    result<std::vector<store_entry>> out = error{errc::unavailable, "no answer"};
    self_->request(store_, timeout, scan_atom_v, std::move(from), std::move(to), max)
        .receive([&](std::vector<store_entry>& xs) { out = std::move(xs); },
                 [&](caf::error& e) { out = from_caf(e); });
    return out;
  }

  result<checkpoint_info> checkpoint(std::string dir) {
    result<checkpoint_info> out = error{errc::unavailable, "no answer"};
    self_->request(store_, timeout, checkpoint_atom_v, std::move(dir))
        .receive([&](checkpoint_info& x) { out = std::move(x); },
                 [&](caf::error& e) { out = from_caf(e); });
    return out;
  }

  /// Every entry (keys in the tests are printable ASCII, below "\x7f").
  result<std::vector<store_entry>> scan_all() { return scan("", "\x7f"); }

  store_stats stats() {
    store_stats out;
    self_->request(store_, timeout, stats_atom_v)
        .receive([&](store_stats& s) { out = std::move(s); },
                 [&](caf::error& e) {
                   throw std::runtime_error("stats failed: " + to_string(from_caf(e)));
                 });
    return out;
  }

  /// Sends every write without waiting, then collects the answers in order: the writes queue up
  /// in the store's mailbox together, so they share batches.
  std::vector<status> write_many(std::vector<store_write> ws) {
    using handle = decltype(self_->request(store_, timeout, write_atom_v, store_write{}));
    std::vector<handle> handles;
    handles.reserve(ws.size());
    for (auto& w : ws)
      handles.push_back(self_->request(store_, timeout, write_atom_v, std::move(w)));
    std::vector<status> out;
    out.reserve(handles.size());
    for (auto& h : handles) {
      status st = error{errc::unavailable, "no answer"};
      h.receive([&](caf::ok_atom) { st = ok_t{}; }, [&](caf::error& e) { st = from_caf(e); });
      out.push_back(std::move(st));
    }
    return out;
  }

  caf::scoped_actor& self() { return self_; }
  const store_actor& store() const { return store_; }

 private:
  caf::scoped_actor self_;
  store_actor store_;
};

/// Stops the store actor and waits until it is gone (its database closed).
inline void stop(caf::actor_system& sys, const store_actor& store) {
  caf::scoped_actor self{sys};
  self->monitor(store);
  self->send_exit(store, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {});
}

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
