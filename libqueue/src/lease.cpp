// Lease token text form and nonces (libqueue/include/laneq/lease.hpp).
#include "laneq/lease.hpp"

#include <algorithm>
#include <charconv>

#include "laneq/limits.hpp"

namespace laneq {

namespace {
void put_hex(std::string& out, std::uint64_t x) {
  char buf[16];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x, 16);
  (void)ec;
  out.append(buf, end);
}

bool take_hex(std::string_view& in, std::uint64_t& x, bool last) {
  auto dot = in.find('.');
  if (last != (dot == std::string_view::npos)) return false;
  auto part = in.substr(0, dot);
  if (part.empty() || part.size() > 16) return false;
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), x, 16);
  if (ec != std::errc{} || end != part.data() + part.size()) return false;
  in = last ? std::string_view{} : in.substr(dot + 1);
  return true;
}
}  // namespace

std::string to_string(const lease_token& x) {
  std::string out;
  out.reserve(40);
  put_hex(out, x.group.value);
  out += '.';
  put_hex(out, x.msg.value);
  out += '.';
  put_hex(out, x.attempt);
  out += '.';
  put_hex(out, x.nonce);
  if (x.batch != 1) {
    out += '.';
    put_hex(out, x.batch);
  }
  return out;
}

std::optional<lease_token> parse_lease_token(std::string_view text) {
  std::uint64_t g = 0, m = 0, a = 0, n = 0, b = 1;
  bool batch = std::count(text.begin(), text.end(), '.') == 4;
  if (!take_hex(text, g, false) || !take_hex(text, m, false) || !take_hex(text, a, false) ||
      !take_hex(text, n, !batch) || (batch && !take_hex(text, b, true)))
    return std::nullopt;
  if (a == 0 || a > UINT32_MAX || m == 0 || b < 1 || b > limits::ordered_batch_max ||
      (batch && b == 1))
    return std::nullopt;
  return lease_token{group_id{g}, message_id{m}, static_cast<std::uint32_t>(a), n,
                     static_cast<std::uint32_t>(b)};
}

namespace {
constexpr std::uint64_t rotl(std::uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

struct sip_state {
  std::uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};
}  // namespace

// SipHash-2-4 (Aumasson and Bernstein) of the 8-byte little-endian message `word`.
std::uint64_t nonce_source::siphash(std::uint64_t word) const {
  return siphash(std::span<const std::uint64_t>{&word, 1});
}

std::uint64_t nonce_source::siphash(std::span<const std::uint64_t> words) const {
  sip_state s{k0_ ^ 0x736f6d6570736575ULL, k1_ ^ 0x646f72616e646f6dULL, k0_ ^ 0x6c7967656e657261ULL,
              k1_ ^ 0x7465646279746573ULL};
  for (auto w : words) s.absorb(w);
  s.absorb(std::uint64_t{(words.size() * 8) & 0xff} << 56);  // final block: length, no tail
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::uint64_t nonce_source::lease_nonce(const lease_subject& s) const {
  // One keyed hash of the subject's words (fixed length: the batch's word only when a lease
  // covers more than one message, as in the chained form).
  std::uint64_t words[] = {s.queue_uid, s.msg.value, s.seq.value,
                           static_cast<std::uint64_t>(s.attempt) | (s.epoch << 32), s.batch};
  return siphash(std::span<const std::uint64_t>{words, s.batch != 1 ? 5u : 4u});
}

std::uint64_t nonce_source::chained_lease_nonce(const lease_subject& s) const {
  // A PRF chained over fixed-length input (like CBC-MAC): each word is mixed into the keyed
  // hash of everything before it.
  auto h = siphash(s.queue_uid);
  h = siphash(h ^ s.msg.value);
  h = siphash(h ^ s.seq.value);
  h = siphash(h ^ (static_cast<std::uint64_t>(s.attempt) | (s.epoch << 32)));
  if (s.batch != 1) h = siphash(h ^ s.batch);
  return h;
}

bool issued_before_restart(const nonce_source& nonces, std::uint64_t uid, std::uint64_t epoch,
                           const lease_token& lease, message_id id, message_seq seq,
                           std::uint32_t attempts) {
  if (lease.msg != id || lease.attempt != attempts + 1) return false;
  for (std::uint64_t back = 1; back <= reclaim_epochs && back < epoch; ++back) {
    lease_subject s{uid, id, seq, lease.attempt, epoch - back, lease.batch};
    // A token of a broker that chained its hashes (before an upgrade) reclaims as well.
    if (lease.nonce == nonces.lease_nonce(s) || lease.nonce == nonces.chained_lease_nonce(s))
      return true;
  }
  return false;
}

}  // namespace laneq
