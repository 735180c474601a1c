// The in-memory store's table, partitioned by lane (actors/include/laneq/actors/memory_table.hpp).
#include "laneq/actors/memory_table.hpp"

#include <algorithm>
#include <cstring>

namespace laneq {

namespace {

/// Compacts a partition once this many entries at least are erased and they outnumber the live.
constexpr std::size_t compact_min = 32;

/// Gives back a vector's room once it is four times what its entries need: a lane that held a
/// deep backlog does not keep that memory after draining.
template <class T>
void fit(std::vector<T>& v) {
  if (v.capacity() > 4 * v.size() + compact_min) v.shrink_to_fit();
}

/// Less than, equal to or greater than 0 as (name + suffix) is less than, equal to or greater
/// than `key`.
int compare(std::string_view name, std::string_view suffix, std::string_view key) {
  auto n = std::min(name.size(), key.size());
  if (int c = name.substr(0, n).compare(key.substr(0, n)); c != 0) return c;
  if (key.size() < name.size()) return 1;  // key is a proper prefix of the name
  return suffix.compare(key.substr(name.size()));
}

}  // namespace

std::size_t memory_table::name_hash::operator()(std::string_view s) const {
  auto mix = [](std::uint64_t h, std::uint64_t word) {
    h = (h ^ word) * 0x9e3779b97f4a7c15u;
    return h ^ (h >> 29);
  };
  std::uint64_t h = s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    h = mix(h, word);
  }
  std::uint64_t tail = 0;
  for (; i < s.size(); ++i) tail = (tail << 8) | static_cast<unsigned char>(s[i]);
  return static_cast<std::size_t>(mix(h, tail));
}

memory_table::suffix_key::suffix_key(std::string_view s) : rest(s) {
  for (std::size_t i = 0; i < 8; ++i)
    lead = (lead << 8) | (i < s.size() ? static_cast<unsigned char>(s[i]) : 0u);
}

memory_table::partition* memory_table::find(std::string_view name) {
  if (last_ != nullptr && last_->name == name) return last_;
  auto it = parts_.find(name);
  if (it == parts_.end()) return nullptr;
  last_ = &it->second;
  return last_;
}

void memory_table::drop(std::string_view name) {
  auto it = parts_.find(name);
  if (&it->second == last_) last_ = nullptr;
  order_.erase(it->first);
  parts_.erase(it);
}

memory_table::partition& memory_table::find_or_make(std::string_view name) {
  if (auto* p = find(name)) return *p;
  auto [it, _] = parts_.emplace(std::string{name}, partition{});
  it->second.name = it->first;
  order_.emplace(it->first, &it->second);
  return it->second;
}

std::size_t memory_table::lower_bound(const partition& p, const suffix_key& suffix) {
  auto it = std::lower_bound(p.entries.begin() + static_cast<std::ptrdiff_t>(p.head),
                             p.entries.end(), suffix);
  return static_cast<std::size_t>(it - p.entries.begin());
}

std::size_t memory_table::first_from(std::string_view name, const partition& p,
                                     std::string_view from) const {
  return name == name_of(from) ? lower_bound(p, suffix_key{from.substr(name.size())}) : p.head;
}

void memory_table::put(std::string_view key, std::string value) {
  auto name = name_of(key);
  suffix_key suffix{key.substr(name.size())};
  auto& p = find_or_make(name);
  auto fresh = entry{suffix.lead, std::string{suffix.rest}, std::move(value), true};
  if (p.head == p.entries.size() || p.entries.back() < suffix) {
    p.entries.push_back(std::move(fresh));
    ++size_;
    return;
  }
  auto it = p.entries.begin() + static_cast<std::ptrdiff_t>(lower_bound(p, suffix));
  if (it != p.entries.end() && *it == suffix) {
    if (!it->live) {
      it->live = true;
      --p.dead;
      ++size_;
    }
    it->value = std::move(fresh.value);
    return;
  }
  p.entries.insert(it, std::move(fresh));
  ++size_;
}

void memory_table::kill(partition& p, entry& e) {
  e.live = false;
  std::string{}.swap(e.value);
  ++p.dead;
  --size_;
}

void memory_table::erase(std::string_view key) {
  auto name = name_of(key);
  auto* p = find(name);
  if (p == nullptr) return;
  suffix_key suffix{key.substr(name.size())};
  auto i = lower_bound(*p, suffix);
  if (i == p->entries.size() || !(p->entries[i] == suffix) || !p->entries[i].live) return;
  kill(*p, p->entries[i]);
  tidy(*p);
}

void memory_table::tidy(partition& p) {
  while (p.head < p.entries.size() && !p.entries[p.head].live) {
    ++p.head;
    --p.dead;
  }
  if (p.head == p.entries.size()) {
    p.entries.clear();
    fit(p.entries);
    p.head = 0;
    if (!p.idle) {
      p.idle = true;
      idle_.push_back(p.name);
      trim_idle();
    }
    return;
  }
  auto erased = p.head + p.dead;
  if (erased < compact_min || erased <= p.live()) return;
  std::erase_if(p.entries, [](const entry& e) { return !e.live; });
  fit(p.entries);
  p.head = 0;
  p.dead = 0;
}

void memory_table::trim_idle() {
  while (idle_.size() > idle_partitions_max) {
    auto name = idle_.front();
    idle_.pop_front();
    auto* p = find(name);
    p->idle = false;
    if (p->entries.empty()) drop(name);  // `name` points into the key dropped: its last use
  }
}

std::size_t memory_table::entries_capacity() const {
  std::size_t n = 0;
  for (const auto& [name, p] : parts_) n += p.entries.capacity();
  return n;
}

std::vector<std::pair<std::string_view, memory_table::partition*>> memory_table::in_range(
    std::string_view from, std::string_view to) const {
  // A partition named below `from`'s name holds only keys below `from`; one named at or above
  // `to` only keys at or above it.
  std::vector<std::pair<std::string_view, partition*>> out;
  for (auto it = order_.lower_bound(name_of(from)); it != order_.end() && it->first < to; ++it)
    out.emplace_back(it->first, it->second);
  return out;
}

void memory_table::erase_range(std::string_view from, std::string_view to) {
  for (auto [name, p] : in_range(from, to)) {
    for (auto i = first_from(name, *p, from); i < p->entries.size(); ++i) {
      auto& e = p->entries[i];
      if (compare(name, e.suffix, to) >= 0) break;
      if (e.live) kill(*p, e);
    }
    tidy(*p);
  }
}

std::vector<store_entry> memory_table::scan(std::string_view from, std::string_view to,
                                            std::size_t max) const {
  std::vector<store_entry> out;
  for (auto [name, p] : in_range(from, to)) {
    for (auto i = first_from(name, *p, from); i < p->entries.size(); ++i) {
      const auto& e = p->entries[i];
      if (compare(name, e.suffix, to) >= 0 || out.size() >= max) break;
      if (e.live) out.push_back(store_entry{std::string{name} + e.suffix, e.value});
    }
    if (out.size() >= max) break;
  }
  return out;
}

}  // namespace laneq
