// JSON forms of the HTTP API (apps/server/include/laneq/server/json_mapping.hpp).
#include "laneq/server/json_mapping.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "laneq/limits.hpp"

namespace laneq::server {

namespace json = boost::json;

namespace {

constexpr std::string_view b64_std =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view b64_url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

error bad(std::string what) {
  return error{errc::invalid_argument, std::move(what)};
}

std::string join(std::string_view path, std::string_view key) {
  std::string out{path};
  if (!out.empty()) out += '.';
  out += key;
  return out;
}

std::string kind_of(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_: return "a number";
    case json::kind::string: return "a string";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
  }
  return "a value";
}

void put_u64(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>(static_cast<unsigned char>((v >> (8 * i)) & 0xFFu)));
}

std::uint64_t get_u64(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)]);
  return v;
}

/// Writes JSON text straight into a string, for the answers that carry messages: a receive's
/// answer holds up to a whole batch of bodies, and building a `json::value` tree for it first
/// cost a sixth of the CAF worker's time in an HTTP groups profile
/// (docs/decisions/0010-performance-history.md). Strings are escaped as Boost.JSON's serializer
/// escapes them.
class json_writer {
 public:
  explicit json_writer(std::size_t reserve) { out_.reserve(reserve); }

  void open(char c) {
    separate();
    out_ += c;
    first_ = true;
  }
  void close(char c) {
    out_ += c;
    first_ = false;
  }
  /// `"name":` after a comma where one is due.
  void key(std::string_view name) {
    separate();
    string(name);
    out_ += ':';
    first_ = true;
  }
  /// The same for a field name written in the source, which needs no escaping: copied whole,
  /// not scanned (about a quarter of rendering a delivery went to scanning its field names).
  template <std::size_t N>
  void key(const char (&name)[N]) {
    std::string_view text{name, N - 1};
    // Checked in the debug builds that run every test (assert), not per call in release.
    assert(text.find_first_of("\"\\") == std::string_view::npos &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20; }));
    separate();
    out_ += '"';
    out_.append(text);
    out_ += "\":";
    first_ = true;
  }
  /// A string value: `text` when it is UTF-8, else with every stray byte written as `\xNN`
  /// (utf8_or_escaped), so the answer stays valid JSON whatever a CAF client stored.
  void text(std::string_view text) {
    if (is_utf8(text))
      value_string(text);
    else
      value_string(utf8_or_escaped(text));
  }
  /// `key` for a name that may not be UTF-8, as `text` writes it.
  void text_key(std::string_view name) {
    if (is_utf8(name))
      key(name);
    else
      key(utf8_or_escaped(name));
  }
  void value_string(std::string_view s) {
    separate();
    string(s);
  }
  void number(std::int64_t n) {
    separate();
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
    out_.append(buf, end);
  }
  void value_bool(bool b) {
    separate();
    out_ += b ? "true" : "false";
  }
  std::string take() { return std::move(out_); }

 private:
  void separate() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  /// Whether any of the eight bytes of `w` is below 0x20, a quote or a backslash (the tests for
  /// a byte below n and for a zero byte of Bit Twiddling Hacks, exact for "any").
  static bool needs_escape(std::uint64_t w) {
    constexpr std::uint64_t ones = 0x0101010101010101u;
    constexpr std::uint64_t highs = 0x8080808080808080u;
    auto has_zero = [&](std::uint64_t v) { return (v - ones) & ~v & highs; };
    return (((w - ones * 0x20u) & ~w & highs) | has_zero(w ^ (ones * '"')) |
            has_zero(w ^ (ones * '\\'))) != 0;
  }

  void string(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out_ += '"';
    std::size_t plain = 0;  // start of the bytes not yet copied
    for (std::size_t i = 0; i < s.size(); ++i) {
      // Eight bytes at a time while none needs escaping, as in most strings (a 256-byte body
      // took 0.5 us bytewise).
      while (i + 8 <= s.size()) {
        std::uint64_t w = 0;
        std::memcpy(&w, s.data() + i, 8);
        if (needs_escape(w)) break;
        i += 8;
      }
      if (i >= s.size()) break;
      auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out_.append(s.data() + plain, i - plain);
      plain = i + 1;
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          out_ += "\\u00";
          out_ += hex[c >> 4];
          out_ += hex[c & 0xFu];
      }
    }
    out_.append(s.data() + plain, s.size() - plain);
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;
};

