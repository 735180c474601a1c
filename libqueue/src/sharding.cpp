// The shard of a message (libqueue/include/laneq/sharding.hpp).
#include "laneq/sharding.hpp"

#include "laneq/codec.hpp"

namespace laneq {

namespace {

/// The first 8 bytes of the key's lane-id hash, modulo the shard count.
std::uint32_t shard_of_key(const queue_spec& spec, std::string_view encoded) {
  auto lane = codec::make_lane_id(spec.name(), encoded);
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < 8; ++i) h = (h << 8) | lane.bytes[i];
  return static_cast<std::uint32_t>(h % spec.shard_count());
}

}  // namespace

std::optional<std::uint32_t> shard_of(const queue_spec& spec, const placement& where,
                                      const key_source& src) {
  if (spec.shard_count() <= 1) return 0;
  if (!where.ordered) {
    if (auto d = dedupe_key(spec, src)) return shard_of_key(spec, *d);
    return std::nullopt;
  }
  // The keyless lane is one group; a message with its whole ordering key has every component of
  // the shard key (each is one of the ordering key's).
  if (spec.shard_key().empty() || where.group_key == keyless_group_key)
    return shard_of_key(spec, where.group_key);
  return shard_of_key(spec, encode_key(resolve(spec.shard_key(), src)));
}

}  // namespace laneq
