// `laneq consume QUEUE -- CMD [ARG...]` (issue 25 §2): runs CMD once per message, the body on
// its standard input and the message's fields in its environment, and acks the message when CMD
// exits 0, dead-letters it on an exit code given with --dead-letter-on, and gives it back for a
// retry otherwise. The lease is extended while CMD runs, so a slow command does not lose its
// message to another consumer. One message at a time: an ordered queue's groups keep their order,
// and no lease is held for a message that waits for the command.
#include <openssl/evp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"

extern char** environ;

namespace laneq::cli {

namespace json = boost::json;
using steady = std::chrono::steady_clock;

namespace {

std::atomic<bool> stop_requested{false};

extern "C" void request_stop(int) {
  stop_requested = true;
}

/// SIGINT and SIGTERM let the message in hand finish (ack or nack), then consume stops.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = request_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a command that does not read its input closes the pipe early
}

struct consume_options {
  client::receive_params receive;
  std::int64_t retry_after_ms = 0;
  std::set<int> dead_letter_on;
  std::optional<std::uint64_t> max_messages;
  bool until_empty = false;
  std::vector<std::string> command;
};

std::variant<consume_options, usage_error> options_of(const parsed& a) {
  consume_options o;  // the ranges were checked while parsing (commands.cpp)
  o.receive.wait_ms = a.number("wait-ms").value_or(5000);
  if (auto n = a.number("lease-ms")) o.receive.lease_ms = *n;
  o.retry_after_ms = a.number("retry-after-ms").value_or(0);
  if (auto n = a.number("max-messages")) o.max_messages = static_cast<std::uint64_t>(*n);
  for (const auto& text : a.all("dead-letter-on")) {
    auto n = parse_int("--dead-letter-on", text, 1, 255);
    if (auto* e = std::get_if<usage_error>(&n)) return *e;
    o.dead_letter_on.insert(static_cast<int>(std::get<std::int64_t>(n)));
  }
  o.until_empty = a.flag("until-empty");
  o.command.assign(a.args.begin() + 1, a.args.end());
  return o;
}

std::string text_field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (!v) return {};
  if (const auto* s = v->if_string()) return std::string(*s);
  return json::serialize(*v);
}

/// The body's bytes: `body`, or `body_base64` decoded (bytes that are not UTF-8).
std::string body_of(const json::object& m) {
  const auto* b64 = m.if_contains("body_base64");
  if (!b64 || !b64->is_string()) return text_field(m, "body");
  const auto& in = b64->as_string();
  std::string out(in.size() / 4 * 3 + 3, '\0');
  auto n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(in.data()),
                           static_cast<int>(in.size()));
  if (n < 0) return {};
  // EVP_DecodeBlock counts the padding's zero bytes too.
  std::size_t pad = in.size() >= 2 && in[in.size() - 2] == '=' ? 2 : in.ends_with('=') ? 1 : 0;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

/// `LANEQ_HEADER_<NAME>`: the header's name upper-cased, each byte outside [A-Z0-9] as `_`.
std::string header_variable(std::string_view name) {
  std::string out = "LANEQ_HEADER_";
  for (char ch : name) {
    auto byte = static_cast<unsigned char>(ch);
    out += std::isalnum(byte) ? static_cast<char>(std::toupper(byte)) : '_';
  }
  return out;
}

/// The command's environment: laneq's own, then the message's fields.
std::vector<std::string> environment_for(const std::string& queue, const json::object& m) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  auto add = [&](std::string name, const std::string& value) {
    env.push_back(std::move(name) + "=" + value);
  };
  add("LANEQ_QUEUE", queue);
  add("LANEQ_MESSAGE_ID", text_field(m, "id"));
  add("LANEQ_LEASE", text_field(m, "lease"));
  add("LANEQ_ATTEMPT", text_field(m, "attempt"));
  add("LANEQ_ORDERING_KEY", text_field(m, "ordering_key"));
  add("LANEQ_FAIRNESS_KEY", text_field(m, "fairness_key"));
  add("LANEQ_ENQUEUED_AT_MS", text_field(m, "enqueued_at_ms"));
  if (const auto* h = m.if_contains("headers"); h && h->is_object())
    for (const auto& [name, value] : h->as_object())
      add(header_variable(name), value.is_string() ? std::string(value.as_string()) : "");
  return env;
}

/// How the command ended: its exit code, or the signal that killed it.
struct ending {
  int code = -1;    ///< exit code; -1 when killed by a signal or not started
  int signal = 0;   ///< the signal, when killed by one
  std::string why;  ///< why it could not start
};

/// Starts `argv` with `body` on its standard input and `env` as its environment.
std::variant<pid_t, std::string> spawn(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env, int& input) {
  int fds[2];
  if (pipe(fds) != 0) return std::string{"pipe: "} + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> args, vars;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& v : env) vars.push_back(const_cast<char*>(v.c_str()));
  args.push_back(nullptr);
  vars.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), vars.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    return "cannot run " + argv[0] + ": " + std::strerror(rc);
  }
  input = fds[1];
  return pid;
}