/// Body as "body" when it is UTF-8, else "body_base64"; headers as an object (the first of
/// several fields of one name); the fairness key.
void put_payload(json_writer& w, const message& m) {
  if (is_utf8(m.body)) {
    w.key("body");
    w.value_string(m.body);
  } else {
    w.key("body_base64");
    w.value_string(base64_encode(m.body));
  }
  w.key("headers");
  w.open('{');
  for (std::size_t i = 0; i < m.headers.size(); ++i) {
    const auto& name = m.headers[i].name;
    bool repeated = false;
    for (std::size_t j = 0; j < i && !repeated; ++j) repeated = m.headers[j].name == name;
    if (repeated) continue;
    w.text_key(name);
    w.text(m.headers[i].value);
  }
  w.close('}');
  w.key("fairness_key");
  w.text(m.fairness_key);
}

/// About what one message's answer takes: its body and headers, base64's growth, the fields.
std::size_t answer_bytes(const message& m) {
  auto n = m.body.size() * 4 / 3 + m.fairness_key.size() + 256;
  for (const auto& h : m.headers) n += h.name.size() + h.value.size() + 8;
  return n;
}

/// One message of an enqueue; `path` is "" (single) or "messages[i]".
result<outgoing_message> message_from_json(const json::value& v, const std::string& path) {
  const auto* obj = v.if_object();
  if (obj == nullptr)
    return bad((path.empty() ? std::string{"the body"} : path) + " must be an object, not " +
               kind_of(v));
  if (auto ok =
          check_fields(*obj, {"body", "body_base64", "headers", "fairness_key", "delay_ms"}, path);
      !ok)
    return ok.err();
  outgoing_message m;
  auto body = get_string(*obj, "body", path);
  if (!body) return body.err();
  auto body64 = get_string(*obj, "body_base64", path);
  if (!body64) return body64.err();
  if (body.value() && body64.value())
    return bad(join(path, "body") + " and " + join(path, "body_base64") +
               " are exclusive: give one");
  if (body.value()) {
    m.body = std::move(*body.value());
  } else if (body64.value()) {
    auto raw = base64_decode(*body64.value());
    if (!raw) return bad(join(path, "body_base64") + " is not valid base64");
    m.body = std::move(*raw);
  }
  if (const auto* h = obj->if_contains("headers")) {
    const auto* ho = h->if_object();
    if (ho == nullptr)
      return bad(join(path, "headers") + " must be an object of strings, not " + kind_of(*h));
    if (ho->size() > limits::headers_max)
      return error{errc::limit_exceeded, join(path, "headers") + " has " +
                                             std::to_string(ho->size()) + " entries, at most " +
                                             std::to_string(limits::headers_max) + " allowed"};
    for (const auto& kv : *ho) {
      const auto* s = kv.value().if_string();
      if (s == nullptr)
        return bad(join(join(path, "headers"), kv.key()) + " must be a string, not " +
                   kind_of(kv.value()));
      m.headers.push_back(header_field{std::string{kv.key()}, std::string{*s}});
    }
  }
  auto fk = get_string(*obj, "fairness_key", path);
  if (!fk) return fk.err();
  if (fk.value()) m.fairness_key = std::move(*fk.value());
  auto delay =
      get_int(*obj, "delay_ms", path, 0,
              std::chrono::duration_cast<std::chrono::milliseconds>(limits::delay_max).count());
  if (!delay) return delay.err();
  if (delay.value()) m.delay = std::chrono::milliseconds{*delay.value()};
  return m;
}

