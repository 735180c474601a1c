// The admin interface laneqd publishes to CAF programs on other nodes (docs/caf-client.md).
// A queue spec carries an on_enqueue hook (a std::function) and cannot cross a process boundary,
// so a remote create takes the spec's JSON form (laneq/spec_json.hpp). Everything else is the
// in-process API: the queue handles it returns are `queue_api`, used exactly as in process.
#pragma once

#include <string>
#include <vector>

#include "laneq/actors/protocol.hpp"

namespace laneq {

/// What a remote CAF program reaches with `caf::io::remote_actor<remote_admin_actor>`.
///   create: (name, spec JSON) -> (queue, newly created); invalid_spec names every broken rule
///   lookup, list, describe, drop: as the in-process admin actor
using remote_admin_actor =
    caf::typed_actor<caf::replies_to<create_atom, std::string, std::string>::with<queue_api, bool>,
                     caf::replies_to<lookup_atom, std::string>::with<queue_api>,
                     caf::replies_to<list_atom>::with<std::vector<std::string>>,
                     caf::replies_to<describe_atom, std::string>::with<queue_description>,
                     caf::replies_to<drop_atom, std::string>::with<caf::ok_atom>>;

/// Spawns a remote admin in front of `admin`; it stops when `admin` does.
remote_admin_actor spawn_remote_admin(caf::actor_system& sys, admin_actor admin);

}  // namespace laneq
