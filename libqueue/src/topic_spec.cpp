// Topic spec builder and validation (libqueue/include/laneq/topic_spec.hpp).
#include "laneq/topic_spec.hpp"

#include "laneq/limits.hpp"
#include "laneq/queue_spec.hpp"

namespace laneq {

topic_spec& topic_spec::fan_out(std::vector<std::string> queues) {
  queues_ = std::move(queues);
  return *this;
}

std::vector<error> topic_spec::validate() const {
  std::vector<error> out;
  auto fail = [&](const std::string& field, const std::string& what) {
    out.push_back(error{errc::invalid_spec, "topic '" + name_ + "': " + field + ": " + what});
  };
  // A topic's name follows the queue name rules; reuse them through a probe spec.
  for (auto& e : queue_spec{name_}.validate()) {
    auto at = e.message.find("': ");  // "queue '<name>': name: <what>"
    out.push_back(error{errc::invalid_spec,
                        "topic '" + name_ + "': " +
                            (at == std::string::npos ? e.message : e.message.substr(at + 3))});
  }
  if (queues_.empty() || queues_.size() > limits::topic_queues_max)
    fail("queues", "a topic fans out into 1 to " + std::to_string(limits::topic_queues_max) +
                       " queues, got " + std::to_string(queues_.size()));
  auto tenant = tenant_of(name_);
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    auto f = "queues[" + std::to_string(i) + "]";
    for (std::size_t j = 0; j < i; ++j)
      if (queues_[j] == queues_[i])
        fail(f, "'" + queues_[i] + "' repeats queues[" + std::to_string(j) + "]");
    if (tenant_of(queues_[i]) != tenant)
      fail(f,
           "queue '" + queues_[i] + "' is not in the topic's tenant '" + std::string{tenant} + "'");
  }
  return out;
}

}  // namespace laneq
