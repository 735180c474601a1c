// Round-robin fair scheduler with delays and throttles (libqueue/include/laneq/fair_scheduler.hpp).
#include "laneq/fair_scheduler.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_set>

#include <boost/intrusive/set.hpp>

#include "laneq/assert.hpp"
#include "laneq/key.hpp"

namespace laneq {

namespace {

struct key_state;

/// What throttles add to an entry (absent on a queue without throttles).
struct throttle_state {
  std::vector<std::string> buckets;  // one per throttle: "<index>/<encoded key>"
  bool throttled = false;            // has waited for a token since it was last ready
  std::string released_by;           // the bucket that released it and owes it a token
};

/// Values kept beside the heap entries, in slots named by a 32-bit handle, so that an entry stays
/// small and trivially copyable (the heaps sift entries by plain copies). A freed slot is reused;
/// once no slot is live the slots start over (and a large block goes back to the allocator).
template <class T>
class slab {
 public:
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

  std::uint32_t put(T&& v) {
    ++live_;
    if (!free_.empty()) {
      auto h = free_.back();
      free_.pop_back();
      slots_[h] = std::move(v);
      return h;
    }
    LANEQ_ASSERT(slots_.size() < none, "a slab has fewer slots than its handles can name");
    slots_.push_back(std::move(v));
    return static_cast<std::uint32_t>(slots_.size() - 1);
  }
  T& at(std::uint32_t h) { return slots_[h]; }
  const T& at(std::uint32_t h) const { return slots_[h]; }
  /// Moves the value out and frees its slot.
  T take(std::uint32_t h) {
    T v = std::move(slots_[h]);
    release(h);
    return v;
  }
  /// Moves the value into `to` and frees its slot.
  void take(std::uint32_t h, T& to) {
    to = std::move(slots_[h]);
    release(h);
  }
  /// Drops the value (and what it holds) and frees its slot.
  void drop(std::uint32_t h) {
    slots_[h] = T{};
    release(h);
  }
  std::size_t size() const { return live_; }

 private:
  void release(std::uint32_t h) {
    LANEQ_ASSERT(live_ > 0, "a slab frees only live slots");
    if (--live_ > 0) {
      free_.push_back(h);
      return;
    }
    if (slots_.capacity() > 4096) {
      slots_ = {};
      free_ = {};
    } else {
      slots_.clear();
      free_.clear();
    }
  }

  std::vector<T> slots_;
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

constexpr std::uint32_t no_slot = slab<message>::none;

/// An item in the scheduler. A group's head is held by reference (its group keeps the message):
/// only its id and seq are kept here. An unordered message is owned by the scheduler, in its
/// slab of messages; throttle state, with throttles only, in its slab of throttle states. At most
/// 64 bytes, as every live group's offered head is one (ADR 0009); trivially copyable, as the
/// heaps move entries on every push and pop.
struct entry {
  message_id id;
  message_seq seq;
  group_id group;
  key_state* ks = nullptr;
  timestamp wake;               // when delayed: its not-before time
  timestamp since;              // when it started waiting
  std::uint32_t msg = no_slot;  // an unordered message: its slot in `impl::messages`
  std::uint32_t thr = no_slot;  // with throttles: its slot in `impl::throttle_states`

  bool owns_message() const { return msg != no_slot; }
  bool has_throttle() const { return thr != no_slot; }
};
static_assert(sizeof(entry) <= 56);
static_assert(std::is_trivially_copyable_v<entry>);

// Min-heap orders.
struct by_seq_desc {
  bool operator()(const entry& a, const entry& b) const { return a.seq > b.seq; }
};
struct by_wake_desc {
  bool operator()(const entry& a, const entry& b) const {
    if (a.wake != b.wake) return a.wake > b.wake;
    return a.seq > b.seq;
  }
};

/// A fairness key. It is linked into the rotation while it has ready entries (an intrusive set:
/// entering and leaving it allocates nothing; ordered by stamp, which is unique).
struct key_state : boost::intrusive::set_base_hook<> {
  std::string name;
  std::vector<entry> heap;  // ready entries, min-heap by seq (entries are small: moved by value)
  std::uint64_t stamp = 0;  // rotation position: lower is served first; 0 = never placed
  bool in_rotation = false;
  std::size_t waiting = 0;  // items of this key that wait (delayed or throttled)

