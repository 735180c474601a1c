// The storage codec (libqueue/include/laneq/codec.hpp).
#include "laneq/codec.hpp"

#include <array>
#include <bit>
#include <cstring>

#include "laneq/assert.hpp"
#include "laneq/limits.hpp"
#include "sha256.hpp"

namespace laneq::codec {

namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr auto crc32c_table = make_crc32c_table();

/// Tag of a writer whose text is a sealed record: it starts with room for the record header.
struct sealed_t {};
constexpr sealed_t sealed{};

/// Bytes of a sealed record's header: format version, CRC32C of the rest.
constexpr std::size_t seal_header_bytes = 5;

/// Writes the low `N` bytes of `x` at `out`, most significant first: one byte swap and one copy
/// on a little-endian machine (the byte loop was 4% of a pure engine run's instructions).
template <std::size_t N>
void put_big_endian(char* out, std::uint64_t x) {
  static_assert(N == 4 || N == 8);
  if constexpr (std::endian::native == std::endian::little) {
    if constexpr (N == 8) {
      auto y = __builtin_bswap64(x);
      std::memcpy(out, &y, N);
    } else {
      auto y = __builtin_bswap32(static_cast<std::uint32_t>(x));
      std::memcpy(out, &y, N);
    }
  } else {
    for (std::size_t k = 0; k < N; ++k)
      out[k] = static_cast<char>(static_cast<std::uint8_t>(x >> (8 * (N - 1 - k))));
  }
}

class writer {
 public:
  writer() = default;
  /// A sealed record's writer: the header is filled in by `seal`, in place.
  explicit writer(sealed_t, std::size_t reserve = 64) {
    out_.reserve(seal_header_bytes + reserve);
    out_.append(seal_header_bytes, '\0');
  }
  void u8(std::uint8_t x) { out_.push_back(static_cast<char>(x)); }
  void u32(std::uint32_t x) { big_endian<4>(x); }
  void u64(std::uint64_t x) { big_endian<8>(x); }
  void i64(std::int64_t x) { u64(static_cast<std::uint64_t>(x)); }
  void bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  void raw(std::string_view s) { out_.append(s); }
  std::string& out() { return out_; }

 private:
  // One append per field: a byte-wise push_back was 5% of all instructions of an engine run
  // (callgrind), every message's record and key being written this way.
  template <std::size_t N>
  void big_endian(std::uint64_t x) {
    char buf[N];
    put_big_endian<N>(buf, x);
    out_.append(buf, N);
  }

  std::string out_;
};

/// Writes into a buffer sized beforehand, with no capacity check per field: for the records and
/// keys written once or twice per message (the message record was 8% of a pure engine run's
/// instructions as appends to a string, each checking its capacity).
class span_writer {
 public:
  explicit span_writer(char* out) : out_(out) {}
  void u8(std::uint8_t x) { *out_++ = static_cast<char>(x); }
  void u32(std::uint32_t x) {
    put_big_endian<4>(out_, x);
    out_ += 4;
  }
  void u64(std::uint64_t x) {
    put_big_endian<8>(out_, x);
    out_ += 8;
  }
  void i64(std::int64_t x) { u64(static_cast<std::uint64_t>(x)); }
  void bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s);
  }
  void raw(std::string_view s) { copy(s.data(), s.size()); }
  const char* end() const { return out_; }

 private:
  void copy(const void* p, std::size_t n) {
    if (n == 0) return;  // memcpy from a null pointer (an empty view) is undefined
    std::memcpy(out_, p, n);
    out_ += n;
  }

  char* out_;
};

class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return in_.empty(); }

  std::uint64_t uint(int n) {
    if (!ok_ || in_.size() < static_cast<std::size_t>(n)) {
      ok_ = false;
      return 0;
    }
    std::uint64_t x = 0;
    for (int i = 0; i < n; ++i)
      x = (x << 8) | static_cast<std::uint8_t>(in_[static_cast<std::size_t>(i)]);
    in_.remove_prefix(static_cast<std::size_t>(n));
    return x;
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(big_endian<4>()); }
  std::uint64_t u64() { return big_endian<8>(); }
  std::int64_t i64() { return static_cast<std::int64_t>(big_endian<8>()); }
  std::string_view raw(std::size_t n) {
    if (!ok_ || in_.size() < n) {
      ok_ = false;
      return {};
    }
    auto out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }
  std::string bytes(std::size_t max) {
    auto n = u32();
    if (!ok_ || n > max || in_.size() < n) {
      ok_ = false;
      return {};
    }
    std::string out{in_.substr(0, n)};
    in_.remove_prefix(n);
    return out;
  }

 private:
  /// `N` bytes, most significant first: one copy and one byte swap on a little-endian machine,
  /// as `put_big_endian` writes them (the byte loop was most of reading a message to enqueue
  /// over CAF, ADR 0013).
  template <std::size_t N>
  std::uint64_t big_endian() {
    static_assert(N == 4 || N == 8);
    if (!ok_ || in_.size() < N) {
      ok_ = false;
      return 0;
    }
    std::uint64_t x = 0;
    if constexpr (std::endian::native == std::endian::little) {
      if constexpr (N == 8) {
        std::memcpy(&x, in_.data(), N);
        x = __builtin_bswap64(x);
      } else {
        std::uint32_t y = 0;
        std::memcpy(&y, in_.data(), N);
        x = __builtin_bswap32(y);
      }
    } else {
      for (std::size_t i = 0; i < N; ++i) x = (x << 8) | static_cast<std::uint8_t>(in_[i]);
    }
    in_.remove_prefix(N);
    return x;
  }

  std::string_view in_;
  bool ok_ = true;
};

