// Lease token text form and nonces (libqueue/include/laneq/lease.hpp).
#include "laneq/lease.hpp"

#include <charconv>

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
  return out;
}

std::optional<lease_token> parse_lease_token(std::string_view text) {
  std::uint64_t g = 0, m = 0, a = 0, n = 0;
  if (!take_hex(text, g, false) || !take_hex(text, m, false) || !take_hex(text, a, false) ||
      !take_hex(text, n, true))
    return std::nullopt;
  if (a == 0 || a > UINT32_MAX || m == 0) return std::nullopt;
  return lease_token{group_id{g}, message_id{m}, static_cast<std::uint32_t>(a), n};
}

std::uint64_t nonce_source::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace laneq
