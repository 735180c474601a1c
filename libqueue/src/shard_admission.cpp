// Admission: what a shard does with an enqueued batch before it stores it (docs/design/lanes.md
// L1-L8): the checks, the on_enqueue hook, the dedupe window, the placement of each message in
// its ordering group and store lane, and its id and arrival seq.
#include "laneq/message_checks.hpp"
#include "shard_parts.hpp"

namespace laneq {

namespace {

error limit(const std::string& what) {
  return error{errc::limit_exceeded, what};
}

/// The on_enqueue hook's attributes for `m`, checked against the limits.
result<std::vector<attribute>> run_hook(const queue_spec& spec, const message& m, std::size_t i) {
  auto attrs = spec.hook()(m);
  if (!attrs)
    return error{errc::enqueue_rejected, "queue '" + spec.name() + "': " + message_field(i, "") +
                                             " rejected by on_enqueue: " + attrs.err().message};
  if (attrs.value().size() > limits::attributes_max)
    return limit("queue '" + spec.name() + "': on_enqueue returned more than " +
                 std::to_string(limits::attributes_max) + " attributes");
  for (const auto& a : attrs.value())
    if (a.name.size() > limits::key_component_name_bytes_max ||
        a.value.size() > limits::header_value_bytes_max)
      return limit("queue '" + spec.name() + "': on_enqueue returned attribute '" +
                   a.name.substr(0, 64) + "' longer than allowed (name at most " +
                   std::to_string(limits::key_component_name_bytes_max) + " bytes, value at most " +
                   std::to_string(limits::header_value_bytes_max) + ")");
  return attrs;
}

/// Why the queue cannot take enqueues yet, if it cannot.
std::optional<error> not_ready(const queue_spec& spec, bool hook_missing) {
  if (hook_missing)
    return error{errc::enqueue_rejected,
                 "queue '" + spec.name() +
                     "' was recovered without its on_enqueue hook; create it again with the hook "
                     "before enqueueing"};
  if (spec.functions_missing())
    return error{errc::enqueue_rejected,
                 "queue '" + spec.name() +
                     "' was recovered without its key functions; create it again with them "
                     "before enqueueing"};
  return std::nullopt;
}

}  // namespace

error storage_failure(const std::string& queue, error e) {
  if (e.code == errc::unavailable) e.code = errc::storage_failed;
  e.message = "queue '" + queue + "': " + e.message;
  return e;
}

result<shard_engine::admitted> shard_engine::admit(std::vector<outgoing_message>& batch,
                                                   timestamp t,
                                                   const std::vector<shared_json>* parsed) {
  const auto& spec = cfg_.spec;
  if (auto err = check_batch(batch)) return *err;
  if (auto err = not_ready(spec, cfg_.hook_missing)) return *err;
  admitted out;
  dedupe_.expire(t);
  const auto& rule = spec.dedupe_rule();
  bool dedupe_after_hook = false;
  if (rule)
    for (const auto& c : rule->key)
      dedupe_after_hook = dedupe_after_hook || c.which() == key_component::kind::attribute;
  out.batch.reserve(batch.size());
  out.ids.reserve(batch.size());
  std::uint64_t missing_total = 0;
  std::uint64_t stored = 0;
  auto fail = [&](error err) -> result<admitted> {
    for (const auto& k : out.new_keys) dedupe_.forget(k);  // the window forgets this batch
    counters_.key_missing += missing_total;
    return err;
  };
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& in = batch[i];
    message m;
    m.body = std::move(in.body);
    m.headers = std::move(in.headers);
    m.fairness_key = std::move(in.fairness_key);
    m.enqueued_at = t;
    m.delay_until = t + in.delay;
    m.not_before = m.delay_until;
    // The hook sees the id and seq the message gets if the batch is accepted (queue_spec.hpp);
    // they are committed below only then, so a rejected batch leaves no gap.
    m.id = message_id{next_id_ + stored};
    m.seq = message_seq{next_seq_ + stored};
    // Every key of this queue reads one source: the body is parsed once (lanes.md L2).
    key_source src = parsed ? key_source{m, (*parsed)[i]} : key_source{m};
    std::optional<std::string> dkey;
    auto duplicate = [&]() {
      if (!rule) return false;
      dkey = dedupe_key(spec, src);
      if (!dkey) return false;
      auto hit = dedupe_.find(*dkey, t);
      if (!hit) return false;
      out.ids.push_back(hit->id);
      if (!hit->confirmed) out.waits_on.push_back(*dkey);
      ++out.duplicates;
      return true;
    };
    if (!dedupe_after_hook && duplicate()) continue;
    if (spec.hook()) {
      auto attrs = run_hook(spec, m, i);
      if (!attrs) return fail(attrs.err());
      m.attributes = std::move(attrs).value();
    }
    if (dedupe_after_hook && duplicate()) continue;
    bool missing = false;
    auto where = place(spec, src, &missing);
    if (missing) ++missing_total;
    if (!where) {
      auto err = where.err();
      err.message = message_field(i, "") + ": " + err.message;
      return fail(std::move(err));
    }
    // The lane is fixed; only the headers the queue stores reach the store (lanes.md L7).
    m.headers = spec.stored_headers(std::move(m.headers));
    if (dkey) {
      auto expires = t + rule->window;
      dedupe_.add(*dkey, m.id, expires);
      out.ops.push_back(store_op{store_op::kind::put, codec::dedupe_key(cfg_.uid, *dkey),
                                 codec::encode_dedupe(codec::dedupe_record{m.id, expires})});
      out.new_keys.push_back(std::move(*dkey));
    }
    out.ids.push_back(m.id);
    group_id live;
    auto lane = lane_of(where.value(), m, &live);
    out.batch.push_back(placed{std::move(m), std::move(where).value(), lane, live});
    ++stored;
  }
  if (auto full = over_depth(out.batch)) {
    ++counters_.refused_full;
    return fail(std::move(*full));
  }
  std::uint64_t bytes = 0;
  for (const auto& p : out.batch) bytes += p.msg.body.size();
  admitting_ += out.batch.size();
  admitting_bytes_ += bytes;
  counters_.key_missing += missing_total;
  // Ids and seqs only once the whole batch is accepted: a rejected batch leaves no gap.
  next_id_ += stored;
  next_seq_ += stored;
  // Entries that expired or were evicted lose their records with this write (after a refused
  // batch they wait for the next one).
  for (auto& key : dedupe_.take_erasures())
    out.ops.push_back(store_op{store_op::kind::erase, codec::dedupe_key(cfg_.uid, key), {}});
  return out;
}