error corrupt(std::string_view kind, const std::string& what) {
  return error{errc::corrupt_record, std::string{kind} + " record: " + what};
}

/// A sealed record: version byte, CRC32C of the payload, payload. Fills in the header of `out`,
/// whose payload follows room for it.
void seal_in_place(std::string& out) {
  LANEQ_ASSERT(out.size() >= seal_header_bytes, "a sealed record starts with its header");
  auto crc = crc32c(std::string_view{out}.substr(seal_header_bytes));
  span_writer head{out.data()};
  head.u8(message_format_version);
  head.u32(crc);
}

/// The record `w` (made with `sealed`) holds, its header filled in.
std::string seal(writer& w) {
  seal_in_place(w.out());
  return std::move(w.out());
}

/// The body of a sealed record, or why it cannot be trusted.
result<std::string_view> unseal(std::string_view kind, std::string_view record) {
  if (record.size() < 5) return corrupt(kind, "shorter than its header");
  auto version = static_cast<std::uint8_t>(record[0]);
  if (version != message_format_version)
    return corrupt(kind, "format version " + std::to_string(version) +
                             " is not known (this build reads " +
                             std::to_string(message_format_version) + ")");
  reader head{record.substr(1, 4)};
  auto crc = head.u32();
  auto payload = record.substr(5);
  if (crc32c(payload) != crc) return corrupt(kind, "checksum mismatch");
  return payload;
}

/// Checks that a reader consumed its record exactly.
result<ok_t> finish(std::string_view kind, const reader& r) {
  if (!r.ok()) return corrupt(kind, "a field runs past the end of the record");
  if (!r.done()) return corrupt(kind, "trailing bytes after the last field");
  return ok_t{};
}

std::string key_prefix(tag t, std::uint64_t uid) {
  writer w;
  w.u8(static_cast<std::uint8_t>(t));
  w.u64(uid);
  return std::move(w.out());
}

/// Bytes `put_headers` writes for `hs`: their count, each name and value after its length (a
/// message record and a message to enqueue's transport form write headers alike).
std::size_t headers_bytes(const std::vector<header_field>& hs) {
  std::size_t n = 4;
  for (const auto& h : hs) n += 8 + h.name.size() + h.value.size();
  return n;
}

void put_headers(span_writer& w, const std::vector<header_field>& hs) {
  w.u32(static_cast<std::uint32_t>(hs.size()));
  for (const auto& h : hs) {
    w.bytes(h.name);
    w.bytes(h.value);
  }
}

/// Reads what `put_headers` wrote into `out`; false when they are more than the limit.
bool get_headers(reader& r, std::vector<header_field>& out) {
  auto n = r.u32();
  if (n > limits::headers_max) return false;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) {
    auto name = r.bytes(limits::header_name_bytes_max);
    auto value = r.bytes(limits::header_value_bytes_max);
    out.push_back(header_field{std::move(name), std::move(value)});
  }
  return true;
}

/// Bytes `put_message` writes for `m`.
std::size_t message_fields_bytes(const message& m) {
  // id, seq, three timestamps, attempts; the fairness key and the body after their lengths; the
  // headers; the attribute count, each name and value after its length.
  std::size_t n =
      5 * 8 + 4 + 4 + m.fairness_key.size() + 4 + m.body.size() + headers_bytes(m.headers) + 4;
  for (const auto& a : m.attributes) n += 8 + a.name.size() + a.value.size();
  return n;
}

void put_message(span_writer& w, const message& m) {
  w.u64(m.id.value);
  w.u64(m.seq.value);
  w.i64(m.enqueued_at.us);
  w.i64(m.delay_until.us);
  w.i64(m.not_before.us);
  w.u32(m.attempts);
  w.bytes(m.fairness_key);
  w.bytes(m.body);
  put_headers(w, m.headers);
  w.u32(static_cast<std::uint32_t>(m.attributes.size()));
  for (const auto& a : m.attributes) {
    w.bytes(a.name);
    w.bytes(a.value);
  }
}

