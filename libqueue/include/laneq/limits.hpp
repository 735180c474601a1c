// Every bound in one place, with the relations between bounds checked at compile time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "laneq/time.hpp"

namespace laneq::limits {

using namespace std::chrono_literals;

// Queue specs.
inline constexpr std::size_t queue_name_bytes_max = 128;
inline constexpr std::size_t key_components_max = 8;
inline constexpr std::size_t key_component_name_bytes_max = 128;
inline constexpr std::size_t throttles_max = 4;
inline constexpr double throttle_rate_per_s_max = 1'000'000.0;
inline constexpr double throttle_rate_per_s_min = 0.001;
inline constexpr std::uint32_t throttle_burst_max = 1'000'000;
inline constexpr std::uint32_t max_attempts_max = 1000;
inline constexpr std::uint32_t max_attempts_default = 10;
inline constexpr std::size_t stored_header_names_max = 64;  ///< names in an allow or deny list
inline constexpr duration dedupe_window_min = 1ms;
inline constexpr duration dedupe_window_max = std::chrono::hours{24 * 7};
/// Dedupe keys a shard remembers; past it the oldest goes first (laneq_dedupe_evictions_total).
/// About 100 to 300 bytes each, by key length: at most some 300 MB per shard.
inline constexpr std::size_t dedupe_entries_max = 1'000'000;
inline constexpr std::size_t topic_queues_max = 16;  ///< queues a topic fans out into
inline constexpr std::size_t topics_max = 1000;
/// A queue's `max_depth` (docs/api.md "Backpressure"): messages and body bytes it may hold.
inline constexpr std::uint64_t max_depth_messages_max = 1'000'000'000;
inline constexpr std::uint64_t max_depth_bytes_max = std::uint64_t{1} << 40;  // 1 TiB
/// A queue's retention periods (docs/design/retention.md): a message's or a dead letter's
/// maximum age, 1 ms to 366 days.
inline constexpr duration retention_min = 1ms;
inline constexpr duration retention_max = std::chrono::hours{24 * 366};
/// Dead letters one retention pass deletes at most (the next pass follows at once).
inline constexpr std::uint32_t dead_letter_expiry_batch = 1000;
/// What a `queue_full` answer tells the client to wait (HTTP `Retry-After`, whole seconds).
inline constexpr std::uint32_t queue_full_retry_after_s = 1;

// Leases.
inline constexpr duration lease_min = 1ms;
inline constexpr duration lease_max = std::chrono::hours{12};
inline constexpr duration lease_default = 30s;

// Messages.
inline constexpr std::size_t body_bytes_max = 1024 * 1024;
inline constexpr std::size_t headers_max = 64;
inline constexpr std::size_t header_name_bytes_max = 256;
inline constexpr std::size_t header_value_bytes_max = 8 * 1024;
inline constexpr std::size_t fairness_key_bytes_max = 256;
inline constexpr std::size_t attributes_max = 16;
inline constexpr duration delay_max = std::chrono::hours{24 * 15};
inline constexpr duration retry_after_max = std::chrono::hours{12};

// Requests.
inline constexpr std::size_t enqueue_batch_max = 1000;
inline constexpr std::size_t receive_batch_max = 1000;
/// Messages of one ordering group a receive may take as one ordered batch under one lease
/// (`receive_request::batch`, docs/design/ordering.md O12). A batch is also cut to what its group
/// holds in memory (its window).
inline constexpr std::uint32_t ordered_batch_max = 100;
inline constexpr std::size_t ack_batch_max = 1000;
inline constexpr duration receive_wait_max = 20s;
inline constexpr std::size_t pending_receives_max = 10'000;
inline constexpr std::size_t redrive_batch_max = 10'000;
/// Dead letters one delete by ids may name (`DELETE .../dead-letters` with a body).
inline constexpr std::size_t dead_letter_delete_max = redrive_batch_max;
/// Messages a peek shows (docs/api.md "Peek"): the default and the most a request may ask.
inline constexpr std::uint32_t peek_default = 10;
inline constexpr std::uint32_t peek_max = 1000;
/// Groups per page of `groups` (docs/api.md "Groups"): the default and the most a request may ask.
inline constexpr std::uint32_t groups_page_default = 1000;
inline constexpr std::uint32_t groups_page_max = 10'000;
/// Groups one page may examine, per group it may return: a `state=blocked` page stops there and
/// answers short, with a cursor, rather than scan a queue of idle-looking groups to its end.
inline constexpr std::uint32_t groups_page_scan_factor = 10;

// Store (persistence.md): a group-commit batch closes at whichever bound comes first.
inline constexpr std::size_t store_batch_writes_max = 4096;  ///< write requests per batch
inline constexpr std::size_t store_batch_bytes_max = 16 * 1024 * 1024;  ///< key+value bytes
inline constexpr duration store_batch_linger_default = 0us;  ///< extra wait for more writers
inline constexpr std::uint32_t store_scan_max = 10'000;      ///< entries per scan answer
inline constexpr duration store_reopen_interval = 1s;        ///< retry after a failed batch
/// A checkpoint's target directory (bytes; Linux's PATH_MAX less the ".tmp" RocksDB appends).
inline constexpr std::size_t checkpoint_dir_bytes_max = 4000;
/// Messages a group holds in memory (its head and a prefetch); the rest stay in the store.
inline constexpr std::size_t group_window_default = 64;
/// A group may hold up to this many while the broker's window budget has room (a deep group then
/// reads nothing back).
inline constexpr std::size_t group_window_max_default = 1024;
/// Bytes of messages all group windows of a broker together may hold before groups stop growing
/// past `group_window`, split evenly over its shards (docs/operations.md, "Group windows").
inline constexpr std::size_t window_budget_bytes_default = std::size_t{256} << 20;
/// Emptied ordering groups a shard keeps for reuse, and for how long (shard_engine, "kept
/// groups"): a message for a group that emptied a moment ago finds it rather than building it
/// again. Each costs a live group's few hundred bytes, so a shard keeps at most this many.
inline constexpr std::size_t kept_groups_max = 1024;
inline constexpr duration kept_group_for = 1s;
/// Lane ids of classes of unordered messages a shard remembers after their class is gone.
inline constexpr std::size_t class_lanes_cached = 256;
/// After a restart in fast delivery mode: how long heads wait for their old lease holders.
inline constexpr duration reclaim_grace_default = 10s;
inline constexpr duration reclaim_grace_max = std::chrono::hours{1};

// Metrics: per-fairness-key backlog series per queue (the rest are summed into one).
inline constexpr std::size_t fairness_backlog_keys_max = 20;

/// Shards of one queue (docs/design/sharding.md): each is a CAF actor with its own engine.
inline constexpr std::uint32_t queue_shards_max = 256;

// Queues per broker.
inline constexpr std::size_t queues_max = 10'000;

static_assert(lease_min < lease_default && lease_default <= lease_max);
static_assert(max_attempts_default <= max_attempts_max);
static_assert(receive_batch_max <= pending_receives_max);
static_assert(1 < ordered_batch_max && ordered_batch_max <= receive_batch_max);
static_assert(throttle_rate_per_s_min < throttle_rate_per_s_max);
static_assert(retry_after_max <= delay_max);
static_assert(0 < groups_page_default && groups_page_default <= groups_page_max);
static_assert(0 < peek_default && peek_default <= peek_max && peek_max <= store_scan_max);

}  // namespace laneq::limits
