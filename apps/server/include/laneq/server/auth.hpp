// Bearer-token authentication and tenant scoping of queue names (docs/api.md "Authentication").
#pragma once

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

  /// The full name of the queue a URL names for `who`: a tenant-scoped token's bare name
  /// `orders` means `<tenant>/orders`. forbidden when the queue is another tenant's. Topic
  /// names are scoped the same way (`what` names the kind in the error).
  result<std::string> resolve(const principal& who, std::string name,
                              std::string_view what = "queue") const;

  /// Whether `who` may see `queue_name` (listing).
  static bool may_use(const principal& who, std::string_view queue_name);

 private:
  std::vector<token_config> tokens_;
};

}  // namespace laneq::server
