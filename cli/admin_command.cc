// mcli admin create-api-key|list-api-keys|revoke-api-key, create-join-token|list-join-tokens|
// revoke-join-token, remove-node, audit.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/names.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::AdminService;

// What a node may say of itself (v1::NodeTerms), on a join token or a node key.
struct NodeTermsOptions {
  std::string cluster;
  std::string gpu_type;
  int max_gpus = 0;
  std::vector<std::string> labels;  // KEY=VALUE

  bool empty() const {
    return cluster.empty() && gpu_type.empty() && max_gpus == 0 && labels.empty();
  }
  tessera::v1::NodeTerms ToProto() const {
    tessera::v1::NodeTerms terms;
    terms.set_cluster(cluster);
    terms.set_gpu_type(gpu_type);
    terms.set_max_gpus(max_gpus);
    for (const std::string& label : labels) {
      const size_t eq = label.find('=');
      if (eq == 0 || eq == std::string::npos) {
        ThrowUsage("--label: expected KEY=VALUE, got \"" + label + "\"");
      }
      (*terms.mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
    }
    return terms;
  }
  void AddTo(Fields& fields) const {
    if (!cluster.empty()) fields.Add("Cluster", cluster);
    if (!gpu_type.empty()) fields.Add("GPU type", gpu_type);
    if (max_gpus > 0) fields.Add("GPUs at most", std::to_string(max_gpus));
    for (const std::string& label : labels) fields.Add("Label", label);
  }
};

void AddNodeTermsFlags(CLI::App* command, NodeTermsOptions& terms) {
  command->add_option("--cluster", terms.cluster,
                      "The cluster the node must register in (default: the node's own word)");
  command->add_option("--gpu-type", terms.gpu_type, "The GPU type the node must report");
  command->add_option("--max-gpus", terms.max_gpus, "The most GPUs the node may report")
      ->check(CLI::Range(0, 64));
  command->add_option("--label", terms.labels,
                      "KEY=VALUE, set on the node whatever it says (repeatable)");
}

// A node key's or join token's terms in one cell: "cluster=a gpu_type=h100 max_gpus=8 k=v".
std::string TermsCell(const tessera::v1::NodeTerms& terms) {
  std::vector<std::string> parts;
  if (!terms.cluster().empty()) parts.push_back("cluster=" + terms.cluster());
  if (!terms.gpu_type().empty()) parts.push_back("gpu_type=" + terms.gpu_type());
  if (terms.max_gpus() > 0) parts.push_back("max_gpus=" + std::to_string(terms.max_gpus()));
  std::vector<std::pair<std::string, std::string>> labels(terms.labels().begin(),
                                                          terms.labels().end());
  std::sort(labels.begin(), labels.end());
  for (const auto& [k, v] : labels) parts.push_back(k + "=" + v);
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : " ") + part;
  return out;
}

struct CreateKeyOptions {
  std::string user;
  std::string role = "user";
  std::string description;
  std::string node;
  std::string expires_in;
  NodeTermsOptions terms;  // --role node only
};

// Seconds of a --expires-in duration ("90m", "24h"); 0 when it is empty.
int64_t LifetimeSeconds(const std::string& text) {
  if (text.empty()) return 0;
  absl::Duration lifetime;
  if (!absl::ParseDuration(text, &lifetime) || lifetime <= absl::ZeroDuration()) {
    ThrowUsage("--expires-in: expected a duration such as 90m, 24h or 720h, got \"" + text + "\"");
  }
  return absl::ToInt64Seconds(lifetime);
}

int CreateApiKey(CommandContext& context, const CreateKeyOptions& options) {
  tessera::v1::CreateApiKeyRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_user(options.user);
  request.set_role(ParseEnum<tessera::v1::Role>("--role", options.role));
  request.set_description(options.description);
  request.set_node(options.node);
  request.set_expires_in_seconds(LifetimeSeconds(options.expires_in));
  if (!options.terms.empty()) *request.mutable_node_terms() = options.terms.ToProto();
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::CreateApiKeyResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->CreateApiKey(c, request, &response); });
  if (PrintIfStructured(context, MessageToJson(response))) return kExitOk;
  Fields fields;
  fields.Add("ID", response.key().id());
  fields.Add("User", response.key().user());
  fields.Add("Role", ShortName(response.key().role()));
  if (!response.key().node().empty()) fields.Add("Node", response.key().node());
  options.terms.AddTo(fields);
  if (response.key().has_expires_at()) {
    fields.Add("Expires", FormatTimestamp(response.key().expires_at()));
  }
  fields.Add("Secret", response.secret());
  fields.Print(context.out());
  context.err() << "Keep the secret now: it is not shown again.\n";
  return kExitOk;
}

