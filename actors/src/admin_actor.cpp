// The admin actor (actors/include/laneq/actors/admin_actor.hpp).
#include "laneq/actors/admin_actor.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdlib>

#include "laneq/actors/gateway_actor.hpp"
#include "laneq/actors/shard_actor.hpp"
#include "laneq/codec.hpp"
#include "laneq/spec_json.hpp"

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
    : actor_base<admin_actor>(cfg),
      ac_(std::move(ac)),
      nonces_(ac_.ctx->seed, ac_.ctx->nonce_key) {}

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

bool admin_actor_impl::syncs(const queue_spec& spec) const {
#if LANEQ_CANARY_NO_SYNC
  // Canary (CMakeLists.txt, broker_power_loss_canary_no_sync_must_be_caught): the broker asks
  // the store for unsynced writes, which the broker power-loss test must catch.
  (void)spec;
  return false;
#else
  return ac_.sync && spec.syncs_writes();
#endif
}

std::size_t admin_actor_impl::budget_share(std::size_t extra) const {
  std::size_t shards = extra;
  for (const auto& [name, e] : queues_) shards += e.spec.shard_count();
  return ac_.window_budget_bytes / std::max<std::size_t>(1, shards);
}

void admin_actor_impl::share_budget() {
  auto share = static_cast<std::uint64_t>(budget_share());
  for (auto& [name, e] : queues_) send(e.handle, budget_atom_v, share);
}

shard_actor admin_actor_impl::spawn_shard(const queue_spec& spec, std::uint64_t uid,
                                          std::uint32_t index, bool hook_missing) {
  shard_config c;
  c.spec = spec;
  c.uid = uid;
  c.shard = index;
  c.sync = syncs(spec);
  c.window = ac_.group_window;
  c.window_max = ac_.group_window_max;
  c.window_budget_bytes = budget_share(spec.shard_count());
  c.epoch = epoch_;
  c.nonces = nonces_;
  c.reclaim_grace = ac_.reclaim_grace;
  c.store_retry = ac_.store_retry;
  c.hook_missing = hook_missing;
  return spawn<shard_actor_impl>(shard_actor_config{ac_.ctx, std::move(c), ac_.store});
}

queue_control admin_actor_impl::spawn_queue(const codec::queue_record& rec, bool hook_missing) {
  if (rec.spec.shard_count() <= 1) return spawn_shard(rec.spec, rec.uid, 0, hook_missing);
  // Shard 0 uses the queue's uid, the others theirs (docs/design/sharding.md): each shard's
  // records are its own uid's ranges.
  gateway_actor_config gc{ac_.ctx, rec.spec, {}};
  gc.shards.push_back(spawn_shard(rec.spec, rec.uid, 0, hook_missing));
  for (std::size_t i = 0; i < rec.shard_uids.size(); ++i)
    gc.shards.push_back(
        spawn_shard(rec.spec, rec.shard_uids[i], static_cast<std::uint32_t>(i + 1), hook_missing));
  return spawn<gateway_actor_impl>(std::move(gc));
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
              std::function<void(std::uint64_t)> then;
              void done() {
                if (--remaining > 0) return;
                if (failed)
                  promise.deliver(*failed);
                else
                  then(queues);
              }
            };
            auto g = std::make_shared<gather>();
            // The queues first, then the topics that name them.
            g->then = [this, promise](std::uint64_t queues) { recover_topics(promise, queues); };
            g->promise = promise;
            for (const auto& e : records) {
              auto q = codec::decode_queue(e.value);
              if (!q) {
                promise.deliver(to_caf(q.err()));
                return;
              }
              auto& rec = q.value();
              auto handle = spawn_queue(rec, rec.had_hook);
              auto name = rec.spec.name();
              queues_.emplace(name, entry{std::move(rec.spec), handle, rec.uid,
                                          std::move(rec.shard_uids), rec.had_hook});
              ++g->remaining;
              ++g->queues;
              request(handle, caf::infinite, recover_atom_v)
                  .then([g](caf::ok_atom) { g->done(); },
                        [g](caf::error& err) {
                          g->failed = std::move(err);
                          g->done();
                        });
            }
            share_budget();
            g->done();
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
}

