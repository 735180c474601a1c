// A CAF program built out of tree against the installed laneq package (find_package(laneq) or
// laneq.pc; tests/package/run_consumer_test.sh): it opens an embedded broker on a RocksDB data
// directory, creates a queue ordered per account, enqueues, receives and acks, and exits 0 only if
// each step did what the API promises (docs/api.md). Prints "package consumer: ok" at the end.
#include <iostream>
#include <string>
#include <vector>

#include "caf/all.hpp"
#include "laneq/actors/broker.hpp"
#include "laneq/version.hpp"

namespace {

/// Prints why the check failed; the caller returns 1.
int fail(const std::string& what) {
  std::cerr << "package consumer: FAILED: " << what << "\n";
  return 1;
}

laneq::outgoing_message message(std::string body, std::string account) {
  laneq::outgoing_message m;
  m.body = std::move(body);
  m.headers.push_back({"account", std::move(account)});
  return m;
}

/// One receive of up to 10 messages, waiting up to `wait_us` for the first.
laneq::result<std::vector<laneq::delivery>> take(laneq::blocking_queue& q, std::int64_t wait_us) {
  return q.receive(laneq::receive_request{10, 0, wait_us, 1});
}

int run(caf::actor_system& sys, const std::string& data_dir) {
  laneq::broker_options options;
  options.data_dir = data_dir;
  auto opened = laneq::broker::open(sys, options);
  if (!opened) return fail("open: " + laneq::to_string(opened.err()));
  auto broker = std::move(opened.value());
  laneq::blocking_admin admin{sys, broker->admin()};
  auto handle =
      admin.create_queue(laneq::queue_spec{"orders"}.ordered_by({laneq::key::header("account")}));
  if (!handle) return fail("create_queue: " + laneq::to_string(handle.err()));
  laneq::blocking_queue orders{sys, handle.value()};
  auto ids = orders.enqueue({message("debit 10", "42"), message("credit 5", "42")});
  if (!ids || ids.value().size() != 2) return fail("enqueue of two messages");
  // Ordered per account: the second message waits until the first is acked.
  for (const char* expected : {"debit 10", "credit 5"}) {
    auto got = take(orders, 2'000'000);
    if (!got) return fail("receive: " + laneq::to_string(got.err()));
    if (got.value().size() != 1 || got.value().front().msg.body != expected)
      return fail(std::string{"receive: expected only '"} + expected + "', got " +
                  std::to_string(got.value().size()) + " message(s)");
    if (auto acked = orders.ack(got.value().front().lease); !acked)
      return fail("ack: " + laneq::to_string(acked.err()));
    std::cout << "received and acked '" << expected << "'\n";
  }
  auto rest = take(orders, 100'000);
  if (!rest || !rest.value().empty()) return fail("the queue is not empty after both acks");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: laneq_package_consumer DATA_DIR\n";
    return 2;
  }
  caf::actor_system_config cfg;
  laneq::add_message_types(cfg);
  caf::actor_system sys{cfg};
  std::cout << "laneq " << laneq::version_string << " (" << LANEQ_VERSION_MAJOR << "."
            << LANEQ_VERSION_MINOR << "." << LANEQ_VERSION_PATCH << ")\n";
  if (int rc = run(sys, argv[1]); rc != 0) return rc;
  std::cout << "package consumer: ok\n";
  return 0;
}
