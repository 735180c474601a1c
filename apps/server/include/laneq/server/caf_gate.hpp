// The actor laneqd publishes on its CAF port (docs/caf-client.md, "Tokens and tenants"): without
// tokens it serves the admin calls as they are; with tokens it answers only a login, which hands
// out the admin calls scoped to the token's tenant (actors/remote_admin.hpp). New tokens (a
// SIGHUP reload) reach it as a message.
#pragma once

#include <cstddef>
#include <memory>

#include "caf/all.hpp"

#include "laneq/actors/remote_admin.hpp"
#include "laneq/server/auth.hpp"

namespace laneq::server {

/// Tenant sessions the gate keeps (one per token and client node). At the bound the session
/// logged into longest ago is stopped (its client sees its handles go down and logs in again).
inline constexpr std::size_t caf_sessions_max = 1024;

}  // namespace laneq::server

// Only laneqd's main sends it, within the process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(laneq::server::auth_snapshot)

namespace laneq::server {

using tokens_atom = caf::atom_constant<caf::atom("tokens")>;
constexpr tokens_atom tokens_atom_v{};

/// The gate: what laneqd publishes (as `remote_admin_actor`), plus `(tokens, snapshot)`, which
/// replaces its tokens. Sessions whose token is gone or now names another tenant are stopped.
using caf_gate_actor = remote_admin_actor::extend<caf::reacts_to<tokens_atom, auth_snapshot>>;

/// Spawns the gate in front of `admin`, with `auth`'s tokens (none: no login needed, and any
/// login answers the unscoped admin calls). Authentication is on or off for the gate's life:
/// a reload replaces tokens, it never turns them off. It stops when `admin` does.
caf_gate_actor spawn_caf_gate(caf::actor_system& sys, admin_actor admin, auth_snapshot auth);

}  // namespace laneq::server
