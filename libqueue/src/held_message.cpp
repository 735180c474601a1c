// Packing and unpacking a window's message (libqueue/include/laneq/held_message.hpp).
#include "laneq/held_message.hpp"

#include <cstring>

#include "laneq/assert.hpp"

namespace laneq {

namespace {

/// Bytes of `n` as a LEB128 varint.
std::size_t size_bytes(std::size_t n) {
  std::size_t bytes = 1;
  for (; n >= 0x80; n >>= 7) ++bytes;
  return bytes;
}

/// Writes into a buffer sized beforehand (`string_bytes`, `fields_bytes`): one allocation at
/// most per message.
class writer {
 public:
  explicit writer(char* out) : out_(out) {}

  void size(std::size_t n) {
    for (; n >= 0x80; n >>= 7) *out_++ = static_cast<char>((n & 0x7f) | 0x80);
    *out_++ = static_cast<char>(n);
  }

  void string(std::string_view s) {
    size(s.size());
    if (s.empty()) return;  // an empty fairness key or value: no call to copy nothing
    std::memcpy(out_, s.data(), s.size());
    out_ += s.size();
  }

  const char* end() const { return out_; }

 private:
  char* out_;
};

/// Reads what `writer` wrote. The packed string is the engine's own, made
/// by the constructor: a short read is a bug, not bad input.
class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}

  std::size_t size() {
    std::size_t n = 0;
    for (int shift = 0;; shift += 7) {
      LANEQ_ASSERT(pos_ < in_.size(), "a packed message is whole");
      auto byte = static_cast<unsigned char>(in_[pos_++]);
      n |= static_cast<std::size_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return n;
    }
  }

  std::string_view string() {
    auto n = size();
    LANEQ_ASSERT(n <= in_.size() - pos_, "a packed message is whole");
    auto s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

std::size_t string_bytes(std::string_view s) {
  return size_bytes(s.size()) + s.size();
}

template <class Field>
std::size_t fields_bytes(const std::vector<Field>& fields) {
  auto n = size_bytes(fields.size());
  for (const auto& f : fields) n += string_bytes(f.name) + string_bytes(f.value);
  return n;
}

template <class Field>
void put_fields(writer& out, const std::vector<Field>& fields) {
  out.size(fields.size());
  for (const auto& f : fields) {
    out.string(f.name);
    out.string(f.value);
  }
}

/// Copies `s` into `out`, an empty string: nothing to do for an empty one (a common fairness
/// key).
void set(std::string& out, std::string_view s) {
  if (!s.empty()) out.assign(s.data(), s.size());
}

template <class Field>
void get_fields(reader& in, std::vector<Field>& out) {
  auto n = in.size();
  if (n == 0) return;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto name = in.string();
    auto value = in.string();
    out.push_back(Field{std::string{name}, std::string{value}});
  }
}

}  // namespace

held_message::held_message(message m)
    : id(m.id),
      seq(m.seq),
      body(std::move(m.body)),
      enqueued_at(m.enqueued_at),
      delay_until(m.delay_until),
      not_before(m.not_before),
      attempts(m.attempts),
      redriven_after_s(m.redriven_after_s) {
  packed_.resize(string_bytes(m.fairness_key) + fields_bytes(m.headers) +
                 fields_bytes(m.attributes));
  writer out{packed_.data()};
  out.string(m.fairness_key);
  put_fields(out, m.headers);
  put_fields(out, m.attributes);
  LANEQ_ASSERT(out.end() == packed_.data() + packed_.size(), "a message packs as sized");
}

message held_message::unpack() const {
  // The unpacked fields given at construction (the body copied straight into place), then the
  // packed ones.
  message m{
      id, seq, body, {}, {}, {}, enqueued_at, delay_until, not_before, attempts, redriven_after_s};
  unpack_into(m);
  return m;
}

message held_message::take() && {
  message m{id,         seq,      std::move(body), {}, {}, {}, enqueued_at, delay_until,
            not_before, attempts, redriven_after_s};
  unpack_into(m);
  return m;
}

void held_message::unpack_into(message& m) const {
  reader in{packed_};
  set(m.fairness_key, in.string());
  get_fields(in, m.headers);
  get_fields(in, m.attributes);
}

std::string_view held_message::fairness_key() const {
  return reader{packed_}.string();
}

std::size_t held_message::footprint() const {
  return sizeof(held_message) + body.size() + packed_.size();
}

}  // namespace laneq
