// Example: a CAF worker on another node. It connects to laneqd's CAF port, looks up an ordered
// queue through the remote admin actor, takes messages under leases, "processes" them and acks
// them in batches: the same typed queue_api as in process (docs/caf-client.md). Prints one line
// per acked message, `<ordering key>\t<body>`, in ack order.
//
//   laneq_example_worker --port=7071 --queue=orders --expect=1000
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "example_client.hpp"

namespace {

namespace ex = laneq::examples;

struct config : ex::client_config {
  std::uint32_t expect = 0;
  std::uint32_t max = 10;
  std::uint32_t idle_ms = 5000;
  config() : client_config("the queue to work on") {
    opt_group{custom_options_, "global"}
        .add(expect, "expect", "stop after acking this many messages (0: run until idle)")
        .add(max, "max", "messages per receive")
        .add(idle_ms, "idle-ms", "stop after this long without a message");
  }
};

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  if (auto rc = ex::parse(cfg, argc, argv, "worker")) return *rc;
  caf::actor_system sys{cfg};
  auto admin = ex::connect(sys, cfg, "worker");
  if (!admin) return 3;
  caf::scoped_actor self{sys};
  laneq::queue_api queue;
  if (!ex::ask(
          self, *admin, "worker", "lookup " + cfg.queue,
          [&](laneq::queue_api q) { queue = std::move(q); }, laneq::lookup_atom_v, cfg.queue))
    return 1;
  std::uint64_t acked = 0;
  auto last_message = std::chrono::steady_clock::now();
  // Long-poll receives of up to 200 ms; ordered per account, so a batch holds at most one
  // message of each account and acking the batch releases each account's next message.
  laneq::receive_request req{cfg.max, 0, 200'000};
  int rc = 0;
  while (rc == 0 && (cfg.expect == 0 || acked < cfg.expect)) {
    std::vector<laneq::delivery> batch;
    if (!ex::ask(
            self, queue, "worker", "receive",
            [&](std::vector<laneq::delivery>& ds) { batch = std::move(ds); }, laneq::receive_atom_v,
            req)) {
      rc = 1;
      break;
    }
    if (batch.empty()) {
      auto idle = std::chrono::steady_clock::now() - last_message;
      if (idle > std::chrono::milliseconds(cfg.idle_ms)) break;
      continue;
    }
    last_message = std::chrono::steady_clock::now();
    std::vector<laneq::lease_token> leases;
    for (const auto& d : batch) leases.push_back(d.lease);
    auto on_acked = [&](const std::vector<laneq::lease_outcome>& failed) {
      // Print only what was really acked (a lease may have expired meanwhile).
      for (const auto& d : batch) {
        bool bad = false;
        for (const auto& f : failed) bad = bad || f.lease == d.lease;
        if (bad) continue;
        std::cout << d.ordering_key << "\t" << d.msg.body << "\n";
        ++acked;
      }
      for (const auto& f : failed)
        std::cerr << "worker: ack failed: " << laneq::to_string(f.err) << "\n";
    };
    if (!ex::ask(self, queue, "worker", "ack", on_acked, laneq::ack_atom_v, std::move(leases)))
      rc = 1;
  }
  std::cout.flush();
  std::cerr << "worker: acked " << acked << " messages\n";
  if (rc == 0 && cfg.expect != 0 && acked < cfg.expect) rc = 4;
  return rc;
}
