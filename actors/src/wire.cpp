// The transport forms on CAF's binary serializers (actors/include/laneq/actors/wire.hpp).
#include "laneq/actors/wire.hpp"

#include <array>
#include <string>
#include <string_view>

#include "caf/binary_deserializer.hpp"

#include "laneq/actors/protocol.hpp"
#include "laneq/codec.hpp"

namespace laneq {

namespace {

/// Writes `x`'s transport form as one sequence of bytes: its size, then the bytes.
template <class T>
caf::error save_form(caf::serializer& f, const T& x) {
  auto bytes = codec::encode_transport(x);
  auto n = bytes.size();
  if (auto err = f.begin_sequence(n)) return err;
  if (auto err = f.apply_raw(n, bytes.data())) return err;
  return f.end_sequence();
}

/// Reads what `save_form` wrote and decodes it into `x` with `decode`. From CAF's binary
/// deserializer (the middleman's) the bytes are decoded where they lie, not copied out first.
template <class T, class Decode>
caf::error load_form(caf::deserializer& f, T& x, Decode decode) {
  std::size_t n = 0;
  if (auto err = f.begin_sequence(n)) return err;
  std::string copy;
  std::string_view bytes;
  auto* in_place = dynamic_cast<caf::binary_deserializer*>(&f);
  if (in_place) {
    if (in_place->remaining() < n) return caf::make_error(caf::sec::end_of_stream);
    bytes = std::string_view{reinterpret_cast<const char*>(in_place->remainder().data()), n};
  } else {
    copy.resize(n);
    if (auto err = f.apply_raw(n, copy.data())) return err;
    bytes = copy;
  }
  auto decoded = decode(bytes);
  if (!decoded) return to_caf(decoded.err());
  x = std::move(decoded.value());
  if (in_place) in_place->skip(n);
  return f.end_sequence();
}

}  // namespace

caf::error inspect(caf::serializer& f, delivery& x) {
  return save_form(f, x);
}

caf::error inspect(caf::deserializer& f, delivery& x) {
  return load_form(f, x, codec::decode_transport_delivery);
}

caf::error inspect(caf::serializer& f, outgoing_message& x) {
  return save_form(f, x);
}

caf::error inspect(caf::deserializer& f, outgoing_message& x) {
  return load_form(f, x, codec::decode_transport_outgoing);
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
