// Bearer-token authentication and tenant scoping of queue names (docs/api.md "Authentication").
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "laneq/error.hpp"
#include "laneq/server/config.hpp"

namespace laneq::server {

/// Who made a request.
struct principal {
  std::string tenant;  ///< "*" for an admin token (and when authentication is off)
  bool admin() const { return tenant == "*"; }
};

/// Checks bearer tokens against the configured list. Immutable after construction, so any
/// thread may use it.
class authenticator {
 public:
  explicit authenticator(std::vector<token_config> tokens) : tokens_(std::move(tokens)) {}

  bool enabled() const { return !tokens_.empty(); }

  /// The principal of an `Authorization` header value (`Bearer <token>`); unauthorized when
  /// authentication is on and the token is missing or unknown. Compares in constant time.
  result<principal> authenticate(std::string_view authorization) const;

  /// The principal of a bare token (a CAF login); unauthorized when authentication is on and
  /// the token is unknown. Compares in constant time.
  result<principal> authenticate_token(std::string_view token) const;

  /// The full name of the queue a URL names for `who`: a tenant-scoped token's bare name
  /// `orders` means `<tenant>/orders`. forbidden when the queue is another tenant's. Topic
  /// names are scoped the same way (`what` names the kind in the error).
  /// The rule is libqueue's `scope_to_tenant`, which the CAF port applies too.
  static result<std::string> resolve(const principal& who, std::string name,
                                     std::string_view what = "queue");

  /// Whether `who` may see `queue_name` (listing).
  static bool may_use(const principal& who, std::string_view queue_name);

 private:
  std::vector<token_config> tokens_;
};

/// An immutable set of tokens, read by whoever holds it; a reload makes a new one.
using auth_snapshot = std::shared_ptr<const authenticator>;

/// The tokens in force for the HTTP threads, swapped whole when a tokens_file is reloaded
/// (SIGHUP). The HTTP front end is not actors: its threads each take the current snapshot per
/// request and keep it for that request, so a request is checked against one set of tokens,
/// never a mix. The CAF side gets the same snapshot as a message (caf_gate.hpp). A mutex guards
/// the pointer for as long as it takes to copy it: libstdc++ 12's std::atomic<std::shared_ptr>
/// guards it with a lock bit that ThreadSanitizer does not see (it reported a race in CI), and an
/// uncontended mutex costs as little.
class auth_source {
 public:
  explicit auth_source(auth_snapshot first) : current_(std::move(first)) {}

  auth_snapshot get() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return current_;
  }
  void replace(auth_snapshot next) {
    std::lock_guard<std::mutex> guard{mutex_};
    current_.swap(next);  // the old snapshot is released after the lock, by `next`
  }

 private:
  mutable std::mutex mutex_;
  auth_snapshot current_;
};

}  // namespace laneq::server
