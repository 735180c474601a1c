// The JSON text of queue and topic specs as the remote admin calls take them
// (actors/include/laneq/actors/remote_admin.hpp): a spec cannot cross a process boundary as a
// `queue_spec` (it may carry a hook), so remote calls send its JSON form (laneq/spec_json.hpp).
#pragma once

#include <functional>
#include <string>

#include "laneq/error.hpp"
#include "laneq/queue_spec.hpp"
#include "laneq/topic_spec.hpp"

namespace laneq {

/// The queue spec of a remote create; invalid_spec naming every broken rule (or the JSON error).
result<queue_spec> queue_spec_from_text(const std::string& name, const std::string& text);

/// Maps a queue name a topic spec lists to the full name it means, or refuses it.
using queue_name_map = std::function<result<std::string>(std::string)>;

/// The topic spec of a remote topic create, each listed queue name first passed through
/// `map_queue` when it is set; invalid_spec naming every broken rule, or `map_queue`'s error.
result<topic_spec> topic_spec_from_text(const std::string& name, const std::string& text,
                                        const queue_name_map& map_queue = {});

}  // namespace laneq
