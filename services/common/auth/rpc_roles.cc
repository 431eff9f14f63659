#include "services/common/auth/rpc_roles.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace tessera::auth {
namespace {

using v1::ROLE_ADMIN;
using v1::ROLE_NODE;
using v1::ROLE_OPERATOR;
using v1::ROLE_SYSTEM;
using v1::ROLE_USER;

// People: their own runs (handlers narrow what a user sees to their own).
const std::vector<v1::Role> kPeople = {ROLE_USER, ROLE_OPERATOR, ROLE_ADMIN};
// People and the services that read the same (the scheduler lists runs, the log service
// describes them).
const std::vector<v1::Role> kPeopleAndServices = {ROLE_USER, ROLE_OPERATOR, ROLE_ADMIN,
                                                  ROLE_SYSTEM};
// Running the cluster's nodes: operators, admins, and the services that act for them (the
// health API cordons).
const std::vector<v1::Role> kOperators = {ROLE_OPERATOR, ROLE_ADMIN, ROLE_SYSTEM};
// Internal: Tessera's services only.
const std::vector<v1::Role> kServices = {ROLE_SYSTEM};

// Who is audited: every person, operators and admins, or those who read another user's run.
constexpr Audit kAuditPeople = Audit::kPeople;
constexpr Audit kAuditPrivileged = Audit::kPrivileged;
constexpr Audit kAuditReadsOfOthers = Audit::kReadsOfOthersRuns;

}  // namespace

