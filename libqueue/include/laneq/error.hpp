// The error catalog: every expected failure has a stable number, a name and a one-line meaning.
// Numbers are part of the public contract (HTTP `error.number`, CAF error codes): never reuse one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "laneq/assert.hpp"

namespace laneq {

/// Stable error numbers. Append only.
enum class errc : std::uint8_t {
  invalid_spec = 1,     ///< a queue spec breaks a rule; the message names queue and field
  spec_conflict = 2,    ///< re-created with a different spec (for example another ordering key)
  queue_not_found = 3,  ///< no queue with that name
  ordering_key_missing = 4,  ///< policy reject and a key component has no value
  enqueue_rejected = 5,      ///< the queue's on_enqueue hook rejected the message
  lease_not_found = 6,       ///< unknown lease, or the message was already acked or dead-lettered
  lease_expired = 7,         ///< the lease ran out and the message went back to its group
  invalid_argument = 8,      ///< a request field is malformed or out of range; the message names it
  limit_exceeded = 9,        ///< a size or count bound was hit; the message names the limit
  dead_letter_not_found = 10,  ///< redrive of an id that is not in the dead-letter list
  queue_deleted = 11,          ///< the queue was deleted while the request was in progress
  storage_failed = 12,     ///< the store could not make a write durable; nothing was acknowledged
  unavailable = 13,        ///< the broker did not answer in time, or is shutting down
  corrupt_record = 14,     ///< a stored record failed its checksum or format check
  unauthorized = 15,       ///< no valid bearer token (HTTP 401)
  forbidden = 16,          ///< the token's tenant may not use that queue (HTTP 403)
  route_not_found = 17,    ///< no such HTTP endpoint or method (HTTP 404/405)
  already_exists = 18,     ///< the target (a checkpoint directory) exists already; names the path
  checkpoint_failed = 19,  ///< the checkpoint could not be written; names the path and the cause
  topic_not_found = 20,    ///< no topic with that name
  queue_full = 21,  ///< the enqueue would take the queue past its max_depth; nothing was stored
  queue_not_empty = 22,  ///< a delete without force of a queue that still holds messages
};

/// Name of an error number, as used in the HTTP API (`"lease_not_found"`).
std::string_view to_string(errc x);

/// One-line meaning of an error number.
std::string_view describe(errc x);

/// An expected failure: a catalog number plus a message naming what is wrong.
struct error {
  errc code = errc::invalid_argument;
  std::string message;

  friend bool operator==(const error&, const error&) = default;
};

/// Renders `name (number): message`.
std::string to_string(const error& x);

/// Several errors as one: the first one's code, the messages joined by "; ".
/// Precondition: `errors` is not empty.
error combine(const std::vector<error>& errors);

/// Either a value or an error. Results are never silently dropped.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  result(error err) : v_(std::move(err)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    LANEQ_ASSERT(ok(), "result::value() on an error");
    return std::get<0>(v_);
  }
  const T& value() const& {
    LANEQ_ASSERT(ok(), "result::value() on an error");
    return std::get<0>(v_);
  }
  T&& value() && {
    LANEQ_ASSERT(ok(), "result::value() on an error");
    return std::get<0>(std::move(v_));
  }
  const error& err() const {
    LANEQ_ASSERT(!ok(), "result::err() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, error> v_;
};

/// Result of an operation that yields nothing but may fail.
struct ok_t {
  friend bool operator==(ok_t, ok_t) = default;
};
using status = result<ok_t>;

}  // namespace laneq