result<message> get_message(reader& r) {
  message m;
  m.id = message_id{r.u64()};
  m.seq = message_seq{r.u64()};
  m.enqueued_at = timestamp{r.i64()};
  m.delay_until = timestamp{r.i64()};
  m.not_before = timestamp{r.i64()};
  m.attempts = r.u32();
  m.fairness_key = r.bytes(limits::fairness_key_bytes_max);
  m.body = r.bytes(limits::body_bytes_max);
  if (!get_headers(r, m.headers)) return corrupt("message", "too many headers");
  auto attributes = r.u32();
  if (attributes > limits::attributes_max) return corrupt("message", "too many attributes");
  for (std::uint32_t i = 0; i < attributes && r.ok(); ++i) {
    auto name = r.bytes(limits::key_component_name_bytes_max);
    auto value = r.bytes(limits::header_value_bytes_max);
    m.attributes.push_back(attribute{std::move(name), std::move(value)});
  }
  return m;
}

void put_components(writer& w, const std::vector<key_component>& cs) {
  w.u32(static_cast<std::uint32_t>(cs.size()));
  for (const auto& c : cs) {
    w.u8(static_cast<std::uint8_t>(c.which()));
    w.bytes(c.name());
  }
}

result<std::vector<key_component>> get_components(reader& r) {
  auto n = r.u32();
  if (n > limits::key_components_max) return corrupt("queue", "too many key components");
  std::vector<key_component> out;
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) {
    auto k = static_cast<std::uint8_t>(r.uint(1));
    if (k < 1 || k > 5) return corrupt("queue", "unknown key component kind");
    // A function component comes back without its callable (key_component::function_missing).
    out.emplace_back(static_cast<key_component::kind>(k), r.bytes(limits::header_name_bytes_max));
  }
  return out;
}

/// The bit of a dead-letter record's reason byte that says the record carries its lane.
constexpr std::uint8_t dead_letter_lane_flag = 0x80;

void put_lane(span_writer& w, const lane_id& lane) {
  w.raw(std::string_view{reinterpret_cast<const char*>(lane.bytes.data()), lane.bytes.size()});
}

lane_id get_lane(reader& r) {
  lane_id lane;
  auto raw = r.raw(lane.bytes.size());
  for (std::size_t i = 0; i < raw.size(); ++i) lane.bytes[i] = static_cast<std::uint8_t>(raw[i]);
  return lane;
}

}  // namespace

namespace {

std::uint32_t crc32c_bytewise(std::string_view bytes, std::uint32_t crc) {
  for (char ch : bytes)
    crc = crc32c_table[(crc ^ static_cast<std::uint8_t>(ch)) & 0xFFu] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// SSE4.2's crc32 instruction computes CRC32C (the Castagnoli polynomial) 8 bytes at a time: the
// byte table cost about 10 instructions per byte, a large share of encoding a 300-byte message
// record (measured, docs/decisions/0010-performance-history.md).
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::string_view bytes,
                                                             std::uint32_t crc) {
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  std::uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian: the byte order the bytewise loop consumes
    c = __builtin_ia32_crc32di(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = __builtin_ia32_crc32qi(c32, static_cast<unsigned char>(*p));
  return c32;
}

const bool have_sse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc) {
  crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (have_sse42) return ~crc32c_sse42(bytes, crc);
#endif
  return ~crc32c_bytewise(bytes, crc);
}

// -- lanes ------------------------------------------------------------------------------------

bool lane_id::unordered() const {
  for (auto b : bytes)
    if (b != 0) return false;
  return true;
}

lane_id make_lane_id(std::string_view queue_name, std::string_view group_key) {
  std::string input;
  input.reserve(queue_name.size() + 1 + group_key.size());
  input.append(queue_name);
  input.push_back('\0');  // queue names hold no NUL, so (name, key) pairs cannot run together
  input.append(group_key);
  auto md = detail::sha256(input);
  lane_id lane;
  for (std::size_t i = 0; i < lane.bytes.size(); ++i) lane.bytes[i] = md[i];
  if (lane.unordered()) lane.bytes.back() = 1;  // lane 0 is reserved for unordered messages
  return lane;
}

// -- keys -------------------------------------------------------------------------------------

std::string meta_key(std::string_view name) {
  std::string out(1, static_cast<char>(tag::meta));
  out.append(name);
  return out;
}

std::string queue_key(std::uint64_t uid) {
  return key_prefix(tag::queue, uid);
}
std::string counters_key(std::uint64_t uid) {
  return key_prefix(tag::counters, uid);
}

std::string message_key(std::uint64_t uid, const lane_id& lane, message_seq seq) {
  // Every enqueue, ack and read-back makes one: written at once into its final size.
  std::string out(message_key_lane_prefix_bytes + 8, '\0');
  span_writer w{out.data()};
  w.u8(static_cast<std::uint8_t>(tag::message));
  w.u64(uid);
  put_lane(w, lane);
  w.u64(seq.value);
  LANEQ_ASSERT(w.end() == out.data() + out.size(), "a message key is written as sized");
  return out;
}

std::string dead_key(std::uint64_t uid, std::uint64_t order) {
  writer w;
  w.raw(key_prefix(tag::dead, uid));
  w.u64(order);
  return std::move(w.out());
}

std::string dead_index_key(std::uint64_t uid, message_id id) {
  writer w;
  w.raw(key_prefix(tag::dead_index, uid));
  w.u64(id.value);
  return std::move(w.out());
}

std::string lease_key(std::uint64_t uid, message_id id) {
  writer w;
  w.raw(key_prefix(tag::lease, uid));
  w.u64(id.value);
  return std::move(w.out());
}

std::string dedupe_key(std::uint64_t uid, std::string_view key) {
  auto out = key_prefix(tag::dedupe, uid);
  out.append(key);
  return out;
}

std::string topic_key(std::string_view name) {
  std::string out(1, static_cast<char>(tag::topic));
  out.append(name);
  return out;
}

result<std::string> parse_dedupe_key(std::string_view key) {
  if (key.size() < 9 || key[0] != static_cast<char>(tag::dedupe))
    return corrupt("dedupe key", "a dedupe key starts with 'U' and a queue uid");
  return std::string{key.substr(9)};
}

std::pair<std::string, std::string> tag_range(tag t) {
  auto c = static_cast<char>(t);
  return {std::string(1, c), std::string(1, static_cast<char>(c + 1))};
}

std::pair<std::string, std::string> queue_range(tag t, std::uint64_t uid) {
  // uid + 1 cannot overflow in practice (uids count queue creations from 1).
  return {key_prefix(t, uid), key_prefix(t, uid + 1)};
}

std::vector<std::pair<std::string, std::string>> queue_ranges(std::uint64_t uid) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(queue_tags.size());
  for (auto t : queue_tags) out.push_back(queue_range(t, uid));
  return out;
}