const std::vector<RpcRule>& RpcRoleTable() {
  static const auto* table = new std::vector<RpcRule>{
      // API keys: admins make them; everyone lists and revokes their own.
      {"tessera.v1.AdminService/CreateApiKey", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.AdminService/ListApiKeys", kPeople},
      {"tessera.v1.AdminService/RevokeApiKey", kPeople, kAuditPeople},
      {"tessera.v1.AdminService/WhoAmI",
       {ROLE_USER, ROLE_OPERATOR, ROLE_ADMIN, ROLE_SYSTEM, ROLE_NODE}},
      // Join tokens (a new node's one-time credential) and the audit log: admins only.
      {"tessera.v1.AdminService/CreateJoinToken", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.AdminService/ListJoinTokens", {ROLE_ADMIN}},
      {"tessera.v1.AdminService/RevokeJoinToken", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.AdminService/ListAuditRecords", {ROLE_ADMIN}},
      // Teams: admins manage them; everyone reads them (the queue depends on them).
      {"tessera.v1.TeamService/CreateTeam", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.TeamService/DeleteTeam", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.TeamService/GetTeam", kPeopleAndServices},
      {"tessera.v1.TeamService/ListTeams", kPeopleAndServices},
      {"tessera.v1.TeamService/AddTeamMember", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.TeamService/RemoveTeamMember", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.TeamService/SetTeamQuota", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.TeamService/SetTeamShare", {ROLE_ADMIN}, kAuditPeople},
      {"tessera.v1.TeamService/GetUsage", kPeopleAndServices},
      // A worker joining: its join token is the credential (JoinHandler checks it), and what it
      // gets is a key and certificate of the token's node only.
      {"tessera.v1.NodeJoin/Join", {}, Audit::kNever, /*open=*/true},
      {"tessera.v1.NodeJoin/RenewNodeCertificate", {ROLE_NODE}, Audit::kAllButServices},
      // Runs.
      {"tessera.v1.RunService/SubmitRun", kPeople},
      {"tessera.v1.RunService/GetRun", kPeopleAndServices, kAuditReadsOfOthers},
      {"tessera.v1.RunService/ListRuns", kPeopleAndServices},
      {"tessera.v1.RunService/DescribeRun", kPeopleAndServices, kAuditReadsOfOthers},
      {"tessera.v1.RunService/StopRun", kPeople, kAuditPrivileged},
      {"tessera.v1.RunService/DeleteRun", kPeople, kAuditPrivileged},
      {"tessera.v1.RunService/UpdateRun", kPeople, kAuditPrivileged},
      {"tessera.v1.RunService/RestartRun", kPeople, kAuditPrivileged},
      {"tessera.v1.RunService/CloneRun", kPeople, kAuditReadsOfOthers},
      {"tessera.v1.RunService/WatchRuns", kPeopleAndServices},
      {"tessera.v1.RunMetricsService/GetRunMetrics", kPeopleAndServices, kAuditReadsOfOthers},
      {"tessera.v1.RunService/RecordAttempt", kServices},
      {"tessera.v1.RunService/ReportProgress", kServices},
      {"tessera.v1.RunService/ClearNodeAvoidance", kServices},
      // Secrets: each user their own; their values only to the scheduler starting a run.
      {"tessera.v1.SecretService/CreateSecret", kPeople, kAuditPeople},
      {"tessera.v1.SecretService/ListSecrets", kPeople},
      {"tessera.v1.SecretService/DeleteSecret", kPeople, kAuditPeople},
      {"tessera.v1.SecretService/GetRunSecrets", kServices},
      // Webhooks: each person their own (operators' node events checked by the handler).
      {"tessera.v1.NotificationService/CreateSubscription", kPeople, kAuditPeople},
      {"tessera.v1.NotificationService/ListSubscriptions", kPeople},
      {"tessera.v1.NotificationService/DeleteSubscription", kPeople, kAuditPeople},
      {"tessera.v1.NotificationService/ListNotifications", kPeople},
      // Logs: workers push (only their node's attempts: LogHandler checks), people read their
      // own, the run manager deletes a deleted run's.
      {"tessera.v1.LogService/PushLogs", {ROLE_NODE, ROLE_SYSTEM}},
      {"tessera.v1.LogService/GetLogs", kPeopleAndServices, kAuditReadsOfOthers},
      {"tessera.v1.LogService/StreamLogs", kPeopleAndServices, kAuditReadsOfOthers},
      {"tessera.v1.LogService/DeleteRunLogs", {ROLE_ADMIN, ROLE_SYSTEM}, kAuditPeople},
      // Nodes and the queue.
      {"tessera.v1.SchedulerService/ListNodes", kPeopleAndServices},
      {"tessera.v1.SchedulerService/GetNode", kPeopleAndServices},
      {"tessera.v1.SchedulerService/SetNodeLabels", kOperators, kAuditPeople},
      {"tessera.v1.SchedulerService/RemoveNode", kOperators, kAuditPeople},
      {"tessera.v1.SchedulerService/GetQueue", kPeopleAndServices},
      {"tessera.v1.SchedulerService/GetStatus", kPeopleAndServices},
      {"tessera.v1.SchedulerService/GetUtilization", kPeopleAndServices},
      {"tessera.v1.SchedulerService/CheckFit", kServices},
      {"tessera.v1.SchedulerService/DispatchToWorker", kServices},
      {"tessera.v1.SchedulerService/EvictNode", kServices},
      // A worker's control stream: only as its own node (WorkerControlService checks the name).
      {"tessera.v1.WorkerControl/Connect", {ROLE_NODE}},
      // mcli connect: a shell in a run's container (the hub lets in its owner and admins), every
      // session audited; the nodes' side only as their own node.
      {"tessera.v1.ShellService/Connect", kPeople, kAuditPeople},
      {"tessera.v1.ShellRelay/Listen", {ROLE_NODE}},
      {"tessera.v1.ShellRelay/Attach", {ROLE_NODE}},
      // Cordons.
      {"tessera.v1.CordonService/CordonNode", kOperators, kAuditPeople},
      {"tessera.v1.CordonService/UncordonNode", kOperators, kAuditPeople},
      {"tessera.v1.CordonService/DrainNode", kOperators, kAuditPeople},
      {"tessera.v1.CordonService/ListNodeEvents", kPeopleAndServices},
      {"tessera.v1.CordonService/WatchNodeEvents", kPeopleAndServices},
      // Health: sweeps and their evidence are the operators'; reports come through the scheduler.
      {"tessera.v1.HealthService/StartSweep", kOperators, kAuditPeople},
      {"tessera.v1.HealthService/GetSweep", kOperators},
      {"tessera.v1.HealthService/ListSweeps", kOperators},
      {"tessera.v1.HealthService/ListHealthResults", kOperators},
      {"tessera.v1.HealthService/ReportHealthResult", kServices},
      {"tessera.v1.HealthService/ReportGpuFault", kServices},
      {"tessera.v1.HealthService/ReportRankHang", kServices},
      {"tessera.v1.HealthService/InjectFault", kOperators, kAuditPeople},
  };
  return *table;
}

std::string RoleName(v1::Role role) {
  // ROLE_OPERATOR -> operator: the enum's own names, so a new role needs nothing here.
  return absl::AsciiStrToLower(absl::StripPrefix(v1::Role_Name(role), "ROLE_"));
}

const RpcRule* FindRpcRule(std::string_view method) {
  static const auto* index = [] {
    auto* m = new absl::flat_hash_map<std::string_view, const RpcRule*>;
    for (const auto& rule : RpcRoleTable()) (*m)[rule.method] = &rule;
    return m;
  }();
  auto it = index->find(method);
  return it == index->end() ? nullptr : it->second;
}

bool Audited(const RpcRule& rule, const Principal& who, bool read_others_run) {
  switch (rule.audit) {
    case Audit::kNever:
      return false;
    case Audit::kPeople:
      return who.is_person();
    case Audit::kPrivileged:
      return who.role == v1::ROLE_OPERATOR || who.role == v1::ROLE_ADMIN;
    case Audit::kAllButServices:
      return !who.is_system();
    case Audit::kReadsOfOthersRuns:
      return read_others_run && who.is_person();
  }
  return false;
}

absl::Status CheckRpcRole(std::string_view method, const Principal& who) {
  return CheckRpcRole(method, FindRpcRule(method), who);
}

absl::Status CheckRpcRole(std::string_view method, const RpcRule* rule, const Principal& who) {
  if (rule == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        std::string(method), " is not open to any role (it has no row in the role table)"));
  }
  if (rule->open) {
    return absl::PermissionDeniedError(absl::StrCat(
        std::string(method), " takes no API key: its request carries its own credential"));
  }
  const auto& roles = rule->roles;
  if (std::find(roles.begin(), roles.end(), who.role) != roles.end()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      std::string(method), " needs a key with the role ",
      absl::StrJoin(roles, " or ", [](std::string* out, v1::Role r) { out->append(RoleName(r)); }),
      "; ", who.user, "'s key is ", RoleName(who.role)));
}

}  // namespace tessera::auth
