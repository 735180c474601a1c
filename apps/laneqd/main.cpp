// laneqd: the laneq daemon. Opens the broker on a data directory, creates the configured queues
// and topics, publishes the remote admin actor (behind its login gate) on its CAF port and
// serves the HTTP API until SIGTERM/SIGINT; SIGHUP reloads the tokens file (docs/operations.md).
//
//   laneqd [--config FILE] [--data-dir DIR] [--http-host IP] [--http-port N] [--caf-port N|any]
//   laneqd --version | --help
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "caf/openssl/all.hpp"

#include "laneq/actors/broker.hpp"
#include "laneq/actors/remote_admin.hpp"
#include "laneq/server/access_log.hpp"
#include "laneq/server/caf_gate.hpp"
#include "laneq/server/config.hpp"
#include "laneq/server/descriptors.hpp"
#include "laneq/server/http_server.hpp"
#include "laneq/server/router.hpp"
#include "laneq/server/tls.hpp"
#include "laneq/version.hpp"

namespace {

constexpr const char* usage_text =
    "usage: laneqd [--config FILE] [--data-dir DIR] [--http-host IP] [--http-port N] "
    "[--caf-port N|any]\n"
    "  no config: data directory ./laneq-data, HTTP on 127.0.0.1:7070, CAF on 127.0.0.1:7071\n"
    "  --http-port 0 and --caf-port any pick a free port; --caf-port 0 disables the CAF remote "
    "actors\n"
    "  prints 'laneqd http_port=N', 'laneqd caf_port=N' and 'laneqd ready' once serving\n"
    "  --version prints 'laneqd VERSION' and exits\n";

int usage(const std::string& why) {
  std::cerr << "laneqd: " << why << "\n" << usage_text;
  return 2;
}

bool parse_port(std::string_view text, std::uint16_t& out) {
  if (text.empty() || text.size() > 5) return false;
  unsigned v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > 65535) return false;
  out = static_cast<std::uint16_t>(v);
  return true;
}

/// Refuses (false, with the reason on stderr) a listener anyone may use without a token, unless
/// the config allows it; warns when it does. HTTP without tokens and the CAF port (which has
/// none) beyond loopback.
bool allowed_exposure(const laneq::server::server_config& cfg, bool publish_caf) {
  if (auto exposed = laneq::server::anonymous_listener(cfg)) {
    if (!cfg.allow_anonymous) {
      std::cerr << "laneqd: refusing to start: " << *exposed
                << ". Configure tokens, listen on 127.0.0.1, or set \"allow_anonymous\": true in "
                   "the config.\n";
      return false;
    }
    std::cerr << "laneqd: WARNING: " << *exposed << " (allow_anonymous is set).\n";
  }
  if (auto exposed = laneq::server::anonymous_caf_listener(cfg, publish_caf)) {
    if (!cfg.caf_allow_anonymous) {
      std::cerr << "laneqd: refusing to start: " << *exposed
                << ". Publish it on 127.0.0.1 (caf.host), turn it off (--caf-port 0), or set "
                   "\"caf\": {\"allow_anonymous\": true} in the config.\n";
      return false;
    }
    std::cerr << "laneqd: WARNING: " << *exposed << " (caf.allow_anonymous is set).\n";
  }
  return true;
}

/// Raises the descriptor limit to the hard limit, lowers the connection cap (and its reserve)
/// in `cfg` to fit under it and says so; returns the store's table files, or nothing (the
/// reason on stderr) when the limit is too low to serve.
std::optional<std::size_t> fit_descriptors(laneq::server::server_config& cfg, bool publish_caf) {
  auto limit = laneq::server::raise_descriptor_limit();
  auto plan = laneq::server::plan_descriptors(limit.soft, laneq::server::open_descriptors(),
                                              publish_caf, cfg.limits);
  if (!plan) {
    std::cerr << "laneqd: refusing to start: " << plan.err().message << "\n";
    return std::nullopt;
  }
  cfg.limits.connections = plan.value().connections;
  cfg.limits.connections_reserve = plan.value().connections_reserve;
  std::cerr << "laneqd: " << laneq::server::describe(plan.value(), limit) << "\n";
  return plan.value().store_files;
}

