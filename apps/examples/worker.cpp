// Example: a CAF worker on another node. It connects to laneqd's CAF port, looks up an ordered
// queue through the remote admin actor, takes messages under leases, "processes" them and acks
// them in batches: the same typed queue_api as in process (docs/caf-client.md). Prints one line
// per acked message, `<ordering key>\t<body>`, in ack order.
//
//   laneq_example_worker --port=7071 --queue=orders --expect=1000
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "laneq/actors/protocol.hpp"
#include "laneq/actors/remote_admin.hpp"

namespace {

struct config : caf::actor_system_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 7071;
  std::string queue = "orders";
  std::uint32_t expect = 0;
  std::uint32_t max = 10;
  std::uint32_t idle_ms = 5000;
  config() {
    opt_group{custom_options_, "global"}
        .add(host, "host", "laneqd's CAF host")
        .add(port, "port", "laneqd's CAF port")
        .add(queue, "queue", "the queue to work on")
        .add(expect, "expect", "stop after acking this many messages (0: run until idle)")
        .add(max, "max", "messages per receive")
        .add(idle_ms, "idle-ms", "stop after this long without a message");
    add_message_types<caf::id_block::laneq>();
    add_message_types<caf::id_block::laneq_remote>();  // the queue handles
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
  }
};

constexpr auto timeout = std::chrono::seconds(30);

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "worker: " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;
  caf::actor_system sys{cfg};
  auto admin = sys.middleman().remote_actor<laneq::remote_admin_actor>(cfg.host, cfg.port);
  if (!admin) {
    std::cerr << "worker: cannot reach laneqd at " << cfg.host << ":" << cfg.port << ": "
              << sys.render(admin.error()) << "\n";
    return 3;
  }
  caf::scoped_actor self{sys};
  laneq::queue_api queue;
  int rc = 0;
  self->request(*admin, timeout, laneq::lookup_atom_v, cfg.queue)
      .receive([&](laneq::queue_api q) { queue = std::move(q); },
               [&](caf::error& e) {
                 std::cerr << "worker: lookup " << cfg.queue << ": "
                           << laneq::to_string(laneq::from_caf(e)) << "\n";
                 rc = 1;
               });
  if (rc != 0) return rc;
  std::uint64_t acked = 0;
  auto last_message = std::chrono::steady_clock::now();
  // Long-poll receives of up to 200 ms; ordered per account, so a batch holds at most one
  // message of each account and acking the batch releases each account's next message.
  laneq::receive_request req{cfg.max, 0, 200'000};
  while (rc == 0 && (cfg.expect == 0 || acked < cfg.expect)) {
    std::vector<laneq::delivery> batch;
    self->request(queue, timeout, laneq::receive_atom_v, req)
        .receive([&](std::vector<laneq::delivery>& ds) { batch = std::move(ds); },
                 [&](caf::error& e) {
                   std::cerr << "worker: receive: " << laneq::to_string(laneq::from_caf(e)) << "\n";
                   rc = 1;
                 });
    if (rc != 0) break;
    if (batch.empty()) {
      auto idle = std::chrono::steady_clock::now() - last_message;
      if (idle > std::chrono::milliseconds(cfg.idle_ms)) break;
      continue;
    }
    last_message = std::chrono::steady_clock::now();
    std::vector<laneq::lease_token> leases;
    for (const auto& d : batch) leases.push_back(d.lease);
    self->request(queue, timeout, laneq::ack_atom_v, std::move(leases))
        .receive(
            [&](const std::vector<laneq::lease_outcome>& failed) {
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
            },
            [&](caf::error& e) {
              std::cerr << "worker: ack: " << laneq::to_string(laneq::from_caf(e)) << "\n";
              rc = 1;
            });
  }
  std::cout.flush();
  std::cerr << "worker: acked " << acked << " messages\n";
  if (rc == 0 && cfg.expect != 0 && acked < cfg.expect) rc = 4;
  return rc;
}
