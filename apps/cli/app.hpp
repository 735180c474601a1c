// The CLI11 app made from the command table (app.cpp): parse() parses argv with it, and
// generate.cpp writes the bash completion and the man page from it, so neither goes stale.
#pragma once

#include <map>
#include <memory>

#include <CLI/CLI.hpp>

#include "cli.hpp"

namespace laneq::cli {

/// The app and which command of the table each of its leaf subcommands runs.
struct app_model {
  std::unique_ptr<CLI::App> app;
  std::map<const CLI::App*, const command_spec*> leaves;
  /// The table's command a subcommand runs; null for the root, a group (`queue`) or a hidden one.
  const command_spec* command_of(const CLI::App* sub) const;
};

/// The hidden commands: they need no server and `laneq --help` does not list them.
inline constexpr std::string_view hidden_commands[] = {"completion", "man", "help"};

/// The app: one subcommand per command of `commands()` (two-word commands nest in a group:
/// `queue` > `create`), each with its options (number options checked against their range) and
/// one positional holding its arguments; the global options bound to `into`'s fields (they may
/// come after the command); the hidden commands. `into` must outlive the app.
app_model make_app(parsed& into);

}  // namespace laneq::cli
