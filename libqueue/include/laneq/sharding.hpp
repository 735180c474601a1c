// Which shard of a queue a message belongs to (docs/design/sharding.md). A queue of `shards`
// shards keeps each ordering group in one shard: the shard comes from the message's shard key,
// which is part of its ordering key (seeds' ordering.md, "Ordering and sharding"), hashed as lane
// ids are (SHA-256 of the queue name and the encoded key; its first 8 bytes modulo the shard
// count), so a key's shard is fixed for as long as the queue exists. Unordered messages go to
// the shard of their dedupe key when they have one (a duplicate meets its original), and are
// spread over the shards otherwise. A message id carries its shard in its high 16 bits, so a
// lease, a redrive or a dead letter names its shard.
#pragma once

#include <cstdint>
#include <optional>

#include "laneq/ids.hpp"
#include "laneq/key.hpp"
#include "laneq/queue_spec.hpp"

namespace laneq {

/// Bits of a message id below its shard index.
inline constexpr unsigned shard_id_shift = 48;

/// The shard whose engine gave out `id`.
inline std::uint32_t shard_of_id(message_id id) {
  return static_cast<std::uint32_t>(id.value >> shard_id_shift);
}

/// The first id shard `shard` gives out.
inline std::uint64_t first_id_of_shard(std::uint32_t shard) {
  return (static_cast<std::uint64_t>(shard) << shard_id_shift) + 1;
}

/// The shard of a message placed at `where` in a queue of `spec.shard_count()` shards, or none
/// for an unordered message without a dedupe key (the caller spreads those). Always 0 for a
/// queue of one shard.
std::optional<std::uint32_t> shard_of(const queue_spec& spec, const placement& where,
                                      const key_source& src);

}  // namespace laneq
