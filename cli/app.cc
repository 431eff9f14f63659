#include "cli/app.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <ostream>
#include <string_view>

#include "cli/commands.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "dev"
#endif

namespace tessera::cli {
namespace {

struct GlobalOptions {
  SettingFlags flags;
  std::string output = "table";
};

// "mcli get runs" for the deepest subcommand that was parsed.
std::string CommandPath(CLI::App& app) {
  std::string path = "mcli";
  CLI::App* current = &app;
  while (true) {
    const std::vector<CLI::App*> parsed = current->get_subcommands();
    if (parsed.empty()) return path;
    current = parsed.front();
    path += " " + current->get_name();
  }
}

void BuildApp(CLI::App& app, GlobalOptions& options, ActionSlot& slot) {
  app.name("mcli");
  app.set_version_flag("--version", std::string("mcli ") + TESSERA_VERSION);
  // Global options may come after the subcommand (mcli get runs -o json).
  app.fallthrough();
  app.require_subcommand(1);
  // Inherited by every subcommand, whose help does not list the options above otherwise.
  app.footer(
      "Global options, accepted anywhere: --endpoint HOST:PORT, --api-key KEY, --ca FILE, "
      "-o table|json|yaml (csv for get metrics and get usage)");
  app.add_option("--endpoint", options.flags.endpoint,
                 "host:port of the Tessera API (or TESSERA_ENDPOINT; default 127.0.0.1:50051)");
  app.add_option("--api-key", options.flags.api_key, "API key (or TESSERA_API_KEY)");
  app.add_option("--ca", options.flags.ca,
                 "PEM file of the cluster CA, to check the server's certificate (or TESSERA_CA)");
  app.add_option("-o,--output", options.output,
                 "Output format: table, json or yaml (csv for get metrics and get usage)");

  AddRunCommands(app, slot);
  AddGetCommands(app, slot);
  AddDescribeCommands(app, slot);
  AddRunLifecycleCommands(app, slot);
  AddNodeCommands(app, slot);
  AddConfigCommands(app, slot);
  AddAdminCommands(app, slot);
  AddUtilCommand(app, slot);
  AddDiffCommand(app, slot);
  AddLogsCommands(app, slot);
  AddHealthCommands(app, slot);
  AddSecretCommands(app, slot);
  AddWebhookCommands(app, slot);
  AddConnectCommands(app, slot);
}

}  // namespace

int TerminalWidth(int fd) {
  if (!::isatty(fd)) return 0;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string_view(term) == "dumb") return 0;
  struct winsize size = {};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

int RunMcli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            const EnvLookup& env, int terminal_width) {
  try {
    CLI::App app("mcli: submit and manage training runs on Tessera");
    GlobalOptions options;
    ActionSlot slot;
    BuildApp(app, options, slot);
    try {
      app.parse(argc, argv);
    } catch (const CLI::Success& e) {  // --help, --help-all, --version
      return app.exit(e, out, err);
    } catch (const CLI::ParseError& e) {
      // Words no command took explain more than what CLI11 noticed first (often only that a
      // subcommand is missing).
      const std::vector<std::string> unexpected = app.remaining(true);
      std::string message = e.what();
      if (!unexpected.empty()) {
        message = "unknown command or argument \"" + unexpected.front() + "\"";
      }
      err << "Error: " << message << " (see `" << CommandPath(app) << " --help`)\n";
      return kExitUsage;
    }
    if (!slot.action) {
      err << "Error: no command given (see `" << CommandPath(app) << " --help`)\n";
      return kExitUsage;
    }
    const OutputFormat format = ParseOutputFormat(options.output);
    // A table of numbers has a CSV form; runs, nodes and events do not.
    const std::string path = CommandPath(app);
    if (format == OutputFormat::kCsv && path != "mcli get metrics" && path != "mcli get usage") {
      err << "Error: -o csv is for `mcli get metrics` and `mcli get usage` only; use table, "
             "json or yaml\n";
      return kExitUsage;
    }
    CommandContext context(ResolveSettings(options.flags, env), format, out, err, terminal_width);
    const int exit_code = slot.action(context);
    out.flush();
    return exit_code;
  } catch (const CliError& e) {
    out.flush();
    err << "Error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    out.flush();
    err << "Error: " << e.what() << "\n";
    return kExitFailure;
  } catch (...) {
    err << "Error: unexpected failure\n";
    return kExitFailure;
  }
}

}  // namespace tessera::cli