result<lease_token> lease_field(const json::value& v, const std::string& path) {
  const auto* s = v.if_string();
  if (s == nullptr) return bad(path + " must be a lease string, not " + kind_of(v));
  auto lease = decode_lease(*s);
  if (!lease) return bad(path + " is not a lease issued by this broker");
  return *lease;
}

result<lease_token> required_lease(const json::object& body) {
  const auto* v = body.if_contains("lease");
  if (v == nullptr) return bad("lease is required");
  return lease_field(*v, "lease");
}

}  // namespace

// -- encodings ----------------------------------------------------------------------------------

std::string base64_encode(std::string_view bytes, bool url) {
  auto alphabet = url ? b64_url : b64_std;
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  // Whole groups written into room made once (an append per character was most of encoding
  // each delivery's lease).
  out.resize(bytes.size() / 3 * 4);
  auto* o = out.data();
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3, o += 4) {
    auto n = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
             (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
             std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    o[0] = alphabet[(n >> 18) & 63u];
    o[1] = alphabet[(n >> 12) & 63u];
    o[2] = alphabet[(n >> 6) & 63u];
    o[3] = alphabet[n & 63u];
  }
  auto rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) n |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out += alphabet[(n >> 18) & 63u];
    out += alphabet[(n >> 12) & 63u];
    if (rest == 2) out += alphabet[(n >> 6) & 63u];
    if (!url) out.append(rest == 1 ? 2 : 1, '=');
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text, bool url) {
  // Built once per alphabet: every lease of an ack batch is decoded here.
  static constexpr auto table = [](std::string_view alphabet) {
    std::array<int, 256> t{};
    for (auto& v : t) v = -1;
    for (std::size_t i = 0; i < alphabet.size(); ++i)
      t[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
    return t;
  };
  static constexpr auto std_values = table(b64_std);
  static constexpr auto url_values = table(b64_url);
  const auto& value = url ? url_values : std_values;
  while (!text.empty() && text.back() == '=') {
    if (text.size() % 4 == 0 || (text.size() + 1) % 4 == 0 || (text.size() + 2) % 4 == 0)
      text.remove_suffix(1);
    else
      return std::nullopt;
  }
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    auto v = value[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(static_cast<unsigned char>((acc >> bits) & 0xFFu));
    }
  }
  // Leftover bits must be zero, so every byte string has exactly one encoding.
  if ((acc & ((1u << bits) - 1u)) != 0) return std::nullopt;
  return out;
}

bool is_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    // ASCII eight bytes at a time: most bodies are all ASCII, and every message body is checked
    // on its way in and out (0.5 us per 256-byte message bytewise, 1% of laneqd's CPU).
    while (i + 8 <= text.size()) {
      std::uint64_t word = 0;
      std::memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080u) != 0) break;
      i += 8;
    }
    if (i >= text.size()) break;
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0u) == 0xC0u) {
      len = 2;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0u) == 0xE0u) {
      len = 3;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8u) == 0xF0u) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (i + len > text.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0u) != 0x80u) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
      return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string encode_lease(const lease_token& lease) {
  std::string raw;
  raw.reserve(32);
  put_u64(raw, lease.group.value, 8);
  put_u64(raw, lease.msg.value, 8);
  put_u64(raw, lease.attempt, 4);
  put_u64(raw, lease.nonce, 8);
  // An ordered batch's lease adds its size; a single message's keeps the form it had before.
  if (lease.batch != 1) put_u64(raw, lease.batch, 4);
  return base64_encode(raw, true);
}

