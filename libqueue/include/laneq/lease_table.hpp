// The lease table for unordered messages, owned by the shard engine (docs/design/ordering.md
// O4, O5). Group heads carry their lease in their group_state instead.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "laneq/deadline_heap.hpp"
#include "laneq/error.hpp"
#include "laneq/lease.hpp"
#include "laneq/message.hpp"
#include "laneq/time.hpp"

namespace laneq {

/// Leases of in-flight unordered messages, with their deadlines.
class lease_table {
 public:
  /// Records a delivery. Precondition: `m` is not in flight.
  void grant(const lease_token& lease, message m, timestamp deadline, timestamp now);

  /// Ends the lease (ack or nack) and returns the message. Fails with lease_not_found for an
  /// unknown token, lease_expired for an earlier attempt of a message that is still here.
  result<message> release(const lease_token& lease);

  /// Moves the deadline to `now + by`.
  result<timestamp> extend(const lease_token& lease, duration by, timestamp now);
  /// Takes the lease's deadline away until `extend` gives it one: its message was taken by a
  /// receive that waits for a read-back, and no attempt runs out before its consumer has it.
  void hold(const lease_token& lease);

  /// Removes and returns every lease whose deadline is at or before `now` (oldest first).
  std::vector<message> expire_due(timestamp now);

  /// Earliest deadline, if any lease is held.
  std::optional<timestamp> next_deadline() const;

  std::size_t size() const { return leases_.size(); }
  /// The in-flight message leased under `lease`, or nullptr.
  const message* leased(const lease_token& lease) const;
  /// The seqs of the messages in flight (a purge keeps their records).
  std::vector<message_seq> seqs() const;
  /// Delivery time and deadline of the lease on `id`, if in flight.
  std::optional<std::pair<timestamp, timestamp>> window(message_id id) const;

  void check_invariants() const;

 private:
  struct entry {
    lease_token lease;
    message msg;
    timestamp since;
    timestamp deadline;
    bool held = false;  ///< no deadline (`hold`)
  };
  result<entry*> find(const lease_token& lease);

  std::unordered_map<message_id, entry> leases_;
  deadline_heap<message_id> deadlines_;  // of the leases, by message
};

}  // namespace laneq
