// Reading docs/openapi.json and checking values against its schemas (openapi_check.hpp).
#include "openapi_check.hpp"

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace laneq::server::test::openapi {

namespace {

json::object load() {
  std::ifstream in{LANEQ_SOURCE_DIR "/docs/openapi.json"};
  if (!in) throw std::runtime_error{"cannot read " LANEQ_SOURCE_DIR "/docs/openapi.json"};
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str()).as_object();
}

/// The operation fields of a path item; its other fields (`parameters`, ...) are not methods.
constexpr std::string_view methods[] = {"get", "put", "post", "delete", "patch", "head", "options"};

std::string upper(std::string_view s) {
  std::string out{s};
  for (auto& ch : out) ch = static_cast<char>(ch - 'a' + 'A');
  return out;
}

bool has_type(const json::value& v, std::string_view t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_bool();
  if (t == "null") return v.is_null();
  if (t == "integer") return v.is_int64() || v.is_uint64();
  if (t == "number") return v.is_number();
  return false;
}

std::string type_violation(const json::value& v, const json::object& s, const std::string& at) {
  const auto* t = s.if_contains("type");
  if (t == nullptr) return {};
  if (t->is_string())
    return has_type(v, t->as_string()) ? "" : at + " is not of type " + std::string{t->as_string()};
  for (const auto& one : t->as_array())
    if (has_type(v, one.as_string())) return {};
  return at + " is of none of the types " + json::serialize(*t);
}

std::string enum_violation(const json::value& v, const json::object& s, const std::string& at) {
  const auto* e = s.if_contains("enum");
  if (e == nullptr) return {};
  for (const auto& allowed : e->as_array())
    if (allowed == v) return {};
  return at + " = " + json::serialize(v) + " is not one of " + json::serialize(*e);
}

/// `minimum`/`maximum`, `minLength`/`maxLength`/`pattern`, `minItems`/`maxItems`.
std::string bounds_violation(const json::value& v, const json::object& s, const std::string& at) {
  auto num = [&](std::string_view k) { return s.at(k).to_number<double>(); };
  if (v.is_number()) {
    auto x = v.to_number<double>();
    if (s.contains("minimum") && x < num("minimum")) return at + " is below its minimum";
    if (s.contains("maximum") && x > num("maximum")) return at + " is above its maximum";
  }
  if (const auto* str = v.if_string()) {
    auto n = static_cast<double>(str->size());
    if (s.contains("minLength") && n < num("minLength")) return at + " is shorter than minLength";
    if (s.contains("maxLength") && n > num("maxLength")) return at + " is longer than maxLength";
    if (const auto* p = s.if_contains("pattern");
        p != nullptr && !std::regex_search(str->c_str(), std::regex{p->as_string().c_str()}))
      return at + " does not match " + std::string{p->as_string()};
  }
  if (const auto* arr = v.if_array()) {
    auto n = static_cast<double>(arr->size());
    if (s.contains("minItems") && n < num("minItems")) return at + " has fewer than minItems";
    if (s.contains("maxItems") && n > num("maxItems")) return at + " has more than maxItems";
  }
  return {};
}

std::string object_violation(const json::object& doc, const json::value& v, const json::object& s,
                             const std::string& at) {
  const auto* o = v.if_object();
  if (o == nullptr) return {};
  if (const auto* req = s.if_contains("required"))
    for (const auto& k : req->as_array())
      if (!o->contains(k.as_string())) return at + " lacks " + std::string{k.as_string()};
  const auto* props = s.if_contains("properties");
  const auto* extra = s.if_contains("additionalProperties");
  for (const auto& kv : *o) {
    auto where = at + "." + std::string{kv.key()};
    const json::value* sub = props != nullptr ? props->as_object().if_contains(kv.key()) : nullptr;
    if (sub == nullptr && extra != nullptr && extra->is_bool() && !extra->as_bool())
      return where + " is not a documented field";
    if (sub == nullptr && extra != nullptr && extra->is_object()) sub = extra;
    if (sub == nullptr) continue;
    if (auto bad = violation(doc, kv.value(), *sub, where); !bad.empty()) return bad;
  }
  return {};
}

std::string array_violation(const json::object& doc, const json::value& v, const json::object& s,
                            const std::string& at) {
  const auto* arr = v.if_array();
  const auto* items = s.if_contains("items");
  if (arr == nullptr || items == nullptr) return {};
  for (std::size_t i = 0; i < arr->size(); ++i)
    if (auto bad = violation(doc, (*arr)[i], *items, at + "[" + std::to_string(i) + "]");
        !bad.empty())
      return bad;
  return {};
}

std::string one_of_violation(const json::object& doc, const json::value& v, const json::object& s,
                             const std::string& at) {
  const auto* alts = s.if_contains("oneOf");
  if (alts == nullptr) return {};
  std::size_t fit = 0;
  std::string why;
  for (const auto& alt : alts->as_array()) {
    auto bad = violation(doc, v, alt, at);
    if (bad.empty())
      ++fit;
    else
      why += (why.empty() ? "" : "; ") + bad;
  }
  if (fit == 1) return {};
  return at + (fit == 0 ? " fits none of its oneOf alternatives: " + why
                        : " fits several of its oneOf alternatives");
}

/// The value a local `$ref` ("#/a/b/c") names in `doc`.
const json::value& local_ref(const json::object& doc, std::string_view ref) {
  if (ref.substr(0, 2) != "#/") throw std::runtime_error{"not a local $ref: " + std::string{ref}};
  ref.remove_prefix(2);
  const json::object* in = &doc;
  while (true) {
    auto slash = ref.find('/');
    const auto& cur = in->at(ref.substr(0, slash));
    if (slash == std::string_view::npos) return cur;
    ref.remove_prefix(slash + 1);
    in = &cur.as_object();
  }
}

}  // namespace

