// Test support: a whole broker on the fault-injecting file system (fault_fs.hpp), with no
// reclaim grace and a quick store reopen, for the crash tests that drive faults through the
// broker (broker_fault_test.cpp, store_retry_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "crash_support.hpp"
#include "fault_fs.hpp"
#include "laneq/actors/broker.hpp"

namespace laneq::test {

/// A fixture (on `Base`, e.g. a parameterized test) holding the data directory, the fault
/// file system and the actor system; `options()` opens a broker on them.
template <class Base = ::testing::Test>
class fault_broker_test : public Base {
 protected:
  broker_options options() {
    using namespace std::chrono_literals;
    broker_options opts;
    opts.data_dir = dir_.sub("db");
    opts.reclaim_grace = duration{0};
    opts.persistence.env = make_env(fs_);
    opts.persistence.reopen_interval = 50ms;
    return opts;
  }

  temp_dir dir_;
  std::shared_ptr<fault_fs> fs_ = std::make_shared<fault_fs>();
  crash_config cfg_;
  caf::actor_system sys_{cfg_};
};

}  // namespace laneq::test
