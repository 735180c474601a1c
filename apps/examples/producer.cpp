// Example: a CAF producer on another node. It connects to laneqd's CAF port, creates (or finds)
// a queue ordered by the `account` header through the remote admin actor, and enqueues messages
// `account-<k> <n>` round-robin over the accounts (docs/caf-client.md).
//
//   laneq_example_producer --port=7071 --queue=orders --count=1000 --accounts=10
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "example_client.hpp"

namespace {

namespace ex = laneq::examples;

struct config : ex::client_config {
  std::uint32_t count = 100;
  std::uint32_t accounts = 10;
  std::uint32_t batch = 50;
  config() : client_config("queue name (ordered by the account header)") {
    opt_group{custom_options_, "global"}
        .add(count, "count", "messages to send")
        .add(accounts, "accounts", "distinct accounts (ordering keys)")
        .add(batch, "batch", "messages per enqueue request");
  }
};

/// The queue's spec: ordered per account (every message must carry the header).
constexpr const char* spec_json =
    R"({"ordering": {"mode": "key", "key": [{"header": "account"}], "when_key_missing": "reject"}})";

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  if (auto rc = ex::parse(cfg, argc, argv, "producer")) return *rc;
  if (cfg.accounts == 0 || cfg.batch == 0) {
    std::cerr << "producer: --accounts and --batch must be at least 1\n";
    return 2;
  }
  caf::actor_system sys{cfg};
  auto admin = ex::connect(sys, cfg, "producer");
  if (!admin) return 3;
  caf::scoped_actor self{sys};
  laneq::queue_api queue;
  if (!ex::ask(
          self, *admin, "producer", "create " + cfg.queue,
          [&](laneq::queue_api q, bool created) {
            queue = std::move(q);
            std::cerr << "producer: " << (created ? "created" : "found") << " queue " << cfg.queue
                      << "\n";
          },
          laneq::create_atom_v, cfg.queue, std::string(spec_json)))
    return 1;
  std::uint32_t sent = 0;
  int rc = 0;
  while (sent < cfg.count && rc == 0) {
    std::vector<laneq::outgoing_message> batch;
    for (std::uint32_t i = 0; i < cfg.batch && sent + i < cfg.count; ++i) {
      auto n = sent + i;
      auto account = "account-" + std::to_string(n % cfg.accounts);
      laneq::outgoing_message m;
      m.body = account + " " + std::to_string(n / cfg.accounts);
      m.headers.push_back({"account", account});
      batch.push_back(std::move(m));
    }
    auto size = static_cast<std::uint32_t>(batch.size());
    if (!ex::ask(
            self, queue, "producer", "enqueue",
            [&](const std::vector<laneq::message_id>&) { sent += size; }, laneq::enqueue_atom_v,
            std::move(batch)))
      rc = 1;
  }
  std::cout << "sent " << sent << "\n";
  return rc;
}
