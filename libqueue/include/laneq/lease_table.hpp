// The lease table for unordered messages, owned by the fairness actor (docs/design/ordering.md
// O4, O5). Group heads carry their lease in their group_state instead.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

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

  /// Removes and returns every lease whose deadline is at or before `now` (oldest first).
  std::vector<message> expire_due(timestamp now);

  /// Earliest deadline, if any lease is held.
  std::optional<timestamp> next_deadline() const;

  std::size_t size() const { return leases_.size(); }
  /// The in-flight message leased under `lease`, or nullptr.
  const message* leased(const lease_token& lease) const;
  /// Delivery time and deadline of the lease on `id`, if in flight.
  std::optional<std::pair<timestamp, timestamp>> window(message_id id) const;

  void check_invariants() const;

 private:
  struct entry {
    lease_token lease;
    message msg;
    timestamp since;
    timestamp deadline;
  };
  struct deadline_ref {
    timestamp deadline;
    message_id id;
    std::uint32_t attempt;
    bool operator>(const deadline_ref& o) const {
      if (deadline != o.deadline) return deadline > o.deadline;
      return id.value > o.id.value;
    }
  };
  result<entry*> find(const lease_token& lease);
  void drop_stale_deadlines();

  std::unordered_map<message_id, entry> leases_;
  std::vector<deadline_ref> deadlines_;  // min-heap; stale refs are skipped lazily
};

}  // namespace laneq
