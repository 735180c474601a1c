// Parsing argv with the CLI11 app of the command table (issue 25 §2): subcommands, options, the
// servers' ranges, `--`, help, and a "did you mean" for a mistyped command.
#include "app.hpp"

#include <algorithm>
#include <climits>

#include "laneq/assert.hpp"

namespace laneq::cli {

bool parsed::flag(std::string_view name) const {
  auto it = flags.find(std::string(name));
  return it != flags.end() && it->second;
}

std::optional<std::string> parsed::value(std::string_view name) const {
  auto it = values.find(std::string(name));
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> parsed::all(std::string_view name) const {
  auto it = values.find(std::string(name));
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::int64_t> parsed::number(std::string_view name) const {
  auto v = value(name);
  if (!v) return std::nullopt;
  auto n = parse_int(name, *v, INT64_MIN + 1, INT64_MAX);
  if (auto* x = std::get_if<std::int64_t>(&n)) return *x;
  return std::nullopt;  // not reached: the option's range was checked while parsing
}

std::variant<std::int64_t, usage_error> parse_int(std::string_view option, std::string_view text,
                                                  std::int64_t min, std::int64_t max) {
  auto bad = [&](std::string why) {
    return usage_error{std::string(option) + " wants " + why + ", got \"" + std::string(text) +
                       "\""};
  };
  auto range = "a number from " + std::to_string(min) + " to " + std::to_string(max);
  if (text.empty()) return bad(range);
  bool neg = text.front() == '-';
  auto digits = neg ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 18) return bad(range);
  std::int64_t v = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return bad("a whole " + range.substr(2));
    v = v * 10 + (ch - '0');
  }
  if (neg) v = -v;
  if (v < min || v > max) return bad(range);
  return v;
}

const command_spec* app_model::command_of(const CLI::App* sub) const {
  auto it = leaves.find(sub);
  return it == leaves.end() ? nullptr : it->second;
}

namespace {

/// A number option's check: the message names the option, the value and the range.
CLI::Validator range_check(const option_spec& o) {
  std::string name = "--" + std::string(o.name);
  auto min = o.min;
  auto max = o.max;
  return CLI::Validator(
      [name, min, max](std::string& text) -> std::string {
        auto n = parse_int(name, text, min, max);
        auto* e = std::get_if<usage_error>(&n);
        return e == nullptr ? std::string{} : e->message;
      },
      std::to_string(min) + " to " + std::to_string(max), "range");
}

/// `-q,--quiet`: CLI11's spelling of an option's names.
std::string names_of(const option_spec& o) {
  std::string out = o.short_name != 0 ? std::string{'-', o.short_name, ','} : std::string{};
  return out + "--" + std::string(o.name);
}

/// Adds option `o` to `app`, unbound: parse() reads its results. A value option may be given
/// several times here; parse() says "given twice" for one that is not repeatable.
CLI::Option* add_spec_option(CLI::App& app, const option_spec& o) {
  if (!o.takes_value)
    return app.add_flag(names_of(o))->description(std::string(o.help))->disable_flag_override();
  auto* opt = app.add_option(names_of(o))->description(std::string(o.help));
  opt->type_name(o.number ? "N" : o.path ? "FILE" : "VALUE");
  opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (o.number) opt->check(range_check(o));
  return opt;
}

/// Adds global option `o`, bound to its field of `p`.
void add_global(CLI::App& app, const option_spec& o, parsed& p) {
  std::string names = names_of(o);
  std::string help(o.help);
  CLI::Option* opt = nullptr;
  if (o.name == "help") return;  // CLI11's own help flag, set in make_app
  if (o.name == "url") opt = app.add_option(names, p.url, help);
  if (o.name == "token") opt = app.add_option(names, p.token, help);
  if (o.name == "cacert") opt = app.add_option(names, p.cacert, help);
  if (o.name == "client-cert") opt = app.add_option(names, p.cert, help);
  if (o.name == "client-key") opt = app.add_option(names, p.key, help);
  if (o.name == "timeout-ms") opt = app.add_option(names, p.timeout_ms, help);
  if (o.name == "insecure") opt = app.add_flag(names, p.insecure, help);
  if (o.name == "json") opt = app.add_flag(names, p.json, help);
  if (o.name == "version") opt = app.add_flag(names, p.version, help);
  LANEQ_ASSERT(opt != nullptr, "a global option without a field in parsed");
  if (o.takes_value) {
    opt->type_name(o.number ? "N" : o.path ? "FILE" : "VALUE");
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if (o.number) opt->check(range_check(o));
  } else {
    opt->disable_flag_override();
  }
}

/// What a group of two-word commands is for.
std::string group_summary(std::string_view group) {
  if (group == "queue") return "create, show, list and delete queues";
  if (group == "topic") return "topics: one send into several queues";
  if (group == "dlq") return "a queue's dead letters";
  return {};
}

/// The subcommand that runs `c`: a top-level one, or one inside its group (made on first use).
CLI::App* add_command(CLI::App& root, const command_spec& c) {
  auto space = c.words.find(' ');
  if (space == std::string_view::npos)
    return root.add_subcommand(std::string(c.words), std::string(c.summary));
  std::string group(c.words.substr(0, space));
  auto found = root.get_subcommands([&](CLI::App* s) { return s->get_name() == group; });
  CLI::App* g = found.empty() ? root.add_subcommand(group, group_summary(group)) : found[0];
  g->require_subcommand(0, 1);
  return g->add_subcommand(std::string(c.words.substr(space + 1)), std::string(c.summary));
}

/// The positional that collects a command's arguments (their count is checked by parse()).
void add_arguments(CLI::App& sub, std::string_view usage_text, std::string_view help) {
  auto* args = sub.add_option("args")->description(std::string(help));
  args->expected(0, CLI::detail::expected_max_vector_size)->allow_extra_args();
  args->option_text(std::string(usage_text));
}

void add_hidden_commands(CLI::App& root) {
  auto* completion =
      root.add_subcommand("completion", "print a bash completion script: laneq completion bash");
  add_arguments(*completion, "SHELL", "the shell (bash)");
  root.add_subcommand("man", "print the laneq(1) man page (roff)");
  auto* help = root.add_subcommand("help", "show help, or a command's: laneq help queue create");
  add_arguments(*help, "[COMMAND...]", "the command");
  for (auto* s : {completion, root.get_subcommand("man"), help}) s->group("");
}

}  // namespace

app_model make_app(parsed& into) {
  app_model m;
  m.app = std::make_unique<CLI::App>(
      "laneq: the command line of the laneq message queue (talks to laneqd over HTTP)", "laneq");
  auto& root = *m.app;
  root.set_help_flag("-h,--help", "show help");
  root.fallthrough();   // the global options go anywhere, after the command too
  root.allow_extras();  // parse() names an unknown command or option itself
  root.require_subcommand(0, 1);
  for (const auto& g : global_options()) add_global(root, g, into);
  for (const auto& c : commands()) {
    auto* sub = add_command(root, c);
    for (const auto& o : c.options) add_spec_option(*sub, o);
    add_arguments(*sub, c.args, "the arguments: " + std::string(c.args));
    m.leaves[sub] = &c;
  }
  add_hidden_commands(root);
  return m;
}

}  // namespace laneq::cli