std::optional<lease_token> decode_lease(std::string_view text) {
  if (text.size() != 38 && text.size() != 43) return std::nullopt;
  auto raw = base64_decode(text, true);
  if (!raw || (raw->size() != 28 && raw->size() != 32)) return std::nullopt;
  lease_token t;
  t.group.value = get_u64(*raw, 0, 8);
  t.msg.value = get_u64(*raw, 8, 8);
  t.attempt = static_cast<std::uint32_t>(get_u64(*raw, 16, 4));
  t.nonce = get_u64(*raw, 20, 8);
  if (raw->size() == 32) {
    t.batch = static_cast<std::uint32_t>(get_u64(*raw, 28, 4));
    if (t.batch < 2 || t.batch > limits::ordered_batch_max) return std::nullopt;
  }
  return t;
}

std::string encode_id(message_id id) {
  return std::to_string(id.value);
}

std::optional<message_id> decode_id(std::string_view text) {
  std::uint64_t v = 0;
  if (text.empty() || text.size() > 20) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v == 0) return std::nullopt;
  return message_id{v};
}

std::string encode_groups_cursor(std::string_view after) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * after.size());
  for (char ch : after) {
    auto c = static_cast<unsigned char>(ch);
    out += hex[c >> 4];
    out += hex[c & 0xFu];
  }
  return out;
}

std::optional<std::string> decode_groups_cursor(std::string_view text) {
  if (text.size() != 32 && text.size() != 36) return std::nullopt;  // lane, or shard and lane
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    auto hi = digit(text[i]);
    auto lo = digit(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    auto hi = hex(text[i + 1]);
    auto lo = hex(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// -- requests -----------------------------------------------------------------------------------

result<json::object> parse_body(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return json::object{};
  boost::system::error_code ec;
  json::parse_options opt;
  opt.max_depth = 32;
  // One arena per request, freed at once with the tree: a batch of messages is a few hundred
  // nodes and strings, each its own allocation and deallocation with the default resource.
  auto arena = json::make_shared_resource<json::monotonic_resource>(
      std::max<std::size_t>(1024, body.size() * 2));
  auto v = json::parse(body, ec, std::move(arena), opt);
  if (ec) return bad("the request body is not valid JSON: " + ec.message());
  auto* obj = v.if_object();
  if (obj == nullptr) return bad("the request body must be a JSON object, not " + kind_of(v));
  return std::move(*obj);
}

status check_fields(const json::object& obj, std::initializer_list<std::string_view> allowed,
                    std::string_view path) {
  for (const auto& kv : obj) {
    bool known = false;
    for (auto a : allowed) known = known || a == kv.key();
    if (!known) return bad(join(path, kv.key()) + " is not a known field");
  }
  return ok_t{};
}

result<std::optional<std::int64_t>> get_int(const json::object& obj, std::string_view key,
                                            std::string_view path, std::int64_t min,
                                            std::int64_t max) {
  const auto* v = obj.if_contains(key);
  if (v == nullptr) return std::optional<std::int64_t>{};
  std::int64_t n = 0;
  if (const auto* i = v->if_int64()) {
    n = *i;
  } else if (const auto* u = v->if_uint64()) {
    if (*u > static_cast<std::uint64_t>(max))
      return bad(join(path, key) + " must be between " + std::to_string(min) + " and " +
                 std::to_string(max));
    n = static_cast<std::int64_t>(*u);
  } else {
    return bad(join(path, key) + " must be an integer, not " + kind_of(*v));
  }
  if (n < min || n > max)
    return bad(join(path, key) + " must be between " + std::to_string(min) + " and " +
               std::to_string(max));
  return std::optional<std::int64_t>{n};
}

result<std::optional<std::string>> get_string(const json::object& obj, std::string_view key,
                                              std::string_view path) {
  const auto* v = obj.if_contains(key);
  if (v == nullptr) return std::optional<std::string>{};
  const auto* s = v->if_string();
  if (s == nullptr) return bad(join(path, key) + " must be a string, not " + kind_of(*v));
  return std::optional<std::string>{std::string{*s}};
}

result<std::optional<bool>> get_bool(const json::object& obj, std::string_view key,
                                     std::string_view path) {
  const auto* v = obj.if_contains(key);
  if (v == nullptr) return std::optional<bool>{};
  const auto* b = v->if_bool();
  if (b == nullptr) return bad(join(path, key) + " must be true or false, not " + kind_of(*v));
  return std::optional<bool>{*b};
}

result<std::vector<outgoing_message>> messages_from_json(const json::object& body,
                                                         std::size_t batch_max) {
  std::vector<outgoing_message> out;
  const auto* batch = body.if_contains("messages");
  if (batch == nullptr) {
    auto m = message_from_json(body, "");
    if (!m) return m.err();
    out.push_back(std::move(m.value()));
    return out;
  }
  if (body.size() != 1)
    return bad("a batch is {\"messages\": [...]} alone; other fields belong in each message");
  const auto* arr = batch->if_array();
  if (arr == nullptr) return bad("messages must be an array, not " + kind_of(*batch));
  if (arr->empty()) return bad("messages must not be empty");
  if (arr->size() > batch_max)
    return error{errc::limit_exceeded, "messages has " + std::to_string(arr->size()) +
                                           " entries, at most " + std::to_string(batch_max) +
                                           " allowed"};
  out.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto m = message_from_json((*arr)[i], "messages[" + std::to_string(i) + "]");
    if (!m) return m.err();
    out.push_back(std::move(m.value()));
  }
  return out;
}

result<receive_request> receive_from_json(const json::object& body) {
  if (auto ok = check_fields(body, {"max", "lease_ms", "wait_ms", "batch"}, ""); !ok)
    return ok.err();
  receive_request r;
  auto max = get_int(body, "max", "", 1, static_cast<std::int64_t>(limits::receive_batch_max));
  if (!max) return max.err();
  if (max.value()) r.max = static_cast<std::uint32_t>(*max.value());
  auto lease =
      get_int(body, "lease_ms", "",
              std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_min).count(),
              std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_max).count());
  if (!lease) return lease.err();
  if (lease.value()) r.lease_us = *lease.value() * 1000;
  auto wait = get_int(
      body, "wait_ms", "", 0,
      std::chrono::duration_cast<std::chrono::milliseconds>(limits::receive_wait_max).count());
  if (!wait) return wait.err();
  if (wait.value()) r.wait_us = *wait.value() * 1000;
  auto batch = get_int(body, "batch", "", 1, limits::ordered_batch_max);
  if (!batch) return batch.err();
  if (batch.value()) r.batch = static_cast<std::uint32_t>(*batch.value());
  return r;
}

