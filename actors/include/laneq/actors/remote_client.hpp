// Connecting a CAF program to laneqd's CAF port (docs/caf-client.md, "Connecting"): the published
// admin actor, then a login when a token is given. Header only: it needs CAF's io module (the
// middleman), which the program loads and links; laneq_actors itself does not.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "caf/io/middleman.hpp"

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/remote_admin.hpp"

namespace laneq {

/// Logs in at laneqd's published admin actor `published` (reached over plain CAF or over TLS):
/// with a `token`, the handle its login answers (scoped to the token's tenant; an admin token's
/// is unscoped); without one, the published actor itself (which serves the admin calls only when
/// laneqd has no tokens). Errors: unauthorized for a token laneqd does not know. Blocking: not
/// for use inside an actor.
inline result<scoped_admin_actor> login_to_laneqd(
    caf::actor_system& sys, const remote_admin_actor& published, const std::string& token,
    caf::timespan timeout = std::chrono::seconds{30}) {
  if (token.empty()) return scoped_admin_actor{published};
  blocking_self self{sys};
  std::optional<result<scoped_admin_actor>> out;
  self->request(published, timeout, login_atom_v, token)
      .receive([&](scoped_admin_actor& scoped) { out.emplace(std::move(scoped)); },
               [&](caf::error& e) { out.emplace(from_caf(e)); });
  return std::move(*out);
}

/// The error for a published actor that could not be reached at `host:port`.
inline error unreachable_laneqd(caf::actor_system& sys, const std::string& host, std::uint16_t port,
                                const caf::error& why) {
  return error{errc::unavailable, "cannot reach laneqd at " + host + ":" + std::to_string(port) +
                                      ": " + sys.render(why)};
}

/// The admin calls of laneqd at `host:port` over plain CAF, logged in with `token` as
/// `login_to_laneqd` does. Errors: unavailable when laneqd cannot be reached (CAF's reason in the
/// message), unauthorized for a token laneqd does not know. `sys` must have loaded the middleman
/// and both of laneq's type ID blocks (`add_message_types`). Over TLS: reach the published actor
/// with `caf::openssl::remote_actor` and call `login_to_laneqd` (docs/caf-client.md, "TLS").
inline result<scoped_admin_actor> connect_to_laneqd(caf::actor_system& sys, const std::string& host,
                                                    std::uint16_t port, const std::string& token,
                                                    caf::timespan timeout = std::chrono::seconds{
                                                        30}) {
  auto published = sys.middleman().remote_actor<remote_admin_actor>(host, port);
  if (!published) return unreachable_laneqd(sys, host, port, published.error());
  return login_to_laneqd(sys, *published, token, timeout);
}

}  // namespace laneq