std::pair<std::string, std::string> lane_range(std::uint64_t uid, const lane_id& lane,
                                               message_seq after) {
  auto first = message_key(uid, lane, message_seq{after.value + 1});
  auto last = message_key(uid, lane, message_seq{0});
  // The end of the lane: the same prefix with every seq byte 0xFF, plus one byte.
  for (std::size_t i = last.size() - 8; i < last.size(); ++i) last[i] = '\xFF';
  last.push_back('\0');
  return {std::move(first), std::move(last)};
}

result<message_key_parts> parse_message_key(std::string_view key) {
  if (key.size() != 33 || key[0] != static_cast<char>(tag::message))
    return corrupt("message key", "a message key is 33 bytes starting with 'M', got " +
                                      std::to_string(key.size()) + " bytes");
  reader r{key.substr(1)};
  message_key_parts parts;
  parts.uid = r.u64();
  parts.lane = get_lane(r);
  parts.seq = message_seq{r.u64()};
  return parts;
}

std::string describe_message_key(std::string_view key) {
  auto parts = parse_message_key(key);
  if (!parts) return "a record with a malformed message key";
  static constexpr char digits[] = "0123456789abcdef";
  std::string lane;
  for (auto b : parts.value().lane.bytes) {
    lane.push_back(digits[b >> 4]);
    lane.push_back(digits[b & 0xFu]);
  }
  return "the message record at seq " + std::to_string(parts.value().seq.value) + " of lane " +
         lane;
}

result<std::uint64_t> parse_uid(std::string_view key) {
  if (key.size() < 9) return corrupt("key", "shorter than a tag and a queue uid");
  reader r{key.substr(1, 8)};
  return r.u64();
}

result<std::uint64_t> parse_dead_order(std::string_view key) {
  if (key.size() != 17 || key[0] != static_cast<char>(tag::dead))
    return corrupt("dead-letter key", "a dead-letter key is 17 bytes starting with 'D', got " +
                                          std::to_string(key.size()) + " bytes");
  reader r{key.substr(9)};
  return r.u64();
}

result<message_id> parse_dead_index_key(std::string_view key) {
  if (key.size() != 17 || key[0] != static_cast<char>(tag::dead_index))
    return error{errc::corrupt_record, "not a dead-letter index key"};
  reader r{key.substr(9)};
  return message_id{r.u64()};
}

// -- records ----------------------------------------------------------------------------------

