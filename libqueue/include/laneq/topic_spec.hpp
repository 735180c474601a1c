// What a topic is: a name and the queues an enqueue to it fans out into (docs/design/lanes.md
// L9-L11). Each queue resolves its own lane; the queues are the topic's subscriptions.
#pragma once

#include <string>
#include <vector>

#include "laneq/error.hpp"

namespace laneq {

/// A topic, built fluently: `topic_spec("orders").fan_out({"orders-by-customer", "audit"})`.
class topic_spec {
 public:
  topic_spec() = default;
  explicit topic_spec(std::string name) : name_(std::move(name)) {}

  /// The queues every enqueue commits one message into, atomically, in this order.
  topic_spec& fan_out(std::vector<std::string> queues);

  const std::string& name() const { return name_; }
  const std::vector<std::string>& queues() const { return queues_; }

  /// Every broken rule, one error each, naming the topic and the field: the name (as for a
  /// queue), 1 to limits::topic_queues_max queues, no queue twice, each queue in the topic's
  /// tenant. Whether the queues exist is the admin actor's check.
  std::vector<error> validate() const;

  friend bool operator==(const topic_spec&, const topic_spec&) = default;

  template <class Inspector>
  friend auto inspect(Inspector& f, topic_spec& x) {
    return f(x.name_, x.queues_);
  }

 private:
  std::string name_;
  std::vector<std::string> queues_;
};

}  // namespace laneq
