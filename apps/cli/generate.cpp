// Text made from the command table and its CLI11 app (issue 25 §2): `laneq --help`, the bash
// completion script (`laneq completion bash`) and the laneq(1) man page (`laneq man`, built into
// share/man/man1 by CMake). Made from the app, they list every command and option there is.
#include <climits>
#include <sstream>

#include "app.hpp"
#include "laneq/version.hpp"

namespace laneq::cli {

namespace {

/// laneq's exit codes and what each means (cli.hpp `exit_code`).
constexpr std::pair<int, std::string_view> exit_codes[] = {
    {exit_ok, "the command did what it was asked"},
    {exit_server_error, "laneqd answered with an error (unknown queue, stale lease, ...)"},
    {exit_usage, "a usage error: bad arguments or options; nothing was sent"},
    {exit_unreachable, "laneqd could not be reached (connect failed, timed out)"},
    {exit_bad_answer, "laneqd answered something that is not the API's shape"},
};

/// The environment variables laneq reads (flags win over them).
constexpr std::pair<std::string_view, std::string_view> environment[] = {
    {"LANEQ_URL", "laneqd's address when --url is not given"},
    {"LANEQ_TOKEN", "the bearer token when --token is not given"},
    {"LANEQ_CACERT", "https: the CA file when --cacert is not given"},
};

/// ` (1 to 1000)`: a number option's range, as its help shows it.
std::string range_text(const option_spec& o) {
  if (!o.number) return {};
  if (o.max == INT64_MAX) return " (at least " + std::to_string(o.min) + ")";
  return " (" + std::to_string(o.min) + " to " + std::to_string(o.max) + ")";
}

std::string value_name(const option_spec& o) {
  if (!o.takes_value) return {};
  return o.number ? " N" : o.path ? " FILE" : " VALUE";
}

void help_options(std::ostringstream& o, const std::vector<option_spec>& list) {
  for (const auto& op : list) {
    std::string left = std::string("  ") +
                       (op.short_name ? std::string{'-', op.short_name} : "  ") +
                       (op.short_name ? ", " : "  ") + "--" + std::string(op.name) + value_name(op);
    if (left.size() < 28) left.resize(28, ' ');
    o << left << " " << op.help << range_text(op) << "\n";
  }
}

}  // namespace

std::string render_help(const command_spec* command) {
  std::ostringstream o;
  if (command != nullptr) {
    o << "usage: laneq " << command->words << (command->args.empty() ? "" : " ") << command->args
      << " [options]\n\n"
      << command->summary << "\n";
    if (!command->options.empty()) {
      o << "\noptions:\n";
      help_options(o, command->options);
    }
    o << "\nglobal options:\n";
    help_options(o, global_options());
    return o.str();
  }
  o << "laneq: the command line of the laneq message queue (talks to laneqd over HTTP)\n\n"
    << "usage: laneq [global options] COMMAND [args] [options]\n\ncommands:\n";
  for (const auto& c : commands()) {
    std::string left = "  " + std::string(c.words) + " " + std::string(c.args);
    if (left.size() < 32) left.resize(32, ' ');
    o << left << " " << c.summary << "\n";
  }
  o << "\nglobal options:\n";
  help_options(o, global_options());
  o << "\nexit codes: 0 ok, 1 laneqd answered with an error, 2 usage error, 3 laneqd unreachable,\n"
    << "4 an answer that is not the API's shape. `laneq COMMAND --help` shows a command's "
       "options;\n`man laneq` shows them all.\n";
  return o.str();
}

namespace {

/// The subcommands `laneq --help` lists (not the hidden ones).
std::vector<CLI::App*> visible(CLI::App& app) {
  return app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); });
}

/// The options of `app` other than its arguments and --help.
std::vector<const CLI::Option*> options_of(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) {
    return !o->get_positional() && o->get_lnames() != std::vector<std::string>{"help"};
  });
}

bool takes_value(const CLI::Option* o) {
  return o->get_type_size() != 0;
}

// -- bash completion ----------------------------------------------------------------------------

/// `--a --b`: the long names of `list` (those with values only, when `values_only`).
std::string long_names(const std::vector<const CLI::Option*>& list, bool values_only) {
  std::string out;
  for (const auto* o : list)
    if (!values_only || takes_value(o))
      for (const auto& n : o->get_lnames()) out += (out.empty() ? "--" : " --") + n;
  return out;
}

/// The `case` arms: for each command path, its sub-commands and its options.
void completion_cases(CLI::App& at, const std::string& path, std::string& words,
                      std::string& options, std::string& values) {
  std::string subs;
  for (auto* s : visible(at)) {
    subs += (subs.empty() ? "" : " ") + s->get_name();
    completion_cases(*s, path.empty() ? s->get_name() : path + " " + s->get_name(), words, options,
                     values);
  }
  if (!subs.empty()) words += "    \"" + path + "\") echo \"" + subs + "\" ;;\n";
  auto opts = options_of(at);
  if (!opts.empty())
    options += "    \"" + (path.empty() ? std::string("-") : path) + "\") echo \"" +
               long_names(opts, false) + "\" ;;\n";
  auto v = long_names(opts, true);
  if (!v.empty()) values += " " + v;
}

std::string file_options() {
  std::string out;
  for (const auto& o : global_options())
    if (o.path) out += " --" + std::string(o.name);
  for (const auto& c : commands())
    for (const auto& o : c.options)
      if (o.path && out.find(" --" + std::string(o.name) + " ") == std::string::npos)
        out += " --" + std::string(o.name);
  return out + " ";
}

