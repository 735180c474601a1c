// Test support: throwaway TLS files made at test time with the `openssl` command (Debian package
// openssl, scripts/install-deps.sh): a CA, a server certificate for localhost and 127.0.0.1, a
// client certificate, a second CA with its own client certificate (trusted by nobody under
// test), and a server certificate for another name. EC P-256 keys, valid for two days.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace laneq::test {

/// The files `make_tls_files` writes into its directory (PEM).
struct tls_files {
  std::filesystem::path dir;
  std::filesystem::path ca() const { return dir / "ca.pem"; }
  std::filesystem::path server_cert() const { return dir / "server.pem"; }
  std::filesystem::path server_key() const { return dir / "server.key"; }
  std::filesystem::path client_cert() const { return dir / "client.pem"; }
  std::filesystem::path client_key() const { return dir / "client.key"; }
  /// Another CA, and a client certificate it signed: laneqd trusts neither.
  std::filesystem::path other_ca() const { return dir / "other-ca.pem"; }
  std::filesystem::path other_client_cert() const { return dir / "other-client.pem"; }
  std::filesystem::path other_client_key() const { return dir / "other-client.key"; }
  /// Signed by `ca()`, but for the name elsewhere.example only (no localhost, no 127.0.0.1).
  std::filesystem::path wrong_name_cert() const { return dir / "wrong-name.pem"; }
  std::filesystem::path wrong_name_key() const { return dir / "wrong-name.key"; }
};

/// Writes the files into `dir` (created); "" on success, else what failed (the commands'
/// output).
inline std::string make_tls_files(const std::filesystem::path& dir, tls_files& out) {
  std::filesystem::create_directories(dir);
  out.dir = dir;
  const std::string script = R"(set -e
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() {  # name subject
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
}
leaf() {  # name ca subject-alt-names extended-key-usage
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$3" "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.pem"
}
ca ca "laneq test CA"
ca other-ca "another test CA"
leaf server ca "DNS:localhost,IP:127.0.0.1" serverAuth
leaf client ca "DNS:client" clientAuth
leaf other-client other-ca "DNS:client" clientAuth
leaf wrong-name ca "DNS:elsewhere.example" serverAuth
)";
  auto script_path = dir / "make.sh";
  std::ofstream{script_path} << script;
  auto log = dir / "make.log";
  auto cmd =
      "bash '" + script_path.string() + "' '" + dir.string() + "' > '" + log.string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in{log};
    return "making the TLS files failed: " +
           std::string{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  }
  return "";
}

}  // namespace laneq::test
