// tsan_canary.cpp: the ThreadSanitizer canary (preset tsan, tests/README.md). Two actors built
// like laneq's (tsan_visible, actors/include/laneq/actors/actor_base.hpp) write one counter
// outside any message, the kind of bug TSan runs in CI to find. The ctest test
// tsan_canary_must_be_caught passes only if TSan reports the race, so TSAN_OPTIONS, a
// suppression or an annotation that hid our own races would fail CI.
#include <caf/all.hpp>

#include "laneq/actors/actor_base.hpp"

namespace {

int shared_counter = 0;  // written by both actors, with nothing ordering the writes: the race

class writer : public laneq::tsan_visible<caf::event_based_actor> {
 public:
  explicit writer(caf::actor_config& cfg) : tsan_visible<caf::event_based_actor>(cfg) {}

  caf::behavior make_behavior() override {
    return {[](int n) {
      for (int i = 0; i < n; ++i) ++shared_counter;
    }};
  }
};

}  // namespace

int main() {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  // Detached: each actor has a thread of its own, so the writes always come from two threads
  // (on the shared workers both could run on one, and TSan would rightly see no race).
  auto a = sys.spawn<writer, caf::detached>();
  auto b = sys.spawn<writer, caf::detached>();
  for (int i = 0; i < 100; ++i) {
    caf::anon_send(a, 1'000);
    caf::anon_send(b, 1'000);
  }
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  return 0;
}