void admin_actor_impl::recover_topics(caf::typed_response_promise<std::uint64_t> promise,
                                      std::uint64_t queues) {
  auto [from, to] = codec::tag_range(codec::tag::topic);
  request(ac_.store, caf::infinite, scan_atom_v, from, to, limits::store_scan_max)
      .then(
          [this, promise, queues](std::vector<store_entry>& records) mutable {
            for (const auto& e : records) {
              auto t = codec::decode_topic(e.value);
              if (!t) {
                promise.deliver(to_caf(t.err()));
                return;
              }
              for (const auto& q : t.value().queues()) topic_of_queue_[q] = t.value().name();
              auto name = t.value().name();
              topics_.emplace(std::move(name), std::move(t).value());
            }
            promise.deliver(queues);
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
}

caf::result<bool> admin_actor_impl::create_topic(topic_spec& spec) {
  auto errors = spec.validate();
  for (const auto& q : spec.queues()) {
    if (!queues_.contains(q))
      errors.push_back(error{errc::invalid_spec, "topic '" + spec.name() +
                                                     "': queues: no queue named '" + q +
                                                     "'; create it before the topic"});
    else if (auto it = topic_of_queue_.find(q);
             it != topic_of_queue_.end() && it->second != spec.name())
      errors.push_back(error{errc::invalid_spec, "topic '" + spec.name() + "': queues: queue '" +
                                                     q + "' is already a subscription of topic '" +
                                                     it->second + "'"});
  }
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) {
      if (!all.empty()) all += "; ";
      all += e.message;
    }
    return to_caf(error{errc::invalid_spec, std::move(all)});
  }
  if (auto it = topics_.find(spec.name()); it != topics_.end()) {
    if (it->second == spec) return false;
    auto list = [](const topic_spec& t) {
      std::string out;
      for (const auto& q : t.queues()) out += (out.empty() ? "" : ", ") + q;
      return "[" + out + "]";
    };
    return to_caf(error{errc::spec_conflict, "topic '" + spec.name() +
                                                 "' exists with other queues: queues differ "
                                                 "(existing " +
                                                 list(it->second) + ", requested " + list(spec) +
                                                 "); drop it first"});
  }
  if (topics_.size() >= limits::topics_max)
    return to_caf(
        error{errc::limit_exceeded, "at most " + std::to_string(limits::topics_max) + " topics"});
  auto name = spec.name();
  std::vector<store_op> ops{
      {store_op::kind::put, codec::topic_key(name), codec::encode_topic(spec)}};
  for (const auto& q : spec.queues()) topic_of_queue_[q] = name;
  topics_.emplace(name, std::move(spec));
  // The topic exists once it is stored; until then a second create finds it here.
  auto promise = make_response_promise<bool>();
  request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
      .then([promise](caf::ok_atom) mutable { promise.deliver(true); },
            [this, promise, name](caf::error& e) mutable {
              if (auto it = topics_.find(name); it != topics_.end()) {
                for (const auto& q : it->second.queues()) topic_of_queue_.erase(q);
                topics_.erase(it);
              }
              auto err = from_caf(e);
              if (err.code == errc::unavailable) err.code = errc::storage_failed;
              err.message = "topic '" + name + "': " + err.message;
              promise.deliver(to_caf(err));
            });
  return promise;
}

void admin_actor_impl::publish_next() {
  publishing_ = false;
  if (publishes_.empty()) return;
  auto f = std::move(publishes_.front());
  publishes_.pop_front();
  f();
}

