// TLS contexts and the start-time check of TLS files (apps/server/include/laneq/server/tls.hpp).
#include "laneq/server/tls.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <optional>

#include <boost/asio/ssl/context.hpp>

namespace laneq::server {

namespace ssl = boost::asio::ssl;

std::string openssl_errors(const std::string& fallback) {
  std::string out;
  while (auto e = ERR_get_error()) {
    // A system error's reason is errno; "PEM lib" and "system lib" only say who passed it on.
    std::string reason = ERR_SYSTEM_ERROR(e) ? std::strerror(ERR_GET_REASON(e))
                         : ERR_reason_error_string(e) != nullptr
                             ? std::string{ERR_reason_error_string(e)}
                             : "error " + std::to_string(e);
    if (reason == "PEM lib" || reason == "system lib") continue;
    if (const char* lib = ERR_lib_error_string(e)) reason += std::string{" ("} + lib + ")";
    if (out.find(reason) != std::string::npos) continue;
    if (!out.empty()) out += "; ";
    out += reason;
  }
  return out.empty() ? fallback : out;
}

namespace {

/// Refuses to ask for a passphrase: an encrypted key fails to load instead of prompting on the
/// terminal (laneqd runs unattended).
int no_passphrase(char*, int, int, void*) {
  return 0;
}

/// Why `file` cannot be opened for reading (errno's text), or nothing when it can.
std::optional<std::string> unreadable(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) return std::string{"cannot read it: "} + std::strerror(errno);
  std::fclose(f);
  return std::nullopt;
}

}  // namespace

// Loads the chain, the key (checked against the certificate) and the CA file, each error naming
// its field and file; the reasons are OpenSSL's own ("No such file or directory (system
// library)", "no start line (PEM routines)", "key values mismatch (x509 certificate routines)").
tls_context_result make_server_tls_context(const tls_config& t, const std::string& field,
                                           const std::string& ca_field) {
  tls_context_result out;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* h = ctx->native_handle();
  SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
  SSL_CTX_set_options(h, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_default_passwd_cb(h, no_passphrase);
  auto fail = [&](const std::string& name, const std::string& file, const std::string& what) {
    out.errors.push_back(
        error{errc::invalid_argument, field + "." + name + ": " + file + ": " + what});
  };
  ERR_clear_error();
  // The key before the certificate: loaded after it, a key of another certificate would fail
  // to load, and the error would not say that it is the wrong key.
  bool key_ok = false;
  if (auto why = unreadable(t.key_file)) {
    fail("key_file", t.key_file, *why);
  } else if (SSL_CTX_use_PrivateKey_file(h, t.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    fail("key_file", t.key_file,
         "not a private key in PEM, or encrypted: " + openssl_errors("no key in it"));
  } else {
    key_ok = true;
  }
  bool cert_ok = false;
  if (auto why = unreadable(t.cert_file)) {
    fail("cert_file", t.cert_file, *why);
  } else if (SSL_CTX_use_certificate_chain_file(h, t.cert_file.c_str()) != 1) {
    fail("cert_file", t.cert_file,
         "not a certificate chain in PEM: " + openssl_errors("no certificate in it"));
  } else {
    cert_ok = true;
  }
  ERR_clear_error();
  if (cert_ok && key_ok && SSL_CTX_check_private_key(h) != 1)
    fail("key_file", t.key_file,
         "is not the key of the certificate in " + t.cert_file + " (their public keys differ)");
  ERR_clear_error();
  if (!t.ca_file.empty()) {
    if (auto why = unreadable(t.ca_file)) {
      fail(ca_field, t.ca_file, *why);
    } else if (SSL_CTX_load_verify_locations(h, t.ca_file.c_str(), nullptr) != 1) {
      fail(ca_field, t.ca_file,
           "cannot load the CA certificates: " + openssl_errors("no PEM certificate in it"));
    } else {
      // The CAs the server names in its certificate request, so a client picks its certificate.
      if (auto* names = SSL_load_client_CA_file(t.ca_file.c_str())) {
        SSL_CTX_set_client_CA_list(h, names);
      }
      SSL_CTX_set_verify(h, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
  }
  ERR_clear_error();
  if (out.errors.empty()) out.context = std::move(ctx);
  return out;
}

file_pins::~file_pins() {
  for (int fd : fds_) ::close(fd);
}

result<std::string> file_pins::pin(const std::string& file) {
  std::FILE* in = std::fopen(file.c_str(), "rb");
  if (in == nullptr) return error{errc::invalid_argument, file + ": " + std::strerror(errno)};
  int fd = ::memfd_create("laneqd-tls", MFD_CLOEXEC);
  bool ok = fd >= 0;
  char buf[4096];
  while (ok) {
    auto n = std::fread(buf, 1, sizeof buf, in);
    if (n == 0) break;
    ok = ::write(fd, buf, n) == static_cast<ssize_t>(n);
  }
  ok = ok && !std::ferror(in);
  auto saved = errno;
  std::fclose(in);
  if (!ok) {
    if (fd >= 0) ::close(fd);
    return error{errc::invalid_argument, file + ": cannot copy it: " + std::strerror(saved)};
  }
  fds_.push_back(fd);
  return "/proc/self/fd/" + std::to_string(fd);
}

std::vector<error> check_tls_files(const server_config& c) {
  std::vector<error> out;
  if (c.http_tls.enabled()) {
    auto r = make_server_tls_context(c.http_tls, "http.tls", "client_ca_file");
    out.insert(out.end(), r.errors.begin(), r.errors.end());
  }
  if (c.caf_tls.enabled()) {
    auto r = make_server_tls_context(c.caf_tls, "caf.tls", "ca_file");
    out.insert(out.end(), r.errors.begin(), r.errors.end());
  }
  return out;
}

}  // namespace laneq::server
