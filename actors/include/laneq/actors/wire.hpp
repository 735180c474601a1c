// How the protocol's most frequent values cross CAF's binary serializers: a delivery, a message
// to enqueue and a lease token each as one byte string in its transport form (codec.hpp), not a
// field at a time. CAF 0.17 makes and destroys an `error` for every field and nesting level it
// serializes (about forty for a delivery); in laneqd over CAF that was about a tenth of its CPU.
// Other inspectors (printing) still see the fields through the plain `inspect` templates of
// libqueue. These overloads are not templates, so a serializer takes them over those templates;
// protocol.hpp includes this header before it names the types to CAF, so every program that
// sends them over CAF sees them. Both ends must be of the same release (docs/caf-client.md).
#pragma once

#include "caf/deserializer.hpp"
#include "caf/error.hpp"
#include "caf/serializer.hpp"

#include "laneq/engine_io.hpp"
#include "laneq/lease.hpp"
#include "laneq/message.hpp"

namespace laneq {

caf::error inspect(caf::serializer& f, delivery& x);
caf::error inspect(caf::deserializer& f, delivery& x);
caf::error inspect(caf::serializer& f, outgoing_message& x);
caf::error inspect(caf::deserializer& f, outgoing_message& x);
caf::error inspect(caf::serializer& f, lease_token& x);
caf::error inspect(caf::deserializer& f, lease_token& x);

}  // namespace laneq
