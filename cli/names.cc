#include "cli/names.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <cctype>

#include "cli/errors.h"

namespace tessera::cli {
namespace {

std::string Upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// "RunStatus" -> "RUN_STATUS_": the prefix every value of the enum carries.
std::string ValuePrefix(const google::protobuf::EnumDescriptor* type) {
  std::string prefix;
  for (char c : type->name()) {
    if (std::isupper(static_cast<unsigned char>(c)) && !prefix.empty()) prefix += '_';
    prefix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return prefix + "_";
}

std::string StripPrefix(const std::string& name, const std::string& prefix) {
  return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name;
}

}  // namespace

std::string EnumShortName(const google::protobuf::EnumDescriptor* type, int value) {
  if (value == 0) return "-";
  const google::protobuf::EnumValueDescriptor* descriptor = type->FindValueByNumber(value);
  if (descriptor == nullptr) return std::to_string(value);
  return StripPrefix(descriptor->name(), ValuePrefix(type));
}

int ParseEnumName(const google::protobuf::EnumDescriptor* type, const std::string& flag,
                  const std::string& text) {
  const std::string prefix = ValuePrefix(type);
  std::string wanted = Upper(text);
  std::replace(wanted.begin(), wanted.end(), '-', '_');
  std::string accepted;
  for (int i = 0; i < type->value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = type->value(i);
    if (value->number() == 0) continue;
    const std::string short_name = StripPrefix(value->name(), prefix);
    if (wanted == short_name || wanted == value->name()) return value->number();
    if (!accepted.empty()) accepted += ", ";
    accepted += Lower(short_name);
  }
  ThrowUsage(flag + ": unknown value \"" + text + "\" (use one of: " + accepted + ")");
}

tessera::v1::Priority ParsePriority(const std::string& flag, const std::string& text) {
  if (Lower(text) == "auto") return tessera::v1::PRIORITY_MEDIUM;
  return ParseEnum<tessera::v1::Priority>(flag, text);
}

}  // namespace tessera::cli
