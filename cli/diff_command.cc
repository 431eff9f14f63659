// mcli diff run A B: how two runs' specs differ, as a unified diff of their YAML (what was
// submitted, overrides applied), so that "what did I change between these two?" is one command.

#include <memory>

#include "cli/commands.h"
#include "cli/spec_diff.h"
#include "runspec/run_spec_parser.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::cli {
namespace {

struct DiffOptions {
  std::string before;
  std::string after;
};

tessera::v1::Run GetRun(CommandContext& context, tessera::v1::RunService::Stub& stub,
                        const std::string& name) {
  tessera::v1::GetRunRequest request;
  request.set_name(name);
  tessera::v1::GetRunResponse response;
  context.connection().Unary(
      [&](grpc::ClientContext* c) { return stub.GetRun(c, request, &response); });
  return response.run();
}

int DiffRuns(CommandContext& context, const DiffOptions& options) {
  auto stub = tessera::v1::RunService::NewStub(context.connection().channel());
  const tessera::v1::Run before = GetRun(context, *stub, options.before);
  const tessera::v1::Run after = GetRun(context, *stub, options.after);
  const std::string diff =
      UnifiedDiff(spec::RunSpecToYaml(before.spec()), spec::RunSpecToYaml(after.spec()),
                  before.name(), after.name());
  if (PrintIfStructured(context, Json{{"before", before.name()},
                                      {"after", after.name()},
                                      {"same_spec", diff.empty()},
                                      {"diff", diff}})) {
    return kExitOk;
  }
  if (diff.empty()) {
    context.out() << "Runs " << before.name() << " and " << after.name() << " have the same spec\n";
  } else {
    context.out() << diff;
  }
  return kExitOk;
}

}  // namespace

void AddDiffCommand(CLI::App& app, ActionSlot& slot) {
  CLI::App* diff = app.add_subcommand("diff", "Compare two runs");
  diff->require_subcommand(1);
  CLI::App* diff_run =
      diff->add_subcommand("run", "How two runs' specs differ (a unified diff of their YAML)");
  auto options = std::make_shared<DiffOptions>();
  diff_run->add_option("RUN_A", options->before, "The run compared from")->required();
  diff_run->add_option("RUN_B", options->after, "The run compared to")->required();
  OnParsed(diff_run, slot,
           [options](CommandContext& context) { return DiffRuns(context, *options); });
}

}  // namespace tessera::cli
