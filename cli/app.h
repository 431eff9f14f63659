#pragma once
// mcli as a function, so that tests can run it without a process: parses the command line,
// resolves the settings, runs the command, and turns every failure into "Error: ..." on `err`
// and an exit code (2: usage or bad input, 1: the server or the run failed). Never throws.

#include <iosfwd>

#include "cli/settings.h"

namespace tessera::cli {

int RunMcli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            const EnvLookup& env = ProcessEnv());

}  // namespace tessera::cli
