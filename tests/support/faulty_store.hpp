// A store for tests that fails writes on demand (storage_failed), to prove that nothing is
// acknowledged or lost when the store cannot make a write durable, or leaves them unanswered (a
// store that hangs). Everything else is passed to an in-memory store.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/memory_store.hpp"
#include "laneq/actors/protocol.hpp"

namespace laneq::test {

/// Switches shared between a test and its faulty_store.
struct store_faults {
  std::atomic<bool> fail_appends{false};  ///< fail every write while set
  /// Answer no write while set: they wait, and are written and answered, in order, before the
  /// next write that comes once it is clear (a store that hung and is back).
  std::atomic<bool> hold_appends{false};
};

class faulty_store : public actor_base<store_actor> {
 public:
  faulty_store(caf::actor_config& cfg, std::shared_ptr<store_faults> faults)
      : actor_base<store_actor>(cfg), faults_(std::move(faults)) {}

  const char* name() const override { return "laneq.test.faulty_store"; }
  void on_exit() override {
    held_.clear();  // the promises hold this actor and their requesters
    anon_send_exit(inner_, caf::exit_reason::user_shutdown);
    inner_ = nullptr;
  }

  behavior_type make_behavior() override {
    inner_ = spawn<memory_store_impl>();
    return {
        [this](write_atom, store_write& w) -> caf::result<caf::ok_atom> {
          if (faults_->fail_appends.load())
            return to_caf(error{errc::storage_failed, "injected: the disk is full"});
          if (faults_->hold_appends.load()) {
            held_.push_back(held_write{make_response_promise<caf::ok_atom>(), std::move(w)});
            return held_.back().promise;
          }
          for (auto& h : held_)
            request(inner_, caf::infinite, write_atom_v, std::move(h.write))
                .then([p = h.promise](caf::ok_atom) mutable { p.deliver(caf::ok_atom_v); },
                      [p = h.promise](caf::error& e) mutable { p.deliver(std::move(e)); });
          held_.clear();
          return delegate(inner_, write_atom_v, std::move(w));
        },
        [this](scan_atom, std::string& from, std::string& to, std::uint32_t max) {
          return delegate(inner_, scan_atom_v, std::move(from), std::move(to), max);
        },
        [this](stats_atom) { return delegate(inner_, stats_atom_v); },
        [this](checkpoint_atom, std::string& dir) {
          return delegate(inner_, checkpoint_atom_v, std::move(dir));
        },
        [](commit_atom, std::uint64_t) {},
        [](reopen_atom) {},
    };
  }

 private:
  std::shared_ptr<store_faults> faults_;
  store_actor inner_;
  struct held_write {
    caf::typed_response_promise<caf::ok_atom> promise;
    store_write write;
  };
  std::vector<held_write> held_;
};

}  // namespace laneq::test