const json::object& document() {
  static const json::object doc = load();
  return doc;
}

std::vector<operation> operations(const json::object& doc) {
  std::vector<operation> out;
  for (const auto& [path, item] : doc.at("paths").as_object())
    for (const auto& [key, op] : item.as_object())
      for (auto m : methods)
        if (key == m)
          out.push_back(operation{upper(m), std::string{path}, &item.as_object(), &op.as_object()});
  return out;
}

const json::value& deref(const json::object& doc, const json::value& v) {
  const json::value* at = &v;
  for (int hops = 0; hops < 8; ++hops) {
    const auto* o = at->if_object();
    const auto* ref = o != nullptr ? o->if_contains("$ref") : nullptr;
    if (ref == nullptr) return *at;
    at = &local_ref(doc, ref->as_string());
  }
  throw std::runtime_error{"a $ref chain longer than 8"};
}

std::string example_target(const json::object& doc, const operation& o) {
  auto target = o.path;
  std::string query;
  for (const auto* owner : {o.path_item, o.op}) {
    const auto* params = owner->if_contains("parameters");
    if (params == nullptr) continue;
    for (const auto& p : params->as_array()) {
      const auto& param = deref(doc, p).as_object();
      auto name = std::string{param.at("name").as_string()};
      const auto& ex = param.at("example");
      auto value = ex.is_string() ? std::string{ex.as_string()} : json::serialize(ex);
      if (param.at("in").as_string() == "query")
        query += (query.empty() ? "?" : "&") + name + "=" + value;
      else if (auto at = target.find("{" + name + "}"); at != std::string::npos)
        target.replace(at, name.size() + 2, value);
    }
  }
  return target + query;
}

std::vector<named_example> examples_of(const json::object& doc, const json::object& content) {
  std::vector<named_example> out;
  if (const auto* one = content.if_contains("example")) out.push_back({"example", one});
  if (const auto* many = content.if_contains("examples"))
    for (const auto& [name, ex] : many->as_object())
      out.push_back({std::string{name}, &deref(doc, ex).as_object().at("value")});
  return out;
}

const json::object* json_content(const json::object& doc, const json::value& body_or_response) {
  const auto& r = deref(doc, body_or_response).as_object();
  const auto* content = r.if_contains("content");
  if (content == nullptr) return nullptr;
  const auto* js = content->as_object().if_contains("application/json");
  return js != nullptr ? &js->as_object() : nullptr;
}

std::string violation(const json::object& doc, const json::value& v, const json::value& schema,
                      const std::string& at) {
  const auto& s = deref(doc, schema).as_object();
  for (auto check : {type_violation, enum_violation, bounds_violation})
    if (auto bad = check(v, s, at); !bad.empty()) return bad;
  for (auto check : {object_violation, array_violation, one_of_violation})
    if (auto bad = check(doc, v, s, at); !bad.empty()) return bad;
  return {};
}

}  // namespace laneq::server::test::openapi
