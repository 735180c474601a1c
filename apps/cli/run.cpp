// run(): parse, answer --version, --help and the hidden commands, connect, run the command; and
// how a failure is reported (see cli.hpp).
#include <chrono>
#include <ostream>

#include "cli.hpp"
#include "laneq/version.hpp"

namespace laneq::cli {

int fail(command_context& c, const client::api_error& e) {
  c.err << "laneq: " << to_string(e) << "\n";
  if (e.message.rfind(client::certificate_verify_failed, 0) == 0)
    c.err << "laneq: to trust laneqd's certificate, pass its CA file with --cacert FILE (or "
             "LANEQ_CACERT); --insecure skips the check, for testing only\n";
  return exit_code_for(e);
}

int usage(command_context& c, const usage_error& e) {
  c.err << "laneq: " << e.message << "\n"
        << "usage: laneq " << c.args.command->words << " " << c.args.command->args << "   (laneq "
        << c.args.command->words << " --help)\n";
  return exit_usage;
}

int run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
        std::ostream& out, std::ostream& err, std::istream& in) {
  auto r = parse(argv, env);
  if (auto* e = std::get_if<usage_error>(&r)) {
    err << "laneq: " << e->message << "\n";
    return exit_usage;
  }
  auto& p = std::get<parsed>(r);
  if (p.version) {
    out << "laneq " << laneq::version_string << "\n";
    return exit_ok;
  }
  if (p.local_command == "man") {
    out << render_man_page();
    return exit_ok;
  }
  if (p.local_command == "completion") {
    if (p.args.size() != 1 || p.args[0] != "bash") {
      err << "laneq: usage: laneq completion bash (the one shell it knows)\n";
      return exit_usage;
    }
    out << render_bash_completion();
    return exit_ok;
  }
  if (p.help || p.command == nullptr) {
    out << render_help(p.command);
    return exit_ok;
  }
  auto ep = client::parse_url(p.url);
  if (!ep) {
    err << "laneq: " << to_string(ep.err()) << "\n";
    return exit_usage;
  }
  if (!ep.value().tls && (p.insecure || !p.cacert.empty() || !p.cert.empty())) {
    err << "laneq: --cacert, --insecure and --client-cert are for https:// URLs, not " << p.url
        << "\n";
    return exit_usage;
  }
  client::client_options opts;
  opts.token = p.token;
  opts.timeout = std::chrono::milliseconds(p.timeout_ms);
  opts.cacert_file = p.cacert;
  opts.insecure = p.insecure;
  opts.cert_file = p.cert;
  opts.key_file = p.key;
  client::http_client c(ep.value(), opts);
  command_context ctx{p, c, out, err, in};
  return p.command->run(ctx);
}

}  // namespace laneq::cli