int ListApiKeys(CommandContext& context, const std::string& user) {
  tessera::v1::ListApiKeysRequest request;
  request.set_user(user);
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::ListApiKeysResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->ListApiKeys(c, request, &response); });
  if (PrintIfStructured(context, MessagesToJson(response.keys()))) return kExitOk;
  Table table(
      {"ID", "USER", "ROLE", "NODE", "TERMS", "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION"});
  for (const auto& key : response.keys()) {
    table.AddRow({key.id(), key.user(), ShortName(key.role()), key.node(),
                  TermsCell(key.node_terms()), FormatTimestamp(key.created_at()),
                  key.has_expires_at() ? FormatTimestamp(key.expires_at()) : "never",
                  key.revoked() ? "yes" : "no", key.description()});
  }
  table.Print(context.out());
  return kExitOk;
}

int RevokeApiKey(CommandContext& context, const std::string& id) {
  tessera::v1::RevokeApiKeyRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_id(id);
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::RevokeApiKeyResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->RevokeApiKey(c, request, &response); });
  context.out() << "Revoked API key " << id << "\n";
  return kExitOk;
}

struct CreateTokenOptions {
  std::string node;
  std::string expires_in;
  std::string description;
  NodeTermsOptions terms;
};

int CreateJoinToken(CommandContext& context, const CreateTokenOptions& options) {
  tessera::v1::CreateJoinTokenRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_node(options.node);
  request.set_description(options.description);
  request.set_expires_in_seconds(LifetimeSeconds(options.expires_in));
  *request.mutable_terms() = options.terms.ToProto();
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::CreateJoinTokenResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->CreateJoinToken(c, request, &response); });
  if (PrintIfStructured(context, MessageToJson(response))) return kExitOk;
  Fields fields;
  fields.Add("ID", response.token().id());
  fields.Add("Node", response.token().node());
  fields.Add("Expires", FormatTimestamp(response.token().expires_at()));
  options.terms.AddTo(fields);
  fields.Add("Secret", response.secret());
  fields.Print(context.out());
  context.err() << "Give the secret to the node's worker in a file only it reads "
                   "(--join-token-file, mode 600): it is not shown again, and joins once.\n";
  return kExitOk;
}

std::string TokenState(const tessera::v1::JoinToken& token) {
  if (token.revoked()) return "revoked";
  if (IsSet(token.used_at())) return "used " + FormatTimestamp(token.used_at());
  if (absl::Now() >= absl::FromUnixSeconds(token.expires_at().seconds())) return "expired";
  return "unused";
}

int ListJoinTokens(CommandContext& context) {
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::ListJoinTokensResponse response;
  connection.Unary([&](grpc::ClientContext* c) {
    return stub->ListJoinTokens(c, tessera::v1::ListJoinTokensRequest(), &response);
  });
  if (PrintIfStructured(context, MessagesToJson(response.tokens()))) return kExitOk;
  Table table({"ID", "NODE", "TERMS", "CREATED", "BY", "EXPIRES", "STATE", "KEY", "DESCRIPTION"});
  for (const auto& t : response.tokens()) {
    table.AddRow({t.id(), t.node(), TermsCell(t.terms()), FormatTimestamp(t.created_at()),
                  t.created_by(), FormatTimestamp(t.expires_at()), TokenState(t), t.key_id(),
                  t.description()});
  }
  table.Print(context.out());
  return kExitOk;
}

int RevokeJoinToken(CommandContext& context, const std::string& id) {
  tessera::v1::RevokeJoinTokenRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_id(id);
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::RevokeJoinTokenResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->RevokeJoinToken(c, request, &response); });
  context.out() << "Revoked join token " << id << "\n";
  return kExitOk;
}

// Forgets an offline node (its labels, states and first word with it): its worker's next
// registration makes it anew, as it then says it is.
int RemoveNode(CommandContext& context, const std::string& node) {
  tessera::v1::RemoveNodeRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_name(node);
  Connection& connection = context.connection();
  auto stub = tessera::v1::SchedulerService::NewStub(connection.channel());
  tessera::v1::RemoveNodeResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->RemoveNode(c, request, &response); });
  context.out() << "Removed node " << node << "\n";
  return kExitOk;
}

struct AuditOptions {
  std::string since;
  std::string actor;
  std::string action;
  std::string target;
  int limit = 100;
};

