// Key components, resolution, encoding and hashing (libqueue/include/laneq/key.hpp).
#include "laneq/key.hpp"

#include <array>
#include <cstring>
#include <span>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "laneq/limits.hpp"
#include "sha256.hpp"

namespace laneq {

shared_json parse_body_json(std::string_view body) {
  // A body over 1 MiB is not read as JSON (lanes.md L2); neither is one that does not parse.
  if (body.size() > limits::body_bytes_max) return nullptr;
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec) return nullptr;
  return std::make_shared<const boost::json::value>(std::move(v));
}

key_source::key_source(const message& m) : m_(&m) {}
key_source::key_source(const message& m, shared_json parsed)
    : m_(&m), json_(std::move(parsed)), tried_(true) {}
key_source::~key_source() = default;

const boost::json::value* key_source::json() const {
  if (!tried_) {
    tried_ = true;
    if (m_->body.size() <= limits::body_bytes_max) ++parses_;
    json_ = parse_body_json(m_->body);
  }
  return json_.get();
}

key_component::key_component(std::string label, key_function f)
    : kind_(kind::function), name_(std::move(label)) {
  set_function(std::move(f));
}

void key_component::set_function(key_function f) {
  if (kind_ != kind::function) return;
  if (f)
    fn_ = std::make_shared<const key_function>(std::move(f));
  else
    fn_.reset();
}

namespace {

/// `sha256:` and the 64 lowercase hex digits of SHA-256(s) (lanes.md L4).
std::string hashed_key(std::string_view s) {
  auto md = detail::sha256(s);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "sha256:";
  out.reserve(7 + 2 * md.size());
  for (std::size_t i = 0; i < md.size(); ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 0xF]);
  }
  return out;
}

/// The JSON body's string at a dot path, viewed inside the parsed body `src` holds.
std::optional<std::string_view> json_view_at(const key_source& src, std::string_view path) {
  if (!valid_json_path(path)) return std::nullopt;
  const auto* v = src.json();
  if (v == nullptr) return std::nullopt;
  std::size_t start = 0;
  while (true) {
    auto dot = path.find('.', start);
    auto end = dot == std::string_view::npos ? path.size() : dot;
    const auto* obj = v->if_object();
    if (obj == nullptr) return std::nullopt;
    v = obj->if_contains(path.substr(start, end - start));
    if (v == nullptr) return std::nullopt;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  const auto* s = v->if_string();
  if (s == nullptr) return std::nullopt;
  return std::string_view{s->data(), s->size()};
}

}  // namespace

std::optional<std::string_view> key_component::view_in(const key_source& src,
                                                       std::string& owned) const {
  const auto& m = src.msg();
  std::optional<std::string_view> out;
  switch (kind_) {
    case kind::fairness_key: out = m.fairness_key; break;
    case kind::header:
      if (const auto* v = header_value(m.headers, name_)) out = *v;
      break;
    case kind::attribute:
      if (const auto* v = attribute_value(m.attributes, name_)) out = *v;
      break;
    case kind::json: out = json_view_at(src, name_); break;
    case kind::function: {
      if (!fn_ || !*fn_) return std::nullopt;
      std::optional<std::string> made;
      try {
        made = (*fn_)(m);
      } catch (...) {
        return std::nullopt;  // a throwing function is a missing key (lanes.md L3)
      }
      if (!made) return std::nullopt;
      owned = std::move(*made);
      out = owned;
      break;
    }
  }
  if (out && out->size() > key_bytes_max) {
    owned = hashed_key(*out);  // `out` may view `owned`: hashed before it is overwritten
    out = owned;
  }
  return out;
}

std::optional<std::string> key_component::value_in(const key_source& src) const {
  std::string owned;
  auto v = view_in(src, owned);
  if (!v) return std::nullopt;
  if (v->data() == owned.data()) return owned;
  return std::string{*v};
}

