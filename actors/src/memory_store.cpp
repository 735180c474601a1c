// The in-memory store (actors/include/laneq/actors/memory_store.hpp).
#include "laneq/actors/memory_store.hpp"

#include <chrono>

#include "laneq/codec.hpp"

namespace laneq {

memory_store_impl::memory_store_impl(caf::actor_config& cfg)
    : actor_base<store_actor>(cfg), data_(codec::message_key_lane_prefix_bytes) {}

void memory_store_impl::apply(const store_op& op) {
  ++stats_.ops;
  stats_.bytes += op.key.size() + op.value.size();
  switch (op.what) {
    case store_op::kind::put: data_.put(op.key, op.value); break;
    case store_op::kind::erase: data_.erase(op.key); break;
    case store_op::kind::erase_range: data_.erase_range(op.key, op.value); break;
  }
}

void memory_store_impl::commit() {
  if (batch_.empty()) return;
  auto started = std::chrono::steady_clock::now();
  ++stats_.batches;
  stats_.count_batch(batch_.size());
  bool sync = false;
  for (auto& p : batch_) {
    sync = sync || p.write.sync;
    ++stats_.writes;
    each_op(p.write, [this](const store_op& op) {
      apply(op);
      return true;
    });
  }
  if (sync) ++stats_.syncs;
  stats_.count_commit(
      std::chrono::duration_cast<duration>(std::chrono::steady_clock::now() - started));
  for (auto& p : batch_) p.promise.deliver(caf::ok_atom_v);
  batch_.clear();
  ++generation_;
}

void memory_store_impl::on_exit() {
  if (fail_state() == caf::exit_reason::kill)
    batch_.clear();
  else
    commit();
  actor_base<store_actor>::on_exit();
}

memory_store_impl::behavior_type memory_store_impl::make_behavior() {
  return {
      [this](write_atom, store_write& w) -> caf::result<caf::ok_atom> {
        // The batch closes when the commit message, queued behind every write already in the
        // mailbox, is processed: all those writes share one commit.
        if (batch_.empty()) send(caf::actor_cast<store_actor>(this), commit_atom_v, generation_);
        auto promise = make_response_promise<caf::ok_atom>();
        batch_.push_back(pending{std::move(w), promise});
        if (batch_.size() >= limits::store_batch_writes_max) commit();
        return promise;
      },
      [this](scan_atom, const std::string& from, const std::string& to, std::uint32_t max) {
        return data_.scan(from, to, std::min(max, limits::store_scan_max));
      },
      [this](stats_atom) { return stats_; },
      [](checkpoint_atom, const std::string& dir) -> caf::result<checkpoint_info> {
        return to_caf(error{
            errc::checkpoint_failed,
            "checkpoint '" + dir + "': the broker has no data directory (an in-memory store)"});
      },
      [this](commit_atom, std::uint64_t generation) {
        if (generation == generation_) commit();
      },
      [](reopen_atom) {},
  };
}

}  // namespace laneq