/// What the queues of a topic enqueue prepared, gathered until the last one has answered.
struct admin_actor_impl::publish_gather {
  publish_promise promise;
  std::vector<topic_enqueued> out;
  std::vector<queue_control> prepared;
  std::vector<store_op> ops;
  bool sync = false;
  std::optional<caf::error> failed;
  std::size_t remaining = 0;
};

void admin_actor_impl::publish(const topic_spec& topic, std::vector<outgoing_message> batch,
                               publish_promise promise) {
  publishing_ = true;
  auto g = std::make_shared<publish_gather>();
  g->promise = promise;
  std::vector<queue_control> handles;
  bool needs_json = false;
  for (const auto& q : topic.queues()) {
    auto it = queues_.find(q);
    if (it == queues_.end()) {
      promise.deliver(to_caf(
          error{errc::queue_not_found, "topic '" + topic.name() + "': queue '" + q + "' is gone"}));
      publish_next();
      return;
    }
    handles.push_back(it->second.handle);
    needs_json = needs_json || it->second.spec.reads_json();
  }
  // One parse per message serves every key of every queue (lanes.md L2).
  std::vector<shared_json> parsed(batch.size());
  if (needs_json)
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].body.size() <= limits::body_bytes_max)
        parsed[i] = parse_body_json(batch[i].body);
  g->out.resize(handles.size());
  g->remaining = handles.size();
  auto finish = [this, g]() { publish_commit(g); };
  for (std::size_t i = 0; i < handles.size(); ++i) {
    auto name = topic.queues()[i];
    request(handles[i], caf::infinite, prepare_atom_v, batch, parsed)
        .then(
            [g, i, name, h = handles[i], finish](topic_prepared& p) {
              g->prepared.push_back(h);
              g->out[i] = topic_enqueued{name, std::move(p.ids)};
              for (auto& op : p.ops) g->ops.push_back(std::move(op));
              g->sync = g->sync || p.sync;
              if (--g->remaining == 0) finish();
            },
            [g, name, finish](caf::error& e) {
              if (!g->failed) {
                auto err = from_caf(e);
                err.message = "topic enqueue into queue '" + name + "': " + err.message;
                g->failed = to_caf(err);
              }
              if (--g->remaining == 0) finish();
            });
  }
}

void admin_actor_impl::publish_commit(const std::shared_ptr<publish_gather>& g) {
  // Each queue answers its settle once it has routed the messages; the client's answer waits
  // for all of them, so a receive sent after it finds the messages (docs/api.md, "Receive").
  auto settle = [this, g](bool ok) {
    auto unsettled = std::make_shared<std::size_t>(g->prepared.size());
    auto one_settled = [g, ok, unsettled] {
      if (--*unsettled == 0 && ok) g->promise.deliver(std::move(g->out));
    };
    for (auto& h : g->prepared)
      request(h, caf::infinite, settle_atom_v, ok)
          .then([one_settled](caf::ok_atom) { one_settled(); },
                [one_settled](caf::error&) { one_settled(); });  // stored all the same
  };
  if (g->failed) {
    settle(false);
    g->promise.deliver(std::move(*g->failed));
    publish_next();
    return;
  }
  // Every queue's messages in one write: all of them are committed, or none (lanes.md L10).
  request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(g->ops), g->sync})
      .then(
          [this, settle](caf::ok_atom) {
            settle(true);  // answers the client
            publish_next();
          },
          [this, g, settle](caf::error& e) {
            settle(false);
            auto err = from_caf(e);
            if (err.code == errc::unavailable) err.code = errc::storage_failed;
            err.message = "topic enqueue: " + err.message;
            g->promise.deliver(to_caf(err));
            publish_next();
          });
}

