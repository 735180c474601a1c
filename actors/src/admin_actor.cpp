// The admin actor (actors/include/laneq/actors/admin_actor.hpp).
#include "laneq/actors/admin_actor.hpp"

#include "laneq/actors/queue_actor.hpp"

namespace laneq {

admin_actor_impl::admin_actor_impl(caf::actor_config& cfg, admin_actor_config ac)
    : admin_actor::base(cfg), ac_(std::move(ac)) {}

void admin_actor_impl::on_exit() {
  for (auto& [name, e] : queues_) anon_send_exit(e.handle, caf::exit_reason::user_shutdown);
  queues_.clear();
  ac_.store = nullptr;
}

caf::result<queue_api> admin_actor_impl::find(const std::string& name) {
  auto it = queues_.find(name);
  if (it == queues_.end())
    return to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"});
  return queue_api{it->second.handle};
}

admin_actor_impl::behavior_type admin_actor_impl::make_behavior() {
  return {
      [this](create_atom, queue_spec& spec) -> caf::result<queue_api, bool> {
        auto errors = spec.validate();
        if (!errors.empty()) {
          std::string all;
          for (const auto& e : errors) {
            if (!all.empty()) all += "; ";
            all += e.message;
          }
          return to_caf(error{errc::invalid_spec, std::move(all)});
        }
        if (auto it = queues_.find(spec.name()); it != queues_.end()) {
          const auto& have = it->second.spec;
          if (have.same_definition(spec)) return {queue_api{it->second.handle}, false};
          std::string what =
              have.same_ordering(spec)
                  ? "settings differ (lease, max_attempts, throttles or hook)"
                  : "the ordering differs; the ordering key is fixed when a queue is "
                    "created (existing: " +
                        have.describe() + ")";
          return to_caf(error{errc::spec_conflict,
                              "queue '" + spec.name() + "' exists with another spec: " + what});
        }
        if (queues_.size() >= limits::queues_max)
          return to_caf(error{errc::limit_exceeded,
                              "at most " + std::to_string(limits::queues_max) + " queues"});
        auto store_key = spec.name() + "#" + std::to_string(next_uid_++);
        queue_actor_config qc{ac_.ctx, std::make_shared<queue_metrics>(), spec, ac_.store,
                              store_key};
        auto handle = spawn<queue_actor_impl>(std::move(qc));
        auto name = spec.name();  // copied: the entry below takes the spec by move
        queues_.emplace(std::move(name), entry{std::move(spec), handle, std::move(store_key)});
        return {queue_api{handle}, true};
      },
      [this](lookup_atom, const std::string& name) { return find(name); },
      [this](list_atom) {
        std::vector<std::string> names;
        for (const auto& [name, e] : queues_) names.push_back(name);
        return names;
      },
      [this](describe_atom, const std::string& name) -> caf::result<queue_description> {
        auto it = queues_.find(name);
        if (it == queues_.end())
          return to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"});
        auto promise = make_response_promise<queue_description>();
        auto summary = it->second.spec.describe();
        request(it->second.handle, caf::infinite, stats_atom_v)
            .then(
                [promise, summary](queue_stats& s) mutable {
                  promise.deliver(queue_description{summary, std::move(s)});
                },
                [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
        return promise;
      },
      [this](drop_atom, const std::string& name) -> caf::result<caf::ok_atom> {
        auto it = queues_.find(name);
        if (it == queues_.end())
          return to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"});
        anon_send_exit(it->second.handle, caf::exit_reason::user_shutdown);
        auto store_key = std::move(it->second.store_key);
        queues_.erase(it);
        return delegate(ac_.store, drop_atom_v, std::move(store_key));
      },
  };
}

}  // namespace laneq
