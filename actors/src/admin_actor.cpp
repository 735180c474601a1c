// The admin actor (actors/include/laneq/actors/admin_actor.hpp).
#include "laneq/actors/admin_actor.hpp"

#include "laneq/actors/queue_actor.hpp"
#include "laneq/actors/queue_storage.hpp"
#include "laneq/codec.hpp"

namespace laneq {

namespace {

constexpr std::string_view meta_epoch = "epoch";
constexpr std::string_view meta_next_uid = "next_uid";
constexpr std::string_view meta_nonce0 = "nonce_key0";
constexpr std::string_view meta_nonce1 = "nonce_key1";

store_op put_meta(std::string_view name, std::uint64_t value) {
  return {store_op::kind::put, codec::meta_key(name), codec::encode_u64(value)};
}

}  // namespace

admin_actor_impl::admin_actor_impl(caf::actor_config& cfg, admin_actor_config ac)
    : admin_actor::base(cfg), ac_(std::move(ac)), nonces_(ac_.ctx->seed, ac_.ctx->nonce_key) {}

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

queue_actor admin_actor_impl::spawn_queue(const queue_spec& spec, std::uint64_t uid,
                                          bool hook_missing) {
  auto st = std::make_shared<queue_storage>();
  st->uid = uid;
  st->name = spec.name();
  st->sync = ac_.sync && spec.syncs_writes();
  st->durable = spec.delivery_mode() == delivery_durability::durable;
  st->window = ac_.group_window;
  st->epoch = epoch_;
  st->nonces = nonces_;
  st->reclaim_grace = ac_.reclaim_grace;
  st->lease_default = spec.lease_duration();
  queue_actor_config qc{
      ac_.ctx, std::make_shared<queue_metrics>(), spec, ac_.store, std::move(st), hook_missing};
  return spawn<queue_actor_impl>(std::move(qc));
}

caf::result<std::uint64_t> admin_actor_impl::recover() {
  auto promise = make_response_promise<std::uint64_t>();
  auto [from, to] = codec::tag_range(codec::tag::meta);
  request(ac_.store, caf::infinite, scan_atom_v, from, to, limits::store_scan_max)
      .then(
          [this, promise](std::vector<store_entry>& meta) mutable {
            std::map<std::string, std::uint64_t> values;
            for (const auto& e : meta) {
              auto v = codec::decode_u64(e.value);
              if (!v) {
                promise.deliver(to_caf(v.err()));
                return;
              }
              values[e.key.substr(1)] = v.value();
            }
            auto get = [&values](std::string_view name, std::uint64_t fallback) {
              auto it = values.find(std::string{name});
              return it == values.end() ? fallback : it->second;
            };
            // A new run: lease nonces of this run differ from every earlier one, and tokens of
            // the previous run can still be recognized (reclaim).
            epoch_ = get(meta_epoch, 0) + 1;
            next_uid_ = get(meta_next_uid, 1);
            nonces_ =
                nonce_source{get(meta_nonce0, ac_.ctx->seed), get(meta_nonce1, ac_.ctx->nonce_key)};
            std::vector<store_op> ops{put_meta(meta_epoch, epoch_),
                                      put_meta(meta_next_uid, next_uid_),
                                      put_meta(meta_nonce0, get(meta_nonce0, ac_.ctx->seed)),
                                      put_meta(meta_nonce1, get(meta_nonce1, ac_.ctx->nonce_key))};
            request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
                .then([this, promise](caf::ok_atom) mutable { recover_queues(promise); },
                      [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
  return promise;
}

void admin_actor_impl::recover_queues(caf::typed_response_promise<std::uint64_t> promise) {
  auto [from, to] = codec::tag_range(codec::tag::queue);
  request(ac_.store, caf::infinite, scan_atom_v, from, to, limits::store_scan_max)
      .then(
          [this, promise](std::vector<store_entry>& records) mutable {
            struct gather {
              caf::typed_response_promise<std::uint64_t> promise;
              std::size_t remaining = 1;
              std::uint64_t queues = 0;
              std::optional<caf::error> failed;
              void done() {
                if (--remaining > 0) return;
                if (failed)
                  promise.deliver(*failed);
                else
                  promise.deliver(queues);
              }
            };
            auto g = std::make_shared<gather>();
            g->promise = promise;
            for (const auto& e : records) {
              auto q = codec::decode_queue(e.value);
              if (!q) {
                promise.deliver(to_caf(q.err()));
                return;
              }
              auto& rec = q.value();
              auto handle = spawn_queue(rec.spec, rec.uid, rec.had_hook);
              auto name = rec.spec.name();
              queues_.emplace(name, entry{std::move(rec.spec), handle, rec.uid, rec.had_hook});
              ++g->remaining;
              ++g->queues;
              request(handle, caf::infinite, recover_atom_v)
                  .then([g](caf::ok_atom) { g->done(); },
                        [g](caf::error& err) {
                          g->failed = std::move(err);
                          g->done();
                        });
            }
            g->done();
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
}

admin_actor_impl::behavior_type admin_actor_impl::make_behavior() {
  return {
      [this](create_atom, queue_spec& spec) -> caf::result<queue_api, bool> {
        if (auto errors = spec.validate(); !errors.empty()) return to_caf(combine(errors));
        if (auto it = queues_.find(spec.name()); it != queues_.end()) {
          auto& have = it->second;
          // A queue recovered without its hook matches only a spec that brings the hook back.
          if (!have.hook_missing && have.spec.same_definition(spec))
            return {queue_api{have.handle}, false};
          if (have.hook_missing && spec.hook()) {
            // Recovered without its hook: the same definition with a hook brings it back.
            auto without = have.spec;
            without.on_enqueue(spec.hook());
            if (without.same_definition(spec)) {
              have.spec = spec;
              have.hook_missing = false;
              send(have.handle, create_atom_v, std::move(spec));
              return {queue_api{have.handle}, false};
            }
          }
          std::string what =
              have.spec.same_ordering(spec)
                  ? "settings differ (lease, max_attempts, throttles, delivery, sync or hook)"
                  : "the ordering differs; the ordering key is fixed when a queue is "
                    "created (existing: " +
                        have.spec.describe() + ")";
          return to_caf(error{errc::spec_conflict,
                              "queue '" + spec.name() + "' exists with another spec: " + what});
        }
        if (queues_.size() >= limits::queues_max)
          return to_caf(error{errc::limit_exceeded,
                              "at most " + std::to_string(limits::queues_max) + " queues"});
        auto uid = next_uid_++;
        auto handle = spawn_queue(spec, uid, false);
        auto name = spec.name();
        codec::queue_record rec{uid, spec, static_cast<bool>(spec.hook())};
        std::vector<store_op> ops{
            {store_op::kind::put, codec::queue_key(uid), codec::encode_queue(rec)},
            put_meta(meta_next_uid, next_uid_)};
        queues_.emplace(name, entry{std::move(spec), handle, uid, false});
        // The queue exists once its spec is stored; until then a second create finds it here.
        auto promise = make_response_promise<queue_api, bool>();
        request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
            .then([promise,
                   handle](caf::ok_atom) mutable { promise.deliver(queue_api{handle}, true); },
                  [this, promise, name, handle](caf::error& e) mutable {
                    anon_send_exit(handle, caf::exit_reason::user_shutdown);
                    if (auto it = queues_.find(name);
                        it != queues_.end() && it->second.handle == handle)
                      queues_.erase(it);
                    promise.deliver(to_caf(storage_error(name, e)));
                  });
        return promise;
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
        auto uid = it->second.uid;
        queues_.erase(it);
        // Every record of the incarnation in one write; its uid is never used again.
        std::vector<store_op> ops{{store_op::kind::erase, codec::queue_key(uid), {}}};
        for (auto t :
             {codec::tag::counters, codec::tag::message, codec::tag::dead, codec::tag::lease}) {
          auto [from, to] = codec::queue_range(t, uid);
          ops.push_back({store_op::kind::erase_range, std::move(from), std::move(to)});
        }
        auto promise = make_response_promise<caf::ok_atom>();
        request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
            .then([promise](caf::ok_atom) mutable { promise.deliver(caf::ok_atom_v); },
                  [promise, name](caf::error& e) mutable {
                    promise.deliver(to_caf(storage_error(name, e)));
                  });
        return promise;
      },
      [this](recover_atom) { return recover(); },
  };
}

}  // namespace laneq
