// Round-robin fair scheduler with delays and throttles (libqueue/include/laneq/fair_scheduler.hpp).
#include "laneq/fair_scheduler.hpp"

#include <algorithm>
#include <functional>
#include <queue>

#include "laneq/assert.hpp"
#include "laneq/key.hpp"

namespace laneq {

namespace {

struct entry {
  ready_item item;
  std::vector<std::string> buckets;  // one per throttle: "<index>/<encoded key>"
  timestamp wake;                    // when waiting: the time it may become ready
  timestamp since;                   // when it started waiting
  bool throttled = false;
};

// Min-heap orders.
struct by_seq_desc {
  bool operator()(const entry& a, const entry& b) const { return a.item.msg.seq > b.item.msg.seq; }
};
struct by_wake_desc {
  bool operator()(const entry& a, const entry& b) const {
    if (a.wake != b.wake) return a.wake > b.wake;
    return a.item.msg.seq > b.item.msg.seq;
  }
};

struct key_state {
  std::string name;
  std::vector<entry> heap;  // min-heap by seq
  bool in_rotation = false;
};

}  // namespace

struct fair_scheduler::impl {
  std::vector<throttle_spec> throttles;
  std::unordered_map<std::string, std::unique_ptr<key_state>> keys;
  std::deque<key_state*> rotation;
  std::vector<entry> waiting;  // min-heap by wake
  std::unordered_map<std::string, token_bucket> buckets;
  std::size_t buckets_pruned_at = 64;
  std::unordered_set<group_id> groups;  // groups with an item present

  std::vector<std::string> bucket_keys(const message& m) const {
    std::vector<std::string> out;
    out.reserve(throttles.size());
    for (std::size_t i = 0; i < throttles.size(); ++i)
      out.push_back(std::to_string(i) + "/" + encode_key(resolve(throttles[i].key, m)));
    return out;
  }

  token_bucket& bucket(const std::string& name, timestamp now) {
    auto it = buckets.find(name);
    if (it != buckets.end()) return it->second;
    auto slash = name.find('/');
    auto idx = static_cast<std::size_t>(std::stoul(name.substr(0, slash)));
    const auto& t = throttles[idx];
    return buckets.emplace(name, token_bucket{t.rate_per_s, t.burst, now}).first->second;
  }

  // True and charged if every bucket has a token; otherwise sets e.wake and charges nothing.
  bool take_tokens(entry& e, timestamp now) {
    timestamp wake = now;
    for (const auto& b : e.buckets) {
      auto& tb = bucket(b, now);
      wake = std::max(wake, tb.next_available(now));
    }
    if (wake > now) {
      e.wake = wake;
      return false;
    }
    for (const auto& b : e.buckets) {
      bool taken = bucket(b, now).try_take(now);
      LANEQ_ASSERT(taken, "a bucket with a token gives it");
    }
    return true;
  }

  void prune_buckets(timestamp now) {
    if (buckets.size() < buckets_pruned_at) return;
    for (auto it = buckets.begin(); it != buckets.end();)
      it = it->second.full(now) ? buckets.erase(it) : std::next(it);
    buckets_pruned_at = std::max<std::size_t>(64, buckets.size() * 2);
  }

  void push_ready(entry e, std::size_t& ready_count) {
    auto& slot = keys[e.item.msg.fairness_key];
    if (!slot) slot = std::make_unique<key_state>(key_state{e.item.msg.fairness_key, {}, false});
    slot->heap.push_back(std::move(e));
    std::push_heap(slot->heap.begin(), slot->heap.end(), by_seq_desc{});
    if (!slot->in_rotation) {
      slot->in_rotation = true;
      rotation.push_back(slot.get());
    }
    ++ready_count;
  }

  void push_waiting(entry e) {
    waiting.push_back(std::move(e));
    std::push_heap(waiting.begin(), waiting.end(), by_wake_desc{});
  }

