// How a queue's actors write to the store: one place that turns queue events into store
// operations under the layout of `laneq/codec.hpp` (docs/design/persistence.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "laneq/actors/context.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/codec.hpp"
#include "laneq/lease.hpp"

namespace laneq {

/// The error a client sees when the store could not make its change durable.
inline error storage_error(const std::string& queue, const caf::error& e) {
  auto err = from_caf(e);
  if (err.code == errc::unavailable) err.code = errc::storage_failed;
  err.message = "queue '" + queue + "': " + err.message;
  return err;
}

/// What a queue incarnation's actors share about storage and restarts (immutable).
struct queue_storage {
  std::uint64_t uid = 0;  ///< the incarnation's key prefix; never reused
  std::string name;       ///< queue name (lane ids hash it)
  bool sync = true;       ///< writes synced before they are answered
  bool durable = false;   ///< delivery durability `durable`: leases are committed
  std::size_t window = limits::group_window_default;
  std::size_t window_max = limits::group_window_max_default;
  window_budget_ptr budget;  ///< the broker's (null: groups never grow past `window`)
  std::uint64_t epoch = 0;   ///< this broker run (lease nonces, reclaim)
  nonce_source nonces{0, 0};
  duration reclaim_grace = limits::reclaim_grace_default;
  duration lease_default = limits::lease_default;  ///< the queue's (a reclaimed lease runs on)
  duration store_retry = limits::store_reopen_interval;  ///< before a failed write goes again
  store_op put_message(const codec::lane_id& lane, const message& m) const {
    return {store_op::kind::put, codec::message_key(uid, lane, m.seq), codec::encode_message(m)};
  }
  store_op erase_message(const codec::lane_id& lane, message_seq seq) const {
    return {store_op::kind::erase, codec::message_key(uid, lane, seq), {}};
  }
  store_op put_lease(const codec::lease_record& l) const {
    return {store_op::kind::put, codec::lease_key(uid, l.lease.msg), codec::encode_lease(l)};
  }
  store_op erase_lease(message_id id) const {
    return {store_op::kind::erase, codec::lease_key(uid, id), {}};
  }
  /// The nonce of a lease issued in this run.
  std::uint64_t nonce(const message& m, std::uint32_t attempt) const {
    return nonces.lease_nonce(lease_subject{uid, m.id, m.seq, attempt, epoch});
  }
  /// True if `lease` was issued for `m` in one of the last runs before this one (fast
  /// delivery's reclaim): only this broker's key makes such a nonce.
  bool issued_before_restart(const lease_token& lease, const message& m) const {
    return laneq::issued_before_restart(nonces, uid, epoch, lease, m);
  }
  store_write write(std::vector<store_op> ops) const { return store_write{std::move(ops), sync}; }
};

using storage_ptr = std::shared_ptr<const queue_storage>;

/// Writes `ops` to `store` on behalf of `self` and answers `promise` with `answer` once they are
/// durable, or with storage_failed naming the queue; `then` runs after either (the writer's own
/// bookkeeping).
template <class Self, class T, class Then>
void answer_when_durable(Self* self, const store_actor& store, const queue_storage& st,
                         std::vector<store_op> ops, caf::typed_response_promise<T> promise,
                         T answer, Then then) {
  self->request(store, caf::infinite, write_atom_v, st.write(std::move(ops)))
      .then(
          [promise, answer = std::move(answer), then](caf::ok_atom) mutable {
            promise.deliver(std::move(answer));
            then();
          },
          [promise, name = st.name, then](caf::error& e) mutable {
            promise.deliver(to_caf(storage_error(name, e)));
            then();
          });
}

}  // namespace laneq
