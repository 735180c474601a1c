// A store for tests that fails writes on demand (storage_failed), to prove that nothing is
// acknowledged or lost when the store cannot make a write durable.
#pragma once

#include <atomic>
#include <memory>

#include "laneq/actors/protocol.hpp"

namespace laneq::test {

/// Switches shared between a test and its faulty_store.
struct store_faults {
  std::atomic<bool> fail_appends{false};
};

class faulty_store : public store_actor::base {
 public:
  faulty_store(caf::actor_config& cfg, std::shared_ptr<store_faults> faults)
      : store_actor::base(cfg), faults_(std::move(faults)) {}

  const char* name() const override { return "laneq.test.faulty_store"; }

  behavior_type make_behavior() override {
    return {
        [this](append_atom, const std::string&,
               const std::vector<message>&) -> caf::result<caf::ok_atom> {
          if (faults_->fail_appends.load())
            return to_caf(error{errc::storage_failed, "injected: the disk is full"});
          return caf::ok_atom_v;
        },
        [](remove_atom, const std::string&, const std::vector<message_id>&) {
          return caf::ok_atom_v;
        },
        [](dead_atom, const std::string&, const std::vector<dead_letter>&) {
          return caf::ok_atom_v;
        },
        [](drop_atom, const std::string&) { return caf::ok_atom_v; },
        [](stats_atom) { return caf::make_result(std::uint64_t{0}, std::uint64_t{0}); },
        [](commit_atom) {},
    };
  }

 private:
  std::shared_ptr<store_faults> faults_;
};

}  // namespace laneq::test
