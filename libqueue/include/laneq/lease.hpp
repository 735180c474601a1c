// Lease tokens: what a consumer holds while it processes a delivery (docs/design/ordering.md O4).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "laneq/ids.hpp"
#include "laneq/message.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// Names one delivery: which group incarnation, which message, which attempt. The nonce makes
/// tokens unguessable across broker runs and distinguishes reissued leases. An ordered batch
/// (docs/design/ordering.md O12) is one delivery of `batch` consecutive messages of a group: its
/// token names the batch's first message and that message's attempt, and every message of the
/// batch carries it.
struct lease_token {
  group_id group;  ///< 0 for an unordered message
  message_id msg;
  std::uint32_t attempt = 0;  ///< 1 for the first delivery
  std::uint64_t nonce = 0;
  std::uint32_t batch = 1;  ///< messages the lease covered when it was granted (1 to 100)
  friend bool operator==(const lease_token&, const lease_token&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, lease_token& x) {
  return f(x.group, x.msg, x.attempt, x.nonce, x.batch);
}

/// Text form `g.m.a.nonce` in lowercase hex, and `g.m.a.nonce.batch` for a batch of more than
/// one message, for logs and errors.
std::string to_string(const lease_token& x);
/// Parses `to_string`'s output; nullopt when malformed.
std::optional<lease_token> parse_lease_token(std::string_view text);

/// Identifies one delivery for `lease_nonce`.
struct lease_subject {
  std::uint64_t queue_uid = 0;
  message_id msg;
  message_seq seq;  ///< new on redrive, so a redriven message never repeats an old nonce
  std::uint32_t attempt = 0;
  std::uint64_t epoch = 0;  ///< broker run; distinguishes attempts re-issued after a restart
  std::uint32_t batch = 1;  ///< messages under the lease (mixed in only when more than one)
};

/// Source of lease nonces: SipHash-2-4, a keyed pseudo-random function, over a counter. Without
/// the 128-bit key, seeing any number of nonces does not reveal the next one, so a lease token
/// cannot be forged from tokens seen earlier. Deterministic for a given key (tests).
class nonce_source {
 public:
  nonce_source(std::uint64_t key0, std::uint64_t key1) : k0_(key0), k1_(key1) {}
  std::uint64_t next() { return siphash(counter_++); }
  /// The nonce of a delivery: a keyed MAC of the subject, so a broker that kept its key can
  /// check after a restart that it issued a token (fast delivery's reclaim), and nobody
  /// without the key can forge one.
  std::uint64_t lease_nonce(const lease_subject& s) const;
  /// The nonce brokers before 2026-12-07 made: SipHash-2-4 chained word by word over the same
  /// subject (four hashes instead of one; a restarted broker still honours their tokens).
  std::uint64_t chained_lease_nonce(const lease_subject& s) const;
  /// SipHash-2-4 of one 64-bit word under this source's key.
  std::uint64_t siphash(std::uint64_t word) const;
  /// SipHash-2-4 of `words` as 8-byte little-endian blocks (a message of 8 x n bytes).
  std::uint64_t siphash(std::span<const std::uint64_t> words) const;

 private:
  std::uint64_t k0_;
  std::uint64_t k1_;
  std::uint64_t counter_ = 0;
};

/// Earlier broker runs whose tokens may still reclaim a held head after a restart (a crash during
/// a reclaim grace must not cost the old holder its claim).
inline constexpr std::uint64_t reclaim_epochs = 4;

/// True if `lease` was issued for the message `id` at `seq` with `attempts` so far (of the queue
/// or shard `uid`) in one of the last `reclaim_epochs` runs before run `epoch`: fast delivery's
/// reclaim (recovery.md R6). Only the holder of `nonces`' key makes such a nonce; a batch's size
/// is part of what it vouches for.
bool issued_before_restart(const nonce_source& nonces, std::uint64_t uid, std::uint64_t epoch,
                           const lease_token& lease, message_id id, message_seq seq,
                           std::uint32_t attempts);

}  // namespace laneq