/// Prints what the broker found in the store at start: queues, messages (those waiting, in flight
/// included, as each queue counted them while it recovered), the ordering groups holding them,
/// dead letters, and how long opening the broker took. The counts are the queues' own
/// (`queue_stats`), read before anything else can enqueue or ack.
void report_recovery(caf::actor_system& sys, const laneq::broker& b, double seconds) {
  laneq::blocking_admin admin{sys, b.admin()};
  auto names = admin.list_queues();
  if (!names) {
    std::cerr << "laneqd: recovered queues unknown: " << laneq::to_string(names.err()) << "\n";
    return;
  }
  std::uint64_t messages = 0, groups = 0, dead = 0;
  for (const auto& n : names.value()) {
    auto d = admin.describe(n);
    if (!d) continue;  // not reachable: nothing serves yet, so nothing dropped it
    messages += d.value().stats.recovered;
    groups += d.value().stats.live_groups;
    dead += d.value().stats.dead_letters;
  }
  char took[32];
  std::snprintf(took, sizeof took, "%.2f", seconds);
  std::cerr << "laneqd: recovered " << names.value().size() << " queues, " << messages
            << " messages in " << groups << " groups (" << dead << " dead letters) in " << took
            << " s\n";
}

/// Reads the tokens file again and puts its tokens in force for HTTP (the router's snapshot) and
/// CAF (a message to the gate); a file that fails keeps the old tokens. Either way one line on
/// stderr and the metric laneq_tokens_reload_total{result}.
void reload_tokens(const std::string& path, laneq::server::router& rt,
                   const laneq::server::caf_gate_actor& gate) {
  if (path.empty()) {
    std::cerr << "laneqd: SIGHUP: nothing to reload (no tokens_file)\n";
    return;
  }
  std::vector<laneq::server::token_config> tokens;
  auto errors = laneq::server::read_tokens_file(path, tokens);
  rt.metrics()->count_tokens_reload(errors.empty());
  if (!errors.empty()) {
    std::cerr << "laneqd: SIGHUP: the old tokens stay in force:";
    for (const auto& e : errors) std::cerr << " " << laneq::to_string(e) << ";";
    std::cerr << "\n";
    return;
  }
  auto count = tokens.size();
  auto next = std::make_shared<const laneq::server::authenticator>(std::move(tokens));
  rt.replace_tokens(next);
  if (gate) caf::anon_send(gate, laneq::server::tokens_atom_v, std::move(next));
  std::cerr << "laneqd: SIGHUP: " << count << " token(s) from " << path << " in force\n";
}

/// Reloads the tokens file on every SIGHUP until `signals` is cancelled.
void await_reloads(boost::asio::signal_set& signals, const std::string& path,
                   laneq::server::router& rt, const laneq::server::caf_gate_actor& gate) {
  signals.async_wait([&signals, &path, &rt, &gate](const boost::system::error_code& ec, int) {
    if (ec) return;  // cancelled: laneqd is stopping
    reload_tokens(path, rt, gate);
    await_reloads(signals, path, rt, gate);
  });
}

/// Loads CAF's openssl module for mutual TLS with copies of `tls`'s files as they were checked
/// (`file_pins`: CAF reads its files for every connection; docs/caf-client.md "TLS"); false,
/// with the reason on stderr, when a file cannot be copied.
bool load_caf_tls(const laneq::server::tls_config& tls, caf::actor_system_config& caf_cfg,
                  laneq::server::file_pins& pins) {
  auto cert = pins.pin(tls.cert_file);
  auto key = pins.pin(tls.key_file);
  auto ca = pins.pin(tls.ca_file);
  for (const auto* r : {&cert, &key, &ca})
    if (!*r) {
      std::cerr << "laneqd: caf.tls: " << r->err().message << "\n";
      return false;
    }
  caf_cfg.load<caf::openssl::manager>();
  caf_cfg.openssl_certificate = cert.value();
  caf_cfg.openssl_key = key.value();
  caf_cfg.openssl_cafile = ca.value();
  return true;
}

/// What the command line says; a flag left out keeps the config's (or the default) value.
struct command_line {
  std::string config_path;
  std::optional<std::string> data_dir, http_host;
  std::optional<std::uint16_t> http_port, caf_port;
  bool caf_port_any = false;  // --caf-port any: publish on a port the OS picks
};