  friend bool operator<(const key_state& a, const key_state& b) { return a.stamp < b.stamp; }
};

using rotation_set = boost::intrusive::set<key_state>;

// Items waiting for a token of one bucket, released in rotation order when tokens come: the
// key served least recently first (F1), its oldest item first (F2).
struct bucket_wait {
  std::unordered_map<key_state*, std::vector<entry>> by_key;  // min-heaps by seq
  // Keys by their stamp when filed; stamps only grow, so a stale entry is refiled lazily.
  std::set<std::pair<std::uint64_t, key_state*>> order;
  std::size_t count = 0;
  std::optional<timestamp> wake;

  void add(key_state* ks, entry e) {
    auto& heap = by_key[ks];
    if (heap.empty()) order.emplace(ks->stamp, ks);
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), by_seq_desc{});
    ++count;
  }

  entry take_next() {
    for (;;) {
      auto [stamp, ks] = *order.begin();
      if (stamp != ks->stamp) {  // served since it was filed: refile at its current place
        order.erase(order.begin());
        order.emplace(ks->stamp, ks);
        continue;
      }
      auto& heap = by_key[ks];
      std::pop_heap(heap.begin(), heap.end(), by_seq_desc{});
      auto e = heap.back();
      heap.pop_back();
      if (heap.empty()) {
        by_key.erase(ks);
        order.erase(order.begin());
      }
      --count;
      return e;
    }
  }
};

/// Hashes fairness keys so the keys' map is found by a string_view (a held message's key).
struct name_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace

struct fair_scheduler::impl {
  std::vector<throttle_spec> throttles;
  std::unordered_map<std::string, std::unique_ptr<key_state>, name_hash, std::equal_to<>> keys;
  rotation_set rotation;  // the keys with ready entries, least recently served first
  std::uint64_t stamp_clock = 0;
  std::vector<entry> delayed;  // min-heap by wake
  std::unordered_map<std::string, token_bucket> buckets;
  std::unordered_map<std::string, bucket_wait> parked;
  // Per bucket: waiters released to the ready set that have not tried their token yet. A
  // release counts them against the bucket's tokens, so an idle queue does not release more.
  std::unordered_map<std::string, std::int64_t> released;
  std::vector<std::pair<timestamp, std::string>> bucket_wakes;  // min-heap; stale entries skipped
  std::size_t parked_count = 0;
  std::size_t buckets_pruned_at = 64;
  slab<message> messages;                // the unordered messages of the entries
  slab<throttle_state> throttle_states;  // the entries' throttle state (with throttles only)
  key_state* last_key = nullptr;         // the key `key_of` found last (most heads share one)

  throttle_state& throttle_of(const entry& e) { return throttle_states.at(e.thr); }

  /// What `pick` hands out for an entry, whose slots it frees: an unordered message whole; a
  /// group's head as its id and seq (its group holds the message).
  std::optional<picked_item> picked(const entry& e) {
    std::optional<picked_item> out{std::in_place};  // built in place: a message moves once
    auto& item = out->item;
    if (e.owns_message()) {
      messages.take(e.msg, item.msg);
    } else {
      item.msg.id = e.id;
      item.msg.seq = e.seq;
    }
    item.group = e.group;
    if (e.has_throttle()) out->charged = throttle_states.take(e.thr).buckets;
    return out;
  }