int ListAudit(CommandContext& context, const AuditOptions& options) {
  tessera::v1::ListAuditRecordsRequest request;
  if (!options.since.empty()) {
    const absl::Time since = ParseTimeArg("--since", options.since, absl::Now());
    request.mutable_since()->set_seconds(absl::ToUnixSeconds(since));
  }
  request.set_actor(options.actor);
  request.set_action(options.action);
  request.set_target(options.target);
  request.set_limit(options.limit);
  Connection& connection = context.connection();
  auto stub = AdminService::NewStub(connection.channel());
  tessera::v1::ListAuditRecordsResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->ListAuditRecords(c, request, &response); });
  if (PrintIfStructured(context, MessagesToJson(response.records()))) return kExitOk;
  Table table({"TIME", "ACTOR", "ROLE", "ACTION", "TARGET", "OUTCOME", "SOURCE"});
  for (const auto& r : response.records()) {
    table.AddRow({FormatTimestamp(r.time()), r.actor(), ShortName(r.role()), r.action(), r.target(),
                  r.outcome(), r.source()});
  }
  table.Print(context.out());
  return kExitOk;
}

}  // namespace

void AddAdminCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* admin = app.add_subcommand(
      "admin",
      "Administration: API keys, join tokens, teams and quotas, the audit log, fault injection");
  admin->require_subcommand(1);

  auto create = std::make_shared<CreateKeyOptions>();
  CLI::App* create_key = admin->add_subcommand("create-api-key", "Create an API key");
  create_key->add_option("--user", create->user, "The key's user")->required();
  create_key->add_option("--role", create->role, "user, operator, admin or node (default: user)");
  create_key->add_option("--node", create->node, "The node a node key acts as (--role node)");
  create_key->add_option("--expires-in", create->expires_in,
                         "The key stops working after this long (e.g. 24h; default: never)");
  create_key->add_option("--description", create->description, "What the key is for");
  AddNodeTermsFlags(create_key, create->terms);  // refused by the server but for --role node
  OnParsed(create_key, slot,
           [create](CommandContext& context) { return CreateApiKey(context, *create); });

  auto user = std::make_shared<std::string>();
  CLI::App* list_keys = admin->add_subcommand("list-api-keys", "List API keys");
  list_keys->add_option("--user", *user, "Only this user's keys");
  OnParsed(list_keys, slot,
           [user](CommandContext& context) { return ListApiKeys(context, *user); });

  auto id = std::make_shared<std::string>();
  CLI::App* revoke_key = admin->add_subcommand("revoke-api-key", "Revoke an API key");
  revoke_key->add_option("ID", *id, "The key's ID")->required();
  OnParsed(revoke_key, slot, [id](CommandContext& context) { return RevokeApiKey(context, *id); });

  auto token = std::make_shared<CreateTokenOptions>();
  CLI::App* create_token = admin->add_subcommand(
      "create-join-token", "Create a one-time token with which a new node's worker joins");
  create_token->add_option("--node", token->node, "The node that may join with it")->required();
  create_token->add_option("--expires-in", token->expires_in,
                           "It can be used for this long (e.g. 30m; default 1h, at most 168h)");
  create_token->add_option("--description", token->description, "What the token is for");
  AddNodeTermsFlags(create_token, token->terms);
  OnParsed(create_token, slot,
           [token](CommandContext& context) { return CreateJoinToken(context, *token); });

  CLI::App* list_tokens = admin->add_subcommand("list-join-tokens", "List join tokens");
  OnParsed(list_tokens, slot, ListJoinTokens);

  auto token_id = std::make_shared<std::string>();
  CLI::App* revoke_token = admin->add_subcommand("revoke-join-token", "Revoke a join token");
  revoke_token->add_option("ID", *token_id, "The token's ID")->required();
  OnParsed(revoke_token, slot,
           [token_id](CommandContext& context) { return RevokeJoinToken(context, *token_id); });

  auto removed = std::make_shared<std::string>();
  CLI::App* remove_node = admin->add_subcommand(
      "remove-node",
      "Forget an offline node; its worker's next registration makes it anew (to move it to "
      "another cluster or GPU type)");
  remove_node->add_option("NODE", *removed, "The node's name")->required();
  OnParsed(remove_node, slot,
           [removed](CommandContext& context) { return RemoveNode(context, *removed); });

  auto audit = std::make_shared<AuditOptions>();
  CLI::App* audit_cmd = admin->add_subcommand(
      "audit",
      "What admins and operators did (keys, tokens, cordons, sweeps, faults), newest first");
  audit_cmd->add_option("--since", audit->since,
                        "Only after this time (2024-05-01, RFC 3339, or an age: 24h, 7d)");
  audit_cmd->add_option("--actor", audit->actor, "Only this user's actions");
  audit_cmd->add_option("--action", audit->action, "Only this action (e.g. CordonNode)");
  audit_cmd->add_option("--target", audit->target, "Only actions whose target contains this");
  audit_cmd->add_option("--limit", audit->limit, "At most this many records")
      ->check(CLI::Range(1, 1000));
  OnParsed(audit_cmd, slot,
           [audit](CommandContext& context) { return ListAudit(context, *audit); });

  AddInjectFaultCommand(admin, slot);
  AddTeamCommands(admin, slot);
}

}  // namespace tessera::cli
