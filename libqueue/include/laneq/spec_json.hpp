// The JSON form of a queue spec (docs/api.md "Queue specs"): what `PUT /v1/queues/{name}`, the
// daemon's config file and the CAF remote admin take, and what `GET /v1/queues/{name}` returns.
#pragma once

#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "laneq/error.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/topic_spec.hpp"

namespace laneq {

/// A spec read from JSON, or every reason it could not be.
struct parsed_spec {
  queue_spec spec;
  /// One `invalid_spec` error per broken rule, each naming the queue and the JSON field
  /// (`queue 'orders': ordering.key[1].header: must be a string`). Empty when the spec is valid.
  std::vector<error> errors;
  bool ok() const { return errors.empty(); }
};

/// Reads the spec of queue `name` from `v`:
///   {"ordering": {"mode": "none"|"queue"|"key", "key": [<component>...],
///                 "when_key_missing": "reject"|"unordered"|"keyless_lane"},
///    "lease_ms": 30000, "max_attempts": 10,
///    "throttles": [{"key": [<component>...], "rate_per_s": 5, "burst": 10}],
///    "delivery_durability": "fast"|"durable", "sync_writes": true,
///    "store_headers": "all"|{"allow": ["account", ...]}|{"deny": ["authorization", ...]},
///    "dedupe": {"key": [<component>...], "window_ms": 60000},
///    "max_depth": {"messages": 100000, "bytes": 1073741824},
///    "retention_ms": 604800000, "on_expiry": "dead_letter"|"drop",
///    "dead_letter_retention_ms": 1209600000}
/// where a component is {"fairness_key": true}, {"header": "account"}, {"attribute": "region"}
/// or {"json": "data.object.customer"} (docs/design/lanes.md). A {"function": ...} component is
/// an error naming the in-process API: JSON cannot carry a callable.
/// Every field is optional; an unknown field is an error (a typo must not silently fall back to
/// a default). The result is also checked with `queue_spec::validate`.
parsed_spec queue_spec_from_json(std::string_view name, const boost::json::value& v);

/// The JSON form of `s` (every field, defaults included, but an unset max_depth or retention
/// period is left out); `queue_spec_from_json` reads it back
/// to a spec with the same definition (the hook aside: JSON cannot carry one).
boost::json::object queue_spec_to_json(const queue_spec& s);

/// The spec of `current` after the JSON merge patch `patch` (RFC 7386, docs/api.md "Change a
/// queue's settings"): each field of `patch` replaces the spec's (objects merge field by field,
/// `null` puts back the default), then the result is read as `queue_spec_from_json` reads a spec
/// and applied with `queue_spec::updated` (which refuses a change of a fixed field, naming it).
/// A queue whose keys hold a function component cannot be patched from JSON (its JSON form
/// cannot carry the function): the error says so and names the in-process update.
parsed_spec queue_spec_patched(const queue_spec& current, const boost::json::value& patch);

/// A topic spec read from JSON, or every reason it could not be.
struct parsed_topic {
  topic_spec spec;
  /// One `invalid_spec` error per broken rule, each naming the topic and the field.
  std::vector<error> errors;
  bool ok() const { return errors.empty(); }
};

/// Reads topic `name` from `{"queues": ["orders-by-customer", "audit"]}` (docs/design/lanes.md
/// L9); also checked with `topic_spec::validate` (whether the queues exist is the broker's check).
parsed_topic topic_spec_from_json(std::string_view name, const boost::json::value& v);

boost::json::object topic_spec_to_json(const topic_spec& t);

}  // namespace laneq
