// Tenants and the names they may use (libqueue/include/laneq/tenant.hpp).
#include "laneq/tenant.hpp"

namespace laneq {

result<std::string> scope_to_tenant(std::string_view tenant, std::string name,
                                    std::string_view what) {
  if (tenant == admin_tenant) return name;
  if (name.find('/') == std::string::npos && tenant != default_tenant)
    name = std::string{tenant} + "/" + name;
  if (!tenant_may_use(tenant, name))
    return error{errc::forbidden, "the token of tenant '" + std::string{tenant} + "' may not use " +
                                      std::string{what} + " '" + name + "'"};
  return name;
}

bool tenant_may_use(std::string_view tenant, std::string_view name) {
  return tenant == admin_tenant || tenant_of(name) == tenant;
}

}  // namespace laneq
