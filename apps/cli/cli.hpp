// The `laneq` command line (issue 4 §4, issue 25 §2): the command table (commands.cpp), its
// CLI11 app and parsing (app.cpp), the request each command makes (queue_commands.cpp,
// message_commands.cpp, admin_commands.cpp, consume.cpp), the rendering of the answers
// (render.cpp), the bash completion and man page made from the app (generate.cpp) and `run`
// (run.cpp). main.cpp only wires argv, the environment and stdout/stderr to `run`; the tests call
// the pieces directly.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/json.hpp>

#include "laneq/client/http_client.hpp"

namespace laneq::cli {

/// Exit codes: distinct for each way a command can fail.
enum exit_code : int {
  exit_ok = 0,
  exit_server_error = 1,  ///< laneqd answered with an API error (unknown queue, stale lease, ...)
  exit_usage = 2,         ///< bad arguments; nothing was sent
  exit_unreachable = 3,   ///< laneqd could not be reached (connect failed, timed out)
  exit_bad_answer = 4,    ///< laneqd answered something that is not the API's shape
};

/// The exit code for a failed call.
int exit_code_for(const client::api_error& e);

/// One option a command accepts.
struct option_spec {
  std::string_view name;  ///< without the leading "--"
  bool takes_value = false;
  bool repeatable = false;
  std::string_view help;
  /// A whole number from `min` to `max` (the server's bounds, laneq/limits.hpp), checked while
  /// parsing; otherwise any text.
  bool number = false;
  std::int64_t min = 0;
  std::int64_t max = 0;
  char short_name = 0;  ///< `-q` for `--quiet`; 0: none
  bool path = false;    ///< the value is a file (the bash completion completes file names)
};

struct parsed;
/// What a command does with its arguments and a client. Returns the exit code.
struct command_context;
using handler = int (*)(command_context&);

/// A command: its words (`"queue create"`), usage line, help and options.
struct command_spec {
  std::string_view words;
  std::string_view args;  ///< positional arguments in the usage line
  std::string_view summary;
  std::size_t min_args = 0;
  std::size_t max_args = 0;  ///< SIZE_MAX: any number
  std::vector<option_spec> options;
  handler run = nullptr;
};

/// Every command, in help order.
const std::vector<command_spec>& commands();

/// The global options every command accepts.
const std::vector<option_spec>& global_options();

/// The command line after parsing.
struct parsed {
  const command_spec* command = nullptr;  ///< null: no command (help is printed)
  std::vector<std::string> args;
  std::map<std::string, std::vector<std::string>> values;  ///< options with values
  std::map<std::string, bool> flags;                       ///< options without values
  bool help = false;
  /// A hidden command that needs no server: `completion` (its args: the shell) or `man`.
  std::string local_command;
  bool version = false;  ///< --version: print the version (laneq/version.hpp) and exit 0
  bool json = false;
  std::string url = "http://127.0.0.1:7070";
  std::string token;
  std::int64_t timeout_ms = 30'000;
  std::string cacert;     ///< https: trust this CA file instead of the system's (LANEQ_CACERT)
  bool insecure = false;  ///< https: skip verifying laneqd's certificate (testing only)
  std::string cert;  ///< https: client certificate chain, --client-cert (http.tls.client_ca_file)
  std::string key;   ///< https: its private key, --client-key