/// Reads the flags; an exit code instead when laneqd should stop here (--help, --version: 0;
/// a bad flag: 2, with the reason and the usage on stderr).
std::variant<command_line, int> parse_command_line(int argc, char** argv) {
  command_line cl;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    if (arg == "--help" || arg == "-h") {
      std::cout << usage_text;
      return 0;
    }
    if (arg == "--version") {
      std::cout << "laneqd " << laneq::version_string << "\n";
      return 0;
    }
    if (i + 1 >= argc) return usage("missing value after " + std::string{arg});
    std::string_view val{argv[++i]};
    std::uint16_t port = 0;
    if (arg == "--config") {
      cl.config_path = std::string{val};
    } else if (arg == "--data-dir") {
      cl.data_dir = std::string{val};
    } else if (arg == "--http-host") {
      cl.http_host = std::string{val};
    } else if (arg == "--http-port") {
      if (!parse_port(val, port)) return usage("--http-port must be 0 to 65535");
      cl.http_port = port;
    } else if (arg == "--caf-port") {
      cl.caf_port_any = val == "any";
      if (!cl.caf_port_any && !parse_port(val, port))
        return usage("--caf-port must be 0 to 65535 or 'any'");
      cl.caf_port = port;
    } else {
      return usage("unknown option " + std::string{arg});
    }
  }
  return cl;
}

/// Prints `errors` one per line under "laneqd: N HEADING:".
void print_errors(const std::vector<laneq::error>& errors, std::string_view heading) {
  std::cerr << "laneqd: " << errors.size() << " " << heading << ":\n";
  for (const auto& e : errors) std::cerr << "  " << laneq::to_string(e) << "\n";
}

/// Everything checked before any thread starts: the configuration with the command line over it,
/// the tokens, the TLS files, the descriptor plan and the access log.
struct startup {
  laneq::server::server_config cfg;
  bool publish_caf = false;
  std::shared_ptr<boost::asio::ssl::context> https;  // null: plain HTTP
  std::size_t store_files = 0;
  std::shared_ptr<laneq::server::access_log> access;  // null: no access log
};

/// The configuration as laneqd will serve it, or nothing when something does not hold (every
/// error at once on stderr; laneqd exits 2).
std::optional<startup> configure(const command_line& cl) {
  laneq::server::parsed_config parsed;
  if (!cl.config_path.empty()) {
    std::ifstream in{cl.config_path};
    if (!in) {
      std::cerr << "laneqd: cannot read config " << cl.config_path << "\n";
      return std::nullopt;
    }
    std::stringstream text;
    text << in.rdbuf();
    parsed = laneq::server::parse_config(text.str());
  }
  if (!parsed.errors.empty()) {
    print_errors(parsed.errors, "error(s) in " + cl.config_path);
    return std::nullopt;
  }
  startup s;
  auto& cfg = s.cfg = std::move(parsed.config);
  if (cl.data_dir) cfg.data_dir = *cl.data_dir;
  if (cl.http_host) cfg.http_host = *cl.http_host;
  if (cl.http_port) cfg.http_port = *cl.http_port;
  if (cl.caf_port) cfg.caf_port = *cl.caf_port;
  if (!cfg.tokens_file.empty()) {
    if (auto errors = laneq::server::read_tokens_file(cfg.tokens_file, cfg.tokens);
        !errors.empty()) {
      print_errors(errors, "error(s) in the tokens file");
      return std::nullopt;
    }
  }
  s.publish_caf = cfg.caf_port != 0 || cl.caf_port_any;
  if (!allowed_exposure(cfg, s.publish_caf)) return std::nullopt;
  // Every certificate, key and CA file loads now or laneqd does not start: CAF would load its
  // files only when a client connects (and throw on a bad one).
  if (auto bad = laneq::server::check_tls_files(cfg); !bad.empty()) {
    print_errors(bad, "TLS file(s) do not load");
    return std::nullopt;
  }
  if (cfg.http_tls.enabled())
    s.https =
        laneq::server::make_server_tls_context(cfg.http_tls, "http.tls", "client_ca_file").context;
  auto store_files = fit_descriptors(cfg, s.publish_caf);
  if (!store_files) return std::nullopt;
  s.store_files = *store_files;
  if (!cfg.access_log.empty()) {
    auto opened_log = laneq::server::access_log::open(cfg.access_log);
    if (!opened_log) {
      std::cerr << "laneqd: " << laneq::to_string(opened_log.err()) << "\n";
      return std::nullopt;
    }
    s.access = std::move(opened_log.value());
  }
  return s;
}

