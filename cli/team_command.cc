// mcli admin create-team|delete-team|add-user|remove-user|set-quota|set-share, mcli get
// teams|queue|usage, mcli util: who shares the GPUs, why each queued run waits, who used what.

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/names.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/teams.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::TeamService;

std::string QuotaText(const tessera::v1::TeamQuota& quota) {
  return absl::StrCat(quota.cluster(), quota.gpu_type().empty() ? "" : "/", quota.gpu_type(), "=",
                      quota.gpus());
}

void PrintTeam(CommandContext& context, const tessera::v1::Team& team) {
  if (PrintIfStructured(context, MessageToJson(team))) return;
  Fields fields;
  fields.Add("Team", team.name());
  fields.Add("Share", absl::StrCat(team.share()));
  fields.Add("Members", team.members().empty() ? "(none)" : absl::StrJoin(team.members(), ", "));
  std::vector<std::string> quotas;
  for (const auto& q : team.quotas()) quotas.push_back(QuotaText(q));
  fields.Add("Quotas", quotas.empty() ? "(none: borrows only where clusters have quotas)"
                                      : absl::StrJoin(quotas, ", "));
  fields.Print(context.out());
}

template <class Request, class Response, class Method>
int EditTeam(CommandContext& context, const Request& request, Method method) {
  Connection& connection = context.connection();
  auto stub = TeamService::NewStub(connection.channel());
  Response response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return ((*stub).*method)(c, request, &response); });
  PrintTeam(context, response.team());
  return kExitOk;
}

struct QuotaOptions {
  std::string team;
  std::string cluster;
  std::string gpu_type;
  int gpus = -1;
  bool remove = false;
};

int SetQuota(CommandContext& context, const QuotaOptions& options) {
  if (options.remove == (options.gpus >= 0)) {
    ThrowUsage("set-quota: give either --gpus N or --remove");
  }
  tessera::v1::SetTeamQuotaRequest request;
  request.set_team(options.team);
  request.set_cluster(options.cluster);
  request.set_gpu_type(options.gpu_type);
  request.set_gpus(options.remove ? 0 : options.gpus);
  request.set_remove(options.remove);
  return EditTeam<tessera::v1::SetTeamQuotaRequest, tessera::v1::SetTeamQuotaResponse>(
      context, request, &TeamService::Stub::SetTeamQuota);
}

int ListTeams(CommandContext& context) {
  Connection& connection = context.connection();
  auto stub = TeamService::NewStub(connection.channel());
  tessera::v1::ListTeamsResponse response;
  connection.Unary([&](grpc::ClientContext* c) {
    return stub->ListTeams(c, tessera::v1::ListTeamsRequest(), &response);
  });
  if (PrintIfStructured(context, MessagesToJson(response.teams()))) return kExitOk;
  Table table({"TEAM", "SHARE", "MEMBERS", "QUOTAS (cluster[/gpu type]=GPUs)"}, 0);
  for (const auto& team : response.teams()) {
    std::vector<std::string> quotas;
    for (const auto& q : team.quotas()) quotas.push_back(QuotaText(q));
    table.AddRow({team.name(), absl::StrCat(team.share()), absl::StrJoin(team.members(), ","),
                  absl::StrJoin(quotas, " ")});
  }
  table.Print(context.out());
  return kExitOk;
}

int GetQueue(CommandContext& context, const std::string& cluster) {
  tessera::v1::GetQueueRequest request;
  request.set_cluster(cluster);
  Connection& connection = context.connection();
  auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::GetQueueResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->GetQueue(c, request, &response); });
  if (PrintIfStructured(context, MessagesToJson(response.entries()))) return kExitOk;
  Table table({"POS", "RUN", "USER", "TEAM", "PRIORITY", "GPUS", "CLUSTER", "AGE", "WHY IT WAITS"},
              0);
  const absl::Time now = absl::Now();
  for (const auto& e : response.entries()) {
    const auto& run = e.run();
    const double age =
        run.created_at().seconds() > 0
            ? absl::ToDoubleSeconds(now - absl::FromUnixSeconds(run.created_at().seconds()))
            : 0;
    table.AddRow({absl::StrCat(e.position() + 1), run.name(), run.user(), run.team(),
                  ShortName(run.spec().scheduling().priority()),
                  absl::StrCat(run.spec().compute().gpus()), run.spec().compute().cluster(),
                  FormatSeconds(age), e.waiting_reason()});
  }
  table.Print(context.out());
  if (response.entries().empty()) context.out() << "The queue is empty.\n";
  return kExitOk;
}

struct UsageOptions {
  std::string team;
  std::string user;
  std::string since;
  std::string until;
};

// A field of a CSV line: quoted when it holds a comma, a quote or a line break.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

