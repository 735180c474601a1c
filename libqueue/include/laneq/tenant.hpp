// Tenants: which queue and topic names a token's tenant may use (docs/api.md "Authentication").
// The one scoping rule of laneqd's HTTP API (apps/server auth.hpp) and of its CAF port
// (actors/remote_admin.hpp).
#pragma once

#include <string>
#include <string_view>

#include "laneq/error.hpp"
#include "laneq/queue_spec.hpp"  // tenant_of, default_tenant

namespace laneq {

/// The tenant of an admin token: every tenant's queues and topics, names used as given.
inline constexpr std::string_view admin_tenant{"*"};

/// The full name `name` (a queue's or, with `what` "topic", a topic's) means for `tenant`: an
/// admin's names as given; a bare name of any other tenant but `default_tenant` is
/// `<tenant>/<name>`. forbidden when the name is another tenant's.
result<std::string> scope_to_tenant(std::string_view tenant, std::string name,
                                    std::string_view what = "queue");

/// Whether `tenant` may use (and see in a listing) the queue or topic `name` (a full name).
bool tenant_may_use(std::string_view tenant, std::string_view name);

}  // namespace laneq
