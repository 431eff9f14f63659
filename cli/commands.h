#pragma once
// The command groups. Each Add* function adds its subcommands to the app; the callback of the
// subcommand given on the command line puts its action in `slot`. A new group (`mcli logs`,
// `mcli health`) is one new file with its Add* function, declared here and listed in app.cc.

#include <CLI/CLI.hpp>

#include "cli/command.h"

namespace tessera::cli {

// mcli run -f FILE, mcli run submit -f FILE [--follow]
void AddRunCommands(CLI::App& app, ActionSlot& slot);
// mcli get runs|nodes|events
void AddGetCommands(CLI::App& app, ActionSlot& slot);
// mcli describe run|node
void AddDescribeCommands(CLI::App& app, ActionSlot& slot);
// mcli stop|delete|update|restart|clone run
void AddRunLifecycleCommands(CLI::App& app, ActionSlot& slot);
// mcli cordon|uncordon|drain NODE
void AddNodeCommands(CLI::App& app, ActionSlot& slot);
// mcli set api-key|endpoint, mcli config, mcli whoami
void AddConfigCommands(CLI::App& app, ActionSlot& slot);
// mcli admin create-api-key|list-api-keys|revoke-api-key
void AddAdminCommands(CLI::App& app, ActionSlot& slot);

}  // namespace tessera::cli
