// The transport forms on CAF's binary serializers (actors/include/laneq/actors/wire.hpp).
#include "laneq/actors/wire.hpp"

#include <array>
#include <string>

#include "laneq/actors/protocol.hpp"
#include "laneq/codec.hpp"

namespace laneq {

namespace {

/// Serializes `x`'s transport form as one string.
template <class T>
caf::error save_as_string(caf::serializer& f, const T& x) {
  auto bytes = codec::encode_transport(x);
  return f(bytes);
}

/// Deserializes one string and decodes it into `x` with `decode`.
template <class T, class Decode>
caf::error load_from_string(caf::deserializer& f, T& x, Decode decode) {
  std::string bytes;
  if (auto err = f(bytes)) return err;
  auto decoded = decode(bytes);
  if (!decoded) return to_caf(decoded.err());
  x = std::move(decoded.value());
  return caf::none;
}

}  // namespace

caf::error inspect(caf::serializer& f, delivery& x) {
  return save_as_string(f, x);
}

caf::error inspect(caf::deserializer& f, delivery& x) {
  return load_from_string(f, x, codec::decode_transport_delivery);
}

caf::error inspect(caf::serializer& f, outgoing_message& x) {
  return save_as_string(f, x);
}

caf::error inspect(caf::deserializer& f, outgoing_message& x) {
  return load_from_string(f, x, codec::decode_transport_outgoing);
}

// A lease token has a fixed size: raw bytes, no length and no allocation.
caf::error inspect(caf::serializer& f, lease_token& x) {
  std::array<char, codec::lease_transport_bytes> bytes;
  codec::encode_transport(x, bytes.data());
  return f.apply_raw(bytes.size(), bytes.data());
}

caf::error inspect(caf::deserializer& f, lease_token& x) {
  std::array<char, codec::lease_transport_bytes> bytes;
  if (auto err = f.apply_raw(bytes.size(), bytes.data())) return err;
  auto decoded = codec::decode_transport_lease(std::string_view{bytes.data(), bytes.size()});
  if (!decoded) return to_caf(decoded.err());
  x = decoded.value();
  return caf::none;
}

}  // namespace laneq