int GetUsage(CommandContext& context, const UsageOptions& options) {
  tessera::v1::GetUsageRequest request;
  request.set_team(options.team);
  request.set_user(options.user);
  const absl::Time now = absl::Now();
  if (!options.since.empty()) {
    request.mutable_since()->set_seconds(
        absl::ToUnixSeconds(ParseTimeArg("--since", options.since, now)));
  }
  if (!options.until.empty()) {
    request.mutable_until()->set_seconds(
        absl::ToUnixSeconds(ParseTimeArg("--until", options.until, now)));
  }
  Connection& connection = context.connection();
  auto stub = TeamService::NewStub(connection.channel());
  tessera::v1::GetUsageResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->GetUsage(c, request, &response); });
  if (context.format() == OutputFormat::kCsv) {
    context.out() << "day,cluster,team,user,outcome,gpu_hours,attempts\n";
    for (const auto& r : response.rows()) {
      context.out() << r.day() << ',' << CsvField(r.cluster()) << ',' << CsvField(r.team()) << ','
                    << CsvField(r.user()) << ',' << CsvField(r.outcome()) << ','
                    << absl::StrCat(r.gpu_hours()) << ',' << r.attempts() << '\n';
    }
    return kExitOk;
  }
  if (PrintIfStructured(context, MessagesToJson(response.rows()))) return kExitOk;
  Table table({"DAY", "CLUSTER", "TEAM", "USER", "OUTCOME", "GPU-HOURS", "ATTEMPTS"});
  double total = 0;
  for (const auto& r : response.rows()) {
    table.AddRow({r.day(), r.cluster(), r.team().empty() ? "-" : r.team(), r.user(), r.outcome(),
                  absl::StrFormat("%.2f", r.gpu_hours()), absl::StrCat(r.attempts())});
    total += r.gpu_hours();
  }
  table.Print(context.out());
  context.out() << absl::StrFormat("Total: %.2f GPU-hours\n", total);
  return kExitOk;
}

int Utilization(CommandContext& context, const std::string& cluster) {
  tessera::v1::GetUtilizationRequest request;
  request.set_cluster(cluster);
  Connection& connection = context.connection();
  auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::GetUtilizationResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->GetUtilization(c, request, &response); });
  if (PrintIfStructured(context, MessageToJson(response))) return kExitOk;
  Table table({"CLUSTER", "GPU TYPES", "NODES", "GPUS", "IN USE", "FREE", "SPARE", "CORDONED",
               "LOST", "RUNNING", "QUEUED"});
  for (const auto& c : response.clusters()) {
    // A spare's GPUs wait for runs resuming after a node fault: not free to anything else.
    const std::string spare = c.nodes_spare() == 0
                                  ? "0"
                                  : absl::StrCat(c.gpus_spare(), " (", c.nodes_spare(),
                                                 c.nodes_spare() == 1 ? " node)" : " nodes)");
    table.AddRow({c.cluster(), absl::StrJoin(c.gpu_types(), ","), absl::StrCat(c.nodes()),
                  absl::StrCat(c.gpus_total()), absl::StrCat(c.gpus_in_use()),
                  absl::StrCat(c.gpus_free()), spare, absl::StrCat(c.gpus_cordoned()),
                  absl::StrCat(c.gpus_lost()), absl::StrCat(c.runs_running()),
                  absl::StrCat(c.runs_queued())});
  }
  table.Print(context.out());
  if (response.runs_queued_any_cluster() > 0) {
    context.out() << response.runs_queued_any_cluster()
                  << " queued run(s) name no cluster (any will do)\n";
  }
  return kExitOk;
}

}  // namespace

void AddUtilCommand(CLI::App& app, ActionSlot& slot) {
  auto cluster = std::make_shared<std::string>();
  CLI::App* util = app.add_subcommand(
      "util",
      "Per cluster: GPUs total, in use, free, held as hot spares and cordoned; runs running and "
      "queued");
  util->add_option("--cluster", *cluster, "Only this cluster");
  OnParsed(util, slot,
           [cluster](CommandContext& context) { return Utilization(context, *cluster); });
}

