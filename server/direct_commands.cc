#include "server/direct_commands.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "services/admin/admin_handler.h"
#include "services/common/auth/rpc_roles.h"

namespace tessera::server {
namespace {

absl::StatusOr<v1::Role> ParseRole(const std::string& role) {
  for (v1::Role r :
       {v1::ROLE_USER, v1::ROLE_OPERATOR, v1::ROLE_ADMIN, v1::ROLE_NODE, v1::ROLE_SYSTEM}) {
    if (role == auth::RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--role: unknown role \"", role, "\" (user, operator, admin, node or system)"));
}

// What the node may say of itself (v1::NodeTerms), on a node key or a join token.
void AddTermsFlags(CLI::App* command, v1::NodeTerms& terms) {
  command->add_option_function<std::string>(
      "--cluster", [&terms](const std::string& v) { terms.set_cluster(v); },
      "the cluster the node must register in (default: the node's own word)");
  command->add_option_function<std::string>(
      "--gpu-type", [&terms](const std::string& v) { terms.set_gpu_type(v); },
      "the GPU type the node must report");
  command->add_option_function<int>(
      "--max-gpus", [&terms](int v) { terms.set_max_gpus(v); },
      "the most GPUs the node may report");
}

int PrintSecret(const absl::StatusOr<std::string>& secret) {
  if (!secret.ok()) {
    std::cerr << "Error: " << secret.status().message() << "\n";
    return absl::IsInvalidArgument(secret.status()) ? 2 : 1;
  }
  std::cout << *secret << "\n";
  return 0;
}

}  // namespace

void AddDirectCommands(CLI::App& app, DirectCommands& d) {
  d.create_key = app.add_subcommand(
      "create-api-key", "create an API key directly in the database and print its secret");
  d.create_key
      ->add_option_function<std::string>(
          "--user", [&d](const std::string& v) { d.key.set_user(v); }, "the key's user")
      ->required();
  d.create_key->add_option("--role", d.key_role, "user, operator, admin, node or system")
      ->capture_default_str();
  d.create_key->add_option_function<std::string>(
      "--node", [&d](const std::string& v) { d.key.set_node(v); },
      "the node a node key acts as (--role node)");
  d.create_key->add_option_function<int64_t>(
      "--expires-in-seconds", [&d](int64_t v) { d.key.set_expires_in_seconds(v); },
      "the key stops working this long after it is made (0: never)");
  d.create_key->add_option_function<std::string>(
      "--description", [&d](const std::string& v) { d.key.set_description(v); },
      "what the key is for");
  AddTermsFlags(d.create_key, *d.key.mutable_node_terms());

  d.token.set_expires_in_seconds(3600);
  d.create_token = app.add_subcommand(
      "create-join-token",
      "create a join token for a new node directly in the database and print its secret");
  d.create_token
      ->add_option_function<std::string>(
          "--node", [&d](const std::string& v) { d.token.set_node(v); },
          "the node that may join with it")
      ->required();
  d.create_token
      ->add_option_function<int64_t>(
          "--expires-in-seconds", [&d](int64_t v) { d.token.set_expires_in_seconds(v); },
          "how long it may be used")
      ->default_str("3600");
  d.create_token->add_option_function<std::string>(
      "--description", [&d](const std::string& v) { d.token.set_description(v); },
      "what the token is for");
  AddTermsFlags(d.create_token, *d.token.mutable_terms());
}

int RunDirectCommand(const DirectCommands& d, const store::Stores& stores, const Clock& clock) {
  if (d.create_key->parsed()) {
    auto role = ParseRole(d.key_role);
    if (!role.ok()) return PrintSecret(role.status());
    v1::CreateApiKeyRequest request = d.key;
    request.set_role(*role);
    return PrintSecret(admin::CreateApiKeyDirect(*stores.api_keys, clock, request));
  }
  return PrintSecret(
      admin::CreateJoinTokenDirect(*stores.join_tokens, clock, d.token, "tessera-server"));
}

}  // namespace tessera::server