caf::result<std::vector<topic_enqueued>> admin_actor_impl::publish_to(
    const std::string& name, std::vector<outgoing_message>& batch) {
  auto it = topics_.find(name);
  if (it == topics_.end())
    return to_caf(error{errc::topic_not_found, "no topic named '" + name + "'"});
  auto promise = make_response_promise<std::vector<topic_enqueued>>();
  if (publishing_) {
    publishes_.push_back([this, name, batch = std::move(batch), promise]() mutable {
      auto t = topics_.find(name);
      if (t == topics_.end()) {
        promise.deliver(to_caf(error{errc::topic_not_found, "no topic named '" + name + "'"}));
        publish_next();
        return;
      }
      publish(t->second, std::move(batch), promise);
    });
    return promise;
  }
  publish(it->second, std::move(batch), promise);
  return promise;
}

caf::result<topic_spec> admin_actor_impl::find_topic(const std::string& name) const {
  auto it = topics_.find(name);
  if (it == topics_.end())
    return to_caf(error{errc::topic_not_found, "no topic named '" + name + "'"});
  return it->second;
}

caf::result<caf::ok_atom> admin_actor_impl::drop_topic(const std::string& name) {
  auto it = topics_.find(name);
  if (it == topics_.end())
    return to_caf(error{errc::topic_not_found, "no topic named '" + name + "'"});
  for (const auto& q : it->second.queues()) topic_of_queue_.erase(q);
  topics_.erase(it);
  auto promise = make_response_promise<caf::ok_atom>();
  std::vector<store_op> ops{{store_op::kind::erase, codec::topic_key(name), {}}};
  request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
      .then([promise](caf::ok_atom) mutable { promise.deliver(caf::ok_atom_v); },
            [promise, name](caf::error& e) mutable {
              auto err = from_caf(e);
              if (err.code == errc::unavailable) err.code = errc::storage_failed;
              err.message = "topic '" + name + "': " + err.message;
              promise.deliver(to_caf(err));
            });
  return promise;
}

caf::result<queue_api, bool> admin_actor_impl::create_queue(queue_spec& spec) {
  if (auto errors = spec.validate(); !errors.empty()) return to_caf(combine(errors));
  if (auto it = queues_.find(spec.name()); it != queues_.end()) {
    auto& have = it->second;
    // A queue recovered without its hook or key functions matches only a spec that
    // brings them back.
    bool incomplete = have.hook_missing || have.spec.functions_missing();
    if (!incomplete && have.spec.same_definition(spec)) return {queue_api{have.handle}, false};
    if (incomplete && (!have.hook_missing || spec.hook())) {
      // The same definition with the hook and functions brings them back.
      auto restored = have.spec;
      if (have.hook_missing) restored.on_enqueue(spec.hook());
      if (restored.restore_functions(spec) && restored.same_definition(spec)) {
        have.spec = spec;
        have.hook_missing = false;
        send(have.handle, create_atom_v, std::move(spec));
        return {queue_api{have.handle}, false};
      }
    }
    std::string what;
    for (const auto& d : have.spec.differences(spec)) what += (what.empty() ? "" : ", ") + d;
    if (!have.spec.same_ordering(spec))
      what +=
          "; the ordering key is fixed when a queue is created (existing: " + have.spec.describe() +
          ")";
    return to_caf(error{errc::spec_conflict, "queue '" + spec.name() +
                                                 "' exists with another spec: settings "
                                                 "differ: " +
                                                 what});
  }
  if (queues_.size() >= limits::queues_max)
    return to_caf(
        error{errc::limit_exceeded, "at most " + std::to_string(limits::queues_max) + " queues"});
  codec::queue_record rec{next_uid_++, spec, static_cast<bool>(spec.hook()), {}};
  for (std::uint32_t i = 1; i < spec.shard_count(); ++i) rec.shard_uids.push_back(next_uid_++);
  auto handle = spawn_queue(rec, false);
  auto name = spec.name();
  auto uid = rec.uid;
  std::vector<store_op> ops{{store_op::kind::put, codec::queue_key(uid), codec::encode_queue(rec)},
                            put_meta(meta_next_uid, next_uid_)};
  queues_.emplace(name, entry{std::move(spec), handle, uid, rec.shard_uids, false});
  share_budget();
  // The queue exists once its spec is stored; until then a second create finds it here.
  auto promise = make_response_promise<queue_api, bool>();
  request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
      .then([promise, handle](caf::ok_atom) mutable { promise.deliver(queue_api{handle}, true); },
            [this, promise, name, handle](caf::error& e) mutable {
              anon_send_exit(handle, caf::exit_reason::user_shutdown);
              if (auto it = queues_.find(name);
                  it != queues_.end() && it->second.handle == handle) {
                queues_.erase(it);
                share_budget();
              }
              promise.deliver(to_caf(storage_error(name, e)));
            });
  return promise;
}