std::string encode_message(const message& m) {
  // Sized exactly first, then written without a capacity check per field.
  // The redrive field was added later (docs/design/retention.md), only for a redriven message:
  // every other record stays as it was, byte for byte.
  const bool redriven = m.redriven_after_s != 0;
  std::string out(seal_header_bytes + message_fields_bytes(m) + (redriven ? 4 : 0), '\0');
  span_writer w{out.data() + seal_header_bytes};
  put_message(w, m);
  if (redriven) w.u32(m.redriven_after_s);
  LANEQ_ASSERT(w.end() == out.data() + out.size(), "a message record is written as sized");
  seal_in_place(out);
  return out;
}

result<message> decode_message(std::string_view record) {
  auto payload = unseal("message", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  auto m = get_message(r);
  if (!m) return m;
  if (!r.done()) m.value().redriven_after_s = r.u32();
  if (auto done = finish("message", r); !done) return done.err();
  return m;
}

result<std::size_t> message_body_bytes(std::string_view record) {
  auto payload = unseal("message", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  r.u64();
  r.u64();
  r.i64();
  r.i64();
  r.i64();
  r.u32();
  r.bytes(limits::fairness_key_bytes_max);
  auto body = r.bytes(limits::body_bytes_max);
  if (!r.ok()) return corrupt("message", "a field runs past the end of the record");
  return body.size();
}

std::string encode_queue(const queue_record& q) {
  const auto& s = q.spec;
  writer w{sealed};
  w.u64(q.uid);
  w.bytes(s.name());
  w.u8(static_cast<std::uint8_t>(s.ordering()));
  put_components(w, s.ordering_key());
  w.u8(static_cast<std::uint8_t>(s.missing_key_policy()));
  w.i64(s.lease_duration().count());
  w.u32(s.attempts_max());
  w.u32(static_cast<std::uint32_t>(s.throttles().size()));
  for (const auto& t : s.throttles()) {
    put_components(w, t.key);
    w.u64(std::bit_cast<std::uint64_t>(t.rate_per_s));
    w.u32(t.burst);
  }
  w.u8(static_cast<std::uint8_t>(s.delivery_mode()));
  w.u8(s.syncs_writes() ? 1 : 0);
  w.u8(q.had_hook ? 1 : 0);
  // Stored headers and dedupe (docs/design/lanes.md).
  w.u8(static_cast<std::uint8_t>(s.header_policy()));
  w.u32(static_cast<std::uint32_t>(s.header_list().size()));
  for (const auto& n : s.header_list()) w.bytes(n);
  w.u8(s.dedupe_rule() ? 1 : 0);
  if (s.dedupe_rule()) {
    put_components(w, s.dedupe_rule()->key);
    w.i64(s.dedupe_rule()->window.count());
  }
  // Shards (docs/design/sharding.md), only when there are several or settings follow: a queue of
  // one shard without them keeps the record of a queue from before shards existed, byte for byte.
  const auto& depth = s.depth_max();
  const auto& keep = s.retention_rule();
  const bool retains = !(keep == retention_rules{});
  if (s.shard_count() > 1 || depth.any() || retains) {
    w.u32(s.shard_count());
    put_components(w, s.shard_key());
    w.u32(static_cast<std::uint32_t>(q.shard_uids.size()));
    for (auto uid : q.shard_uids) w.u64(uid);
  }
  // Settings added later (docs/api.md "Backpressure", "Retention"), each present-flag then
  // value, each block written when it or one after it is set.
  if (depth.any() || retains) {
    w.u8(depth.messages ? 1 : 0);
    w.u64(depth.messages.value_or(0));
    w.u8(depth.bytes ? 1 : 0);
    w.u64(depth.bytes.value_or(0));
  }
  if (retains) {
    w.u8(keep.max_age ? 1 : 0);
    w.i64(keep.max_age.value_or(duration{}).count());
    w.u8(static_cast<std::uint8_t>(keep.on_expiry));
    w.u8(keep.dead_letter_max_age ? 1 : 0);
    w.i64(keep.dead_letter_max_age.value_or(duration{}).count());
  }
  return seal(w);
}

namespace {

// decode_queue's parts, each reading one block of a queue record into `spec` in the order
// encode_queue writes them; each returns the record's damage, if it finds any.

std::optional<error> get_throttles(reader& r, queue_spec& spec) {
  auto throttles = r.u32();
  if (throttles > limits::throttles_max) return corrupt("queue", "too many throttles");
  for (std::uint32_t i = 0; i < throttles && r.ok(); ++i) {
    auto tkey = get_components(r);
    if (!tkey) return tkey.err();
    auto rate = std::bit_cast<double>(r.u64());
    auto burst = r.u32();
    spec.throttle(std::move(tkey).value(), rate, burst);
  }
  return std::nullopt;
}

/// Stored headers and dedupe (docs/design/lanes.md).
std::optional<error> get_headers_and_dedupe(reader& r, queue_spec& spec) {
  auto policy = r.uint(1);
  if (policy > 2) return corrupt("queue", "unknown stored-headers policy");
  auto n = r.u32();
  if (n > limits::stored_header_names_max) return corrupt("queue", "too many header names");
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < n && r.ok(); ++i)
    names.push_back(r.bytes(limits::header_name_bytes_max));
  if (policy == static_cast<std::uint8_t>(header_storage::allow))
    spec.store_headers_allow(std::move(names));
  if (policy == static_cast<std::uint8_t>(header_storage::deny))
    spec.store_headers_deny(std::move(names));
  if (r.uint(1) != 0) {
    auto dkey = get_components(r);
    if (!dkey) return dkey.err();
    spec.dedupe(std::move(dkey).value(), duration{r.i64()});
  }
  return std::nullopt;
}

/// Shards (docs/design/sharding.md): their count, their key and the uids of shards after the
/// first.
std::optional<error> get_shards(reader& r, queue_record& q, queue_spec& spec) {
  auto shards = r.u32();
  auto skey = get_components(r);
  if (!skey) return skey.err();
  auto n = r.u32();
  if (!r.ok()) return corrupt("queue", "a field runs past the end of the record");
  if (shards < 1 || shards > limits::queue_shards_max || n + 1 != shards)
    return corrupt("queue", "shard count and shard uids disagree");
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) q.shard_uids.push_back(r.u64());
  spec.sharded(shards, std::move(skey).value());
  return std::nullopt;
}

/// A value written as a present-flag and the value (0 when absent).
template <class T, class Read>
std::optional<T> get_optional(reader& r, Read read) {
  auto present = r.uint(1) != 0;
  auto value = read();
  if (!present) return std::nullopt;
  return T{value};
}

/// Backpressure (docs/api.md "Backpressure").
void get_depth(reader& r, queue_spec& spec) {
  auto messages = get_optional<std::uint64_t>(r, [&r] { return r.u64(); });
  auto bytes = get_optional<std::uint64_t>(r, [&r] { return r.u64(); });
  spec.max_depth(messages, bytes);
}

/// Retention (docs/api.md "Retention").
std::optional<error> get_retention(reader& r, queue_spec& spec) {
  auto max_age = get_optional<duration>(r, [&r] { return r.i64(); });
  auto on_expiry = r.uint(1);
  auto dead_letter_max_age = get_optional<duration>(r, [&r] { return r.i64(); });
  if (on_expiry > 1) return corrupt("queue", "unknown expiry action");
  spec.retention(max_age, static_cast<expiry_action>(on_expiry), dead_letter_max_age);
  return std::nullopt;
}

}  // namespace