  void drop_key(key_state* ks) {
    LANEQ_ASSERT(ks->heap.empty() && !ks->in_rotation, "only an idle key is dropped");
    keys.erase(ks->name);
  }
};

fair_scheduler::fair_scheduler(std::vector<throttle_spec> throttles)
    : impl_(std::make_unique<impl>()) {
  impl_->throttles = std::move(throttles);
}

fair_scheduler::~fair_scheduler() = default;
fair_scheduler::fair_scheduler(fair_scheduler&&) noexcept = default;
fair_scheduler& fair_scheduler::operator=(fair_scheduler&&) noexcept = default;

void fair_scheduler::on_ready(ready_item item, timestamp now) {
  auto& s = *impl_;
  if (item.group) {
    bool fresh = s.groups.insert(item.group).second;
    LANEQ_ASSERT(fresh, "at most one item per ordering group is in the scheduler");
  }
  entry e{std::move(item), {}, {}, now, false};
  if (!s.throttles.empty()) e.buckets = s.bucket_keys(e.item.msg);
  if (e.item.msg.not_before > now) {
    e.wake = e.item.msg.not_before;
    s.push_waiting(std::move(e));
  } else {
    s.push_ready(std::move(e), ready_count_);
  }
}

void fair_scheduler::on_tick(timestamp now) {
  auto& s = *impl_;
  while (!s.waiting.empty() && s.waiting.front().wake <= now) {
    std::pop_heap(s.waiting.begin(), s.waiting.end(), by_wake_desc{});
    auto e = std::move(s.waiting.back());
    s.waiting.pop_back();
    e.throttled = false;
    s.push_ready(std::move(e), ready_count_);
  }
  s.prune_buckets(now);
}

std::optional<picked_item> fair_scheduler::pick(timestamp now) {
  auto& s = *impl_;
  on_tick(now);
  while (!s.rotation.empty()) {
    key_state* ks = s.rotation.front();
    s.rotation.pop_front();
    ks->in_rotation = false;
    while (!ks->heap.empty()) {
      std::pop_heap(ks->heap.begin(), ks->heap.end(), by_seq_desc{});
      auto e = std::move(ks->heap.back());
      ks->heap.pop_back();
      --ready_count_;
      if (e.buckets.empty() || s.take_tokens(e, now)) {
        if (ks->heap.empty()) {
          s.drop_key(ks);
        } else {
          ks->in_rotation = true;
          s.rotation.push_back(ks);
        }
        if (e.item.group) s.groups.erase(e.item.group);
        return picked_item{std::move(e.item), std::move(e.buckets)};
      }
      // Throttled: it waits for its bucket; the rest of its fairness key goes on.
      e.throttled = true;
      e.since = now;
      s.push_waiting(std::move(e));
    }
    s.drop_key(ks);
  }
  return std::nullopt;
}

std::optional<timestamp> fair_scheduler::next_wakeup() const {
  if (impl_->waiting.empty()) return std::nullopt;
  return impl_->waiting.front().wake;
}

std::size_t fair_scheduler::waiting_size() const {
  return impl_->waiting.size();
}

std::vector<std::string> fair_scheduler::rotation() const {
  std::vector<std::string> out;
  for (auto* ks : impl_->rotation) out.push_back(ks->name);
  return out;
}

std::unordered_map<std::string, std::uint64_t> fair_scheduler::backlog_by_fairness_key() const {
  std::unordered_map<std::string, std::uint64_t> out;
  for (const auto& [name, ks] : impl_->keys) out[name] += ks->heap.size();
  for (const auto& e : impl_->waiting) out[e.item.msg.fairness_key] += 1;
  return out;
}

std::vector<waiting_item> fair_scheduler::waiting() const {
  std::vector<waiting_item> out;
  out.reserve(impl_->waiting.size());
  for (const auto& e : impl_->waiting)
    out.push_back(waiting_item{e.item.group, e.item.msg.id, e.throttled, e.since, e.wake});
  return out;
}

std::size_t fair_scheduler::bucket_count() const {
  return impl_->buckets.size();
}

void fair_scheduler::check_invariants() const {
  const auto& s = *impl_;
  std::size_t ready = 0;
  std::size_t grouped = 0;
  for (const auto& [name, ks] : s.keys) {
    LANEQ_ASSERT(ks->name == name, "a key state knows its name");
    LANEQ_ASSERT(!ks->heap.empty(), "an empty key is dropped");
    LANEQ_ASSERT(ks->in_rotation, "every key with ready items is in the rotation");
    ready += ks->heap.size();
    for (const auto& e : ks->heap) grouped += e.item.group ? 1u : 0u;
  }
  LANEQ_ASSERT(ready == ready_count_, "the ready count matches the keys");
  LANEQ_ASSERT(s.rotation.size() == s.keys.size(), "each key is in the rotation once");
  for (const auto& e : s.waiting) grouped += e.item.group ? 1u : 0u;
  LANEQ_ASSERT(grouped == s.groups.size(), "one item per present group");
}

}  // namespace laneq
