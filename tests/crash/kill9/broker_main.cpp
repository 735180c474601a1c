// laneq_kill9_broker: the broker process the kill -9 test (RELIABILITY.md T3) kills and restarts.
// Opens a RocksDB-backed broker on --data, creates the test queues (idempotently), publishes
// each queue's typed queue_api on 127.0.0.1 (ports --port, --port+1, --port+2; 0: the OS picks
// each), prints "ready <ports>" and runs until it is killed or its stdin closes.
//
//   laneq_kill9_broker --data DIR --port P [--grace-ms N]
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "kill9_setup.hpp"
#include "laneq/actors/broker.hpp"

namespace {

struct options {
  std::string data_dir;
  long port = -1;
  long grace_ms = 200;
};

int usage(const char* why) {
  std::cerr << "laneq_kill9_broker: " << why
            << "\nusage: laneq_kill9_broker --data DIR --port P [--grace-ms N]\n";
  return 2;
}

bool parse_number(std::string_view text, long max, long& out) {
  char* end = nullptr;
  std::string copy{text};
  auto v = std::strtol(copy.c_str(), &end, 10);
  if (copy.empty() || *end != '\0' || v < 0 || v > max) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    if (i + 1 >= argc) return usage("missing value after an option");
    std::string_view val{argv[++i]};
    if (arg == "--data") {
      opt.data_dir = std::string{val};
    } else if (arg == "--port") {
      if (!parse_number(val, 65535 - 2, opt.port)) return usage("bad --port");
    } else if (arg == "--grace-ms") {
      if (!parse_number(val, 3'600'000, opt.grace_ms)) return usage("bad --grace-ms");
    } else {
      return usage("unknown option");
    }
  }
  if (opt.data_dir.empty() || opt.port < 0) return usage("--data and --port are required");

  caf::actor_system_config cfg;
  laneq::add_message_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};

  laneq::broker_options bo;
  bo.data_dir = opt.data_dir;
  bo.reclaim_grace = std::chrono::milliseconds{opt.grace_ms};
  auto opened = laneq::broker::open(sys, bo);
  if (!opened) {
    std::cerr << "laneq_kill9_broker: open failed: " << laneq::to_string(opened.err()) << "\n";
    std::_Exit(3);
  }
  auto& broker = *opened.value();
  laneq::blocking_admin admin{sys, broker.admin(), std::chrono::seconds{30}};
  std::array<std::uint16_t, laneq::kill9::queue_count> ports{};
  for (std::size_t i = 0; i < laneq::kill9::queue_count; ++i) {
    auto q = admin.create_queue(laneq::kill9::spec_of(i));
    if (!q) {
      std::cerr << "laneq_kill9_broker: create " << laneq::kill9::queue_names[i]
                << " failed: " << laneq::to_string(q.err()) << "\n";
      std::_Exit(3);
    }
    auto want = opt.port == 0 ? std::uint16_t{0}
                              : static_cast<std::uint16_t>(opt.port + static_cast<long>(i));
    auto port = sys.middleman().publish(q.value(), want, "127.0.0.1", true);
    if (!port) {
      std::cerr << "laneq_kill9_broker: publish failed: " << sys.render(port.error()) << "\n";
      std::_Exit(3);
    }
    ports[i] = *port;
  }
  std::cout << laneq::kill9::make_ready_line(ports) << std::endl;

  // Runs until killed. A closed stdin means the test driver is gone: leave at once (no orderly
  // shutdown; this process exists to be killed).
  char buf[64];
  while (true) {
    auto got = ::read(STDIN_FILENO, buf, sizeof buf);
    if (got == 0 || (got < 0 && errno != EINTR)) std::_Exit(0);
  }
}
