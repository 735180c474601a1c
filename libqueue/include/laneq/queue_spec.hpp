// What a queue is: name, ordering, missing-key policy, leases, attempts, throttles, on_enqueue,
// stored headers and dedupe. Implements docs/design/ordering.md (O1, O2, O8),
// docs/design/throttling.md (T1) and docs/design/lanes.md (L1-L9).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "laneq/error.hpp"
#include "laneq/key.hpp"
#include "laneq/limits.hpp"
#include "laneq/message.hpp"

namespace laneq {

/// How a queue orders delivery.
enum class ordering_mode : std::uint8_t {
  none = 0,   ///< no order: oldest deliverable first, nothing waits on anything else
  queue = 1,  ///< `ordered()`: the whole queue is one ordering group
  key = 2,    ///< `ordered_by(...)`: one ordering group per distinct key value
};

/// What happens to a message that lacks a value for an ordering key component.
enum class missing_ordering_key : std::uint8_t {
  reject = 0,        ///< the enqueue fails, naming the missing component (default)
  unordered = 1,     ///< the message belongs to no group
  keyless_lane = 2,  ///< the message joins the queue's one shared keyless group
};

/// Whether leases survive a restart (the seed's "delivery durability", ARCHITECTURE.md §4).
enum class delivery_durability : std::uint8_t {
  fast = 0,     ///< leases live in memory; after a restart heads wait a reclaim grace period
  durable = 1,  ///< a lease is committed before the message is handed out, honoured after restart
};

/// Which headers a queue stores with a message (lanes.md L7). Keys are resolved from the complete
/// header list at enqueue; only the stored ones reach the store and the consumer.
enum class header_storage : std::uint8_t {
  all = 0,    ///< every header (default)
  allow = 1,  ///< only the listed names (case-insensitive)
  deny = 2,   ///< every header but the listed names (for secrets such as `authorization`)
};

std::string_view to_string(ordering_mode x);
std::string_view to_string(header_storage x);
std::string_view to_string(delivery_durability x);
std::string_view to_string(missing_ordering_key x);

/// A token bucket applied per distinct value of `key` (empty key: one bucket for the queue).
struct throttle_spec {
  std::vector<key_component> key;
  double rate_per_s = 1.0;
  std::uint32_t burst = 1;
  friend bool operator==(const throttle_spec&, const throttle_spec&) = default;
};

/// A dedupe rule (lanes.md L8): an enqueue whose key was seen within `window` is acknowledged
/// with the original message id and stored nowhere.
struct dedupe_spec {
  std::vector<key_component> key;
  duration window{0};
  friend bool operator==(const dedupe_spec&, const dedupe_spec&) = default;
};

/// How much a queue may hold (docs/api.md "Backpressure"); an unset bound is no bound. Depth
/// counts the messages waiting, delayed and in flight (not dead letters) and their body bytes.
struct depth_bounds {
  std::optional<std::uint64_t> messages;
  std::optional<std::uint64_t> bytes;
  bool any() const { return messages || bytes; }
  friend bool operator==(const depth_bounds&, const depth_bounds&) = default;
};

/// What happens to a message that outlives the queue's retention (docs/design/retention.md).
enum class expiry_action : std::uint8_t {
  dead_letter = 0,  ///< it moves to the dead-letter list (reason `expired`)
  drop = 1,         ///< it is erased
};
std::string_view to_string(expiry_action x);

/// How long a queue keeps what it holds (docs/design/retention.md); an unset period is forever.
struct retention_rules {
  /// A message that has waited this long since it entered the queue (its enqueue, or its
  /// redrive) and is not in flight expires.
  std::optional<duration> max_age;
  expiry_action on_expiry = expiry_action::dead_letter;
  /// A dead letter is deleted this long after it died.
  std::optional<duration> dead_letter_max_age;
  bool any() const { return max_age || dead_letter_max_age; }
  friend bool operator==(const retention_rules&, const retention_rules&) = default;
};

/// The on_enqueue hook: sees the message (id, seq, enqueued_at already set) and returns the
/// attributes to attach, or an error (reported to the producer as `enqueue_rejected`).
/// Runs inside the shard engine, on its shard actor's thread: it must be fast and must not
/// block.
using enqueue_hook = std::function<result<std::vector<attribute>>(const message&)>;

/// Declarative description of a queue, built fluently:
///   queue_spec("account-events")
///     .ordered_by({key::fairness_key(), key::header("account")})
///     .when_ordering_key_missing(missing_ordering_key::unordered);
class queue_spec {
 public:
  queue_spec() = default;
  explicit queue_spec(std::string name) : name_(std::move(name)) {}