  /// Frees the slots of an entry that leaves without being picked; its unordered message goes
  /// into `taken` when not null.
  void discard(const entry& e, std::vector<message>* taken) {
    if (e.owns_message()) {
      if (taken)
        taken->push_back(messages.take(e.msg));
      else
        messages.drop(e.msg);
    }
    if (e.has_throttle()) throttle_states.drop(e.thr);
  }

  /// Files an entry as ready or, when its not-before time lies ahead, delayed.
  void add(entry e, timestamp not_before, timestamp now, std::size_t& ready_count) {
    if (not_before > now) {
      e.wake = not_before;
      push_delayed(e);
    } else {
      push_ready(e, ready_count);
    }
  }

  entry entry_for(const message& m, group_id group, timestamp now) {
    auto e = entry_for(m.id, m.seq, m.fairness_key, group, now);
    if (!throttles.empty()) e.thr = throttle_states.put(throttle_state{bucket_keys(m), false, {}});
    return e;
  }

  /// An entry without its throttle state (the caller adds it when there are throttles).
  entry entry_for(message_id id, message_seq seq, std::string_view fairness_key, group_id group,
                  timestamp now) {
    entry e;
    e.id = id;
    e.seq = seq;
    e.group = group;
    e.ks = &key_of(fairness_key);
    e.since = now;
    return e;
  }

  // The names of the buckets `m` takes a token from, one per throttle.
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

  // Takes one token from every bucket of `e`, or returns the bucket that has none (the one
  // whose next token is furthest away) and takes nothing.
  const std::string* take_tokens(const entry& e, timestamp now) {
    const std::string* blocked = nullptr;
    timestamp latest = now;
    const auto& mine = throttle_of(e).buckets;
    for (const auto& b : mine) {
      auto next = bucket(b, now).next_available(now);
      if (next > latest) {
        latest = next;
        blocked = &b;
      }
    }
    if (blocked) return blocked;
    for (const auto& b : mine) {
      bool taken = bucket(b, now).try_take(now);
      LANEQ_ASSERT(taken, "a bucket with a token gives it");
    }
    return nullptr;
  }

  void prune_buckets(timestamp now) {
    if (buckets.size() < buckets_pruned_at) return;
    for (auto it = buckets.begin(); it != buckets.end();) {
      bool idle = it->second.full(now) && parked.find(it->first) == parked.end();
      it = idle ? buckets.erase(it) : std::next(it);
    }
    buckets_pruned_at = std::max<std::size_t>(64, buckets.size() * 2);
  }

  key_state& key_of(std::string_view name) {
    if (last_key && last_key->name == name) return *last_key;
    last_key = &find_key(name);
    return *last_key;
  }

  key_state& find_key(std::string_view name) {
    auto it = keys.find(name);
    if (it == keys.end()) {
      auto ks = std::make_unique<key_state>();
      ks->name = name;
      it = keys.emplace(ks->name, std::move(ks)).first;
    }
    return *it->second;
  }

  /// Calls `f` on every entry, ready or waiting.
  template <class F>
  void each_entry(F f) const {
    for (const auto& [name, ks] : keys)
      for (const auto& e : ks->heap) f(e);
    for (const auto& e : delayed) f(e);
    for (const auto& [name, w] : parked)
      for (const auto& [ks, heap] : w.by_key)
        for (const auto& e : heap) f(e);
  }

  void leave_rotation(key_state& ks) {
    rotation.erase(rotation.iterator_to(ks));
    ks.in_rotation = false;
  }

  /// The key at the front of the rotation was served: it takes a new stamp, the highest, and goes
  /// to the back of the rotation if it has ready entries left (F1). Alone in the rotation, it
  /// stays linked (its new stamp keeps the set in order).
  void served(key_state& ks) {
    ks.stamp = ++stamp_clock;
    if (ks.heap.empty()) return leave_rotation(ks);
    if (rotation.size() == 1) return;
    rotation.erase(rotation.iterator_to(ks));
    rotation.push_back(ks);  // the highest stamp: the back
  }