result<lease_list> leases_from_json(const json::object& body, std::size_t batch_max) {
  if (auto ok = check_fields(body, {"lease", "leases", "count"}, ""); !ok) return ok.err();
  lease_list out;
  const auto* one = body.if_contains("lease");
  const auto* many = body.if_contains("leases");
  if ((one == nullptr) == (many == nullptr)) return bad("give exactly one of lease or leases");
  auto count = get_int(body, "count", "", 1, limits::ordered_batch_max);
  if (!count) return count.err();
  if (count.value() && one == nullptr) return bad("count goes with one lease, not with leases");
  if (one != nullptr) {
    auto l = lease_field(*one, "lease");
    if (!l) return l.err();
    out.leases.push_back(l.value());
    if (count.value()) out.count = static_cast<std::uint32_t>(*count.value());
    return out;
  }
  out.single = false;
  const auto* arr = many->if_array();
  if (arr == nullptr) return bad("leases must be an array, not " + kind_of(*many));
  if (arr->empty()) return bad("leases must not be empty");
  if (arr->size() > batch_max)
    return error{errc::limit_exceeded, "leases has " + std::to_string(arr->size()) +
                                           " entries, at most " + std::to_string(batch_max) +
                                           " allowed"};
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto l = lease_field((*arr)[i], "leases[" + std::to_string(i) + "]");
    if (!l) return l.err();
    out.leases.push_back(l.value());
  }
  return out;
}

