// mcli admin create-api-key|list-api-keys|revoke-api-key.

#include <memory>

#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/names.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera::cli {
namespace {

using tessera::v1::AdminService;

struct CreateKeyOptions {
  std::string user;
  std::string role = "user";
  std::string description;
  std::string node;
  std::string expires_in;
};

int CreateApiKey(CommandContext& context, const CreateKeyOptions& options) {
  tessera::v1::CreateApiKeyRequest request;
  request.set_idempotency_key(NewUuid());
  request.set_user(options.user);
  request.set_role(ParseEnum<tessera::v1::Role>("--role", options.role));
  request.set_description(options.description);
  request.set_node(options.node);
  if (!options.expires_in.empty()) {
    absl::Duration lifetime;
    if (!absl::ParseDuration(options.expires_in, &lifetime) || lifetime <= absl::ZeroDuration()) {
      ThrowUsage("--expires-in: expected a duration such as 90m, 24h or 720h, got \"" +
                 options.expires_in + "\"");
    }
    request.set_expires_in_seconds(absl::ToInt64Seconds(lifetime));
  }
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
  Table table({"ID", "USER", "ROLE", "NODE", "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION"});
  for (const auto& key : response.keys()) {
    table.AddRow({key.id(), key.user(), ShortName(key.role()), key.node(),
                  FormatTimestamp(key.created_at()),
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

}  // namespace

void AddAdminCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* admin = app.add_subcommand("admin", "Administration: API keys, fault injection");
  admin->require_subcommand(1);

  auto create = std::make_shared<CreateKeyOptions>();
  CLI::App* create_key = admin->add_subcommand("create-api-key", "Create an API key");
  create_key->add_option("--user", create->user, "The key's user")->required();
  create_key->add_option("--role", create->role, "user, operator, admin or node (default: user)");
  create_key->add_option("--node", create->node, "The node a node key acts as (--role node)");
  create_key->add_option("--expires-in", create->expires_in,
                         "The key stops working after this long (e.g. 24h; default: never)");
  create_key->add_option("--description", create->description, "What the key is for");
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

  AddInjectFaultCommand(admin, slot);
}

}  // namespace tessera::cli