  /// Orders the whole queue in arrival order (one group).
  queue_spec& ordered();
  /// Orders per combination of the given components. Fixed once the queue exists.
  queue_spec& ordered_by(std::vector<key_component> components);
  queue_spec& when_ordering_key_missing(missing_ordering_key policy);
  /// Default lease for receives that do not name one.
  queue_spec& lease(duration d);
  /// Deliveries of one message before it is dead-lettered.
  queue_spec& max_attempts(std::uint32_t n);
  /// Adds a token bucket: at most `burst` at once and `rate_per_s` sustained per key value.
  queue_spec& throttle(std::vector<key_component> key, double rate_per_s, std::uint32_t burst);
  queue_spec& on_enqueue(enqueue_hook hook);
  /// Lease durability across restarts (default fast).
  queue_spec& delivery(delivery_durability d);
  /// Whether writes are synced before they are acknowledged (default true). false: an
  /// acknowledged enqueue survives a process crash, not a power loss.
  queue_spec& sync_writes(bool on);
  /// Stores only these headers (names compared case-insensitively).
  queue_spec& store_headers_allow(std::vector<std::string> names);
  /// Stores every header but these (names compared case-insensitively).
  queue_spec& store_headers_deny(std::vector<std::string> names);
  /// Acknowledges a repeat of `key` within `window` with the first message's id, storing nothing.
  queue_spec& dedupe(std::vector<key_component> key, duration window);
  /// Spreads the queue over `n` shards (docs/design/sharding.md), each a CAF actor with its own
  /// engine and store records. The shard of a message comes from `key`, which must be part of
  /// the ordering key (ordering.md, "Ordering and sharding"); empty: the whole ordering key. An
  /// unordered queue spreads its messages. Fixed once the queue exists.
  queue_spec& sharded(std::uint32_t n, std::vector<key_component> key = {});
  /// Bounds the queue's depth: an enqueue that would take it past either bound is refused with
  /// `queue_full` and stores nothing (docs/api.md "Backpressure"). nullopt: no bound.
  queue_spec& max_depth(std::optional<std::uint64_t> messages,
                        std::optional<std::uint64_t> bytes = std::nullopt);
  /// Expires messages `max_age` after they entered the queue (`on_expiry`: dead-letter or drop)
  /// and deletes dead letters `dead_letter_max_age` after they died (docs/design/retention.md).
  /// nullopt: kept until consumed or deleted.
  queue_spec& retention(std::optional<duration> max_age,
                        expiry_action on_expiry = expiry_action::dead_letter,
                        std::optional<duration> dead_letter_max_age = std::nullopt);
  /// Gives the key functions of a recovered spec their callables back, matched by label.
  /// Returns false if `from` lacks one of them.
  bool restore_functions(const queue_spec& from);

  /// The full name, `tenant/queue` or a bare `queue` (tenant `default`).
  const std::string& name() const { return name_; }
  /// The tenant the queue belongs to (see `tenant_of`).
  std::string_view tenant() const;
  ordering_mode ordering() const { return ordering_; }
  const std::vector<key_component>& ordering_key() const { return key_; }
  missing_ordering_key missing_key_policy() const { return missing_; }
  duration lease_duration() const { return lease_; }
  std::uint32_t attempts_max() const { return max_attempts_; }
  const std::vector<throttle_spec>& throttles() const { return throttles_; }
  const enqueue_hook& hook() const { return hook_; }
  delivery_durability delivery_mode() const { return delivery_; }
  bool syncs_writes() const { return sync_; }
  bool ordered_by_key() const { return ordering_ == ordering_mode::key; }
  header_storage header_policy() const { return header_policy_; }
  const std::vector<std::string>& header_list() const { return header_list_; }
  /// True if a header of this name is stored.
  bool stores_header(std::string_view name) const;
  /// The headers kept of `headers` (in order), under the stored-headers policy.
  std::vector<header_field> stored_headers(std::vector<header_field> headers) const;
  const std::optional<dedupe_spec>& dedupe_rule() const { return dedupe_; }
  std::uint32_t shard_count() const { return shards_; }
  const depth_bounds& depth_max() const { return depth_max_; }
  const retention_rules& retention_rule() const { return retention_; }
  /// The shard key as given (empty: the whole ordering key).
  const std::vector<key_component>& shard_key() const { return shard_key_; }
  /// True if a key function has no callable (a spec recovered from the store).
  bool functions_missing() const;
  /// True if any key (ordering, throttle, dedupe) has a function component.
  bool has_functions() const;
  /// True if the ordering or dedupe key reads the JSON body (a topic parses it once for all).
  bool reads_json() const;