/// Writes `body` to the command's input and closes it (on a thread of its own: a command may
/// read its input late, or never).
std::thread feed(int fd, std::string body) {
  return std::thread([fd, body = std::move(body)] {
    std::size_t done = 0;
    while (done < body.size()) {
      auto n = write(fd, body.data() + done, body.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the command closed its input: it has what it wanted
      done += static_cast<std::size_t>(n);
    }
    close(fd);
  });
}

/// Runs the command for one message, extending its lease at half its length while it runs.
ending run_command(command_context& c, const consume_options& o, const std::string& queue,
                   const json::object& m, std::int64_t lease_ms) {
  int input = -1;
  auto started = spawn(o.command, environment_for(queue, m), input);
  if (auto* why = std::get_if<std::string>(&started)) return ending{-1, 0, *why};
  auto pid = std::get<pid_t>(started);
  auto writer = feed(input, body_of(m));
  auto lease = text_field(m, "lease");
  auto every = std::chrono::milliseconds{std::max<std::int64_t>(lease_ms / 2, 1)};
  auto next_extend = steady::now() + every;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
    if (steady::now() < next_extend) continue;
    next_extend = steady::now() + every;
    if (auto r = c.client.extend(queue, lease, lease_ms); !r)
      c.err << "laneq: consume: could not extend lease " << lease << ": " << to_string(r.err())
            << "\n";
  }
  writer.join();
  if (WIFEXITED(status)) return ending{WEXITSTATUS(status), 0, {}};
  return ending{-1, WIFSIGNALED(status) ? WTERMSIG(status) : 0, {}};
}

/// The lease length of a delivery: its deadline less now, as the server counted it.
std::int64_t lease_ms_of(const json::object& m, const consume_options& o) {
  if (o.receive.lease_ms) return *o.receive.lease_ms;
  auto deadline = m.if_contains("lease_deadline_ms");
  if (!deadline || !deadline->is_number()) return 30'000;
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  return std::max<std::int64_t>(deadline->to_number<std::int64_t>() - now, 100);
}

/// Acks, dead-letters or gives back the message for how its command ended; one line on stderr.
/// False when laneqd refused (the lease was lost: another consumer may have the message).
bool settle(command_context& c, const consume_options& o, const std::string& queue,
            const json::object& m, const ending& e, steady::duration took) {
  auto id = text_field(m, "id");
  auto lease = text_field(m, "lease");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  std::string how = !e.why.empty() ? e.why
                    : e.signal     ? "killed by signal " + std::to_string(e.signal)
                                   : "exit " + std::to_string(e.code);
  how += ", " + std::to_string(ms) + " ms";
  bool dead = e.code != 0 && o.dead_letter_on.count(e.code) > 0;
  auto r = e.code == 0 ? c.client.ack(queue, {lease})
           : dead      ? c.client.nack(queue, lease, 0, true)
                       : c.client.nack(queue, lease, o.retry_after_ms, false);
  if (!r) {
    c.err << "laneq: consume: message " << id << ": " << to_string(r.err()) << "\n";
    return false;
  }
  c.err << "laneq: consume: ";
  if (e.code == 0)
    c.err << "acked " << id;
  else if (dead)
    c.err << "dead-lettered " << id;
  else
    c.err << "gave " << id << " back for a retry in " << o.retry_after_ms << " ms";
  c.err << " (" << how << ")\n";
  return true;
}

/// Waits before calling laneqd again after it could not be reached: 1 s, doubling to 30 s.
void back_off(command_context& c, const client::api_error& e, std::chrono::seconds& pause) {
  c.err << "laneq: consume: " << to_string(e) << "; trying again in " << pause.count() << " s\n";
  for (auto until = steady::now() + pause; steady::now() < until && !stop_requested;)
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  pause = std::min(pause * 2, std::chrono::seconds{30});
}

}  // namespace

int cmd_consume(command_context& c) {
  auto parsed_options = options_of(c.args);
  if (auto* e = std::get_if<usage_error>(&parsed_options)) return usage(c, *e);
  const auto& o = std::get<consume_options>(parsed_options);
  const auto& queue = c.args.args[0];
  install_stop_handlers();
  std::uint64_t done = 0;
  auto pause = std::chrono::seconds{1};
  while (!stop_requested && (!o.max_messages || done < *o.max_messages)) {
    auto r = c.client.receive(queue, o.receive);
    if (!r && r.err().kind == client::failure_kind::unreachable) {
      back_off(c, r.err(), pause);
      continue;
    }
    if (!r) return fail(c, r.err());
    pause = std::chrono::seconds{1};
    const auto* msgs =
        r.value().is_object() ? r.value().as_object().if_contains("messages") : nullptr;
    if (!msgs || !msgs->is_array()) return exit_bad_answer;
    if (msgs->as_array().empty()) {
      if (o.until_empty) break;
      continue;
    }
    for (const auto& v : msgs->as_array()) {
      if (!v.is_object()) return exit_bad_answer;
      const auto& m = v.as_object();
      auto t0 = steady::now();
      auto e = run_command(c, o, queue, m, lease_ms_of(m, o));
      settle(c, o, queue, m, e, steady::now() - t0);
      ++done;
    }
  }
  c.err << "laneq: consume: " << done << (done == 1 ? " message" : " messages") << " handled\n";
  return exit_ok;
}

}  // namespace laneq::cli