result<std::pair<lease_token, nack_request>> nack_from_json(const json::object& body) {
  if (auto ok = check_fields(body, {"lease", "retry_after_ms", "dead_letter", "from"}, ""); !ok)
    return ok.err();
  auto lease = required_lease(body);
  if (!lease) return lease.err();
  auto retry = get_int(
      body, "retry_after_ms", "", 0,
      std::chrono::duration_cast<std::chrono::milliseconds>(limits::retry_after_max).count());
  if (!retry) return retry.err();
  auto dead = get_bool(body, "dead_letter", "");
  if (!dead) return dead.err();
  auto from = get_int(body, "from", "", 0, limits::ordered_batch_max - 1);
  if (!from) return from.err();
  nack_request r;
  if (from.value()) r.from = static_cast<std::uint32_t>(*from.value());
  if (dead.value().value_or(false)) {
    if (retry.value()) return bad("retry_after_ms and dead_letter are exclusive");
    r.kind = nack_kind::dead_letter;
  } else {
    r.kind = nack_kind::retry;
    r.retry_after_us = retry.value().value_or(0) * 1000;
  }
  return std::pair{lease.value(), r};
}

result<std::pair<lease_token, std::int64_t>> extend_from_json(const json::object& body) {
  if (auto ok = check_fields(body, {"lease", "lease_ms"}, ""); !ok) return ok.err();
  auto lease = required_lease(body);
  if (!lease) return lease.err();
  auto ms =
      get_int(body, "lease_ms", "",
              std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_min).count(),
              std::chrono::duration_cast<std::chrono::milliseconds>(limits::lease_max).count());
  if (!ms) return ms.err();
  if (!ms.value()) return bad("lease_ms is required");
  return std::pair{lease.value(), *ms.value() * 1000};
}

result<std::string> checkpoint_dir_from_json(const json::object& body) {
  if (auto ok = check_fields(body, {"dir"}, ""); !ok) return ok.err();
  auto dir = get_string(body, "dir", "");
  if (!dir) return dir.err();
  if (!dir.value()) return bad("dir is required (an absolute path on the laneqd host)");
  auto& d = *dir.value();
  if (d.size() > limits::checkpoint_dir_bytes_max)
    return bad("dir has " + std::to_string(d.size()) + " bytes, at most " +
               std::to_string(limits::checkpoint_dir_bytes_max) + " allowed");
  if (d.find('\0') != std::string::npos) return bad("dir must not contain a NUL byte");
  if (d.empty() || d.front() != '/')
    return bad("dir must be an absolute path (laneqd's working directory is not yours), got \"" +
               d.substr(0, 200) + "\"");
  return std::move(d);
}

result<std::vector<message_id>> redrive_from_json(const json::object& body, std::size_t batch_max) {
  if (auto ok = check_fields(body, {"ids", "to"}, ""); !ok) return ok.err();
  std::vector<message_id> ids;
  const auto* v = body.if_contains("ids");
  if (v == nullptr) return ids;
  const auto* arr = v->if_array();
  if (arr == nullptr) return bad("ids must be an array of id strings, not " + kind_of(*v));
  if (arr->size() > batch_max)
    return error{errc::limit_exceeded, "ids has " + std::to_string(arr->size()) +
                                           " entries, at most " + std::to_string(batch_max) +
                                           " allowed"};
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const auto* s = (*arr)[i].if_string();
    auto id = s != nullptr ? decode_id(*s) : std::nullopt;
    if (!id) return bad("ids[" + std::to_string(i) + "] is not a message id string");
    ids.push_back(*id);
  }
  return ids;
}

// -- answers ------------------------------------------------------------------------------------

namespace {

/// `{"<list>": [...]}` with `each(w, x)` writing the fields of every element of `xs`.
template <class T, class Each>
std::string list_json(std::string_view list, const std::vector<T>& xs, std::size_t bytes,
                      Each each) {
  json_writer w{bytes};
  w.open('{');
  w.key(list);
  w.open('[');
  for (const auto& x : xs) {
    w.open('{');
    each(w, x);
    w.close('}');
  }
  w.close(']');
  w.close('}');
  return w.take();
}

}  // namespace