result<queue_record> decode_queue(std::string_view record) {
  auto payload = unseal("queue", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  queue_record q;
  q.uid = r.u64();
  queue_spec spec{r.bytes(limits::queue_name_bytes_max)};
  auto mode = r.uint(1);
  auto key = get_components(r);
  if (!key) return key.err();
  auto missing = r.uint(1);
  if (mode > 2 || missing > 2) return corrupt("queue", "unknown ordering mode or policy");
  if (mode == static_cast<std::uint8_t>(ordering_mode::queue)) spec.ordered();
  if (mode == static_cast<std::uint8_t>(ordering_mode::key)) {
    spec.ordered_by(std::move(key).value());
    spec.when_ordering_key_missing(static_cast<missing_ordering_key>(missing));
  }
  spec.lease(duration{r.i64()});
  spec.max_attempts(r.u32());
  if (auto damaged = get_throttles(r, spec)) return *damaged;
  auto delivery = r.uint(1);
  if (delivery > 1) return corrupt("queue", "unknown delivery durability");
  spec.delivery(static_cast<delivery_durability>(delivery));
  spec.sync_writes(r.uint(1) != 0);
  q.had_hook = r.uint(1) != 0;
  if (auto damaged = get_headers_and_dedupe(r, spec)) return *damaged;
  // The blocks added later, each present when it or one after it is set (encode_queue).
  if (!r.done()) {
    if (auto damaged = get_shards(r, q, spec)) return *damaged;
  }
  if (!r.done()) get_depth(r, spec);
  if (!r.done()) {
    if (auto damaged = get_retention(r, spec)) return *damaged;
  }
  if (auto done = finish("queue", r); !done) return done.err();
  q.spec = std::move(spec);
  return q;
}

std::string encode_counters(const counters_record& c) {
  writer w{sealed};
  w.u64(c.next_id);
  w.u64(c.next_seq);
  w.u64(c.next_dead);
  return seal(w);
}

result<counters_record> decode_counters(std::string_view record) {
  auto payload = unseal("counters", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  counters_record c;
  c.next_id = r.u64();
  c.next_seq = r.u64();
  c.next_dead = r.u64();
  if (auto done = finish("counters", r); !done) return done.err();
  return c;
}

std::string encode_dead_letter(const dead_letter& d) {
  std::string out(
      seal_header_bytes + 1 + 8 + (d.lane_known ? d.lane.size() : 0) + message_fields_bytes(d.msg),
      '\0');
  span_writer w{out.data() + seal_header_bytes};
  // The reason byte's top bit says that the stored lane follows the time (a record written
  // before dead letters kept their lane has no lane and the bit clear).
  w.u8(static_cast<std::uint8_t>(d.reason) | (d.lane_known ? dead_letter_lane_flag : 0));
  w.i64(d.at.us);
  if (d.lane_known) put_lane(w, lane_id{d.lane});
  put_message(w, d.msg);
  LANEQ_ASSERT(w.end() == out.data() + out.size(), "a dead-letter record is written as sized");
  seal_in_place(out);
  return out;
}

result<dead_letter> decode_dead_letter(std::string_view record) {
  auto payload = unseal("dead letter", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  dead_letter d;
  auto flags = r.uint(1);
  auto reason = flags & ~std::uint64_t{dead_letter_lane_flag};
  if (reason < 1 || reason > 3) return corrupt("dead letter", "unknown reason");
  d.reason = static_cast<dead_letter_reason>(reason);
  d.at = timestamp{r.i64()};
  d.lane_known = (flags & dead_letter_lane_flag) != 0;
  if (d.lane_known) d.lane = get_lane(r).bytes;
  auto m = get_message(r);
  if (!m) return m.err();
  d.msg = std::move(m).value();
  if (auto done = finish("dead letter", r); !done) return done.err();
  return d;
}

std::string encode_lease(const lease_record& l) {
  writer w{sealed};
  w.u64(l.lease.group.value);
  w.u64(l.lease.msg.value);
  w.u32(l.lease.attempt);
  w.u64(l.lease.nonce);
  w.i64(l.deadline.us);
  w.u64(l.seq.value);
  // An ordered batch's (O12): a trailing section, so a single message's record keeps the layout
  // of records written before batches, and those read as they were.
  if (l.lease.batch != 1) {
    w.u32(l.lease.batch);
    w.u32(l.count);
    w.u32(l.acked);
    w.u64(l.epoch);
  }
  return seal(w);
}

result<lease_record> decode_lease(std::string_view record) {
  auto payload = unseal("lease", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  lease_record l;
  l.lease.group = group_id{r.u64()};
  l.lease.msg = message_id{r.u64()};
  l.lease.attempt = r.u32();
  l.lease.nonce = r.u64();
  l.deadline = timestamp{r.i64()};
  l.seq = message_seq{r.u64()};
  if (r.ok() && !r.done()) {
    l.lease.batch = r.u32();
    l.count = r.u32();
    l.acked = r.u32();
    l.epoch = r.u64();
    if (r.ok() && (l.lease.batch < 2 || l.lease.batch > limits::ordered_batch_max || l.count < 1 ||
                   std::uint64_t{l.count} + l.acked != l.lease.batch))
      return corrupt("lease", "its batch, count and acked messages disagree");
  }
  if (auto done = finish("lease", r); !done) return done.err();
  return l;
}

std::string encode_dedupe(const dedupe_record& d) {
  writer w{sealed};
  w.u64(d.id.value);
  w.i64(d.expires.us);
  return seal(w);
}

result<dedupe_record> decode_dedupe(std::string_view record) {
  auto payload = unseal("dedupe", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  dedupe_record d;
  d.id = message_id{r.u64()};
  d.expires = timestamp{r.i64()};
  if (auto done = finish("dedupe", r); !done) return done.err();
  return d;
}

std::string encode_topic(const topic_spec& t) {
  writer w{sealed};
  w.bytes(t.name());
  w.u32(static_cast<std::uint32_t>(t.queues().size()));
  for (const auto& q : t.queues()) w.bytes(q);
  return seal(w);
}

result<topic_spec> decode_topic(std::string_view record) {
  auto payload = unseal("topic", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  topic_spec t{r.bytes(limits::queue_name_bytes_max)};
  auto n = r.u32();
  if (n > limits::topic_queues_max) return corrupt("topic", "too many queues");
  std::vector<std::string> queues;
  for (std::uint32_t i = 0; i < n && r.ok(); ++i)
    queues.push_back(r.bytes(limits::queue_name_bytes_max));
  t.fan_out(std::move(queues));
  if (auto done = finish("topic", r); !done) return done.err();
  return t;
}

std::string encode_u64(std::uint64_t x) {
  writer w{sealed};
  w.u64(x);
  return seal(w);
}

result<std::uint64_t> decode_u64(std::string_view record) {
  auto payload = unseal("metadata", record);
  if (!payload) return payload.err();
  reader r{payload.value()};
  auto x = r.u64();
  if (auto done = finish("metadata", r); !done) return done.err();
  return x;
}

// -- transport forms --------------------------------------------------------------------------

namespace {

error malformed(std::string_view kind, std::string_view what) {
  return error{errc::invalid_argument,
               "the " + std::string{kind} + " sent over CAF is malformed: " + std::string{what}};
}

/// The version byte, or why the form cannot be read (a peer of another release).
result<reader> open_transport(std::string_view kind, std::string_view bytes) {
  if (bytes.empty()) return malformed(kind, "it is empty");
  auto version = static_cast<std::uint8_t>(bytes[0]);
  if (version != transport_format_version)
    return malformed(kind, "transport form version " + std::to_string(version) +
                               " is not known (this build reads " +
                               std::to_string(transport_format_version) +
                               "; run laneqd and its CAF clients from the same release)");
  return reader{bytes.substr(1)};
}

/// Checks that a reader consumed a transport form exactly.
result<ok_t> close_transport(std::string_view kind, const reader& r) {
  if (!r.ok()) return malformed(kind, "a field runs past its end");
  if (!r.done()) return malformed(kind, "trailing bytes after the last field");
  return ok_t{};
}

void put_lease_token(span_writer& w, const lease_token& t) {
  w.u64(t.group.value);
  w.u64(t.msg.value);
  w.u32(t.attempt);
  w.u64(t.nonce);
  w.u32(t.batch);
}

lease_token get_lease_token(reader& r) {
  lease_token t;
  t.group = group_id{r.u64()};
  t.msg = message_id{r.u64()};
  t.attempt = r.u32();
  t.nonce = r.u64();
  t.batch = r.u32();
  return t;
}

/// A delivery's ordering key is at most its components' values and separators; this bound only
/// refuses a length no broker would send.
constexpr std::size_t transport_key_bytes_max = limits::body_bytes_max;

}  // namespace

std::string encode_transport(const delivery& d) {
  // Sized exactly first, then written without a capacity check per field, as a record is.
  const auto& m = d.msg;
  std::string out(1 + message_fields_bytes(m) + 4 + (lease_transport_bytes - 1) + 8 + 4 +
                      d.ordering_key.size() + 4,
                  '\0');
  span_writer w{out.data()};
  w.u8(transport_format_version);
  put_message(w, m);
  w.u32(m.redriven_after_s);
  put_lease_token(w, d.lease);
  w.i64(d.deadline.us);
  w.bytes(d.ordering_key);
  w.u32(d.batch_index);
  LANEQ_ASSERT(w.end() == out.data() + out.size(),
               "a delivery's transport form is written as sized");
  return out;
}

result<delivery> decode_transport_delivery(std::string_view bytes) {
  auto opened = open_transport("delivery", bytes);
  if (!opened) return opened.err();
  auto& r = opened.value();
  auto m = get_message(r);
  if (!m) return malformed("delivery", m.err().message);
  delivery d;
  d.msg = std::move(m.value());
  d.msg.redriven_after_s = r.u32();
  d.lease = get_lease_token(r);
  d.deadline = timestamp{r.i64()};
  d.ordering_key = r.bytes(transport_key_bytes_max);
  d.batch_index = r.u32();
  if (auto closed = close_transport("delivery", r); !closed) return closed.err();
  return d;
}

std::string encode_transport(const outgoing_message& m) {
  std::string out(1 + 4 + m.body.size() + headers_bytes(m.headers) + 4 + m.fairness_key.size() + 8,
                  '\0');
  span_writer w{out.data()};
  w.u8(transport_format_version);
  w.bytes(m.body);
  put_headers(w, m.headers);
  w.bytes(m.fairness_key);
  w.i64(m.delay.count());
  LANEQ_ASSERT(w.end() == out.data() + out.size(),
               "a message's transport form is written as sized");
  return out;
}

result<outgoing_message> decode_transport_outgoing(std::string_view bytes) {
  auto opened = open_transport("message to enqueue", bytes);
  if (!opened) return opened.err();
  auto& r = opened.value();
  outgoing_message m;
  m.body = r.bytes(limits::body_bytes_max);
  if (!get_headers(r, m.headers)) return malformed("message to enqueue", "too many headers");
  m.fairness_key = r.bytes(limits::fairness_key_bytes_max);
  m.delay = duration{r.i64()};
  if (auto closed = close_transport("message to enqueue", r); !closed) return closed.err();
  return m;
}

void encode_transport(const lease_token& t, char* out) {
  span_writer w{out};
  w.u8(transport_format_version);
  put_lease_token(w, t);
  LANEQ_ASSERT(w.end() == out + lease_transport_bytes, "a lease's transport form has its size");
}

result<lease_token> decode_transport_lease(std::string_view bytes) {
  auto opened = open_transport("lease", bytes);
  if (!opened) return opened.err();
  auto t = get_lease_token(opened.value());
  if (auto closed = close_transport("lease", opened.value()); !closed) return closed.err();
  return t;
}

}  // namespace laneq::codec
