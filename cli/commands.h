#pragma once
// The command groups. Each Add* function adds its subcommands to the app; the callback of the
// subcommand given on the command line puts its action in `slot`. A new group (`mcli logs`,
// `mcli health`) is one new file with its Add* function, declared here and listed in app.cc.

#include <CLI/CLI.hpp>
#include <optional>

#include "absl/status/statusor.h"
#include "cli/command.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/logs.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::cli {

// mcli run -f FILE, mcli run submit -f FILE [--follow]
void AddRunCommands(CLI::App& app, ActionSlot& slot);
// mcli get runs|nodes|events
void AddGetCommands(CLI::App& app, ActionSlot& slot);
// mcli describe run|node
void AddDescribeCommands(CLI::App& app, ActionSlot& slot);
// mcli stop|delete|update|restart|clone run, mcli watchdog RUN
void AddRunLifecycleCommands(CLI::App& app, ActionSlot& slot);
// mcli cordon|uncordon|drain NODE
void AddNodeCommands(CLI::App& app, ActionSlot& slot);
// mcli set api-key|endpoint, mcli config, mcli whoami
void AddConfigCommands(CLI::App& app, ActionSlot& slot);
// mcli admin create-api-key|list-api-keys|revoke-api-key
void AddAdminCommands(CLI::App& app, ActionSlot& slot);
// mcli logs RUN [-f] [--rank N] [--node-rank N] [--resumption N | --prev] [--failed] [--tail N]
//               [--first-exception]
void AddLogsCommands(CLI::App& app, ActionSlot& slot);

// mcli create secret env|mounted|docker-registry|git-ssh|ssh, mcli get secrets, mcli delete
// secret (after AddGetCommands and AddRunLifecycleCommands: it adds to `get` and `delete`)
void AddSecretCommands(CLI::App& app, ActionSlot& slot);
// mcli create webhook URL, mcli get webhooks|notifications, mcli delete webhook (after
// AddSecretCommands: it adds to `create`, `get` and `delete`)
void AddWebhookCommands(CLI::App& app, ActionSlot& slot);
// mcli connect RUN, mcli interactive
void AddConnectCommands(CLI::App& app, ActionSlot& slot);
// mcli health sweep|sweeps|show
void AddHealthCommands(CLI::App& app, ActionSlot& slot);
// mcli get metrics RUN (added to `get`)
void AddGetMetricsCommand(CLI::App* get, ActionSlot& slot);
// mcli get health|sweeps (added to `get`)
void AddGetHealthCommands(CLI::App* get, ActionSlot& slot);
// mcli admin create-team|delete-team|add-user|remove-user|set-quota|set-share (added to
// `admin`)
void AddTeamCommands(CLI::App* admin, ActionSlot& slot);
// mcli get teams|queue|usage (added to `get`)
void AddGetTeamCommands(CLI::App* get, ActionSlot& slot);
// mcli util
void AddUtilCommand(CLI::App& app, ActionSlot& slot);
// mcli diff run A B
void AddDiffCommand(CLI::App& app, ActionSlot& slot);
// mcli admin inject-fault NODE --kind KIND (added to `admin`)
void AddInjectFaultCommand(CLI::App* admin, ActionSlot& slot);
// The node's newest health results, or the call's error (PERMISSION_DENIED for a user: health
// results are the operators'; UNAVAILABLE when the health API does not answer).
absl::StatusOr<google::protobuf::RepeatedPtrField<tessera::v1::HealthCheckResult>> RecentHealth(
    Connection& connection, const std::string& node, int limit);

// Prints the lines of a GetLogs stream as mcli logs does (raw text, "[rank N] " first unless the
// request selects one rank; JSON Lines with -o json) until the server ends the stream. Returns
// kExitOk, or kExitInterrupted when Ctrl-C ended it; a failed stream throws CliError (exit 1).
// Also used by mcli run submit --follow.
// `by_node`: the lines are nodes' launchers' (launch: node), each marked "[node N]" rather
// than "[rank N]" where several ranks' lines are printed.
int PrintLogStream(CommandContext& context, const tessera::v1::GetLogsRequest& request,
                   bool by_node = false);
// Whether the run's command runs once per node (launch: node, the default).
bool LaunchedPerNode(const tessera::v1::Run& run);

}  // namespace tessera::cli
