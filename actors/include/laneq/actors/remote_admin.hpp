// The admin interface laneqd publishes to CAF programs on other nodes (docs/caf-client.md).
// A queue spec carries an on_enqueue hook (a std::function) and cannot cross a process boundary,
// so a remote create takes the spec's JSON form (laneq/spec_json.hpp). Everything else is the
// in-process API: the queue handles it returns are `queue_api`, used exactly as in process.
#pragma once

#include <string>
#include <vector>

#include "laneq/actors/protocol.hpp"

namespace laneq {

/// The admin calls a CAF program on another node makes: what laneqd's published actor answers
/// when no tokens are configured, and what a login answers when they are (scoped to the token's
/// tenant; docs/caf-client.md).
///   create: (name, spec JSON) -> (queue, newly created); invalid_spec names every broken rule
///   lookup, list, describe, drop (with or without force), redrive into another queue: as the
///     in-process admin actor
///   update: (name, JSON merge patch of the settings) -> the queue's spec JSON as stored
///     (docs/api.md "Change a queue's settings"); invalid_spec names each fixed field it changes
///   topics (docs/design/lanes.md L9-L11):
///     (topic, create, name, spec JSON `{"queues": [...]}`) -> newly created; invalid_spec names
///       every broken rule (a missing queue too), spec_conflict other queues under the name
///     (topic, list) -> every topic; (topic, describe, name) -> the topic (topic_not_found)
///     (topic, drop, name) -> ok; the queues and their messages stay
///     (publish, topic name, batch) -> per queue the ids, in one store write (all or nothing)
using scoped_admin_actor =
    caf::typed_actor<caf::replies_to<create_atom, std::string, std::string>::with<queue_api, bool>,
                     caf::replies_to<lookup_atom, std::string>::with<queue_api>,
                     caf::replies_to<list_atom>::with<std::vector<std::string>>,
                     caf::replies_to<describe_atom, std::string>::with<queue_description>,
                     caf::replies_to<drop_atom, std::string>::with<caf::ok_atom>,
                     caf::replies_to<update_atom, std::string, std::string>::with<std::string>,
                     caf::replies_to<drop_atom, std::string, bool>::with<caf::ok_atom>,
                     caf::replies_to<redrive_atom, std::string, std::vector<message_id>,
                                     std::string>::with<std::uint64_t>,
                     caf::replies_to<topic_atom, create_atom, std::string, std::string>::with<bool>,
                     caf::replies_to<topic_atom, list_atom>::with<std::vector<topic_spec>>,
                     caf::replies_to<topic_atom, describe_atom, std::string>::with<topic_spec>,
                     caf::replies_to<topic_atom, drop_atom, std::string>::with<caf::ok_atom>,
                     caf::replies_to<publish_atom, std::string, std::vector<outgoing_message>>::
                         with<std::vector<topic_enqueued>>>;

}  // namespace laneq

// The queue and admin handles the remote admin answers cross the network inside messages, so
// their types need an ID on both nodes (without one the reply cannot be serialized and the client
// gets `unexpected_response`). `laneq::add_message_types` registers this block too; a client that
// registers types itself adds both blocks.
CAF_BEGIN_TYPE_ID_BLOCK(laneq_remote, caf::id_block::laneq::end)
CAF_ADD_TYPE_ID(laneq_remote, (laneq::queue_api))
CAF_ADD_TYPE_ID(laneq_remote, (laneq::scoped_admin_actor))
CAF_ADD_ATOM(laneq_remote, laneq, login_atom, "login")
CAF_END_TYPE_ID_BLOCK(laneq_remote)

namespace laneq {

/// What a remote CAF program reaches with `caf::io::remote_actor<remote_admin_actor>`: the admin
/// calls, and a login.
///   (login, token) -> the admin calls scoped to the token's tenant: its queues and topics only,
///     names as over HTTP (a bare `orders` of tenant acme is `acme/orders`; another tenant's is
///     forbidden), queue handles that serve the node that logged in only; an admin token
///     (tenant "*") every queue. unauthorized for an unknown token. Without tokens configured,
///     any login answers the unscoped admin.
///   the admin calls themselves: served as they are when no tokens are configured; unauthorized
///     when tokens are (log in first).
using remote_admin_actor =
    scoped_admin_actor::extend<caf::replies_to<login_atom, std::string>::with<scoped_admin_actor>>;

/// Spawns the unscoped admin calls in front of `admin` (every tenant's queues, the queue handles
/// themselves); it stops when `admin` does. laneqd publishes it behind its gate
/// (server/caf_gate.hpp).
scoped_admin_actor spawn_remote_admin(caf::actor_system& sys, admin_actor admin);

/// Spawns the admin calls of `tenant` (not the admin tenant "*") in front of `admin`: names are
/// scoped with `scope_to_tenant` (laneq/tenant.hpp), listings filtered with `tenant_may_use`, and
/// each queue handle it answers is a proxy that forwards to the queue and serves only requests
/// sent from `client` (the node that logged in). It and its proxies stop when `admin` does, or
/// when it is sent an exit.
scoped_admin_actor spawn_tenant_admin(caf::actor_system& sys, admin_actor admin, std::string tenant,
                                      caf::node_id client);

}  // namespace laneq
