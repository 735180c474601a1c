// The error catalog's names and messages (libqueue/include/laneq/error.hpp).
#include "laneq/error.hpp"

namespace laneq {

std::string_view to_string(errc x) {
  switch (x) {
    case errc::invalid_spec: return "invalid_spec";
    case errc::spec_conflict: return "spec_conflict";
    case errc::queue_not_found: return "queue_not_found";
    case errc::ordering_key_missing: return "ordering_key_missing";
    case errc::enqueue_rejected: return "enqueue_rejected";
    case errc::lease_not_found: return "lease_not_found";
    case errc::lease_expired: return "lease_expired";
    case errc::invalid_argument: return "invalid_argument";
    case errc::limit_exceeded: return "limit_exceeded";
    case errc::dead_letter_not_found: return "dead_letter_not_found";
    case errc::queue_deleted: return "queue_deleted";
    case errc::storage_failed: return "storage_failed";
    case errc::unavailable: return "unavailable";
    case errc::corrupt_record: return "corrupt_record";
    case errc::unauthorized: return "unauthorized";
    case errc::forbidden: return "forbidden";
    case errc::route_not_found: return "route_not_found";
    case errc::already_exists: return "already_exists";
    case errc::checkpoint_failed: return "checkpoint_failed";
    case errc::topic_not_found: return "topic_not_found";
    case errc::queue_full: return "queue_full";
    case errc::queue_not_empty: return "queue_not_empty";
  }
  return "unknown_error";
}

std::string_view describe(errc x) {
  switch (x) {
    case errc::invalid_spec: return "the queue spec breaks a rule";
    case errc::spec_conflict: return "the queue exists with a different spec";
    case errc::queue_not_found: return "no queue with that name";
    case errc::ordering_key_missing:
      return "the message has no value for an ordering key component";
    case errc::enqueue_rejected: return "the queue's on_enqueue hook rejected the message";
    case errc::lease_not_found:
      return "no such lease (already acked, dead-lettered or never issued)";
    case errc::lease_expired: return "the lease expired and the message returned to its group";
    case errc::invalid_argument: return "a request field is malformed or out of range";
    case errc::limit_exceeded: return "a size or count limit was exceeded";
    case errc::dead_letter_not_found: return "no dead letter with that id";
    case errc::queue_deleted: return "the queue was deleted";
    case errc::storage_failed: return "the store could not make the write durable";
    case errc::unavailable: return "the broker did not answer in time, or is shutting down";
    case errc::corrupt_record: return "a stored record failed its checksum or format check";
    case errc::unauthorized: return "the request has no valid bearer token";
    case errc::forbidden: return "the token may not use that queue";
    case errc::route_not_found: return "no such endpoint or method";
    case errc::already_exists: return "the target path exists already";
    case errc::checkpoint_failed: return "the checkpoint could not be written";
    case errc::topic_not_found: return "no topic with that name";
    case errc::queue_full: return "the queue is at its max_depth; nothing was stored, retry later";
    case errc::queue_not_empty: return "the queue still holds messages or dead letters";
  }
  return "unknown error";
}

std::string to_string(const error& x) {
  std::string out{to_string(x.code)};
  out += " (";
  out += std::to_string(static_cast<int>(x.code));
  out += "): ";
  out += x.message;
  return out;
}

error combine(const std::vector<error>& errors) {
  LANEQ_ASSERT(!errors.empty(), "combine() of no errors");
  error out{errors.front().code, {}};
  for (const auto& e : errors) {
    if (!out.message.empty()) out.message += "; ";
    out.message += e.message;
  }
  return out;
}

}  // namespace laneq
