// Key components, resolution and encoding (libqueue/include/laneq/key.hpp).
#include "laneq/key.hpp"

namespace laneq {

std::optional<std::string_view> key_component::value_in(const message& m) const {
  switch (kind_) {
    case kind::fairness_key: return std::string_view{m.fairness_key};
    case kind::header:
      if (const auto* v = header_value(m.headers, name_)) return std::string_view{*v};
      return std::nullopt;
    case kind::attribute:
      if (const auto* v = attribute_value(m.attributes, name_)) return std::string_view{*v};
      return std::nullopt;
  }
  return std::nullopt;
}

std::string key_component::describe() const {
  switch (kind_) {
    case kind::fairness_key: return "fairness_key";
    case kind::header: return "header:" + name_;
    case kind::attribute: return "attribute:" + name_;
  }
  return "?";
}

bool operator==(const key_component& a, const key_component& b) {
  if (a.kind_ != b.kind_) return false;
  if (a.kind_ == key_component::kind::header) return iequals(a.name_, b.name_);
  return a.name_ == b.name_;
}

namespace key {
key_component fairness_key() {
  return {key_component::kind::fairness_key, {}};
}
key_component header(std::string name) {
  return {key_component::kind::header, std::move(name)};
}
key_component attribute(std::string name) {
  return {key_component::kind::attribute, std::move(name)};
}
}  // namespace key

std::optional<std::size_t> key_values::first_missing() const {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!values[i]) return i;
  return std::nullopt;
}

key_values resolve(const std::vector<key_component>& components, const message& m) {
  key_values out;
  out.values.reserve(components.size());
  for (const auto& c : components) {
    if (auto v = c.value_in(m))
      out.values.emplace_back(std::string{*v});
    else
      out.values.emplace_back(std::nullopt);
  }
  return out;
}

namespace {
void put_u32(std::string& out, std::uint32_t x) {
  out.push_back(static_cast<char>((x >> 24) & 0xFF));
  out.push_back(static_cast<char>((x >> 16) & 0xFF));
  out.push_back(static_cast<char>((x >> 8) & 0xFF));
  out.push_back(static_cast<char>(x & 0xFF));
}
}  // namespace

std::string encode_key(const key_values& v) {
  std::string out;
  std::size_t n = 0;
  for (const auto& x : v.values) n += 4 + (x ? x->size() : 0);
  out.reserve(n);
  for (const auto& x : v.values) {
    if (!x) {
      put_u32(out, 0xFFFFFFFFu);
      continue;
    }
    put_u32(out, static_cast<std::uint32_t>(x->size()));
    out += *x;
  }
  return out;
}

std::string describe_key(const std::vector<key_component>& components, const key_values& v) {
  std::string out;
  for (std::size_t i = 0; i < components.size() && i < v.values.size(); ++i) {
    if (i > 0) out += ' ';
    out += components[i].describe();
    out += '=';
    out += v.values[i] ? *v.values[i] : std::string{"-"};
  }
  return out;
}

}  // namespace laneq
