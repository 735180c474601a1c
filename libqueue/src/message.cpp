// Header and attribute lookup, a message's memory footprint and its redrive offset
// (libqueue/include/laneq/message.hpp).
#include "laneq/message.hpp"

#include <algorithm>

namespace laneq {

namespace {
char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
}  // namespace

std::uint32_t seconds_after(timestamp enqueued_at, timestamp t) {
  auto s = (t.us - enqueued_at.us) / 1'000'000;
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(s, 0, 0xffffffff));
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::size_t memory_footprint(const message& m) {
  auto n = sizeof(message) + m.body.size() + m.fairness_key.size();
  for (const auto& h : m.headers) n += sizeof(h) + h.name.size() + h.value.size();
  for (const auto& a : m.attributes) n += sizeof(a) + a.name.size() + a.value.size();
  return n;
}

const std::string* header_value(const std::vector<header_field>& headers, std::string_view name) {
  for (const auto& h : headers)
    if (iequals(h.name, name)) return &h.value;
  return nullptr;
}

const std::string* attribute_value(const std::vector<attribute>& attributes,
                                   std::string_view name) {
  for (const auto& a : attributes)
    if (a.name == name) return &a.value;
  return nullptr;
}

}  // namespace laneq
