// What the CAF examples (producer.cpp, worker.cpp) share: their common options and CAF setup,
// connecting to laneqd's remote admin actor, and blocking requests that report errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "laneq/actors/protocol.hpp"
#include "laneq/actors/remote_admin.hpp"
#include "laneq/actors/remote_client.hpp"

namespace laneq::examples {

/// How long an example waits for any answer.
constexpr auto timeout = std::chrono::seconds(30);

/// The options every example has (laneqd's CAF host and port, its token, the queue) and its CAF
/// setup:
/// laneq's message types, the remote queue handles and the middleman. An example adds its own
/// options in its constructor.
struct client_config : caf::actor_system_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 7071;
  std::string queue = "orders";
  /// Logs in with it when set (laneqd with tokens); $LANEQ_TOKEN by default, as for the CLI.
  std::string token;

  explicit client_config(const char* queue_help) {
    if (const char* t = std::getenv("LANEQ_TOKEN")) token = t;
    opt_group{custom_options_, "global"}
        .add(host, "host", "laneqd's CAF host")
        .add(port, "port", "laneqd's CAF port")
        .add(token, "token", "log in with this token (default: $LANEQ_TOKEN)")
        .add(queue, "queue", queue_help);
    add_message_types<caf::id_block::laneq>();
    add_message_types<caf::id_block::laneq_remote>();  // the queue handles
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
  }
};

/// Parses the command line: nothing to go on, else the exit code (2 for a bad command line, 0
/// when the help text was printed).
inline std::optional<int> parse(client_config& cfg, int argc, char** argv, std::string_view prog) {
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << prog << ": " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;
  return std::nullopt;
}

/// The admin calls of laneqd at the configured host and port, logged in with the token when one
/// is set; or nothing (the reason said on stderr; the example exits 3).
inline std::optional<scoped_admin_actor> connect(caf::actor_system& sys, const client_config& cfg,
                                                 std::string_view prog) {
  auto admin = connect_to_laneqd(sys, cfg.host, cfg.port, cfg.token, timeout);
  if (!admin) {
    std::cerr << prog << ": " << to_string(admin.err()) << "\n";
    return std::nullopt;
  }
  return std::move(admin).value();
}

/// Sends `args` to `dest` and waits for the answer, which goes to `on_answer`; an error is said
/// on stderr as `<prog>: <what>: <error>` and makes the result false.
template <class Dest, class F, class... Args>
bool ask(caf::scoped_actor& self, const Dest& dest, std::string_view prog, std::string_view what,
         F on_answer, Args&&... args) {
  bool ok = true;
  self->request(dest, timeout, std::forward<Args>(args)...)
      .receive(std::move(on_answer), [&](caf::error& e) {
        std::cerr << prog << ": " << what << ": " << to_string(from_caf(e)) << "\n";
        ok = false;
      });
  return ok;
}

}  // namespace laneq::examples
