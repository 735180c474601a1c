// The in-memory store (actors/include/laneq/actors/memory_store.hpp).
#include "laneq/actors/memory_store.hpp"

namespace laneq {

memory_store_impl::memory_store_impl(caf::actor_config& cfg) : store_actor::base(cfg) {}

caf::result<caf::ok_atom> memory_store_impl::join_window() {
  // The window closes when the commit message, queued behind every write already in the
  // mailbox, is processed: all those writes share one commit.
  if (window_.empty()) send(caf::actor_cast<store_actor>(this), commit_atom_v);
  auto promise = make_response_promise<caf::ok_atom>();
  window_.push_back(promise);
  return promise;
}

memory_store_impl::behavior_type memory_store_impl::make_behavior() {
  return {
      [this](append_atom, const std::string& queue,
             std::vector<message>& msgs) -> caf::result<caf::ok_atom> {
        if (dropped_.count(queue))
          return to_caf(error{errc::queue_deleted, "the queue was deleted"});
        auto& q = queues_[queue];
        records_ += msgs.size();
        for (auto& m : msgs) {
          q.dead.erase(m.id);  // a redrive moves the message back
          auto id = m.id;
          q.live.insert_or_assign(id, std::move(m));
        }
        return join_window();
      },
      [this](remove_atom, const std::string& queue,
             const std::vector<message_id>& ids) -> caf::result<caf::ok_atom> {
        auto it = queues_.find(queue);
        if (it == queues_.end()) return caf::ok_atom_v;  // dropped: nothing left to remove
        records_ += ids.size();
        for (auto id : ids) it->second.live.erase(id);
        return caf::ok_atom_v;  // acks are not waited for: a lost ack means a redelivery
      },
      [this](dead_atom, const std::string& queue,
             std::vector<dead_letter>& dls) -> caf::result<caf::ok_atom> {
        auto it = queues_.find(queue);
        if (it == queues_.end()) return caf::ok_atom_v;  // dropped
        auto& q = it->second;
        records_ += dls.size();
        for (auto& dl : dls) {
          auto id = dl.msg.id;
          q.live.erase(id);
          q.dead.insert_or_assign(id, std::move(dl));
        }
        return caf::ok_atom_v;
      },
      [this](drop_atom, const std::string& queue) -> caf::result<caf::ok_atom> {
        queues_.erase(queue);
        dropped_.insert(queue);  // store keys are never reused (one per queue incarnation)
        return caf::ok_atom_v;
      },
      [this](stats_atom) { return caf::make_result(commits_, records_); },
      [this](commit_atom) {
        ++commits_;
        for (auto& p : window_) p.deliver(caf::ok_atom_v);
        window_.clear();
      },
  };
}

}  // namespace laneq
