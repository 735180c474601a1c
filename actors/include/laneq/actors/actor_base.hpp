// actor_base.hpp: the base class of every laneq actor class, and `blocking_self`, the actor of a
// blocking caller. They only matter under ThreadSanitizer (preset tsan): Debian's CAF is not
// built with TSan, so the atomics with which its mailboxes and scheduler hand a message, or an
// actor, from one thread to the next are invisible to it, and every message would look like a
// data race. Each actor therefore tells TSan what CAF guarantees: its spawner's writes happen
// before its first run (launch releases), a send happens before the receiver handles the
// message (enqueue releases; each message handled, and each wake-up of a blocking caller,
// acquires), one run of an actor happens before its next one on any thread (resume releases at
// its end), and everything happens before the actor's destruction. Races in our own code,
// including state shared between actors outside messages, stay visible.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/scoped_execution_unit.hpp>

#if defined(__SANITIZE_THREAD__)
#define LANEQ_TSAN_ANNOTATE 1
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace laneq {

/// `Base` (a CAF actor base such as `some_actor::base`) with the happens-before edges CAF
/// provides made visible to ThreadSanitizer; identical to `Base` in other builds.
template <class Base>
class tsan_visible : public Base {
 public:
  using Base::Base;

#ifdef LANEQ_TSAN_ANNOTATE
  /// CAF calls this before the destructor, on the thread that dropped the last reference:
  /// acquire here, not in ~tsan_visible, which runs after the derived class's members are gone.
  void on_destroy() override {
    __tsan_acquire(this);
    Base::on_destroy();
  }

  void launch(caf::execution_unit* eu, bool lazy, bool hide) override {
    __tsan_release(this);
    Base::launch(eu, lazy, hide);
  }

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    __tsan_release(this);
    Base::enqueue(std::move(ptr), eu);
  }

  /// A message may arrive while the actor runs and be handled in the same run: acquire before
  /// each one, not only when the run starts. Release after each one too: once CAF marks the run
  /// over, another thread may start the next before `resume` below returns.
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    __tsan_acquire(this);
    auto result = Base::consume(x);
    __tsan_release(this);
    return result;
  }

  caf::resumable::resume_result resume(caf::execution_unit* eu, std::size_t max) override {
    __tsan_acquire(this);
    auto result = Base::resume(eu, max);
    __tsan_release(this);
    return result;
  }
#endif
};

/// The base class for the implementation of the typed actor `Handle`.
template <class Handle>
using actor_base = tsan_visible<typename Handle::base>;

#ifdef LANEQ_TSAN_ANNOTATE
namespace detail {

/// What `caf::scoped_actor` spawns (a blocking actor without a thread of its own, run by its
/// caller), with the edges above: a send to it releases, each wake-up to read its mailbox
/// acquires (CAF's receive waits in `await_data` before it reads the next messages).
class tsan_blocking_actor final : public caf::blocking_actor {
 public:
  using caf::blocking_actor::blocking_actor;

  ~tsan_blocking_actor() override { __tsan_acquire(this); }

  void act() override {}

  const char* name() const override { return "blocking_self"; }

  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    __tsan_release(this);
    caf::blocking_actor::enqueue(std::move(ptr), eu);
  }

  void await_data() override {
    caf::blocking_actor::await_data();
    __tsan_acquire(this);
  }

  bool await_data(timeout_type timeout) override {
    auto ready = caf::blocking_actor::await_data(timeout);
    __tsan_acquire(this);
    return ready;
  }
};

}  // namespace detail

/// `caf::scoped_actor` with a mailbox whose hand-over TSan sees (spawned and stopped as
/// CAF 0.17's scoped_actor does).
class blocking_self {
 public:
  explicit blocking_self(caf::actor_system& sys, bool hide = false) : context_(&sys) {
    caf::actor_config cfg{&context_};
    self_ = caf::make_actor<detail::tsan_blocking_actor, caf::strong_actor_ptr>(
        sys.next_actor_id(), sys.node(), &sys, cfg);
    if (!hide) ptr()->register_at_system();
    ptr()->initialize();
  }
  blocking_self(const blocking_self&) = delete;
  blocking_self& operator=(const blocking_self&) = delete;

  /// Its caller's last use happens before the actor's destruction, which may come later on
  /// another thread (an answer's promise can hold the last reference).
  ~blocking_self() {
    auto* x = ptr();
    if (!x->getf(caf::abstract_actor::is_terminated_flag))
      x->cleanup(caf::make_error(caf::exit_reason::normal), &context_);
    __tsan_release(x);
  }

  caf::blocking_actor* operator->() const { return ptr(); }
  caf::blocking_actor& operator*() const { return *ptr(); }

 private:
  detail::tsan_blocking_actor* ptr() const {
    return static_cast<detail::tsan_blocking_actor*>(caf::actor_cast<caf::abstract_actor*>(self_));
  }

  caf::scoped_execution_unit context_;
  caf::strong_actor_ptr self_;
};
#else
/// The actor of a blocking caller (see above: a different class only under TSan).
using blocking_self = caf::scoped_actor;
#endif

}  // namespace laneq