  void enter_rotation(key_state& ks) {
    if (ks.in_rotation) return;
    if (ks.stamp == 0) ks.stamp = ++stamp_clock;  // a new key joins at the back
    ks.in_rotation = true;
    rotation.insert(ks);
  }

  void push_ready(entry e, std::size_t& ready_count) {
    auto& ks = *e.ks;
    ks.heap.push_back(e);
    std::push_heap(ks.heap.begin(), ks.heap.end(), by_seq_desc{});
    enter_rotation(ks);
    ++ready_count;
  }

  void push_delayed(entry e) {
    ++e.ks->waiting;
    delayed.push_back(e);
    std::push_heap(delayed.begin(), delayed.end(), by_wake_desc{});
  }

  void schedule_bucket(const std::string& name, timestamp wake) {
    auto& w = parked[name];
    if (w.wake && *w.wake <= wake) return;
    w.wake = wake;
    bucket_wakes.emplace_back(wake, name);
    std::push_heap(bucket_wakes.begin(), bucket_wakes.end(), std::greater<>{});
  }

  void park(entry e, const std::string& bucket_name, timestamp now) {
    auto& ks = *e.ks;
    ++ks.waiting;
    auto& t = throttle_of(e);
    if (!t.throttled) e.since = now;
    t.throttled = true;
    auto wake = bucket(bucket_name, now).next_available(now);
    parked[bucket_name].add(&ks, e);
    ++parked_count;
    schedule_bucket(bucket_name, wake);
  }

  // Releases as many waiters of `name` as it has tokens, in rotation order.
  void release_bucket(const std::string& name, timestamp now, std::size_t& ready_count) {
    auto it = parked.find(name);
    if (it == parked.end()) return;
    auto& w = it->second;
    w.wake.reset();
    auto& tb = bucket(name, now);
    auto n = tb.tokens(now) - (released.count(name) ? released[name] : 0);
    while (n-- > 0 && w.count > 0) {
      auto e = w.take_next();
      --parked_count;
      throttle_of(e).released_by = name;
      ++released[name];
      --e.ks->waiting;
      push_ready(e, ready_count);
    }
    if (w.count == 0) {
      parked.erase(it);
      return;
    }
    // Those released take the tokens there are; the rest look again when one more refills.
    auto next = tb.next_available(now);
    schedule_bucket(name, next > now ? next : now + tb.refill_interval());
  }

  // The item is about to try its tokens: it no longer counts against the bucket that
  // released it.
  void settle_release(const entry& e) {
    if (!e.has_throttle()) return;
    auto& t = throttle_of(e);
    if (t.released_by.empty()) return;
    auto it = released.find(t.released_by);
    if (it != released.end() && --it->second <= 0) released.erase(it);
    t.released_by.clear();
  }

  // Drops wake entries superseded by an earlier one, so the top of the heap is live.
  void prune_stale_wakes() {
    while (!bucket_wakes.empty()) {
      const auto& [wake, name] = bucket_wakes.front();
      auto it = parked.find(name);
      if (it != parked.end() && it->second.wake == wake) return;
      std::pop_heap(bucket_wakes.begin(), bucket_wakes.end(), std::greater<>{});
      bucket_wakes.pop_back();
    }
  }

  void maybe_drop(key_state* ks) {
    if (ks->in_rotation || !ks->heap.empty() || ks->waiting > 0) return;
    if (last_key == ks) last_key = nullptr;
    keys.erase(ks->name);
  }

  /// Removes the entries of `heap` that `gone` accepts, calling `each` on them first; keeps the
  /// rest a heap under `order`. Returns how many went.
  template <class Gone, class Each, class Order>
  static std::size_t remove_from(std::vector<entry>& heap, Gone gone, Each each, Order order) {
    auto before = heap.size();
    for (auto& e : heap)
      if (gone(e)) each(e);
    heap.erase(std::remove_if(heap.begin(), heap.end(), gone), heap.end());
    std::make_heap(heap.begin(), heap.end(), order);
    return before - heap.size();
  }