caf::result<queue_spec> admin_actor_impl::update_queue(
    const std::string& name, const std::function<result<queue_spec>(const queue_spec&)>& make) {
  auto it = queues_.find(name);
  if (it == queues_.end())
    return to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"});
  auto& have = it->second;
  auto next = make(have.spec);
  if (!next) return to_caf(next.err());
  auto spec = std::move(next).value();
  if (have.spec.same_definition(spec)) return spec;  // nothing changes: nothing to write
  auto previous = have.spec;
  have.spec = spec;  // a second update builds on this one (it is stored before it)
  codec::queue_record rec{have.uid, spec, static_cast<bool>(spec.hook()) || have.hook_missing,
                          have.shard_uids};
  std::vector<store_op> ops{
      {store_op::kind::put, codec::queue_key(have.uid), codec::encode_queue(rec)}};
  auto promise = make_response_promise<queue_spec>();
  auto handle = have.handle;
  // Stored first: the shards apply settings a restart would find.
  request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
      .then(
          [this, promise, handle, spec](caf::ok_atom) mutable {
            request(handle, caf::infinite, update_atom_v, spec)
                .then([promise, spec](caf::ok_atom) mutable { promise.deliver(spec); },
                      [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
          },
          [this, promise, name, handle, previous, spec](caf::error& e) mutable {
            // Not stored: the queue keeps its settings (unless another update came meanwhile).
            if (auto q = queues_.find(name); q != queues_.end() && q->second.handle == handle &&
                                             q->second.spec.same_definition(spec))
              q->second.spec = previous;
            promise.deliver(to_caf(storage_error(name, e)));
          });
  return promise;
}

caf::result<queue_description> admin_actor_impl::describe_queue(const std::string& name) {
  auto it = queues_.find(name);
  if (it == queues_.end())
    return to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"});
  auto promise = make_response_promise<queue_description>();
  auto summary = it->second.spec.describe();
  auto spec_json = boost::json::serialize(queue_spec_to_json(it->second.spec));
  request(it->second.handle, caf::infinite, stats_atom_v)
      .then(
          [promise, summary, spec_json](queue_stats& s) mutable {
            promise.deliver(queue_description{summary, std::move(s), spec_json});
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
  return promise;
}

caf::result<caf::ok_atom> admin_actor_impl::drop_queue(const std::string& name, bool force) {
  auto it = queues_.find(name);
  if (it == queues_.end())
    return to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"});
  if (auto t = topic_of_queue_.find(name); t != topic_of_queue_.end())
    return to_caf(error{errc::invalid_argument, "queue '" + name +
                                                    "' is a subscription of topic '" + t->second +
                                                    "'; drop the topic first"});
  auto promise = make_response_promise<caf::ok_atom>();
  if (force) {
    drop_now(name, promise);
    return promise;
  }
  // Empty: no message waiting, delayed or in flight, no dead letter. Checked on the queue's
  // stats; the delete follows at once, in this actor's next step.
  auto handle = it->second.handle;
  request(handle, caf::infinite, stats_atom_v)
      .then(
          [this, name, handle, promise](queue_stats& s) mutable {
            auto again = queues_.find(name);
            if (again == queues_.end() || again->second.handle != handle) {
              promise.deliver(
                  to_caf(error{errc::queue_not_found, "no queue named '" + name + "'"}));
              return;
            }
            if (s.backlog > 0 || s.dead_letters > 0) {
              promise.deliver(to_caf(
                  error{errc::queue_not_empty,
                        "queue '" + name + "' is not empty: it holds " + std::to_string(s.backlog) +
                            " message(s) (" + std::to_string(s.in_flight) + " in flight) and " +
                            std::to_string(s.dead_letters) +
                            " dead letter(s); delete it with force to delete them too"}));
              return;
            }
            drop_now(name, promise);
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
  return promise;
}

void admin_actor_impl::drop_now(const std::string& name,
                                caf::typed_response_promise<caf::ok_atom> promise) {
  auto it = queues_.find(name);
  send_exit(it->second.handle, queue_deleted_reason(name));
  auto uids = it->second.shard_uids;
  uids.insert(uids.begin(), it->second.uid);
  queues_.erase(it);
  share_budget();
  // Every record of the incarnation, each shard's, in one write; its uids are never used
  // again.
  std::vector<store_op> ops;
  for (auto uid : uids)
    for (auto& [from, to] : codec::queue_ranges(uid))
      ops.push_back({store_op::kind::erase_range, std::move(from), std::move(to)});
  request(ac_.store, caf::infinite, write_atom_v, store_write{std::move(ops), true})
      .then([promise](caf::ok_atom) mutable { promise.deliver(caf::ok_atom_v); },
            [promise, name](caf::error& e) mutable {
              promise.deliver(to_caf(storage_error(name, e)));
            });
}

admin_actor_impl::behavior_type admin_actor_impl::make_behavior() {
  return {
      [this](create_atom, queue_spec& spec) { return create_queue(spec); },
      [this](lookup_atom, const std::string& name) { return find(name); },
      [this](list_atom) {
        std::vector<std::string> names;
        for (const auto& [name, e] : queues_) names.push_back(name);
        return names;
      },
      [this](describe_atom, const std::string& name) { return describe_queue(name); },
      [this](update_atom, queue_spec& requested) {
        auto name = requested.name();
        return update_queue(
            name, [&requested](const queue_spec& have) { return have.updated(requested); });
      },
      [this](update_atom, const std::string& name, const std::string& patch) {
        return update_queue(name, [&patch](const queue_spec& have) -> result<queue_spec> {
          boost::json::error_code ec;
          auto v = boost::json::parse(patch, ec);
          if (ec)
            return error{errc::invalid_spec, "queue '" + have.name() +
                                                 "': the settings are not valid JSON (" +
                                                 ec.message() + ")"};
          auto parsed = queue_spec_patched(have, v);
          if (!parsed.ok()) return combine(parsed.errors);
          return std::move(parsed.spec);
        });
      },
      [this](drop_atom, const std::string& name) { return drop_queue(name, false); },
      [this](drop_atom, const std::string& name, bool force) { return drop_queue(name, force); },
      [this](redrive_atom, const std::string& from, std::vector<message_id>& ids,
             const std::string& to) { return redrive_into(from, std::move(ids), to); },
      [this](recover_atom) { return recover(); },
      [this](create_atom, topic_spec& spec) { return create_topic(spec); },
      [this](topic_atom, lookup_atom, const std::string& name) { return find_topic(name); },
      [this](topic_atom, list_atom) {
        std::vector<topic_spec> out;
        for (const auto& [name, t] : topics_) out.push_back(t);
        return out;
      },
      [this](topic_atom, drop_atom, const std::string& name) { return drop_topic(name); },
      [this](publish_atom, const std::string& name, std::vector<outgoing_message>& batch) {
        return publish_to(name, batch);
      },
      [this](checkpoint_atom, std::string& dir) {
        return delegate(ac_.store, checkpoint_atom_v, std::move(dir));
      },
  };
}

}  // namespace laneq
