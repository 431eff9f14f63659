#pragma once
// What every mcli command shares: the resolved settings, the output format, the output
// streams and a connection opened on first use.

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>

#include "cli/client.h"
#include "cli/errors.h"
#include "cli/output.h"
#include "cli/settings.h"
#include "cli/status_line.h"

namespace tessera::cli {

class CommandContext {
 public:
  // `terminal_width`: the columns of the terminal `out` writes to; 0 when it is not a terminal
  // (a pipe, a file), so no bars or redrawn lines.
  CommandContext(Settings settings, OutputFormat format, std::ostream& out, std::ostream& err,
                 int terminal_width = 0);

  const Settings& settings() const { return settings_; }
  OutputFormat format() const { return format_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  int terminal_width() const { return terminal_width_; }

  // The status line kept under the output while a run is followed (null when none): writers of
  // `out` hold it (StatusLine::Hold) so that their lines go above it.
  StatusLine* status_line() const { return status_line_; }
  void set_status_line(StatusLine* line) { status_line_ = line; }

  // Opened on first use, so that commands that need no server (config, set) never dial one.
  Connection& connection();

 private:
  Settings settings_;
  OutputFormat format_;
  std::ostream& out_;
  std::ostream& err_;
  int terminal_width_;
  StatusLine* status_line_ = nullptr;
  std::unique_ptr<Connection> connection_;
};

// What a parsed subcommand does; it returns the exit code or throws CliError.
using Action = std::function<int(CommandContext&)>;

// Filled by the callback of the subcommand that was parsed; RunMcli runs it after parsing.
struct ActionSlot {
  Action action;
};

// Makes `command` select `action` when it is the subcommand given.
void OnParsed(CLI::App* command, ActionSlot& slot, Action action);

// Prints a JSON/YAML document when -o asks for one; returns false for table output.
bool PrintIfStructured(CommandContext& context, const Json& document);

}  // namespace tessera::cli
