// mcli create secret env|mounted|docker-registry|git-ssh|ssh, mcli get secrets,
// mcli delete secret: a user's secrets, kept encrypted by the cluster and given to their runs.
// Values go to the server once and are never shown again.

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "cli/commands.h"
#include "cli/names.h"
#include "cli/secret_input.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "tessera/v1/secrets.grpc.pb.h"

namespace tessera::cli {
namespace {

namespace v1 = tessera::v1;

struct CreateSecretOptions {
  v1::SecretType type = v1::SECRET_TYPE_UNSPECIFIED;
  std::string name;
  std::string argument;  // KEY=VALUE (env) or a local file (mounted, git-ssh, ssh)
  std::string mount_path;
  std::string username, password, server, email;
  std::string password_file;  // a file, or "-" (--password-stdin)
  std::string value_file;     // env: the value from a file, or "-"
};

std::string ReadLocalFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowUsage("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// mcli's names are lower-case letters, digits and '-'.
std::string SecretNameFrom(std::string text) {
  text = absl::AsciiStrToLower(text);
  for (char& c : text) {
    if (!absl::ascii_isalnum(c)) c = '-';
  }
  while (!text.empty() && text.front() == '-') text.erase(text.begin());
  return text.substr(0, 63);
}

int CreateSecret(CommandContext& context, const CreateSecretOptions& o) {
  v1::CreateSecretRequest request;
  v1::Secret* s = request.mutable_secret();
  s->set_type(o.type);
  std::string name = o.name;
  switch (o.type) {
    case v1::SECRET_TYPE_ENVIRONMENT: {
      // KEY=VALUE (mcli's), KEY=- (standard input), KEY --from-file FILE, or KEY alone (the
      // value of $KEY here): only the first puts the value on the command line.
      const auto eq = o.argument.find('=');
      const std::string key = o.argument.substr(0, eq);
      if (key.empty()) ThrowUsage("expected KEY=VALUE, KEY=- or KEY, got " + o.argument);
      s->set_env_key(key);
      const std::string what = "value of " + key;
      if (!o.value_file.empty()) {
        if (eq != std::string::npos) ThrowUsage("--from-file and KEY=VALUE: give one of them");
        request.set_value(ReadSecretFrom(o.value_file, what));
      } else if (eq == std::string::npos) {
        request.set_value(SecretFromEnvironment(key, what));
      } else if (o.argument.substr(eq + 1) == "-") {
        request.set_value(ReadSecretFrom("-", what));
      } else {
        request.set_value(o.argument.substr(eq + 1));
      }
      if (name.empty()) name = SecretNameFrom(s->env_key());
      break;
    }
    case v1::SECRET_TYPE_MOUNTED:
    case v1::SECRET_TYPE_GIT_SSH:
    case v1::SECRET_TYPE_SSH: {
      request.set_value(ReadLocalFile(o.argument));
      std::string mount = o.mount_path;
      if (mount.empty()) {
        if (o.type == v1::SECRET_TYPE_MOUNTED) ThrowUsage("--mount-path is required");
        mount = o.type == v1::SECRET_TYPE_GIT_SSH ? "/secrets/git-ssh/id" : "/secrets/ssh/id";
      }
      s->set_mount_path(mount);
      if (name.empty()) {
        name = o.type == v1::SECRET_TYPE_MOUNTED
                   ? SecretNameFrom(std::filesystem::path(o.argument).filename().string())
                   : (o.type == v1::SECRET_TYPE_GIT_SSH ? "git-ssh" : "ssh");
      }
      break;
    }
    case v1::SECRET_TYPE_DOCKER_REGISTRY:
      s->set_server(o.server);
      s->set_username(o.username);
      if (o.password.empty() == o.password_file.empty()) {
        ThrowUsage(
            "give the password once: --password-stdin, --password-file FILE or --password "
            "(which others on this machine can see)");
      }
      request.set_value(o.password.empty() ? ReadSecretFrom(o.password_file, "password")
                                           : o.password);
      if (name.empty()) name = SecretNameFrom("docker-" + o.server);
      break;
    default:
      ThrowUsage("unknown secret type");
  }
  s->set_name(name);
  Connection& connection = context.connection();
  auto stub = v1::SecretService::NewStub(connection.channel());
  v1::CreateSecretResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->CreateSecret(c, request, &response); });
  if (!PrintIfStructured(context, MessageToJson(response.secret()))) {
    context.out() << "Secret " << response.secret().name() << " created\n";
  }
  return kExitOk;
}

std::string TypeName(v1::SecretType type) {
  std::string name =
      absl::AsciiStrToLower(absl::StripPrefix(v1::SecretType_Name(type), "SECRET_TYPE_"));
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

std::string WhereItGoes(const v1::Secret& s) {
  switch (s.type()) {
    case v1::SECRET_TYPE_ENVIRONMENT:
      return "$" + s.env_key();
    case v1::SECRET_TYPE_DOCKER_REGISTRY:
      return s.username() + "@" + s.server();
    default:
      return s.mount_path();
  }
}

int GetSecrets(CommandContext& context) {
  Connection& connection = context.connection();
  auto stub = v1::SecretService::NewStub(connection.channel());
  v1::ListSecretsResponse response;
  connection.Unary([&](grpc::ClientContext* c) {
    return stub->ListSecrets(c, v1::ListSecretsRequest(), &response);
  });
  if (PrintIfStructured(context, MessagesToJson(response.secrets()))) return kExitOk;
  Table table({"NAME", "TYPE", "USED AS", "CREATED"});
  for (const auto& s : response.secrets()) {
    table.AddRow({s.name(), TypeName(s.type()), WhereItGoes(s), FormatTimestamp(s.created_at())});
  }
  table.Print(context.out());
  return kExitOk;
}

int DeleteSecrets(CommandContext& context, const std::vector<std::string>& names) {
  Connection& connection = context.connection();
  auto stub = v1::SecretService::NewStub(connection.channel());
  for (const auto& name : names) {
    v1::DeleteSecretRequest request;
    request.set_name(name);
    v1::DeleteSecretResponse response;
    connection.Unary(
        [&](grpc::ClientContext* c) { return stub->DeleteSecret(c, request, &response); });
    if (context.format() == OutputFormat::kTable)
      context.out() << "Secret " << name << " deleted\n";
  }
  return kExitOk;
}

void AddCreateSecret(CLI::App* secret, ActionSlot& slot, const std::string& type_name,
                     v1::SecretType type, const std::string& description) {
  auto o = std::make_shared<CreateSecretOptions>();
  o->type = type;
  CLI::App* command = secret->add_subcommand(type_name, description);
  command->add_option("--name", o->name, "The secret's name (default: from what it holds)");
  switch (type) {
    case v1::SECRET_TYPE_ENVIRONMENT:
      command
          ->add_option("KEY=VALUE", o->argument,
                       "The variable and its value; KEY=- reads the value from standard input, "
                       "KEY alone takes it from $KEY here")
          ->required();
      command->add_option("--from-file", o->value_file, "Read the value from this file");
      break;
    case v1::SECRET_TYPE_DOCKER_REGISTRY:
      command->add_option("--username", o->username, "The registry user")->required();
      command->add_option("--password", o->password,
                          "The password or access token (visible to others on this machine: "
                          "prefer --password-stdin or --password-file)");
      command->add_flag_callback(
          "--password-stdin", [o] { o->password_file = "-"; },
          "Read the password from standard input");
      command->add_option("--password-file", o->password_file, "Read the password from this file");
      command->add_option("--server", o->server, "The registry's host[:port]")->required();
      command->add_option("--email", o->email, "Accepted for compatibility");
      break;
    default:
      command->add_option("FILE", o->argument, "The local file that holds it")->required();
      command->add_option("--mount-path", o->mount_path, "Where ranks find the file");
  }
  OnParsed(command, slot, [o](CommandContext& context) { return CreateSecret(context, *o); });
}

}  // namespace

void AddSecretCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* create = app.add_subcommand("create", "Create secrets");
  create->require_subcommand(1);
  CLI::App* secret = create->add_subcommand("secret", "Create a secret your runs get");
  secret->require_subcommand(1);
  AddCreateSecret(secret, slot, "env", v1::SECRET_TYPE_ENVIRONMENT,
                  "An environment variable of every rank");
  AddCreateSecret(secret, slot, "mounted", v1::SECRET_TYPE_MOUNTED,
                  "A file in every rank's sandbox (mode 0400)");
  AddCreateSecret(secret, slot, "docker-registry", v1::SECRET_TYPE_DOCKER_REGISTRY,
                  "Credentials to pull your runs' images");
  AddCreateSecret(secret, slot, "git-ssh", v1::SECRET_TYPE_GIT_SSH,
                  "An SSH key git_repo integrations clone with");
  AddCreateSecret(secret, slot, "ssh", v1::SECRET_TYPE_SSH, "An SSH key for your ranks");

  CLI::App* get = app.get_subcommand("get");
  CLI::App* get_secrets = get->add_subcommand("secrets", "List your secrets (never their values)");
  OnParsed(get_secrets, slot, [](CommandContext& context) { return GetSecrets(context); });

  auto names = std::make_shared<std::vector<std::string>>();
  CLI::App* remove = app.get_subcommand("delete");
  CLI::App* delete_secret = remove->add_subcommand("secret", "Delete secrets");
  delete_secret->add_option("NAME", *names, "Secret names")->required();
  OnParsed(delete_secret, slot,
           [names](CommandContext& context) { return DeleteSecrets(context, *names); });
}

}  // namespace tessera::cli
