// A remote CAF client of laneqd for the server tests: an actor system that speaks laneq's message
// types over the network, as a program on another node would (docs/caf-client.md).
#pragma once

#include "caf/io/all.hpp"

#include "laneq/actors/broker.hpp"  // add_message_types

namespace laneq::server::test {

struct caf_client {
  static caf::actor_system_config& prepare(caf::actor_system_config& c) {
    add_message_types(c);
    return c.load<caf::io::middleman>();
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{prepare(cfg)};
};

}  // namespace laneq::server::test
