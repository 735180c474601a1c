// Leases of in-flight unordered messages (libqueue/include/laneq/lease_table.hpp).
#include "laneq/lease_table.hpp"

#include <algorithm>
#include <functional>

#include "laneq/assert.hpp"

namespace laneq {

void lease_table::grant(const lease_token& lease, message m, timestamp deadline, timestamp now) {
  LANEQ_ASSERT(lease.msg == m.id, "a lease names its message");
  auto [it, fresh] = leases_.emplace(m.id, entry{lease, std::move(m), now, deadline});
  LANEQ_ASSERT(fresh, "a message has at most one lease");
  deadlines_.push_back(deadline_ref{deadline, lease.msg, lease.attempt});
  std::push_heap(deadlines_.begin(), deadlines_.end(), std::greater<>{});
}

result<lease_table::entry*> lease_table::find(const lease_token& lease) {
  auto it = leases_.find(lease.msg);
  if (it == leases_.end())
    return error{errc::lease_not_found, "no lease " + to_string(lease) + " is in flight"};
  if (it->second.lease == lease) return &it->second;
  if (lease.attempt < it->second.lease.attempt)
    return error{errc::lease_expired,
                 "lease " + to_string(lease) + " expired; the message was delivered again"};
  return error{errc::lease_not_found, "no lease " + to_string(lease) + " is in flight"};
}

result<message> lease_table::release(const lease_token& lease) {
  auto e = find(lease);
  if (!e) return e.err();
  auto m = std::move(e.value()->msg);
  leases_.erase(lease.msg);
  drop_stale_deadlines();
  return m;
}

result<timestamp> lease_table::extend(const lease_token& lease, duration by, timestamp now) {
  auto e = find(lease);
  if (!e) return e.err();
  auto* x = e.value();
  x->deadline = now + by;
  deadlines_.push_back(deadline_ref{x->deadline, lease.msg, lease.attempt});
  std::push_heap(deadlines_.begin(), deadlines_.end(), std::greater<>{});
  drop_stale_deadlines();
  return x->deadline;
}

void lease_table::drop_stale_deadlines() {
  while (!deadlines_.empty()) {
    const auto& top = deadlines_.front();
    auto it = leases_.find(top.id);
    if (it != leases_.end() && it->second.lease.attempt == top.attempt &&
        it->second.deadline == top.deadline)
      return;
    std::pop_heap(deadlines_.begin(), deadlines_.end(), std::greater<>{});
    deadlines_.pop_back();
  }
}

std::vector<message> lease_table::expire_due(timestamp now) {
  std::vector<message> out;
  drop_stale_deadlines();
  while (!deadlines_.empty() && deadlines_.front().deadline <= now) {
    auto id = deadlines_.front().id;
    std::pop_heap(deadlines_.begin(), deadlines_.end(), std::greater<>{});
    deadlines_.pop_back();
    auto it = leases_.find(id);
    out.push_back(std::move(it->second.msg));
    leases_.erase(it);
    drop_stale_deadlines();
  }
  return out;
}

std::optional<timestamp> lease_table::next_deadline() const {
  // drop_stale_deadlines() runs after every mutation, so the top is live.
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.front().deadline;
}

std::optional<std::pair<timestamp, timestamp>> lease_table::window(message_id id) const {
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return std::pair{it->second.since, it->second.deadline};
}

void lease_table::check_invariants() const {
  LANEQ_ASSERT(deadlines_.size() >= leases_.size(), "every lease has a deadline entry");
  for (const auto& [id, e] : leases_) {
    LANEQ_ASSERT(e.lease.msg == id && e.msg.id == id, "lease, message and key agree");
    LANEQ_ASSERT(e.lease.attempt == e.msg.attempts, "the lease is the message's latest attempt");
  }
}

const message* lease_table::leased(const lease_token& lease) const {
  auto it = leases_.find(lease.msg);
  return it != leases_.end() && it->second.lease == lease ? &it->second.msg : nullptr;
}

}  // namespace laneq
