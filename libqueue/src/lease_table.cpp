// Leases of in-flight unordered messages (libqueue/include/laneq/lease_table.hpp).
#include "laneq/lease_table.hpp"

#include "laneq/assert.hpp"

namespace laneq {

void lease_table::grant(const lease_token& lease, message m, timestamp deadline, timestamp now) {
  LANEQ_ASSERT(lease.msg == m.id, "a lease names its message");
  auto [it, fresh] = leases_.emplace(m.id, entry{lease, std::move(m), now, deadline});
  LANEQ_ASSERT(fresh, "a message has at most one lease");
  deadlines_.set(lease.msg, deadline);
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
  deadlines_.erase(lease.msg);
  return m;
}

result<timestamp> lease_table::extend(const lease_token& lease, duration by, timestamp now) {
  auto e = find(lease);
  if (!e) return e.err();
  auto* x = e.value();
  x->deadline = now + by;
  x->held = false;
  deadlines_.set(lease.msg, x->deadline);
  return x->deadline;
}

void lease_table::hold(const lease_token& lease) {
  auto e = find(lease);
  LANEQ_ASSERT(static_cast<bool>(e), "a lease to hold is in flight");
  e.value()->held = true;
  deadlines_.erase(lease.msg);
}

std::vector<message> lease_table::expire_due(timestamp now) {
  std::vector<message> out;
  for (auto id : deadlines_.pop_due(now)) {
    auto it = leases_.find(id);
    out.push_back(std::move(it->second.msg));
    leases_.erase(it);
  }
  return out;
}

std::optional<timestamp> lease_table::next_deadline() const {
  return deadlines_.next();
}

std::optional<std::pair<timestamp, timestamp>> lease_table::window(message_id id) const {
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return std::pair{it->second.since, it->second.deadline};
}

void lease_table::check_invariants() const {
  deadlines_.check_invariants();
  std::size_t held = 0;
  for (const auto& [id, e] : leases_) {
    held += e.held ? 1 : 0;
    LANEQ_ASSERT(e.held ? !deadlines_.deadline(id) : deadlines_.deadline(id) == e.deadline,
                 "the heap has the lease's deadline, unless the lease is held");
    LANEQ_ASSERT(e.lease.msg == id && e.msg.id == id, "lease, message and key agree");
    LANEQ_ASSERT(e.lease.attempt == e.msg.attempts, "the lease is the message's latest attempt");
  }
  LANEQ_ASSERT(deadlines_.size() + held == leases_.size(), "every lease not held has a deadline");
}

std::vector<message_seq> lease_table::seqs() const {
  std::vector<message_seq> out;
  out.reserve(leases_.size());
  for (const auto& [id, e] : leases_) out.push_back(e.msg.seq);
  return out;
}

const message* lease_table::leased(const lease_token& lease) const {
  auto it = leases_.find(lease.msg);
  return it != leases_.end() && it->second.lease == lease ? &it->second.msg : nullptr;
}

}  // namespace laneq