/// The actor system's configuration: laneq's message types, the middleman (and CAF's openssl
/// module) when the CAF port is published, the scheduler's threads. False when a TLS file cannot
/// be pinned.
bool configure_actors(const startup& s, caf::actor_system_config& caf_cfg,
                      laneq::server::file_pins& caf_files) {
  laneq::add_message_types(caf_cfg);
  if (s.publish_caf) caf_cfg.load<caf::io::middleman>();
  if (s.publish_caf && s.cfg.caf_tls.enabled() && !load_caf_tls(s.cfg.caf_tls, caf_cfg, caf_files))
    return false;
  laneq::tune_scheduler(caf_cfg, laneq::server::actor_threads_for(
                                     s.cfg.actor_threads, std::thread::hardware_concurrency()));
  return true;
}

/// Opens the broker on the data directory, reports what it recovered and creates the configured
/// queues, then the topics over them. Nothing (the reason on stderr; laneqd exits 3) when the
/// store does not open or a configured queue or topic is refused (a queue stored with another
/// definition, say): every refused one is named.
std::unique_ptr<laneq::broker> open_broker(caf::actor_system& sys, const startup& s) {
  const auto& cfg = s.cfg;
  laneq::broker_options bo;
  bo.data_dir = cfg.data_dir;
  bo.sync = cfg.sync;
  bo.reclaim_grace = cfg.reclaim_grace;
  bo.group_window = cfg.group_window;
  bo.group_window_max = cfg.group_window_max;
  bo.window_budget_bytes = cfg.window_budget_bytes;
  bo.persistence.max_open_files = static_cast<int>(s.store_files);
  auto opening = std::chrono::steady_clock::now();
  auto opened = laneq::broker::open(sys, bo);
  if (!opened) {
    std::cerr << "laneqd: cannot open the broker on " << cfg.data_dir << ": "
              << laneq::to_string(opened.err()) << "\n";
    return nullptr;
  }
  auto broker = std::move(opened.value());
  report_recovery(
      sys, *broker,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opening).count());
  laneq::blocking_admin admin{sys, broker->admin()};
  std::vector<std::string> failed;
  for (const auto& spec : cfg.queues)
    if (auto q = admin.create_queue(spec); !q)
      failed.push_back("queue " + spec.name() + ": " + laneq::to_string(q.err()));
  for (const auto& spec : cfg.topics)
    if (auto t = admin.create_topic(spec); !t)
      failed.push_back("topic " + spec.name() + ": " + laneq::to_string(t.err()));
  if (failed.empty()) return broker;
  std::cerr << "laneqd: " << failed.size() << " configured queue(s)/topic(s) refused:\n";
  for (const auto& f : failed) std::cerr << "  " << f << "\n";
  return nullptr;
}

/// Publishes the remote admin actor behind its login gate on the CAF port (TLS when
/// configured) and records the port it got in `cfg`; a null handle (the reason on stderr) when
/// publishing fails.
laneq::server::caf_gate_actor publish_caf(caf::actor_system& sys, const laneq::broker& broker,
                                          laneq::server::server_config& cfg) {
  auto gate = laneq::server::spawn_caf_gate(
      sys, broker.admin(), std::make_shared<const laneq::server::authenticator>(cfg.tokens));
  auto published = caf::actor_cast<laneq::remote_admin_actor>(gate);
  auto port = cfg.caf_tls.enabled()
                  ? caf::openssl::publish(published, cfg.caf_port, cfg.caf_host.c_str(), true)
                  : sys.middleman().publish(published, cfg.caf_port, cfg.caf_host.c_str(), true);
  if (!port) {
    std::cerr << "laneqd: cannot publish on " << cfg.caf_host << ":" << cfg.caf_port << ": "
              << sys.render(port.error()) << "\n";
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    return {};
  }
  cfg.caf_port = *port;
  return gate;
}

