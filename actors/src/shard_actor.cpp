// The shard actor (actors/include/laneq/actors/shard_actor.hpp).
#include "laneq/actors/shard_actor.hpp"

#include <iostream>

namespace laneq {

namespace {

/// Delivers `a` to `p` when `p` answers that type; an error to any promise.
template <class T>
void deliver(caf::typed_response_promise<T>& p, engine_answer& a) {
  if (auto* e = std::get_if<error>(&a)) {
    p.deliver(to_caf(*e));
  } else if constexpr (std::is_same_v<T, caf::ok_atom>) {
    LANEQ_ASSERT(std::holds_alternative<ok_t>(a), "an ok_atom request is answered ok");
    p.deliver(caf::ok_atom_v);
  } else {
    auto* v = std::get_if<T>(&a);
    LANEQ_ASSERT(v, "a request is answered with its type");
    p.deliver(std::move(*v));
  }
}

}  // namespace

shard_actor_impl::shard_actor_impl(caf::actor_config& cfg, shard_actor_config sc)
    : actor_base<shard_actor>(cfg), sc_(std::move(sc)), engine_(sc_.engine) {}

void shard_actor_impl::on_exit() {
  // Every request still waiting is answered: the queue was deleted, or the broker stops.
  engine_.stop(stopped_queue_error(fail_state(), sc_.engine.spec.name()));
  auto fx = engine_.take_effects();
  for (auto& r : fx.replies) answer(r);
  for (auto& [id, p] : promises_)  // none should be left; never leave a caller hanging
    std::visit(
        [](auto& x) {
          x.deliver(to_caf(error{errc::unavailable, "the queue stopped"}));
        },
        p);
  promises_.clear();
  sc_.store = nullptr;
}

template <class T>
std::pair<request_id, caf::typed_response_promise<T>> shard_actor_impl::open() {
  auto p = make_response_promise<T>();
  auto id = next_request_++;
  promises_.emplace(id, p);
  return {id, p};
}

void shard_actor_impl::answer(engine_reply& r) {
  auto it = promises_.find(r.to);
  if (it == promises_.end()) return;
  std::visit([&r](auto& p) { deliver(p, r.value); }, it->second);
  promises_.erase(it);
}

void shard_actor_impl::write(engine_write w) {
  request(sc_.store, caf::infinite, write_atom_v, std::move(w.write))
      .then(
          [this, id = w.id](caf::ok_atom) {
            engine_.on_written(id, std::nullopt, now());
            flush();
          },
          [this, id = w.id](caf::error& e) {
            engine_.on_written(id, from_caf(e), now());
            flush();
          });
}

void shard_actor_impl::read(engine_read r) {
  request(sc_.store, caf::infinite, scan_atom_v, std::move(r.from), std::move(r.to), r.max)
      .then(
          [this, id = r.id](std::vector<store_entry>& page) {
            engine_.on_read(id, std::move(page), now());
            flush();
          },
          [this, id = r.id](caf::error& e) {
            engine_.on_read(id, from_caf(e), now());
            flush();
          });
}

void shard_actor_impl::flush() {
  auto fx = engine_.take_effects();
  // Writes first, in the engine's order: a reply never overtakes the write it follows.
  for (auto& w : fx.writes) write(std::move(w));
  for (auto& r : fx.reads) read(std::move(r));
  for (auto& r : fx.replies) answer(r);
  for (const auto& line : fx.log) std::cerr << "laneq.shard: " << line << "\n";
  if (fx.failed) {
    quit(to_caf(*fx.failed));
    return;
  }
  if (fx.wake) timer_.arm(this, tick_atom_v, *fx.wake, now());
#ifndef NDEBUG
  engine_.check_invariants();
#endif
}

// Long: one short handler per message of shard_actor (protocol.hpp); a table, not logic.
shard_actor_impl::behavior_type shard_actor_impl::make_behavior() {
  return {
      [this](enqueue_atom, std::vector<outgoing_message>& batch) {
        auto [id, p] = open<std::vector<message_id>>();
        engine_.enqueue(id, std::move(batch), now());
        flush();
        return p;
      },
      [this](receive_atom, const receive_request& req) {
        auto [id, p] = open<std::vector<delivery>>();
        engine_.receive(id, req, now());
        flush();
        return p;
      },
      [this](ack_atom, const std::vector<lease_token>& leases) {
        auto [id, p] = open<std::vector<lease_outcome>>();
        engine_.ack(id, leases, now());
        flush();
        return p;
      },
      [this](ack_atom, const lease_token& l, std::uint32_t count) {
        auto [id, p] = open<std::uint64_t>();
        engine_.ack(id, l, count, now());
        flush();
        return p;
      },
      [this](nack_atom, const lease_token& l, const nack_request& req) {
        auto [id, p] = open<caf::ok_atom>();
        engine_.nack(id, l, req, now());
        flush();
        return p;
      },
      [this](extend_atom, const lease_token& l, std::int64_t by_us) {
        auto [id, p] = open<timestamp>();
        engine_.extend(id, l, by_us, now());
        flush();
        return p;
      },
      [this](watch_atom, timestamp deadline) {
        auto [id, p] = open<std::uint64_t>();
        engine_.watch(id, deadline, now());
        flush();
        return p;
      },
      [this](dlq_atom, std::uint32_t max) {
        auto [id, p] = open<std::vector<dead_letter>>();
        engine_.dead_letters(id, max, now());
        flush();
        return p;
      },
      [this](redrive_atom, const std::vector<message_id>& ids) {
        auto [id, p] = open<std::uint64_t>();
        engine_.redrive(id, ids, now());
        flush();
        return p;
      },
      [this](dlq_atom, const std::vector<message_id>& ids) {
        auto [id, p] = open<std::vector<dead_letter>>();
        engine_.dead_letters(id, ids, now());
        flush();
        return p;
      },
      [this](dlq_atom, drop_atom, const std::vector<message_id>& ids) {
        auto [id, p] = open<std::uint64_t>();
        engine_.delete_dead_letters(id, ids, now());
        flush();
        return p;
      },
      [this](purge_atom, const group_filter& which) {
        auto [id, p] = open<std::uint64_t>();
        engine_.purge(id, which, now());
        flush();
        return p;
      },
      [this](peek_atom, const peek_request& req) {
        auto [id, p] = open<std::vector<peeked_message>>();
        engine_.peek(id, req, now());
        flush();
        return p;
      },
      [this](stats_atom) { return engine_.stats(now()); },
      [this](groups_atom, const groups_query& q) -> caf::result<groups_page> {
        auto page = engine_.groups(q, now());
        if (!page) return to_caf(page.err());
        return std::move(page).value();
      },
      [this](recover_atom) {
        auto [id, p] = open<caf::ok_atom>();
        engine_.recover(id, now());
        flush();
        return p;
      },
      [this](create_atom, queue_spec& spec) {
        engine_.adopt(std::move(spec), now());
        flush();
      },
      [this](update_atom, queue_spec& spec) {
        engine_.update(std::move(spec), now());
        flush();
        return caf::ok_atom_v;
      },
      [this](prepare_atom, std::vector<outgoing_message>& batch,
             std::vector<shared_json>& parsed) -> caf::result<topic_prepared> {
        auto prepared = engine_.prepare(std::move(batch), parsed, now());
        flush();
        if (!prepared) return to_caf(prepared.err());
        return std::move(prepared).value();
      },
      [this](settle_atom, bool committed) {
        auto [id, p] = open<caf::ok_atom>();
        engine_.settle(id, committed, now());
        flush();
        return p;
      },
      [this](budget_atom, std::uint64_t bytes) { engine_.set_window_budget(bytes); },
      [this](tick_atom, std::uint64_t generation) {
        if (!timer_.fire(generation)) return;
        engine_.tick(now());
        flush();
      },
  };
}

}  // namespace laneq
