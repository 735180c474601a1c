// The storage layout: how laneq's state is laid out as keys and values in an ordered key-value
// store (docs/design/persistence.md). Pure: bytes in, bytes out. Every key starts with a one-byte
// tag; queue data continues with the queue's uid (8 bytes, big-endian), so a queue's records of
// one kind form one contiguous range. Every record carries a format version and a CRC32C of its
// contents, checked on every read. At the end, the transport forms: the same fields as bytes for
// the CAF protocol's most frequent values (a delivery, a message to enqueue, a lease token).
//
//   'A' name                   broker metadata (nonce key, boot epoch, next queue uid)
//   'Q' uid                    queue record: the spec (without its hook)
//   'C' uid                    counters: next message id, next arrival seq, next dead-letter order
//   'M' uid lane(16) seq       message record; one lane per ordering group or class of unordered
//                              messages (persistence.md P12; lane 0: unordered, before classes)
//   'D' uid order              dead letter (dead-letter list order), with its stored lane
//   'I' uid message-id         the order of a message's dead letter (redrive by id)
//   'E' uid message-id         lease record (durable delivery; a partly acked ordered batch)
//   'U' uid dedupe-key         dedupe record: the first message's id and when it was seen
//   'T' topic-name             topic record: the queues it fans out into
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laneq/engine_io.hpp"
#include "laneq/error.hpp"
#include "laneq/group_state.hpp"
#include "laneq/ids.hpp"
#include "laneq/lease.hpp"
#include "laneq/message.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/topic_spec.hpp"

namespace laneq::codec {

/// Version of the record formats; a reader refuses versions it does not know.
inline constexpr std::uint8_t message_format_version = 1;

/// CRC32C (Castagnoli), as used by RocksDB and iSCSI.
std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0);

// -- lanes ------------------------------------------------------------------------------------

/// A lane: the store's fixed-width name for an ordering group or a class of unordered messages.
/// All zero: unordered messages stored before classes (recovery moves them to their class's).
struct lane_id {
  std::array<std::uint8_t, 16> bytes{};
  bool unordered() const;
  friend bool operator==(const lane_id&, const lane_id&) = default;
};

/// The lane of an ordering group: the first 16 bytes of SHA-256(queue name, 0, encoded group
/// key), never all zero. Two keys can share a lane only by a SHA-256 prefix collision; they
/// would then share one ordering group (merged, never split).
lane_id make_lane_id(std::string_view queue_name, std::string_view group_key);

// -- keys -------------------------------------------------------------------------------------

enum class tag : char {
  meta = 'A',
  queue = 'Q',
  counters = 'C',
  message = 'M',
  dead = 'D',
  dead_index = 'I',
  lease = 'E',
  dedupe = 'U',
  topic = 'T',
};

std::string meta_key(std::string_view name);
std::string queue_key(std::uint64_t uid);
std::string counters_key(std::uint64_t uid);
std::string message_key(std::uint64_t uid, const lane_id& lane, message_seq seq);
/// Bytes of a message key before its seq: tag, uid and lane. Keys that share them are one lane
/// (the store's memtable keeps each such prefix apart, docs/design/persistence.md).
inline constexpr std::size_t message_key_lane_prefix_bytes = 1 + 8 + 16;
std::string dead_key(std::uint64_t uid, std::uint64_t order);
std::string dead_index_key(std::uint64_t uid, message_id id);
std::string lease_key(std::uint64_t uid, message_id id);
std::string dedupe_key(std::uint64_t uid, std::string_view key);
std::string topic_key(std::string_view name);

/// The tags of a queue's records: every key that starts with one of them and the queue's uid
/// belongs to that queue. The one list of what "every record of a queue" is: a new kind of
/// queue record is added here, and a deleted queue leaves none behind.
inline constexpr std::array<tag, 7> queue_tags{
    tag::queue, tag::counters, tag::message, tag::dead, tag::dead_index, tag::lease, tag::dedupe};

/// [first, last) of every key with this tag (and uid, for queue data).
std::pair<std::string, std::string> tag_range(tag t);
std::pair<std::string, std::string> queue_range(tag t, std::uint64_t uid);
/// Every record of a queue: `queue_range` of each of `queue_tags`.
std::vector<std::pair<std::string, std::string>> queue_ranges(std::uint64_t uid);
/// [first, last) of one lane's messages with seq > `after`.
std::pair<std::string, std::string> lane_range(std::uint64_t uid, const lane_id& lane,
                                               message_seq after);

