// mcli set api-key|endpoint, mcli config, mcli whoami: the client's own settings and who the
// server takes us for.

#include <cctype>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/names.h"
#include "cli/secret_input.h"
#include "cli/table.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera::cli {
namespace {

// Writes one setting to the config file and says where it went, and what still overrides it.
int SetValue(CommandContext& context, const std::string& key, const std::string& value,
             const std::string& what, const Setting& current) {
  if (value.empty()) ThrowUsage(what + " must not be empty");
  const std::string& path = context.settings().config_path;
  SetConfigValue(path, key, value);
  context.out() << "Saved the " << what << " to " << path << "\n";
  if (current.source == "TESSERA_API_KEY" || current.source == "TESSERA_ENDPOINT" ||
      current.source == "TESSERA_CA") {
    context.err() << "Note: " << current.source << " is set and takes precedence over the file\n";
  }
  return kExitOk;
}

int ShowConfig(CommandContext& context) {
  const Settings& settings = context.settings();
  const std::string masked_key =
      settings.api_key.value.empty() ? "" : MaskSecret(settings.api_key.value);
  if (context.format() != OutputFormat::kTable) {
    Json document = Json::object();
    document["config_file"] = settings.config_path;
    document["config_file_exists"] = settings.config_exists;
    document["endpoint"] = {{"value", settings.endpoint.value},
                            {"source", settings.endpoint.source}};
    document["api_key"] = {{"value", masked_key}, {"source", settings.api_key.source}};
    document["ca"] = {{"value", settings.ca.value}, {"source", settings.ca.source}};
    PrintDocument(context.out(), context.format(), document);
    return kExitOk;
  }
  Fields fields;
  fields.Add("Config file",
             settings.config_path + (settings.config_exists ? "" : " (does not exist)"));
  fields.Add("Endpoint", settings.endpoint.value + "  (from " + settings.endpoint.source + ")");
  fields.Add("API key", settings.api_key.value.empty()
                            ? "not set (run `mcli set api-key KEY`)"
                            : masked_key + "  (from " + settings.api_key.source + ")");
  fields.Add("CA", settings.ca.value.empty()
                       ? "not set (plain text, loopback only; `mcli set ca FILE` for TLS)"
                       : settings.ca.value + "  (from " + settings.ca.source + ")");
  fields.Print(context.out());
  return kExitOk;
}

int WhoAmI(CommandContext& context) {
  Connection& connection = context.connection();
  auto stub = tessera::v1::AdminService::NewStub(connection.channel());
  tessera::v1::WhoAmIRequest request;
  tessera::v1::WhoAmIResponse response;
  connection.Unary([&](grpc::ClientContext* c) { return stub->WhoAmI(c, request, &response); });
  if (!PrintIfStructured(context, MessageToJson(response))) {
    std::string role = ShortName(response.role());
    for (char& c : role) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    context.out() << response.user() << " (" << role << ") at " << connection.endpoint() << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddConfigCommands(CLI::App& app, ActionSlot& slot) {
  CLI::App* set = app.add_subcommand("set", "Save a setting in the config file");
  set->require_subcommand(1);

  auto key = std::make_shared<std::string>();
  CLI::App* set_key = set->add_subcommand("api-key", "Save the API key (file mode 0600)");
  set_key->add_option("KEY", *key,
                      "The API key; - or nothing reads it from standard input (a key on the "
                      "command line is visible to others on this machine)");
  OnParsed(set_key, slot, [key](CommandContext& context) {
    const std::string value = key->empty() || *key == "-" ? ReadSecretFrom("-", "API key") : *key;
    CheckApiKey(value, key->empty() || *key == "-" ? "standard input" : "the command line");
    return SetValue(context, "api_key", value, "API key", context.settings().api_key);
  });

  auto endpoint = std::make_shared<std::string>();
  CLI::App* set_endpoint = set->add_subcommand("endpoint", "Save the server's host:port");
  set_endpoint->add_option("ENDPOINT", *endpoint, "host:port of the Tessera API")->required();
  OnParsed(set_endpoint, slot, [endpoint](CommandContext& context) {
    return SetValue(context, "endpoint", *endpoint, "endpoint", context.settings().endpoint);
  });

  auto ca = std::make_shared<std::string>();
  CLI::App* set_ca = set->add_subcommand("ca", "Save the cluster CA's PEM file (for TLS)");
  set_ca->add_option("FILE", *ca, "PEM certificates of the cluster CA")->required();
  OnParsed(set_ca, slot, [ca](CommandContext& context) {
    std::error_code ec;
    const std::string absolute = std::filesystem::absolute(*ca, ec).string();
    return SetValue(context, "ca", ec ? *ca : absolute, "CA", context.settings().ca);
  });

  CLI::App* config = app.add_subcommand("config", "Show the settings and where each came from");
  OnParsed(config, slot, ShowConfig);

  CLI::App* whoami = app.add_subcommand("whoami", "Show the user and role of the API key");
  OnParsed(whoami, slot, WhoAmI);
}

}  // namespace tessera::cli