  /// The parked waiters of `w` that `gone` accepts leave; returns how many.
  template <class Gone, class Each>
  std::size_t remove_parked(bucket_wait& w, Gone gone, Each each) {
    std::size_t n = 0;
    for (auto it = w.by_key.begin(); it != w.by_key.end();) {
      auto* ks = it->first;
      n += remove_from(
          it->second, gone,
          [&each](const entry& e) {
            --e.ks->waiting;
            each(e);
          },
          by_seq_desc{});
      if (!it->second.empty()) {
        ++it;
        continue;
      }
      std::erase_if(w.order, [ks](const auto& o) { return o.second == ks; });
      it = w.by_key.erase(it);
    }
    w.count -= n;
    return n;
  }
};

fair_scheduler::fair_scheduler(std::vector<throttle_spec> throttles)
    : impl_(std::make_unique<impl>()) {
  impl_->throttles = std::move(throttles);
}

fair_scheduler::~fair_scheduler() = default;

void fair_scheduler::set_throttles(std::vector<throttle_spec> throttles, timestamp now) {
  auto& im = *impl_;
  LANEQ_ASSERT(throttles.size() == im.throttles.size(), "set_throttles keeps the throttles");
  for (std::size_t i = 0; i < throttles.size(); ++i)
    LANEQ_ASSERT(throttles[i].key == im.throttles[i].key, "set_throttles keeps the keys");
  im.throttles = std::move(throttles);
  for (auto& [name, tb] : im.buckets) {
    const auto& t = im.throttles[std::stoul(name.substr(0, name.find('/')))];
    tb.reconfigure(t.rate_per_s, t.burst, now);
  }
  // A faster rate brings a waiter's token forward: wake it then (a slower one only makes an
  // earlier wake find no token, and the bucket is scheduled again from there).
  for (const auto& kv : im.parked) {
    const auto& name = kv.first;
    im.schedule_bucket(name, im.bucket(name, now).next_available(now));
  }
}
fair_scheduler::fair_scheduler(fair_scheduler&&) noexcept = default;
fair_scheduler& fair_scheduler::operator=(fair_scheduler&&) noexcept = default;

void fair_scheduler::on_ready(ready_item item, timestamp now) {
  if (item.group) return on_head(item.msg, item.group, now);
  auto& m = item.msg;
  auto not_before = m.not_before;
  auto e = impl_->entry_for(m, group_id{}, now);
  e.msg = impl_->messages.put(std::move(m));  // kept here until it goes
  impl_->add(e, not_before, now, ready_count_);
}

void fair_scheduler::on_head(const message& head, group_id group, timestamp now) {
  impl_->add(impl_->entry_for(head, group, now), head.not_before, now, ready_count_);
}

void fair_scheduler::on_head(const held_message& head, group_id group, timestamp now) {
  auto& s = *impl_;
  // Throttle keys are worked out over the whole message (key sources read headers, the body's
  // JSON or a function of the message): only a throttled queue unpacks its heads.
  if (!s.throttles.empty()) return on_head(head.unpack(), group, now);
  s.add(s.entry_for(head.id, head.seq, head.fairness_key(), group, now), head.not_before, now,
        ready_count_);
}

std::size_t fair_scheduler::remove_if(const std::function<bool(group_id, message_seq)>& drop) {
  return remove_entries([&drop](group_id g, message_seq seq) { return drop(g, seq); }, nullptr);
}

std::vector<message> fair_scheduler::take_unordered_if(
    const std::function<bool(const message&)>& take) {
  // Which ones first (by seq: seqs are unique in a shard), then out with them as a purge goes.
  std::unordered_set<std::uint64_t> seqs;
  auto& s = *impl_;
  auto note = [&](const entry& e) {
    if (e.owns_message() && take(s.messages.at(e.msg))) seqs.insert(e.seq.value);
  };
  for (auto& [name, ks] : s.keys)
    for (const auto& e : ks->heap) note(e);
  for (const auto& e : s.delayed) note(e);
  for (const auto& [name, w] : s.parked)
    for (const auto& [ks, waiters] : w.by_key)
      for (const auto& e : waiters) note(e);
  std::vector<message> out;
  if (seqs.empty()) return out;
  remove_entries([&seqs](group_id g, message_seq seq) { return !g && seqs.contains(seq.value); },
                 &out);
  return out;
}

std::size_t fair_scheduler::remove_entries(const std::function<bool(group_id, message_seq)>& drop,
                                           std::vector<message>* taken) {
  auto& s = *impl_;
  auto gone = [&drop](const entry& e) { return drop(e.group, e.seq); };
  // The entries that go free their slots; their unordered messages move to `taken` if wanted.
  auto keep_msg = [&s, taken](const entry& e) { s.discard(e, taken); };
  std::size_t n = 0;
  for (auto& [name, ks] : s.keys) {
    auto k = impl::remove_from(
        ks->heap, gone,
        [&s, &keep_msg](const entry& e) {
          s.settle_release(e);
          keep_msg(e);
        },
        by_seq_desc{});
    ready_count_ -= k;
    n += k;
    if (ks->heap.empty() && ks->in_rotation) {
      s.rotation.erase(s.rotation.iterator_to(*ks));
      ks->in_rotation = false;
    }
  }
  n += impl::remove_from(
      s.delayed, gone,
      [&keep_msg](const entry& e) {
        --e.ks->waiting;
        keep_msg(e);
      },
      by_wake_desc{});
  for (auto it = s.parked.begin(); it != s.parked.end();) {
    auto k = s.remove_parked(it->second, gone, keep_msg);
    s.parked_count -= k;
    n += k;
    it = it->second.count == 0 ? s.parked.erase(it) : std::next(it);
  }
  s.prune_stale_wakes();
  std::vector<key_state*> idle;
  for (auto& [name, ks] : s.keys)
    if (!ks->in_rotation && ks->heap.empty() && ks->waiting == 0) idle.push_back(ks.get());
  for (auto* ks : idle) s.maybe_drop(ks);
  return n;
}

std::string fair_scheduler::class_of(const message& m) const {
  // Each part with its length (4 bytes, big-endian) before it: no two classes share a key.
  std::string out;
  auto add = [&out](std::string_view part) {
    auto n = static_cast<std::uint32_t>(part.size());
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(n >> shift));
    out.append(part);
  };
  add(m.fairness_key);
  if (!impl_->throttles.empty())
    for (const auto& bucket : impl_->bucket_keys(m)) add(bucket);
  return out;
}