void AddTeamCommands(CLI::App* admin, ActionSlot& slot) {
  auto create = std::make_shared<tessera::v1::CreateTeamRequest>();
  CLI::App* create_team = admin->add_subcommand("create-team", "Create a team");
  create_team
      ->add_option_function<std::string>(
          "NAME", [create](const std::string& v) { create->set_name(v); }, "The team's name")
      ->required();
  create_team->add_option_function<double>(
      "--share", [create](double v) { create->set_share(v); },
      "Its weight in fair share (default 1)");
  OnParsed(create_team, slot, [create](CommandContext& context) {
    return EditTeam<tessera::v1::CreateTeamRequest, tessera::v1::CreateTeamResponse>(
        context, *create, &TeamService::Stub::CreateTeam);
  });

  auto name = std::make_shared<std::string>();
  CLI::App* delete_team =
      admin->add_subcommand("delete-team", "Delete a team (its users belong to no team after)");
  delete_team->add_option("NAME", *name, "The team's name")->required();
  OnParsed(delete_team, slot, [name](CommandContext& context) {
    tessera::v1::DeleteTeamRequest request;
    request.set_name(*name);
    Connection& connection = context.connection();
    auto stub = TeamService::NewStub(connection.channel());
    tessera::v1::DeleteTeamResponse response;
    connection.Unary(
        [&](grpc::ClientContext* c) { return stub->DeleteTeam(c, request, &response); });
    context.out() << "Deleted team " << *name << "\n";
    return kExitOk;
  });

  auto member = std::make_shared<tessera::v1::AddTeamMemberRequest>();
  CLI::App* add_user = admin->add_subcommand("add-user", "Make a user a member of a team");
  add_user
      ->add_option_function<std::string>(
          "USER", [member](const std::string& v) { member->set_user(v); }, "The user")
      ->required();
  add_user
      ->add_option_function<std::string>(
          "--team", [member](const std::string& v) { member->set_team(v); }, "The team")
      ->required();
  OnParsed(add_user, slot, [member](CommandContext& context) {
    return EditTeam<tessera::v1::AddTeamMemberRequest, tessera::v1::AddTeamMemberResponse>(
        context, *member, &TeamService::Stub::AddTeamMember);
  });

  auto leaving = std::make_shared<tessera::v1::RemoveTeamMemberRequest>();
  CLI::App* remove_user = admin->add_subcommand("remove-user", "Remove a user from a team");
  remove_user
      ->add_option_function<std::string>(
          "USER", [leaving](const std::string& v) { leaving->set_user(v); }, "The user")
      ->required();
  remove_user
      ->add_option_function<std::string>(
          "--team", [leaving](const std::string& v) { leaving->set_team(v); }, "The team")
      ->required();
  OnParsed(remove_user, slot, [leaving](CommandContext& context) {
    return EditTeam<tessera::v1::RemoveTeamMemberRequest, tessera::v1::RemoveTeamMemberResponse>(
        context, *leaving, &TeamService::Stub::RemoveTeamMember);
  });

  auto quota = std::make_shared<QuotaOptions>();
  CLI::App* set_quota = admin->add_subcommand(
      "set-quota", "Set (or --remove) a team's GPU quota in a cluster, for one GPU type or all");
  set_quota->add_option("--team", quota->team, "The team")->required();
  set_quota->add_option("--cluster", quota->cluster, "The cluster")->required();
  set_quota->add_option("--gpu-type", quota->gpu_type, "Only GPUs of this type (default: all)");
  set_quota->add_option("--gpus", quota->gpus, "At most this many GPUs without borrowing")
      ->check(CLI::Range(0, 1000000));
  set_quota->add_flag("--remove", quota->remove, "Remove the quota instead");
  OnParsed(set_quota, slot, [quota](CommandContext& context) { return SetQuota(context, *quota); });

  auto share = std::make_shared<tessera::v1::SetTeamShareRequest>();
  CLI::App* set_share = admin->add_subcommand("set-share", "Set a team's fair-share weight");
  set_share
      ->add_option_function<std::string>(
          "--team", [share](const std::string& v) { share->set_team(v); }, "The team")
      ->required();
  set_share
      ->add_option_function<double>(
          "SHARE", [share](double v) { share->set_share(v); }, "Its weight (above 0; default 1)")
      ->required();
  OnParsed(set_share, slot, [share](CommandContext& context) {
    return EditTeam<tessera::v1::SetTeamShareRequest, tessera::v1::SetTeamShareResponse>(
        context, *share, &TeamService::Stub::SetTeamShare);
  });
}

void AddGetTeamCommands(CLI::App* get, ActionSlot& slot) {
  CLI::App* teams = get->add_subcommand("teams", "List teams: members, quotas, shares");
  OnParsed(teams, slot, ListTeams);
  auto cluster = std::make_shared<std::string>();
  CLI::App* queue = get->add_subcommand(
      "queue", "The queue in placement order, with why each run waits (others' runs anonymised)");
  queue->add_option("--cluster", *cluster, "Only this cluster's queue");
  OnParsed(queue, slot, [cluster](CommandContext& context) { return GetQueue(context, *cluster); });
  auto usage = std::make_shared<UsageOptions>();
  CLI::App* get_usage = get->add_subcommand(
      "usage",
      "GPU-hours per day, cluster, team, user and outcome (failed and preempted attempts "
      "included; -o csv for a spreadsheet). A user sees their own.");
  get_usage->add_option("--team", usage->team, "Only this team's runs");
  get_usage->add_option("--user", usage->user, "Only this user's runs");
  get_usage->add_option("--since", usage->since,
                        "From this time (2026-11-01, RFC 3339, or an age: 7d; default 7d)");
  get_usage->add_option("--until", usage->until, "Up to this time (default: now)");
  OnParsed(get_usage, slot, [usage](CommandContext& context) { return GetUsage(context, *usage); });
}

}  // namespace tessera::cli