struct message_key_parts {
  std::uint64_t uid = 0;
  lane_id lane;
  message_seq seq;
};
result<message_key_parts> parse_message_key(std::string_view key);
/// A message record named for an error: "the message record at seq N of lane <32 hex digits>".
std::string describe_message_key(std::string_view key);
/// The dedupe key in a `dedupe_key`.
result<std::string> parse_dedupe_key(std::string_view key);
/// The uid in any key of a `queue_tags` tag.
result<std::uint64_t> parse_uid(std::string_view key);
/// The dead-letter order in a `dead_key`.
result<std::uint64_t> parse_dead_order(std::string_view key);
/// The message id in a `dead_index_key`.
result<message_id> parse_dead_index_key(std::string_view key);

// -- records ----------------------------------------------------------------------------------

std::string encode_message(const message& m);
/// Decodes a record; corrupt_record on a bad checksum, an unknown version or a malformed body.
result<message> decode_message(std::string_view record);
/// The body's size in a message record, checked as `decode_message` checks it (recovery counts
/// the bytes of messages it leaves in the store).
result<std::size_t> message_body_bytes(std::string_view record);

/// A queue as stored: its spec without the hook, and whether it had one.
struct queue_record {
  std::uint64_t uid = 0;  ///< the queue incarnation's uid: shard 0's key prefix
  queue_spec spec;
  bool had_hook = false;
  /// The key prefixes of shards 1 to n-1 (docs/design/sharding.md); empty with one shard.
  std::vector<std::uint64_t> shard_uids{};
};
std::string encode_queue(const queue_record& q);
result<queue_record> decode_queue(std::string_view record);

/// Where a queue's numbering continues after a restart.
struct counters_record {
  std::uint64_t next_id = 1;
  std::uint64_t next_seq = 1;
  std::uint64_t next_dead = 1;
  friend bool operator==(const counters_record&, const counters_record&) = default;
};
std::string encode_counters(const counters_record& c);
result<counters_record> decode_counters(std::string_view record);

std::string encode_dead_letter(const dead_letter& d);
result<dead_letter> decode_dead_letter(std::string_view record);

/// A lease committed before its delivery (durable delivery mode), keyed by the id its token
/// names. An ordered batch's record (docs/design/ordering.md O12) covers the `count` messages of
/// its group from `seq` on: the batch's messages not acked yet, the first of them at
/// `batch_index` `acked`; a partial ack writes it again (also in fast delivery, where the token
/// then no longer names the group's head). A record of a single message (`lease.batch` 1) has
/// the layout it had before batches; a batch's record adds the token's batch, `count`, `acked`
/// and `epoch`.
struct lease_record {
  lease_token lease;
  timestamp deadline;
  message_seq seq;  ///< of the (first still leased) message (a redriven message has a new one)
  std::uint32_t count = 1;  ///< messages still under the lease, from `seq` on in their group
  std::uint32_t acked = 0;  ///< messages of the batch acked before them
  /// The broker run that wrote it: fast delivery honours a batch's record for the
  /// `reclaim_epochs` runs after it, as it does a token (recovery.md R6).
  std::uint64_t epoch = 0;
  friend bool operator==(const lease_record&, const lease_record&) = default;
};
std::string encode_lease(const lease_record& l);
result<lease_record> decode_lease(std::string_view record);

/// A dedupe window entry: an enqueue with this key before `expires` gets `id`.
struct dedupe_record {
  message_id id;
  timestamp expires;
  friend bool operator==(const dedupe_record&, const dedupe_record&) = default;
};
std::string encode_dedupe(const dedupe_record& d);
result<dedupe_record> decode_dedupe(std::string_view record);

std::string encode_topic(const topic_spec& t);
result<topic_spec> decode_topic(std::string_view record);

/// A 64-bit metadata value (boot epoch, next uid, nonce key halves).
std::string encode_u64(std::uint64_t x);
result<std::uint64_t> decode_u64(std::string_view record);

// -- transport forms --------------------------------------------------------------------------
// How the CAF protocol carries its most frequent values between processes: a delivery, a message
// to enqueue and a lease token each as one byte string rather than a field at a time (the
// `inspect` overloads for CAF's binary serializers are in actors/include/laneq/actors/wire.hpp).
// Not sealed: the connection carries them whole. A version byte comes first, so that a peer of
// another release is refused with an error that says so rather than misread.

inline constexpr std::uint8_t transport_format_version = 1;
/// Bytes of a lease token's transport form: the version and five fixed-width fields.
inline constexpr std::size_t lease_transport_bytes = 1 + 8 + 8 + 4 + 8 + 4;

std::string encode_transport(const delivery& d);
result<delivery> decode_transport_delivery(std::string_view bytes);
std::string encode_transport(const outgoing_message& m);
result<outgoing_message> decode_transport_outgoing(std::string_view bytes);
/// Writes exactly `lease_transport_bytes` at `out`.
void encode_transport(const lease_token& t, char* out);
result<lease_token> decode_transport_lease(std::string_view bytes);

}  // namespace laneq::codec
