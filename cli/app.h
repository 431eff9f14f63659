#pragma once
// mcli as a function, so that tests can run it without a process: parses the command line,
// resolves the settings, runs the command, and turns every failure into "Error: ..." on `err`
// and an exit code (2: usage or bad input, 1: the server or the run failed). Never throws.

#include <iosfwd>

#include "cli/settings.h"

namespace tessera::cli {

// `terminal_width`: the columns of the terminal `out` is, 0 when it is none (mcli's main tells).
int RunMcli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            const EnvLookup& env = ProcessEnv(), int terminal_width = 0);

// The columns of the terminal on `fd` (80 when it does not say), or 0 when `fd` is not a
// terminal or TERM is "dumb".
int TerminalWidth(int fd);

}  // namespace tessera::cli