  /// Every broken rule, one error each, naming the queue and the field. Empty when valid.
  std::vector<error> validate() const;

  /// True when both specs define the same queue (everything but the hook's identity; whether a
  /// hook is present does count): `differences` is empty and the names are equal.
  bool same_definition(const queue_spec& other) const;

  /// Each setting in which `requested` differs from this spec, named by its JSON field (docs/
  /// api.md), with both values where they are short: `lease_ms (existing 30000, requested
  /// 60000)`. The one list of what makes two definitions of a queue differ.
  std::vector<std::string> differences(const queue_spec& requested) const;

  /// This spec with the settings of `requested` that may change on a live queue (docs/api.md,
  /// "Change a queue's settings"): lease, max_attempts, throttle rates and bursts,
  /// delivery_durability, store_headers, the dedupe window, max_depth, the retentions. What decides
  /// where data lives or which buckets and dedupe entries a message has stays fixed: the ordering,
  /// shards, shard_key, sync_writes, the throttles' number and keys, the dedupe rule's presence and
  /// key. A request that changes one of those is refused with `invalid_spec` naming each field.
  /// Keeps this spec's name, on_enqueue hook and key functions. The result is validated (the
  /// stored-headers check among others); every broken rule is one error.
  result<queue_spec> updated(const queue_spec& requested) const;

  /// True when the ordering (mode, key, missing-key policy) is the same.
  bool same_ordering(const queue_spec& other) const;

  /// One-line summary, for logs and errors.
  std::string describe() const;

 private:
  std::string name_;
  ordering_mode ordering_ = ordering_mode::none;
  std::vector<key_component> key_;
  missing_ordering_key missing_ = missing_ordering_key::reject;
  bool missing_set_ = false;
  duration lease_ = limits::lease_default;
  std::uint32_t max_attempts_ = limits::max_attempts_default;
  std::vector<throttle_spec> throttles_;
  enqueue_hook hook_;
  delivery_durability delivery_ = delivery_durability::fast;
  bool sync_ = true;
  header_storage header_policy_ = header_storage::all;
  std::vector<std::string> header_list_;
  std::optional<dedupe_spec> dedupe_;
  std::uint32_t shards_ = 1;
  std::vector<key_component> shard_key_;
  depth_bounds depth_max_;
  retention_rules retention_;
};

/// Tenant of a queue name: the part before its '/', or `default_tenant` for a bare name.
/// Queue names live in a tenant namespace: `acme/orders` and `globex/orders` are two queues.
std::string_view tenant_of(std::string_view queue_name);
inline constexpr std::string_view default_tenant{"default"};

/// Where an accepted message goes.
struct placement {
  bool ordered = false;      ///< false: no group (unordered)
  std::string group_key;     ///< encoded key of the ordering group (when ordered)
  std::string ordering_key;  ///< the key a consumer receives (lanes.md L5); empty if unordered
};

/// Encoded group key of an `ordered()` queue's single group.
inline constexpr std::string_view whole_queue_group_key{};
/// Encoded group key of the shared keyless lane (cannot collide: real keys are >= 4 bytes).
inline constexpr std::string_view keyless_group_key{"\xFF", 1};

/// `tenant/queue` for a queue name: the name itself when it holds a '/', else `default/<name>`.
/// The ordering key a consumer receives for the keyless lane and for an `ordered()` queue.
std::string tenant_queue(std::string_view queue_name);

/// Decides the message's ordering group under the queue's spec and missing-key policy.
/// `missing` is set when a component was absent (for the missing-key counter), whatever policy.
result<placement> place(const queue_spec& spec, const key_source& src, bool* missing = nullptr);
result<placement> place(const queue_spec& spec, const message& m, bool* missing = nullptr);

/// The message's dedupe key under the queue's rule: nullopt when the queue has no rule or a
/// component is missing (such a message is never a duplicate).
std::optional<std::string> dedupe_key(const queue_spec& spec, const key_source& src);

}  // namespace laneq
