// Redrive into another queue (docs/design/purge.md, "Redrive into another queue"): the admin
// actor, which knows every queue, reads the chosen dead letters of one queue, enqueues them into
// another as new messages there, and then deletes them from the first queue's dead letters.
// At least once: a crash (or a failed delete) between the enqueue and the delete leaves a message
// both in the target and among the dead letters; never neither.
#include <algorithm>

#include "laneq/actors/admin_actor.hpp"

namespace laneq {

namespace {

/// A dead letter as a new message: its body, stored headers and fairness key, and the rest of its
/// enqueue delay (measured from its first enqueue, ordering.md "Delayed messages").
outgoing_message as_new_message(const dead_letter& d, timestamp now) {
  outgoing_message m;
  m.body = d.msg.body;
  m.headers = d.msg.headers;
  m.fairness_key = d.msg.fairness_key;
  if (d.msg.delay_until > now) m.delay = d.msg.delay_until - now;
  return m;
}

}  // namespace

caf::result<std::uint64_t> admin_actor_impl::redrive_into(const std::string& from,
                                                          std::vector<message_id> ids,
                                                          const std::string& to) {
  auto source = queues_.find(from);
  if (source == queues_.end())
    return to_caf(error{errc::queue_not_found, "no queue named '" + from + "'"});
  if (to == from) return delegate(source->second.handle, redrive_atom_v, std::move(ids));
  if (queues_.find(to) == queues_.end())
    return to_caf(
        error{errc::queue_not_found,
              "redrive from queue '" + from + "': the target queue '" + to + "' does not exist"});
  if (ids.size() > limits::enqueue_batch_max)
    return to_caf(error{errc::limit_exceeded,
                        "redrive from queue '" + from + "' into queue '" + to + "': at most " +
                            std::to_string(limits::enqueue_batch_max) + " ids at once"});
  auto promise = make_response_promise<std::uint64_t>();
  auto taken = [this, from, to, promise](std::vector<dead_letter>& dls) mutable {
    redrive_taken(from, to, std::move(dls), promise);
  };
  auto failed = [promise](caf::error& e) mutable { promise.deliver(std::move(e)); };
  const auto& q = source->second.handle;
  if (ids.empty())  // the first ones of the list, as many as one enqueue takes
    request(q, caf::infinite, dlq_atom_v, static_cast<std::uint32_t>(limits::enqueue_batch_max))
        .then(std::move(taken), std::move(failed));
  else
    request(q, caf::infinite, dlq_atom_v, std::move(ids)).then(std::move(taken), std::move(failed));
  return promise;
}

void admin_actor_impl::redrive_taken(const std::string& from, const std::string& to,
                                     std::vector<dead_letter> dls,
                                     caf::typed_response_promise<std::uint64_t> promise) {
  if (dls.empty()) {
    promise.deliver(std::uint64_t{0});
    return;
  }
  auto source = queues_.find(from);
  auto target = queues_.find(to);
  if (source == queues_.end() || target == queues_.end()) {
    promise.deliver(
        to_caf(error{errc::queue_deleted, "redrive from queue '" + from + "' into queue '" + to +
                                              "': a queue was deleted"}));
    return;
  }
  auto now = ac_.ctx->time.now(clock());
  std::vector<outgoing_message> batch;
  std::vector<message_id> ids;
  for (const auto& d : dls) {
    batch.push_back(as_new_message(d, now));
    ids.push_back(d.msg.id);
  }
  auto q = source->second.handle;
  request(target->second.handle, caf::infinite, enqueue_atom_v, std::move(batch))
      .then(
          [this, q, ids = std::move(ids), from, to, promise](std::vector<message_id>&) mutable {
            request(q, caf::infinite, dlq_atom_v, drop_atom_v, std::move(ids))
                .then([promise](std::uint64_t n) mutable { promise.deliver(n); },
                      [promise, from, to](caf::error& e) mutable {
                        auto err = from_caf(e);
                        err.message = "redrive from queue '" + from + "' into queue '" + to +
                                      "': the messages were enqueued into '" + to +
                                      "' but stay dead letters of '" + from + "': " + err.message;
                        promise.deliver(to_caf(err));
                      });
          },
          [promise, from, to](caf::error& e) mutable {
            auto err = from_caf(e);
            err.message = "redrive from queue '" + from + "' into queue '" + to +
                          "': nothing was redriven: " + err.message;
            promise.deliver(to_caf(err));
          });
}

}  // namespace laneq
