// Example: a CAF producer on another node. It connects to laneqd's CAF port, creates (or finds)
// a queue ordered by the `account` header through the remote admin actor, and enqueues messages
// `account-<k> <n>` round-robin over the accounts (docs/caf-client.md).
//
//   laneq_example_producer --port=7071 --queue=orders --count=1000 --accounts=10
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
  std::uint32_t count = 100;
  std::uint32_t accounts = 10;
  std::uint32_t batch = 50;
  config() {
    opt_group{custom_options_, "global"}
        .add(host, "host", "laneqd's CAF host")
        .add(port, "port", "laneqd's CAF port")
        .add(queue, "queue", "queue name (ordered by the account header)")
        .add(count, "count", "messages to send")
        .add(accounts, "accounts", "distinct accounts (ordering keys)")
        .add(batch, "batch", "messages per enqueue request");
    add_message_types<caf::id_block::laneq>();
    add_message_types<caf::id_block::laneq_remote>();  // the queue handles
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
  }
};

/// The queue's spec: ordered per account (every message must carry the header).
constexpr const char* spec_json =
    R"({"ordering": {"mode": "key", "key": [{"header": "account"}], "when_key_missing": "reject"}})";

constexpr auto timeout = std::chrono::seconds(30);

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "producer: " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;
  if (cfg.accounts == 0 || cfg.batch == 0) {
    std::cerr << "producer: --accounts and --batch must be at least 1\n";
    return 2;
  }
  caf::actor_system sys{cfg};
  auto admin = sys.middleman().remote_actor<laneq::remote_admin_actor>(cfg.host, cfg.port);
  if (!admin) {
    std::cerr << "producer: cannot reach laneqd at " << cfg.host << ":" << cfg.port << ": "
              << sys.render(admin.error()) << "\n";
    return 3;
  }
  caf::scoped_actor self{sys};
  laneq::queue_api queue;
  int rc = 0;
  self->request(*admin, timeout, laneq::create_atom_v, cfg.queue, std::string(spec_json))
      .receive(
          [&](laneq::queue_api q, bool created) {
            queue = std::move(q);
            std::cerr << "producer: " << (created ? "created" : "found") << " queue " << cfg.queue
                      << "\n";
          },
          [&](caf::error& e) {
            std::cerr << "producer: create " << cfg.queue << ": "
                      << laneq::to_string(laneq::from_caf(e)) << "\n";
            rc = 1;
          });
  if (rc != 0) return rc;
  std::uint32_t sent = 0;
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
    self->request(queue, timeout, laneq::enqueue_atom_v, std::move(batch))
        .receive([&](const std::vector<laneq::message_id>&) { sent += size; },
                 [&](caf::error& e) {
                   std::cerr << "producer: enqueue: " << laneq::to_string(laneq::from_caf(e))
                             << "\n";
                   rc = 1;
                 });
  }
  std::cout << "sent " << sent << "\n";
  return rc;
}
