// parse(): argv through the CLI11 app (app.hpp) into `parsed`, with laneq's own words for what
// is wrong (unknown command with a "did you mean", option given twice, argument counts).
#include <algorithm>

#include "app.hpp"

namespace laneq::cli {

namespace {

/// Levenshtein distance: single-byte insertions, deletions and substitutions.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      auto above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// ` (did you mean "W"?)` for the command whose words are nearest `typed`, when one is within two
/// edits (and closer than the length of what was typed); empty otherwise.
std::string did_you_mean(std::string_view typed) {
  std::string_view best;
  auto best_distance = std::min<std::size_t>(3, typed.size());
  for (const auto& c : commands())
    if (auto d = edit_distance(typed, c.words); d < best_distance) {
      best = c.words;
      best_distance = d;
    }
  return best.empty() ? std::string{} : " (did you mean \"" + std::string{best} + "\"?)";
}

/// CLI11's error in laneq's words where CLI11's are terse; its own otherwise.
usage_error error_of(const CLI::ParseError& e) {
  std::string what = e.what();
  auto colon = what.find(": ");
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr && colon != std::string::npos)
    return {what.substr(colon + 2)};  // range_check's message names the option itself
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    if (what.ends_with(" missing") && colon != std::string::npos)
      return {"option " + what.substr(0, colon) + " needs a value"};
    if (auto at = what.find(" was given a disallowed flag override"); at != std::string::npos)
      return {"option --" + what.substr(0, at) + " takes no value"};
  }
  return {what};
}

/// The deepest subcommand the command line chose: the root, a group or a command.
CLI::App* chosen(CLI::App& root) {
  CLI::App* at = &root;
  for (auto subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands())
    at = subs.front();
  return at;
}

/// The words that name `sub` (`queue create`).
std::string words_of(const CLI::App* sub) {
  std::string words;
  for (; sub != nullptr && sub->get_parent() != nullptr; sub = sub->get_parent())
    words = sub->get_name() + (words.empty() ? "" : " ") + words;
  return words;
}

/// The values of positional `args` of `sub`, then those after `--`.
std::vector<std::string> arguments_of(CLI::App* sub, const std::vector<std::string>& after) {
  std::vector<std::string> out;
  if (auto* a = sub->get_option_no_throw("args")) out = a->results();
  out.insert(out.end(), after.begin(), after.end());
  return out;
}

/// The error for extra tokens CLI11 could place nowhere: an unknown option or command.
usage_error unknown(const std::string& token, const CLI::App* at, const command_spec* cmd) {
  if (token.rfind("--", 0) == 0)
    return {"unknown option " + token.substr(0, token.find('=')) +
            (cmd ? " for \"" + std::string(cmd->words) + "\"" : "") + " (see --help)"};
  if (token.size() > 1 && token[0] == '-')
    return {"unknown option " + token + " (options are spelled --name)"};
  if (cmd != nullptr) return {"unexpected argument \"" + token + "\" (see --help)"};
  std::string typed = (at->get_parent() ? words_of(at) + " " : "") + token;
  return {"unknown command \"" + typed + "\"" + did_you_mean(typed) +
          " (laneq --help lists the commands)"};
}

/// The error for a command given too few or too many arguments, if it was.
std::optional<usage_error> check_arg_count(const command_spec& c, std::size_t given) {
  if (given >= c.min_args && given <= c.max_args) return std::nullopt;
  std::string want = c.min_args == c.max_args ? std::to_string(c.min_args)
                     : c.max_args == SIZE_MAX
                         ? "at least " + std::to_string(c.min_args)
                         : std::to_string(c.min_args) + " to " + std::to_string(c.max_args);
  return usage_error{"\"" + std::string(c.words) + "\" takes " + want + " argument(s) (" +
                     std::string(c.args) + "), got " + std::to_string(given) + "; usage: laneq " +
                     std::string(c.words) + " " + std::string(c.args)};
}

/// Copies the options command `c` (subcommand `sub`) was given into `p`.
std::optional<usage_error> read_options(const command_spec& c, CLI::App* sub, parsed& p) {
  for (const auto& o : c.options) {
    const auto* opt = sub->get_option_no_throw("--" + std::string(o.name));
    if (opt == nullptr || opt->count() == 0) continue;
    if (!o.takes_value) {
      p.flags[std::string(o.name)] = true;
      continue;
    }
    if (opt->results().size() > 1 && !o.repeatable)
      return usage_error{"option --" + std::string(o.name) + " given twice"};
    p.values[std::string(o.name)] = opt->results();
  }
  return std::nullopt;
}

/// `laneq help [COMMAND...]`: help, on the command its words name when they name one.
parsed help_on(parsed p, const std::vector<std::string>& words) {
  std::string joined;
  for (const auto& w : words)
    if (w.rfind("-", 0) != 0) joined += (joined.empty() ? "" : " ") + w;
  p.help = true;
  for (const auto& c : commands())
    if (c.words == joined) p.command = &c;
  return p;
}

/// The command line after CLI11 parsed it (`help`: it asked for help) into `p`.
std::variant<parsed, usage_error> read_parsed(const app_model& m, parsed p, bool help,
                                              const std::vector<std::string>& after) {
  CLI::App* at = chosen(*m.app);
  const auto* cmd = m.command_of(at);
  auto extras = m.app->remaining(true);
  if (p.version) return p;
  if (at->get_name() == "help" && at->get_parent() == m.app.get())
    return help_on(std::move(p), arguments_of(at, after));
  if (cmd == nullptr && at != m.app.get() && at->get_group().empty()) {  // completion, man
    p.local_command = at->get_name();
    p.args = arguments_of(at, after);
    return p;
  }
  if (help || (at == m.app.get() && extras.empty())) {
    p.help = true;
    p.command = cmd;
    return p;
  }
  if (!extras.empty()) return unknown(extras.front(), at, cmd);
  if (cmd == nullptr)
    return usage_error{"\"" + words_of(at) + "\" needs a sub-command (laneq --help lists them)"};
  p.command = cmd;
  if (auto e = read_options(*cmd, at, p)) return *e;
  p.args = arguments_of(at, after);
  if (auto e = check_arg_count(*cmd, p.args.size())) return *e;
  return p;
}

}  // namespace

std::variant<parsed, usage_error> parse(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env) {
  parsed p;
  if (auto it = env.find("LANEQ_URL"); it != env.end() && !it->second.empty()) p.url = it->second;
  if (auto it = env.find("LANEQ_TOKEN"); it != env.end()) p.token = it->second;
  if (auto it = env.find("LANEQ_CACERT"); it != env.end()) p.cacert = it->second;
  // CLI11 ends a subcommand at `--`; here every token after it is an argument of the command.
  auto dash = std::find(argv.begin(), argv.end(), "--");
  std::vector<std::string> tokens(argv.begin(), dash);
  std::vector<std::string> after(dash == argv.end() ? dash : dash + 1, argv.end());
  std::reverse(tokens.begin(), tokens.end());  // CLI11 takes them last first
  auto m = make_app(p);
  bool help = false;
  try {
    m.app->parse(tokens);
  } catch (const CLI::CallForHelp&) {
    help = true;
  } catch (const CLI::CallForAllHelp&) {
    help = true;
  } catch (const CLI::ParseError& e) {
    return error_of(e);
  }
  return read_parsed(m, std::move(p), help, after);
}

}  // namespace laneq::cli