void shard_engine::settle_dedupe(const admitted& a, bool committed) {
  for (const auto& key : a.new_keys) {
    if (committed)
      dedupe_.confirm(key);
    else
      dedupe_.forget(key);  // nothing was stored: a retry is a new message
  }
}

codec::lane_id shard_engine::lane_of(const placement& where, const message& m,
                                     group_id* live) const {
  if (!where.ordered) return class_lane_of(m);
  if (auto it = group_by_key_.find(where.group_key); it != group_by_key_.end()) {
    if (live) *live = it->second->state.id();
    return it->second->lane;  // a live group knows its lane: one hash per group
  }
  return codec::make_lane_id(cfg_.spec.name(), where.group_key);
}

placement shard_engine::stored_placement(const message& m, const codec::lane_id& lane) const {
  if (lane.unordered()) return placement{};  // stored before classes of unordered messages
  auto where = place(cfg_.spec, m);
  if (where && lane_of(where.value(), m) == lane)
    return std::move(where).value();  // its group's lane, or its class's (unordered)
  // A key function that answers otherwise now, or read a header the queue does not store: the
  // message keeps its lane, named by a key no placement produces ("\xFE" + lane id).
  std::string key(1, '\xFE');
  key.append(lane.bytes.begin(), lane.bytes.end());
  auto label = where && where.value().ordered ? std::move(where.value().ordering_key)
                                              : tenant_queue(cfg_.spec.name());
  return placement{true, std::move(key), std::move(label)};
}

std::uint64_t shard_engine::depth_messages() const {
  const auto& c = counters_;
  auto in = c.recovered + c.enqueued + c.redriven;
  auto out = c.acked + c.dead_lettered + c.purged + c.expired_dropped;
  return in > out ? in - out : 0;
}

void shard_engine::release_bytes(std::uint64_t bytes) {
  depth_bytes_ -= std::min(depth_bytes_, bytes);
  if (depth_messages() == 0) depth_bytes_ = 0;  // exact again (after purges, estimated)
}

void shard_engine::release_purged_bytes(std::uint64_t n) {
  auto before = depth_messages();
  if (n >= before)
    depth_bytes_ = 0;
  else
    depth_bytes_ -= std::min(depth_bytes_, depth_bytes_ / before * n);
}

std::optional<error> shard_engine::over_depth(const std::vector<placed>& batch) const {
  const auto& max = cfg_.spec.depth_max();
  if (!max.any() || batch.empty()) return std::nullopt;
  // A sharded queue: each shard holds at most its share (docs/api.md "Backpressure").
  const std::uint64_t shards = cfg_.spec.shard_count();
  auto share = [shards](std::uint64_t total) { return (total + shards - 1) / shards; };
  std::uint64_t bytes = 0;
  for (const auto& p : batch) bytes += p.msg.body.size();
  auto full = [&](const char* field, std::uint64_t have, std::uint64_t adds, std::uint64_t bound) {
    auto per_shard = shards > 1 ? " (" + std::to_string(share(bound)) + " on each of its " +
                                      std::to_string(shards) + " shards)"
                                : std::string{};
    return error{errc::queue_full, "queue '" + cfg_.spec.name() + "' is full: max_depth." + field +
                                       " is " + std::to_string(bound) + per_shard + ", it holds " +
                                       std::to_string(have) + " and the batch adds " +
                                       std::to_string(adds) + "; nothing was stored, retry later"};
  };
  auto n = depth_messages() + admitting_;
  if (max.messages && n + batch.size() > share(*max.messages))
    return full("messages", n, batch.size(), *max.messages);
  auto b = depth_bytes_ + admitting_bytes_;
  if (max.bytes && b + bytes > share(*max.bytes)) return full("bytes", b, bytes, *max.bytes);
  return std::nullopt;
}

void shard_engine::admitted_settled(const admitted& a, bool durable) {
  std::uint64_t bytes = 0;
  for (const auto& p : a.batch) bytes += p.msg.body.size();
  admitting_ -= std::min<std::uint64_t>(admitting_, a.batch.size());
  admitting_bytes_ -= std::min(admitting_bytes_, bytes);
  if (durable) depth_bytes_ += bytes;
}

store_op shard_engine::counters_op() const {
  codec::counters_record c{next_id_, next_seq_, next_dead_};
  return store_op{store_op::kind::put, codec::counters_key(cfg_.uid), codec::encode_counters(c)};
}

}  // namespace laneq