result<std::optional<std::string>> redrive_target_from_json(const json::object& body) {
  auto to = get_string(body, "to", "");
  if (!to) return to.err();
  if (to.value() && to.value()->empty()) return bad("to must name a queue, not be empty");
  return to;
}

result<std::vector<message_id>> dead_letter_ids_from_json(const json::object& body) {
  if (auto ok = check_fields(body, {"ids"}, ""); !ok) return ok.err();
  if (!body.contains("ids")) return std::vector<message_id>{};
  auto ids = redrive_from_json(body, limits::dead_letter_delete_max);
  if (ids && ids.value().empty())
    return bad("ids must name at least one dead letter (send no body to delete every one)");
  return ids;
}

result<group_filter> purge_from_json(const json::object& body) {
  if (auto ok = check_fields(body, {"group"}, ""); !ok) return ok.err();
  auto group = get_string(body, "group", "");
  if (!group) return group.err();
  group_filter out;
  if (group.value()) {
    out.one = true;
    out.key = std::move(*group.value());
  }
  return out;
}

std::string deliveries_json(const std::vector<delivery>& ds) {
  std::size_t bytes = 32;
  for (const auto& d : ds) bytes += answer_bytes(d.msg) + d.ordering_key.size();
  return list_json("messages", ds, bytes, [](json_writer& w, const delivery& d) {
    w.key("id");
    w.value_string(encode_id(d.msg.id));
    w.key("lease");
    w.value_string(encode_lease(d.lease));
    w.key("batch_index");
    w.number(d.batch_index);
    w.key("attempt");
    w.number(d.msg.attempts);
    put_payload(w, d.msg);
    w.key("ordering_key");
    w.text(d.ordering_key);
    w.key("enqueued_at_ms");
    w.number(d.msg.enqueued_at.ms());
    w.key("lease_deadline_ms");
    w.number(d.deadline.ms());
  });
}

std::string peeked_json(const std::vector<peeked_message>& ms) {
  std::size_t bytes = 32;
  for (const auto& m : ms) bytes += answer_bytes(m.msg) + m.ordering_key.size();
  return list_json("messages", ms, bytes, [](json_writer& w, const peeked_message& m) {
    w.key("id");
    w.value_string(encode_id(m.msg.id));
    put_payload(w, m.msg);
    w.key("ordering_key");
    w.text(m.ordering_key);
    w.key("attempts");
    w.number(m.msg.attempts);
    w.key("enqueued_at_ms");
    w.number(m.msg.enqueued_at.ms());
    w.key("not_before_ms");
    w.number(m.msg.not_before.ms());
    w.key("in_flight");
    w.value_bool(m.in_flight);
    if (m.in_flight) {
      w.key("lease_deadline_ms");
      w.number(m.lease_deadline.ms());
    }
  });
}

std::string dead_letters_json(const std::vector<dead_letter>& ds) {
  std::size_t bytes = 32;
  for (const auto& d : ds) bytes += answer_bytes(d.msg);
  return list_json("dead_letters", ds, bytes, [](json_writer& w, const dead_letter& d) {
    w.key("id");
    w.value_string(encode_id(d.msg.id));
    put_payload(w, d.msg);
    w.key("attempts");
    w.number(d.msg.attempts);
    w.key("reason");
    w.value_string(to_string(d.reason));
    w.key("at_ms");
    w.number(d.at.ms());
    w.key("enqueued_at_ms");
    w.number(d.msg.enqueued_at.ms());
  });
}

