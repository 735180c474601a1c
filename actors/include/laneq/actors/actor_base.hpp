// actor_base.hpp: the base class of every laneq actor class. It only matters under
// ThreadSanitizer (preset tsan): Debian's CAF is not built with TSan, so the atomics with which
// its mailboxes and scheduler hand a message, or an actor, from one thread to the next are
// invisible to it, and every message would look like a data race. Each actor therefore tells
// TSan what CAF guarantees: a send happens before the receiver's next run (enqueue releases,
// resume acquires), one run of an actor happens before its next one on any thread (resume
// releases at its end), and everything happens before the actor's destruction. A blocking caller
// (`scoped_actor`) cannot name the actor that answered it, so it acquires the end of every actor
// run so far (`received_blocking_answer`). Races in our own code, including state shared between
// actors outside messages, stay visible.
#pragma once

#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>

#if defined(__SANITIZE_THREAD__)
#define LANEQ_TSAN_ANNOTATE 1
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace laneq {

#ifdef LANEQ_TSAN_ANNOTATE
/// What every actor run releases at its end and a blocking caller acquires.
inline char tsan_runs_sync;
#endif

/// A blocking caller has received its answer (called right after a `scoped_actor`'s receive).
inline void received_blocking_answer() {
#ifdef LANEQ_TSAN_ANNOTATE
  __tsan_acquire(&tsan_runs_sync);
#endif
}

/// `Base` (a CAF actor base such as `some_actor::base`) with the happens-before edges CAF
/// provides made visible to ThreadSanitizer; identical to `Base` in other builds.
template <class Base>
class tsan_visible : public Base {
 public:
  using Base::Base;

#ifdef LANEQ_TSAN_ANNOTATE
  ~tsan_visible() override {
    __tsan_acquire(this);
  }

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    __tsan_release(this);
    Base::enqueue(std::move(ptr), eu);
  }

  caf::resumable::resume_result resume(caf::execution_unit* eu, std::size_t max) override {
    __tsan_acquire(this);
    auto result = Base::resume(eu, max);
    __tsan_release(this);
    __tsan_release(&tsan_runs_sync);
    return result;
  }
#endif
};

/// The base class for the implementation of the typed actor `Handle`.
template <class Handle>
using actor_base = tsan_visible<typename Handle::base>;

}  // namespace laneq
