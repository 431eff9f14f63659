#include "cli/output.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ostream>

#include "cli/errors.h"

namespace tessera::cli {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Whether a plain YAML scalar with this text would be read as something other than a string.
bool NeedsQuotes(const std::string& text) {
  if (text.empty()) return true;
  static const char* const kSpecial[] = {"true", "false", "yes", "no",   "on",    "off",   "y",
                                         "n",    "null",  "~",   ".inf", "-.inf", "+.inf", ".nan"};
  const std::string lower = Lower(text);
  for (const char* special : kSpecial) {
    if (lower == special) return true;
  }
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0') return true;
  // Leading or trailing blanks would be lost, and a few characters start YAML syntax.
  if (std::isspace(static_cast<unsigned char>(text.front())) ||
      std::isspace(static_cast<unsigned char>(text.back()))) {
    return true;
  }
  return false;
}

void Emit(YAML::Emitter& emitter, const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      emitter << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        emitter << YAML::Key << key << YAML::Value;
        Emit(emitter, item);
      }
      emitter << YAML::EndMap;
      break;
    case Json::value_t::array:
      emitter << YAML::BeginSeq;
      for (const auto& item : value) Emit(emitter, item);
      emitter << YAML::EndSeq;
      break;
    case Json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      // A literal block reads back with one final newline ("|" keeps it), so only text that
      // ends with exactly one newline can be written as one.
      const size_t newline = text.find('\n');
      if (newline != std::string::npos && newline + 1 < text.size() && text.back() == '\n' &&
          text[text.size() - 2] != '\n') {
        emitter << YAML::Literal << text;
      } else if (newline != std::string::npos) {
        emitter << YAML::DoubleQuoted << text;
      } else if (NeedsQuotes(text)) {
        emitter << YAML::DoubleQuoted << text;
      } else {
        emitter << text;
      }
      break;
    }
    case Json::value_t::boolean:
      emitter << (value.get<bool>() ? "true" : "false");
      break;
    case Json::value_t::null:
    case Json::value_t::discarded:
      emitter << YAML::Null;
      break;
    default:  // numbers: JSON's text is valid YAML
      emitter << value.dump();
      break;
  }
}

}  // namespace

OutputFormat ParseOutputFormat(const std::string& text) {
  const std::string lower = Lower(text);
  if (lower == "table") return OutputFormat::kTable;
  if (lower == "json") return OutputFormat::kJson;
  if (lower == "yaml") return OutputFormat::kYaml;
  if (lower == "csv") return OutputFormat::kCsv;
  ThrowUsage("unknown output format \"" + text + "\" (use table, json, yaml or csv)");
}

Json MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  const auto status = google::protobuf::util::MessageToJsonString(message, &text, options);
  if (!status.ok()) {
    ThrowFailure("cannot convert the server's reply to JSON: " + status.ToString());
  }
  return Json::parse(text);
}

std::string JsonToYaml(const Json& document) {
  YAML::Emitter emitter;
  Emit(emitter, document);
  return emitter.c_str();
}

void PrintDocument(std::ostream& out, OutputFormat format, const Json& document) {
  if (format == OutputFormat::kYaml) {
    out << JsonToYaml(document) << "\n";
  } else {
    out << document.dump(2) << "\n";
  }
}

void PrintStreamedDocument(std::ostream& out, OutputFormat format, const Json& document) {
  if (format == OutputFormat::kYaml) {
    out << "---\n" << JsonToYaml(document) << "\n";
  } else {
    out << document.dump() << "\n";
  }
  out.flush();
}

}  // namespace tessera::cli