  bool flag(std::string_view name) const;
  /// The last value of an option, if given.
  std::optional<std::string> value(std::string_view name) const;
  /// Every value of a repeatable option.
  std::vector<std::string> all(std::string_view name) const;
  /// The last value of a number option (its range was checked while parsing), if given.
  std::optional<std::int64_t> number(std::string_view name) const;
};

/// A usage error: what is wrong, for stderr.
struct usage_error {
  std::string message;
};

/// Parses argv (without argv[0]) with the CLI11 app of `commands()`. `env` supplies LANEQ_URL,
/// LANEQ_TOKEN and LANEQ_CACERT (flags win).
std::variant<parsed, usage_error> parse(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env);

/// Parses an integer option value, naming the option, the value and the range when it is not one
/// or out of range.
std::variant<std::int64_t, usage_error> parse_int(std::string_view option, std::string_view text,
                                                  std::int64_t min, std::int64_t max);

/// Builds the queue spec JSON of `laneq queue create` from its options.
std::variant<boost::json::object, usage_error> spec_from_options(const parsed& p);
/// Builds the JSON merge patch of `laneq queue update` from its options (not empty).
std::variant<boost::json::object, usage_error> patch_from_options(const parsed& p);

/// Parses one ordering key component: `fairness_key`, `header:NAME`, `attribute:NAME`, `json:PATH`.
std::variant<boost::json::object, usage_error> parse_key_component(std::string_view text);

// -- rendering (human-readable output) ----------------------------------------------------------

/// `laneq help` and `laneq <command> --help`.
std::string render_help(const command_spec* command);
/// A received batch: one block per message.
std::string render_messages(const boost::json::value& answer);
/// Received messages, one line each: lease, ordering key, body (tab-separated, escaped).
std::string render_messages_quiet(const boost::json::value& answer);
/// One page of a queue's groups as a table, then the cursor of the next page if there is one.
std::string render_groups(const boost::json::value& answer);
/// Dead letters as a table.
std::string render_dead_letters(const boost::json::value& answer);
/// Any JSON value as indented `key: value` lines (queue descriptions, stats, specs).
std::string render_tree(const boost::json::value& v);
/// A queue list, one name per line.
std::string render_queue_list(const boost::json::value& answer);
/// Whether an answer's field is a point in time in Unix milliseconds (docs/api.md: `*_at_ms`,
/// `*_deadline_ms`, and a group's `since_ms` and `until_ms`), which the text output shows with
/// render_time and names without its `_ms`.
bool is_time_field(std::string_view key);
/// A point in time as ISO 8601 UTC with milliseconds and how far it is from `now_ms`:
/// `2026-12-06T17:13:32.210Z (in 4s)`, `... (2m ago)`, `... (now)`; `-` for 0 (none).
std::string render_time(std::int64_t unix_ms, std::int64_t now_ms);
/// `laneq stats`: one row per queue; the main counters and gauges, or with `wide` every one.
std::string render_stats(const boost::json::object& by_queue, bool wide);
/// Escapes control characters and backslashes so a value stays on one line.
std::string one_line(std::string_view s);

/// Everything a command handler needs.
struct command_context {
  const parsed& args;
  client::http_client& client;
  std::ostream& out;
  std::ostream& err;
  std::istream& in;
};

/// Prints a failed call's error on stderr; returns its exit code.
int fail(command_context& c, const client::api_error& e);
/// Prints a usage error and the command's usage line on stderr; returns exit_usage.
int usage(command_context& c, const usage_error& e);

// -- the commands' handlers ---------------------------------------------------------------------

// queue_commands.cpp: queues and topics.
int cmd_queue_create(command_context& c);
int cmd_queue_get(command_context& c);
int cmd_queue_list(command_context& c);
int cmd_queue_update(command_context& c);
int cmd_queue_delete(command_context& c);
int cmd_queue_purge(command_context& c);
int cmd_peek(command_context& c);
int cmd_dlq_delete(command_context& c);
int cmd_topic_create(command_context& c);
int cmd_topic_list(command_context& c);
int cmd_topic_delete(command_context& c);
// message_commands.cpp: sending, receiving and settling messages.
int cmd_send(command_context& c);
int cmd_topic_publish(command_context& c);
int cmd_receive(command_context& c);
int cmd_ack(command_context& c);
int cmd_nack(command_context& c);
int cmd_extend(command_context& c);
// admin_commands.cpp: dead letters, groups, stats, health, metrics and backups.
int cmd_dlq_list(command_context& c);
int cmd_dlq_redrive(command_context& c);
int cmd_groups(command_context& c);
int cmd_stats(command_context& c);
int cmd_health(command_context& c);
int cmd_metrics(command_context& c);
int cmd_backup(command_context& c);
/// `laneq consume` (consume.cpp).
int cmd_consume(command_context& c);

// -- made from the app (generate.cpp) -----------------------------------------------------------

/// `laneq completion bash`: a bash completion script for every command and option.
std::string render_bash_completion();
/// `laneq man`: the laneq(1) man page in roff: commands, options, environment, exit codes.
std::string render_man_page();

// -- shared by the handlers and the renderers (render.cpp) --------------------------------------

/// Prints `v` as one line of JSON.
void print_json(command_context& c, const boost::json::value& v);
/// A string's text, `-` for null, otherwise the JSON.
std::string text_of(const boost::json::value& v);
/// `text_of` the answer's field `name` (a count, say), or `fallback` when it has none.
std::string field_text(const boost::json::value& answer, std::string_view name,
                       std::string fallback = "");
/// The array under `key`, or the first array member of an object, or the value itself.
const boost::json::array* find_array(const boost::json::value& v, std::string_view key);
/// `o[key]`'s text, `-` when absent.
std::string field(const boost::json::object& o, std::string_view key);

/// Runs the command line: parses, connects, runs, prints. Returns the exit code.
int run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
        std::ostream& out, std::ostream& err, std::istream& in);

}  // namespace laneq::cli