json::object to_json(const queue_stats& s) {
  json::object o;
  o["enqueued"] = s.enqueued;
  o["delivered"] = s.delivered;
  o["acked"] = s.acked;
  o["nacked"] = s.nacked;
  o["lease_expired"] = s.lease_expired;
  o["dead_lettered"] = s.dead_lettered;
  o["redriven"] = s.redriven;
  o["purged"] = s.purged;
  o["dead_letters_deleted"] = s.dead_letters_deleted;
  o["expired_dead_lettered"] = s.expired_dead_lettered;
  o["expired_dropped"] = s.expired_dropped;
  o["dead_letters_expired"] = s.dead_letters_expired;
  o["key_missing"] = s.key_missing;
  o["rejected"] = s.rejected;
  o["recovered"] = s.recovered;
  o["deduplicated"] = s.deduplicated;
  o["refused_full"] = s.refused_full;
  o["dedupe_evictions"] = s.dedupe_evictions;
  o["window_reads"] = s.window_reads;
  o["window_read_messages"] = s.window_read_messages;
  o["corrupt_records"] = s.corrupt_records;
  o["backlog"] = s.backlog;
  o["backlog_bytes"] = s.backlog_bytes;
  o["in_flight"] = s.in_flight;
  o["live_groups"] = s.live_groups;
  o["dead_letters"] = s.dead_letters;
  o["waiting_receives"] = s.waiting_receives;
  o["window_bytes"] = s.window_bytes;
  json::array fairness;
  for (const auto& f : s.fairness) {
    json::object e;
    e["fairness_key"] = f.key;
    e["backlog"] = f.backlog;
    if (f.other) e["other"] = true;
    fairness.emplace_back(std::move(e));
  }
  o["fairness_backlog"] = std::move(fairness);
  return o;
}

json::object to_json(const group_info& g) {
  json::object o;
  o["key"] = g.key;
  o["backlog"] = g.backlog;
  o["state"] = to_string(g.state);
  o["since_ms"] = g.since.ms();
  o["until_ms"] = g.until.ms();
  o["head"] = g.head ? json::value(encode_id(g.head)) : json::value(nullptr);
  if (!g.reason.empty()) o["reason"] = g.reason;
  return o;
}

json::object to_json(const checkpoint_info& c) {
  json::object o;
  o["dir"] = c.dir;
  o["bytes"] = c.bytes;
  o["files"] = c.files;
  o["ms"] = c.elapsed_us / 1000;
  return o;
}

unsigned http_status(errc code) {
  switch (code) {
    case errc::invalid_spec:
    case errc::ordering_key_missing:
    case errc::enqueue_rejected:
    case errc::invalid_argument: return 400;
    case errc::spec_conflict:
    case errc::queue_not_empty: return 409;
    case errc::queue_not_found:
    case errc::topic_not_found:
    case errc::lease_not_found:
    case errc::lease_expired:
    case errc::dead_letter_not_found:
    case errc::queue_deleted: return 404;
    case errc::limit_exceeded: return 413;
    case errc::queue_full: return 429;
    case errc::storage_failed:
    case errc::unavailable: return 503;
    case errc::corrupt_record: return 500;
    case errc::unauthorized: return 401;
    case errc::forbidden: return 403;
    case errc::route_not_found: return 404;
    case errc::already_exists: return 409;
    case errc::checkpoint_failed: return 500;
  }
  return 500;
}

std::string utf8_or_escaped(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80u ? 1 : (c & 0xE0u) == 0xC0u ? 2 : (c & 0xF0u) == 0xE0u ? 3 : 4;
    if (i + len <= text.size() && is_utf8(text.substr(i, len))) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 0xFu];
    ++i;
  }
  return out;
}

std::string error_body(const error& e) {
  json::object inner;
  inner["code"] = to_string(e.code);
  inner["number"] = static_cast<int>(e.code);
  // Messages quote what the client sent (a path, a query parameter), cut to a length: keep the
  // answer valid JSON (Boost.JSON writes string bytes as they are).
  inner["message"] = utf8_or_escaped(e.message);
  json::object o;
  o["error"] = std::move(inner);
  return json::serialize(o);
}

}  // namespace laneq::server