void fair_scheduler::on_tick(timestamp now) {
  auto& s = *impl_;
  // Nothing delayed, nothing parked, no buckets to prune (every pick looks): nothing to do.
  if (s.delayed.empty() && s.bucket_wakes.empty() && s.buckets.size() < s.buckets_pruned_at) return;
  while (!s.delayed.empty() && s.delayed.front().wake <= now) {
    std::pop_heap(s.delayed.begin(), s.delayed.end(), by_wake_desc{});
    auto e = s.delayed.back();
    s.delayed.pop_back();
    --e.ks->waiting;
    s.push_ready(e, ready_count_);
  }
  while (!s.bucket_wakes.empty() && s.bucket_wakes.front().first <= now) {
    std::pop_heap(s.bucket_wakes.begin(), s.bucket_wakes.end(), std::greater<>{});
    auto [wake, name] = std::move(s.bucket_wakes.back());
    s.bucket_wakes.pop_back();
    auto it = s.parked.find(name);
    if (it == s.parked.end() || it->second.wake != wake) continue;  // superseded
    s.release_bucket(name, now, ready_count_);
  }
  s.prune_stale_wakes();
  s.prune_buckets(now);
}

std::optional<picked_item> fair_scheduler::pick(timestamp now) {
  auto& s = *impl_;
  on_tick(now);
  while (!s.rotation.empty()) {
    // The key served least recently; it stays linked while its entries are tried.
    key_state* ks = &*s.rotation.begin();
    while (!ks->heap.empty()) {
      std::pop_heap(ks->heap.begin(), ks->heap.end(), by_seq_desc{});
      auto e = ks->heap.back();
      ks->heap.pop_back();
      --ready_count_;
      s.settle_release(e);
      if (const auto* blocked = e.has_throttle() ? s.take_tokens(e, now) : nullptr) {
        // Throttled: it waits for its bucket; the rest of its fairness key goes on (T3).
        auto name = *blocked;
        s.park(e, name, now);
        s.prune_stale_wakes();
        continue;
      }
      s.served(*ks);
      s.maybe_drop(ks);
      return s.picked(e);
    }
    // Nothing of this key can go now; it keeps its place for when its items return.
    s.leave_rotation(*ks);
    s.maybe_drop(ks);
  }
  return std::nullopt;
}

