// What the CAF examples (producer.cpp, worker.cpp) share: their common options and CAF setup,
// connecting to laneqd's remote admin actor (plain or over TLS with CAF's openssl module,
// docs/caf-client.md "TLS"), and blocking requests that report errors.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "caf/openssl/all.hpp"

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
  std::string tls_cert;  ///< set: connect over TLS (laneqd's caf.tls), with this certificate
  std::string tls_key;
  std::string tls_ca;

  explicit client_config(const char* queue_help) {
    if (const char* t = std::getenv("LANEQ_TOKEN")) token = t;
    opt_group{custom_options_, "global"}
        .add(host, "host", "laneqd's CAF host")
        .add(port, "port", "laneqd's CAF port")
        .add(token, "token", "log in with this token (default: $LANEQ_TOKEN)")
        .add(queue, "queue", queue_help)
        .add(tls_cert, "tls-cert",
             "TLS: this client's certificate (PEM), signed by a CA in "
             "laneqd's caf.tls.ca_file")
        .add(tls_key, "tls-key", "TLS: the certificate's private key (PEM)")
        .add(tls_ca, "tls-ca", "TLS: CA file (PEM) that signed laneqd's certificate");
    add_message_types<caf::id_block::laneq>();
    add_message_types<caf::id_block::laneq_remote>();  // the queue handles
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
  }
};

/// CAF 0.17.6's openssl module needs all three files and loads them only when it connects: a
/// missing certificate aborts the process ("No certificate configured for SSL endpoint"), one
/// that does not load kills CAF's connection actor and leaves `remote_actor` waiting for good.
/// So they are loaded here first; the reason when one does not load, else nothing.
inline std::optional<std::string> check_tls_files(const client_config& cfg) {
  if (cfg.tls_cert.empty() || cfg.tls_key.empty() || cfg.tls_ca.empty())
    return "TLS needs --tls-cert, --tls-key and --tls-ca together (CAF's TLS is mutual)";
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx{SSL_CTX_new(TLS_method()), SSL_CTX_free};
  ERR_clear_error();
  auto reason = [] {
    auto e = ERR_peek_last_error();
    const char* r = ERR_reason_error_string(e);
    ERR_clear_error();
    return std::string{r != nullptr ? r : "not PEM"};
  };
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cfg.tls_cert.c_str()) != 1)
    return "--tls-cert " + cfg.tls_cert + ": cannot load the certificate: " + reason();
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), cfg.tls_key.c_str(), SSL_FILETYPE_PEM) != 1)
    return "--tls-key " + cfg.tls_key +
           ": cannot load the key (or it is not the certificate's): " + reason();
  if (SSL_CTX_load_verify_locations(ctx.get(), cfg.tls_ca.c_str(), nullptr) != 1)
    return "--tls-ca " + cfg.tls_ca + ": cannot load the CA certificates: " + reason();
  return std::nullopt;
}

/// Parses the command line: nothing to go on, else the exit code (2 for a bad command line, 0
/// when the help text was printed).
inline std::optional<int> parse(client_config& cfg, int argc, char** argv, std::string_view prog) {
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << prog << ": " << caf::actor_system_config::render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) return 0;
  if (cfg.tls_cert.empty() && cfg.tls_key.empty() && cfg.tls_ca.empty()) return std::nullopt;
  if (auto why = check_tls_files(cfg)) {
    std::cerr << prog << ": " << *why << "\n";
    return 2;
  }
  // CAF's openssl module: mutual TLS with these files (the `openssl.*` options of CAF's config).
  cfg.openssl_certificate = cfg.tls_cert;
  cfg.openssl_key = cfg.tls_key;
  cfg.openssl_cafile = cfg.tls_ca;
  cfg.load<caf::openssl::manager>();
  return std::nullopt;
}

/// The admin calls of laneqd at the configured host and port, logged in with the token when one
/// is set; or nothing (the reason said on stderr; the example exits 3).
inline std::optional<scoped_admin_actor> connect(caf::actor_system& sys, const client_config& cfg,
                                                 std::string_view prog) {
  auto admin = [&]() -> result<scoped_admin_actor> {
    if (cfg.tls_cert.empty()) return connect_to_laneqd(sys, cfg.host, cfg.port, cfg.token, timeout);
    auto published = caf::openssl::remote_actor<remote_admin_actor>(sys, cfg.host, cfg.port);
    if (!published) return unreachable_laneqd(sys, cfg.host, cfg.port, published.error());
    return login_to_laneqd(sys, *published, cfg.token, timeout);
  }();
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