std::string key_component::describe() const {
  switch (kind_) {
    case kind::fairness_key: return "fairness_key";
    case kind::header: return "header:" + name_;
    case kind::attribute: return "attribute:" + name_;
    case kind::json: return "json:" + name_;
    case kind::function: return "function:" + name_;
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
key_component json(std::string path) {
  return {key_component::kind::json, std::move(path)};
}
key_component function(std::string label, key_function f) {
  return {std::move(label), std::move(f)};
}
}  // namespace key

std::string bound_key(std::string s) {
  if (s.size() <= key_bytes_max) return s;
  return hashed_key(s);
}

bool valid_json_path(std::string_view path) {
  if (path.empty()) return false;
  std::size_t start = 0;
  while (true) {
    auto dot = path.find('.', start);
    auto end = dot == std::string_view::npos ? path.size() : dot;
    if (end == start) return false;  // an empty segment: leading, trailing or doubled dot
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::optional<std::string> json_string_at(const key_source& src, std::string_view path) {
  auto v = json_view_at(src, path);
  if (!v) return std::nullopt;
  return std::string{*v};
}

std::optional<std::size_t> key_values::first_missing() const {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!values[i]) return i;
  return std::nullopt;
}

key_values resolve(const std::vector<key_component>& components, const key_source& src) {
  key_values out;
  out.values.reserve(components.size());
  for (const auto& c : components) out.values.push_back(c.value_in(src));
  return out;
}

key_values resolve(const std::vector<key_component>& components, const message& m) {
  return resolve(components, key_source{m});
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

key_view::key_view(const std::vector<key_component>& components, const key_source& src)
    : size_(components.size()) {
  if (size_ <= inline_.size()) {
    values_ = inline_.data();
  } else {
    spill_.resize(size_);
    values_ = spill_.data();
  }
  for (std::size_t i = 0; i < size_; ++i) {
    std::string made;
    auto v = components[i].view_in(src, made);
    if (v && v->data() == made.data()) {
      if (owned_.capacity() == 0) owned_.reserve(size_);  // no reallocation moves a view's target
      v = owned_.emplace_back(std::move(made));
    }
    values_[i] = v;
  }
}

std::optional<std::size_t> key_view::first_missing() const {
  for (std::size_t i = 0; i < size_; ++i)
    if (!values_[i]) return i;
  return std::nullopt;
}

std::string key_view::encoded() const {
  // encode_key's layout, sized once and written with copies.
  std::size_t n = 0;
  for (std::size_t i = 0; i < size_; ++i) n += 4 + (values_[i] ? values_[i]->size() : 0);
  std::string out(n, '\0');
  char* p = out.data();
  for (std::size_t i = 0; i < size_; ++i) {
    const auto& x = values_[i];
    auto len = x ? static_cast<std::uint32_t>(x->size()) : 0xFFFFFFFFu;
    const unsigned char prefix[4] = {
        static_cast<unsigned char>(len >> 24), static_cast<unsigned char>(len >> 16),
        static_cast<unsigned char>(len >> 8), static_cast<unsigned char>(len)};
    std::memcpy(p, prefix, 4);
    p += 4;
    if (x && !x->empty()) {
      std::memcpy(p, x->data(), x->size());
      p += x->size();
    }
  }
  return out;
}

namespace {
/// `delivered_key` of values held (`std::optional<std::string>`) or viewed
/// (`std::optional<std::string_view>`).
template <class Values>
std::string delivered_of(const Values& values) {
  if (values.size() == 1) return values[0] ? std::string{*values[0]} : std::string{};
  std::string out;
  for (const auto& x : values) {
    if (!x) {
      out += "-:";  // never produced for a placed key (every component is present there)
      continue;
    }
    out += std::to_string(x->size());
    out += ':';
    out += *x;
  }
  return bound_key(std::move(out));
}
}  // namespace

std::string key_view::delivered() const {
  return delivered_of(std::span<const std::optional<std::string_view>>{values_, size_});
}

std::string delivered_key(const key_values& v) {
  return delivered_of(v.values);
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