bool fair_scheduler::try_charge(const held_message& m, timestamp now) {
  return impl_->throttles.empty() || try_charge(m.unpack(), now);
}

bool fair_scheduler::try_charge(const message& m, timestamp now) {
  auto& s = *impl_;
  if (s.throttles.empty()) return true;
  auto keys = s.bucket_keys(m);
  for (const auto& b : keys) {
    auto owed = s.released.find(b);
    auto spare = s.bucket(b, now).tokens(now) - (owed == s.released.end() ? 0 : owed->second);
    if (spare < 1) return false;
  }
  for (const auto& b : keys) {
    bool taken = s.bucket(b, now).try_take(now);
    LANEQ_ASSERT(taken, "a bucket with a spare token gives it");
  }
  return true;
}

std::optional<timestamp> fair_scheduler::next_wakeup() const {
  const auto& s = *impl_;
  // Every mutation ends with prune_stale_wakes(), so the top of bucket_wakes is live.
  std::optional<timestamp> next;
  if (!s.delayed.empty()) next = s.delayed.front().wake;
  if (!s.bucket_wakes.empty() && (!next || s.bucket_wakes.front().first < *next))
    next = s.bucket_wakes.front().first;
  return next;
}

std::size_t fair_scheduler::waiting_size() const {
  return impl_->delayed.size() + impl_->parked_count;
}

std::vector<std::string> fair_scheduler::rotation() const {
  std::vector<std::string> out;
  for (const auto& ks : impl_->rotation) out.push_back(ks.name);
  return out;
}

std::unordered_map<std::string, std::uint64_t> fair_scheduler::backlog_by_fairness_key() const {
  std::unordered_map<std::string, std::uint64_t> out;
  for (const auto& [name, ks] : impl_->keys)
    if (auto n = ks->heap.size() + ks->waiting; n > 0) out[name] += n;
  return out;
}

std::optional<timestamp> fair_scheduler::oldest_deliverable_since() const {
  std::optional<timestamp> out;
  auto consider = [&out](const entry& e) {
    auto t = std::max(e.since, e.wake);
    if (!out || t < *out) out = t;
  };
  for (const auto& [name, ks] : impl_->keys)
    for (const auto& e : ks->heap) consider(e);
  for (const auto& [name, w] : impl_->parked)
    for (const auto& [ks, heap] : w.by_key)
      for (const auto& e : heap) consider(e);
  return out;
}

template <class Keep>
std::vector<waiting_item> fair_scheduler::waiting_if(Keep keep) const {
  const auto& s = *impl_;
  std::vector<waiting_item> out;
  for (const auto& e : s.delayed)
    if (keep(e.group)) out.push_back(waiting_item{e.group, e.id, false, e.since, e.wake});
  for (const auto& [name, w] : s.parked)
    for (const auto& [ks, heap] : w.by_key)
      for (const auto& e : heap)
        if (keep(e.group))
          out.push_back(waiting_item{e.group, e.id, true, e.since, w.wake ? *w.wake : e.since});
  return out;
}

