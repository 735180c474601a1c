// The storage codec (libqueue/include/laneq/codec.hpp).
#include "laneq/codec.hpp"

#include <array>

#include "laneq/limits.hpp"

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

class writer {
 public:
  void u8(std::uint8_t x) { out_.push_back(static_cast<char>(x)); }
  void u32(std::uint32_t x) {
    for (int i = 3; i >= 0; --i) u8(static_cast<std::uint8_t>(x >> (8 * i)));
  }
  void u64(std::uint64_t x) {
    for (int i = 7; i >= 0; --i) u8(static_cast<std::uint8_t>(x >> (8 * i)));
  }
  void i64(std::int64_t x) { u64(static_cast<std::uint64_t>(x)); }
  void bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
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
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  std::uint64_t u64() { return uint(8); }
  std::int64_t i64() { return static_cast<std::int64_t>(uint(8)); }
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
  std::string_view in_;
  bool ok_ = true;
};

error corrupt(const std::string& what) {
  return error{errc::corrupt_record, "message record: " + what};
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc) {
  crc = ~crc;
  for (char ch : bytes)
    crc = crc32c_table[(crc ^ static_cast<std::uint8_t>(ch)) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

std::string message_key(std::uint64_t queue_uid, message_seq seq) {
  writer w;
  w.u64(queue_uid);
  w.u64(seq.value);
  return std::move(w.out());
}

result<std::pair<std::uint64_t, message_seq>> parse_message_key(std::string_view key) {
  if (key.size() != 16)
    return corrupt("a message key is 16 bytes, got " + std::to_string(key.size()));
  reader r{key};
  auto uid = r.u64();
  auto seq = r.u64();
  return std::pair{uid, message_seq{seq}};
}

std::string encode_message(const message& m) {
  writer body;
  body.u64(m.id.value);
  body.u64(m.seq.value);
  body.i64(m.enqueued_at.us);
  body.i64(m.delay_until.us);
  body.i64(m.not_before.us);
  body.u32(m.attempts);
  body.bytes(m.fairness_key);
  body.bytes(m.body);
  body.u32(static_cast<std::uint32_t>(m.headers.size()));
  for (const auto& h : m.headers) {
    body.bytes(h.name);
    body.bytes(h.value);
  }
  body.u32(static_cast<std::uint32_t>(m.attributes.size()));
  for (const auto& a : m.attributes) {
    body.bytes(a.name);
    body.bytes(a.value);
  }
  writer out;
  out.u8(message_format_version);
  out.u32(crc32c(body.out()));
  out.out().append(body.out());
  return std::move(out.out());
}

result<message> decode_message(std::string_view record) {
  if (record.size() < 5) return corrupt("shorter than its header");
  auto version = static_cast<std::uint8_t>(record[0]);
  if (version != message_format_version)
    return corrupt("format version " + std::to_string(version) +
                   " is not known (this build reads " + std::to_string(message_format_version) +
                   ")");
  reader head{record.substr(1, 4)};
  auto crc = head.u32();
  auto payload = record.substr(5);
  if (crc32c(payload) != crc) return corrupt("checksum mismatch");
  reader r{payload};
  message m;
  m.id = message_id{r.u64()};
  m.seq = message_seq{r.u64()};
  m.enqueued_at = timestamp{r.i64()};
  m.delay_until = timestamp{r.i64()};
  m.not_before = timestamp{r.i64()};
  m.attempts = r.u32();
  m.fairness_key = r.bytes(limits::fairness_key_bytes_max);
  m.body = r.bytes(limits::body_bytes_max);
  auto headers = r.u32();
  if (headers > limits::headers_max) return corrupt("too many headers");
  for (std::uint32_t i = 0; i < headers && r.ok(); ++i) {
    auto name = r.bytes(limits::header_name_bytes_max);
    auto value = r.bytes(limits::header_value_bytes_max);
    m.headers.push_back(header_field{std::move(name), std::move(value)});
  }
  auto attributes = r.u32();
  if (attributes > limits::attributes_max) return corrupt("too many attributes");
  for (std::uint32_t i = 0; i < attributes && r.ok(); ++i) {
    auto name = r.bytes(limits::key_component_name_bytes_max);
    auto value = r.bytes(limits::header_value_bytes_max);
    m.attributes.push_back(attribute{std::move(name), std::move(value)});
  }
  if (!r.ok()) return corrupt("a field runs past the end of the record");
  if (!r.done()) return corrupt("trailing bytes after the last field");
  return m;
}

}  // namespace laneq::codec
