// The storage codec: how messages are laid out as RocksDB keys and values (docs/design/
// persistence.md, issue 3). Pure: bytes in, bytes out. Every record carries a format version and
// a CRC32C of its contents, checked on every read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "laneq/error.hpp"
#include "laneq/ids.hpp"
#include "laneq/message.hpp"

namespace laneq::codec {

/// Version of the message record format; a reader refuses versions it does not know.
inline constexpr std::uint8_t message_format_version = 1;

/// CRC32C (Castagnoli), as used by RocksDB and iSCSI.
std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0);

/// Key of a message: (queue incarnation, arrival seq), both big-endian, so a prefix scan over a
/// queue returns its messages in arrival order.
std::string message_key(std::uint64_t queue_uid, message_seq seq);
/// Parses `message_key`'s output.
result<std::pair<std::uint64_t, message_seq>> parse_message_key(std::string_view key);

/// Record of a message: version, CRC32C, then the fields.
std::string encode_message(const message& m);
/// Decodes a record; corrupt_record on a bad checksum, an unknown version or a malformed body.
result<message> decode_message(std::string_view record);

}  // namespace laneq::codec
