#pragma once
// Machine-readable output: `-o json` is protobuf's JSON mapping with the proto field names and
// every field present (so scripts see a stable shape); `-o yaml` is the same document as YAML.
// Human output (`-o table`, the default) is up to each command (see table.h).

#include <google/protobuf/message.h>

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::cli {

// kCsv only for tables of numbers (mcli get metrics); mcli refuses it for other commands.
enum class OutputFormat { kTable, kJson, kYaml, kCsv };

// "table", "json", "yaml" or "csv"; throws CliError (exit 2) for anything else.
OutputFormat ParseOutputFormat(const std::string& text);

using Json = nlohmann::ordered_json;

// The message as protobuf JSON (proto field names, defaults included), in field order.
Json MessageToJson(const google::protobuf::Message& message);

template <typename Messages>
Json MessagesToJson(const Messages& messages) {
  Json array = Json::array();
  for (const auto& message : messages) array.push_back(MessageToJson(message));
  return array;
}

// The JSON document as YAML: strings that would read back as another type are quoted.
std::string JsonToYaml(const Json& document);

// Writes `document` in `format` (json or yaml), followed by a newline.
void PrintDocument(std::ostream& out, OutputFormat format, const Json& document);

// For streams (follow): one compact JSON document per line, or YAML documents after `---`.
void PrintStreamedDocument(std::ostream& out, OutputFormat format, const Json& document);

}  // namespace tessera::cli
