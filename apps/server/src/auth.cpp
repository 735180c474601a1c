// Bearer tokens and tenants (apps/server/include/laneq/server/auth.hpp).
#include "laneq/server/auth.hpp"

#include <openssl/crypto.h>

#include "laneq/queue_spec.hpp"
#include "laneq/tenant.hpp"

namespace laneq::server {

result<principal> authenticator::authenticate(std::string_view authorization) const {
  if (!enabled()) return principal{"*"};
  constexpr std::string_view scheme = "Bearer ";
  if (authorization.size() <= scheme.size() ||
      !iequals(authorization.substr(0, scheme.size()), scheme))
    return error{errc::unauthorized, "an Authorization: Bearer <token> header is required"};
  auto token = authorization.substr(scheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return authenticate_token(token);
}

result<principal> authenticator::authenticate_token(std::string_view token) const {
  if (!enabled()) return principal{"*"};
  const token_config* found = nullptr;
  // Every configured token is compared, so the time taken does not tell which one matched.
  for (const auto& t : tokens_) {
    bool same = t.token.size() == token.size() &&
                CRYPTO_memcmp(t.token.data(), token.data(), token.size()) == 0;
    if (same) found = &t;
  }
  if (found == nullptr) return error{errc::unauthorized, "the bearer token is not valid"};
  return principal{found->tenant};
}

result<std::string> authenticator::resolve(const principal& who, std::string name,
                                           std::string_view what) {
  return scope_to_tenant(who.tenant, std::move(name), what);
}

bool authenticator::may_use(const principal& who, std::string_view queue_name) {
  return tenant_may_use(who.tenant, queue_name);
}

}  // namespace laneq::server
