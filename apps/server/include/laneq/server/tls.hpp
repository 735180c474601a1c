// TLS for laneqd's listeners (docs/operations.md "TLS"): the HTTPS context of the HTTP port, and
// the start-time check of every configured certificate, key and CA file (HTTP's and CAF's), so
// a file that does not load stops laneqd at start (exit 2) with the file and OpenSSL's reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "laneq/error.hpp"
#include "laneq/server/config.hpp"

namespace boost::asio::ssl {
class context;
}

namespace laneq::server {

/// A server context over `t`'s files, or every file that did not load. `field` names the
/// config object in the errors (`http.tls`); `ca_field` its CA file's field (`client_ca_file`).
/// TLS 1.2 at least; with a CA file, clients must present a certificate it signed.
struct tls_context_result {
  std::shared_ptr<boost::asio::ssl::context> context;  ///< null when `errors` is not empty
  std::vector<error> errors;  ///< invalid_argument, each `<field>.<file field>: <file>: <why>`
};
tls_context_result make_server_tls_context(const tls_config& t, const std::string& field,
                                           const std::string& ca_field);

/// Every configured TLS file that does not load, HTTP's and CAF's (loaded the way their
/// listeners load them); empty when all load or none is configured.
std::vector<error> check_tls_files(const server_config& c);

/// Copies of files, frozen as they were when pinned, under paths of their own
/// (`/proc/self/fd/N` of a memfd) that live as long as this object. CAF 0.17.6's openssl module
/// reads its certificate, key and CA files again for every new connection, and a file that no
/// longer loads then ends the process (`std::terminate`, "cannot load certificate"; measured):
/// laneqd hands CAF pinned copies, so the files it checked at start are the ones it serves, and
/// changing them takes a restart, as for HTTPS.
class file_pins {
 public:
  file_pins() = default;
  ~file_pins();
  file_pins(const file_pins&) = delete;
  file_pins& operator=(const file_pins&) = delete;

  /// The pinned copy's path, or why `file` could not be copied.
  result<std::string> pin(const std::string& file);

 private:
  std::vector<int> fds_;
};

/// OpenSSL's queued errors on this thread as one line (`reason (library)`, joined with "; "),
/// cleared; `fallback` when none is queued.
std::string openssl_errors(const std::string& fallback);

}  // namespace laneq::server