constexpr std::string_view completion_function = R"sh(_laneq() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev="" path="" word i
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    [[ $word == -- ]] && { COMPREPLY=($(compgen -c -- "$cur")); return; }
    if [[ $word == -* ]]; then
      [[ $word != *=* && $_laneq_value_options == *" $word "* ]] && i=$((i + 1))
      continue
    fi
    if [[ " $(_laneq_words "$path") " == *" $word "* ]]; then
      path=${path:+$path }$word
    else
      break
    fi
  done
  if [[ $prev == --* && $_laneq_value_options == *" $prev "* ]]; then
    if [[ $_laneq_file_options == *" $prev "* ]]; then
      COMPREPLY=($(compgen -f -- "$cur"))
    else
      COMPREPLY=()
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_laneq_options "$path") $(_laneq_options -)" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$(_laneq_words "$path")" -- "$cur"))
  fi
}
complete -F _laneq laneq
)sh";

}  // namespace

std::string render_bash_completion() {
  parsed unused;
  auto m = make_app(unused);
  std::string words, options, values;
  completion_cases(*m.app, "", words, options, values);
  std::string out = "# bash completion for laneq " + std::string(version_string) +
                    ", made by `laneq completion bash` from laneq's own commands.\n"
                    "# Load it with: source <(laneq completion bash)\n\n";
  out += "_laneq_words() {\n  case \"$1\" in\n" + words + "  esac\n}\n\n";
  out += "_laneq_options() {\n  case \"$1\" in\n" + options + "  esac\n}\n\n";
  out += "_laneq_value_options=\"" + values + " \"\n";
  out += "_laneq_file_options=\"" + file_options() + "\"\n\n";
  return out + std::string(completion_function);
}

namespace {

// -- the man page -------------------------------------------------------------------------------

/// Text for roff: backslashes and hyphens escaped, no line that starts a request.
std::string roff(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\\')
      out += "\\e";
    else if (ch == '-')
      out += "\\-";
    else
      out += ch;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

/// `.TP` entries for options: `\-\-max N` and its description, range included.
void man_options(std::ostringstream& o, const std::vector<const CLI::Option*>& list) {
  for (const auto* opt : list) {
    o << ".TP\n";
    std::string names;
    for (const auto& s : opt->get_snames()) names += "\\fB\\-" + roff(s) + "\\fR, ";
    for (const auto& l : opt->get_lnames()) names += "\\fB\\-\\-" + roff(l) + "\\fR";
    if (takes_value(opt)) {
      auto type = opt->get_type_name();  // `N:1 to 1000`: the value's name, then its range
      names += " \\fI" + roff(type.substr(0, type.find(':'))) + "\\fR";
    }
    o << names << "\n" << roff(opt->get_description());
    auto type = opt->get_type_name();
    if (auto colon = type.find(':'); takes_value(opt) && colon != std::string::npos)
      o << " (" << roff(type.substr(colon + 1)) << ")";
    o << "\n";
  }
}

/// A `.SS` section per command under `at` (`path`: the words that lead there).
void man_commands(std::ostringstream& o, CLI::App& at, const std::string& path) {
  for (auto* s : visible(at)) {
    auto words = path.empty() ? s->get_name() : path + " " + s->get_name();
    if (!visible(*s).empty()) {
      man_commands(o, *s, words);
      continue;
    }
    std::string args;
    if (const auto* a = s->get_option_no_throw("args")) args = a->get_option_text();
    o << ".SS \"" << roff(words) << (args.empty() ? "" : " ") << roff(args) << "\"\n"
      << roff(s->get_description()) << "\n";
    man_options(o, options_of(*s));
  }
}

}  // namespace

// Long: the page's fixed sections, in order; each is a few lines of roff.
std::string render_man_page() {
  parsed unused;
  auto m = make_app(unused);
  std::ostringstream o;
  o << ".TH LANEQ 1 \"\" \"laneq " << version_string << "\" \"laneq\"\n"
    << ".SH NAME\nlaneq \\- the command line of the laneq message queue\n"
    << ".SH SYNOPSIS\n.B laneq\n[\\fIglobal options\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR] "
       "[\\fIoptions\\fR]\n"
    << ".SH DESCRIPTION\n\\fBlaneq\\fR talks to \\fBlaneqd\\fR, the laneq daemon, over its "
       "HTTP API: it creates and inspects queues and topics, sends, receives and settles messages, "
       "runs a command per message, and shows dead letters, ordering groups, stats and metrics.\n"
       ".PP\nThe global options may come before or after the command. Options are spelled "
       "\\fB\\-\\-name\\fR \\fIVALUE\\fR or \\fB\\-\\-name=\\fR\\fIVALUE\\fR; "
       "\\fB\\-\\-\\fR ends the options (every word after it is an argument). Number options "
       "are checked against the bounds laneqd applies before anything is sent. "
       "\\fBlaneq\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR shows one command's options.\n"
    << ".SH COMMANDS\n";
  man_commands(o, *m.app, "");
  o << ".SH GLOBAL OPTIONS\n";
  man_options(o, options_of(*m.app));
  o << ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nshow help (of a command, after it)\n";
  o << ".SH ENVIRONMENT\n";
  for (const auto& [name, what] : environment)
    o << ".TP\n.B " << name << "\n" << roff(what) << "\n";
  o << ".SH EXIT STATUS\n";
  for (const auto& [code, what] : exit_codes) o << ".TP\n.B " << code << "\n" << roff(what) << "\n";
  o << ".SH FILES\nThe bash completion: \\fBlaneq completion bash\\fR prints it; the package "
       "installs it as share/bash\\-completion/completions/laneq.\n"
    << ".SH SEE ALSO\n\\fBlaneqd\\fR(8); the HTTP API and operations guides in "
       "/usr/share/doc/laneq (api.md, operations.md).\n";
  return o.str();
}

}  // namespace laneq::cli