std::vector<waiting_item> fair_scheduler::waiting() const {
  return waiting_if([](group_id) { return true; });
}

std::vector<waiting_item> fair_scheduler::waiting(
    const std::unordered_set<group_id>& groups) const {
  return waiting_if([&groups](group_id g) { return groups.count(g) != 0; });
}

std::unordered_set<group_id> fair_scheduler::groups() const {
  const auto& s = *impl_;
  std::unordered_set<group_id> out;
  auto add = [&out](const entry& e) {
    if (!e.group) return;
    bool fresh = out.insert(e.group).second;
    LANEQ_ASSERT(fresh, "at most one item per ordering group is in the scheduler");
  };
  for (const auto& [name, ks] : s.keys)
    for (const auto& e : ks->heap) add(e);
  for (const auto& e : s.delayed) add(e);
  for (const auto& [name, w] : s.parked)
    for (const auto& [ks, heap] : w.by_key)
      for (const auto& e : heap) add(e);
  return out;
}

std::size_t fair_scheduler::bucket_count() const {
  return impl_->buckets.size();
}

void fair_scheduler::check_invariants() const {
  const auto& s = *impl_;
  std::size_t ready = 0;
  std::size_t waiting = 0;
  for (const auto& [name, ks] : s.keys) {
    LANEQ_ASSERT(ks->name == name, "a key state knows its name");
    LANEQ_ASSERT(!ks->heap.empty() || ks->waiting > 0, "a key without items is dropped");
    LANEQ_ASSERT(ks->in_rotation == !ks->heap.empty(),
                 "a key is in the rotation exactly when it has ready items");
    ready += ks->heap.size();
    waiting += ks->waiting;
    LANEQ_ASSERT(std::is_heap(ks->heap.begin(), ks->heap.end(), by_seq_desc{}),
                 "a key's ready entries are a heap by seq");
    for (const auto& e : ks->heap) {
      LANEQ_ASSERT(e.ks == ks.get(), "an entry is in its own key's heap");
      LANEQ_ASSERT(e.owns_message() == !e.group, "only unordered messages are owned");
    }
  }
  LANEQ_ASSERT(ready == ready_count_, "the ready count matches the keys");
  LANEQ_ASSERT(waiting == waiting_size(), "the waiting count matches the keys");
  std::size_t in_rotation = 0;
  for (const auto& [name, ks] : s.keys) in_rotation += ks->in_rotation ? 1u : 0u;
  LANEQ_ASSERT(s.rotation.size() == in_rotation, "each ready key is in the rotation once");
  std::size_t parked = 0;
  for (const auto& [name, w] : s.parked) {
    LANEQ_ASSERT(w.count > 0 && w.wake, "a bucket with waiters has a wake time");
    parked += w.count;
  }
  LANEQ_ASSERT(parked == s.parked_count, "the parked count matches the buckets");
  std::uint64_t last_stamp = 0;
  for (const auto& ks : s.rotation) {
    LANEQ_ASSERT(ks.stamp > last_stamp, "the rotation is in stamp order");
    last_stamp = ks.stamp;
  }
  std::size_t owned = 0;
  std::size_t with_throttle = 0;
  s.each_entry([&](const entry& e) {
    owned += e.owns_message() ? 1u : 0u;
    with_throttle += e.has_throttle() ? 1u : 0u;
    LANEQ_ASSERT(e.has_throttle() == !s.throttles.empty(),
                 "an entry has throttle state iff throttles");
  });
  LANEQ_ASSERT(owned == s.messages.size(), "each owned message slot is an entry's");
  LANEQ_ASSERT(with_throttle == s.throttle_states.size(), "each throttle slot is an entry's");
  (void)groups();  // at most one item per ordering group
}

}  // namespace laneq