/// Takes the gate off the CAF port and stops it.
void unpublish_caf(caf::actor_system& sys, laneq::server::caf_gate_actor& gate,
                   const laneq::server::server_config& cfg) {
  // caf/openssl/unpublish.hpp of CAF 0.17.6 does not compile (it sends (unpublish, port),
  // which the middleman actor does not accept): ask the openssl manager's actor directly.
  if (cfg.caf_tls.enabled())
    static_cast<void>(caf::make_function_view(sys.openssl_manager().actor_handle())(
        caf::unpublish_atom_v, gate.address(), cfg.caf_port));
  else
    static_cast<void>(
        sys.middleman().unpublish(caf::actor_cast<laneq::remote_admin_actor>(gate), cfg.caf_port));
  caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
  gate = nullptr;
}

/// The lines a supervisor or a test waits for: what is served where, then "laneqd ready".
void announce(const startup& s, std::uint16_t http_port) {
  const auto& cfg = s.cfg;
  if (s.https)
    std::cerr << "laneqd: HTTP serves HTTPS only (TLS 1.2 or later), certificate "
              << cfg.http_tls.cert_file << "\n";
  if (s.publish_caf && cfg.caf_tls.enabled())
    std::cerr << "laneqd: the CAF port speaks TLS only (mutual: clients need a certificate "
              << cfg.caf_tls.ca_file << " signed), certificate " << cfg.caf_tls.cert_file << "\n";
  std::cout << "laneqd http_port=" << http_port << "\n"
            << "laneqd caf_port=" << cfg.caf_port << "\n"
            << "laneqd data_dir=" << cfg.data_dir << "\n"
            << "laneqd ready" << std::endl;
}

/// Stops accepting, lets requests in flight finish briefly, then shuts the HTTP server down.
void stop_http(laneq::server::http_server& http) {
  http.stop_accepting();
  if (!http.drain(laneq::server::http_bounds::drain_timeout))
    std::cerr << "laneqd: " << http.in_flight() << " request(s) still in flight, dropped\n";
  http.shutdown();
}

}  // namespace

// Start-up runs in steps, each of which says why laneqd stops there: the command line and the
// configuration (exit 2), signals before any thread, the actor system, the broker and its
// configured queues (exit 3), the CAF port, HTTP; then serving until SIGINT/SIGTERM (SIGHUP
// reloads the tokens file), and the shutdown in reverse.
int main(int argc, char** argv) {
  auto cl = parse_command_line(argc, argv);
  if (auto* code = std::get_if<int>(&cl)) return *code;
  auto s = configure(std::get<command_line>(cl));
  if (!s) return 2;
  auto& cfg = s->cfg;

  // Signals first, so no thread started later takes SIGTERM with the default action.
  boost::asio::io_context signal_io;
  boost::asio::signal_set signals{signal_io, SIGINT, SIGTERM};
  boost::asio::signal_set reload_signals{signal_io, SIGHUP};
  int stop_signal = 0;
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (!ec) stop_signal = sig;
    reload_signals.cancel();  // nothing left to wait for: signal_io.run() returns
  });

  caf::actor_system_config caf_cfg;
  laneq::server::file_pins caf_files;  // outlives the actor system
  if (!configure_actors(*s, caf_cfg, caf_files)) return 2;
  caf::actor_system sys{caf_cfg};
  auto broker = open_broker(sys, *s);
  if (!broker) return 3;
  laneq::server::caf_gate_actor remote;
  if (s->publish_caf && !(remote = publish_caf(sys, *broker, cfg))) return 3;

  auto rt = std::make_unique<laneq::server::router>(sys, broker->admin(), broker->store(),
                                                    cfg.limits, cfg.tokens);
  rt->log_access(std::move(s->access));
  auto http =
      std::make_unique<laneq::server::http_server>(*rt, cfg.limits, cfg.http_threads, s->https);
  auto bound = http->start(cfg.http_host, cfg.http_port);
  if (!bound) {
    std::cerr << "laneqd: " << laneq::to_string(bound.err()) << "\n";
    if (remote) caf::anon_send_exit(remote, caf::exit_reason::user_shutdown);
    return 3;
  }
  announce(*s, bound.value());

  await_reloads(reload_signals, cfg.tokens_file, *rt, remote);
  signal_io.run();  // until SIGINT or SIGTERM

  // Destroying the broker stops its actors after the open batch and closes RocksDB.
  std::cerr << "laneqd: signal " << stop_signal << ", shutting down\n";
  stop_http(*http);
  if (remote) unpublish_caf(sys, remote, cfg);
  broker.reset();
  std::cout << "laneqd stopped" << std::endl;
  return 0;
}
