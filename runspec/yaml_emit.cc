#include "runspec/yaml_emit.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "runspec/absl_view.h"
#include "runspec/yaml_scalar.h"

namespace tessera::spec {
namespace {

// Longer keys that need quoting are written as explicit keys ("? key"): an implicit key may not
// exceed 1024 characters once escaped.
constexpr std::size_t kMaxImplicitQuotedKey = 64;

// Text that a plain scalar can hold without being read as anything but this string. Also avoids
// the YAML 1.1 booleans (yes, no, on, off, y, n) so that other YAML readers agree.
bool IsPlainSafe(std::string_view text) {
  if (text.empty() || text.size() > 256) return false;
  const auto first = static_cast<unsigned char>(text[0]);
  if (!absl::ascii_isalpha(first) && first != '_' && first != '/') return false;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (!absl::ascii_isalnum(u) && c != '_' && c != '.' && c != '/' && c != '-') return false;
  }
  const std::string lower = absl::AsciiStrToLower(AbslView(text));
  for (std::string_view word : {"y", "n", "yes", "no", "on", "off"}) {
    if (lower == word) return false;
  }
  return ResolvePlain(text).kind == ScalarKind::kString;
}

// Multi-line ASCII text that a literal block scalar with the default (clip) chomping reproduces
// exactly: it ends with a single newline, has no other control characters, and no line starts or
// ends with a space (so indentation detection and trailing whitespace cannot change it).
bool IsLiteralSafe(std::string_view text) {
  if (text.size() < 2 || text.back() != '\n' || text[text.size() - 2] == '\n') return false;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      if (i > line_start && (text[line_start] == ' ' || text[i - 1] == ' ')) return false;
      line_start = i + 1;
      continue;
    }
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

void EmitString(YAML::Emitter& out, std::string_view text) {
  const std::string value(text);
  if (IsPlainSafe(text)) {
    out << value;
  } else if (IsLiteralSafe(text)) {
    out << YAML::Literal << value;
  } else {
    out << YAML::DoubleQuoted << value;
  }
}

void EmitKey(YAML::Emitter& out, std::string_view key) {
  const std::string value(key);
  out << YAML::Key;
  if (IsPlainSafe(key)) {
    out << value;
  } else if (key.size() > kMaxImplicitQuotedKey) {
    out << YAML::LongKey << YAML::DoubleQuoted << value;
  } else {
    out << YAML::DoubleQuoted << value;
  }
}

void EmitNumber(YAML::Emitter& out, double value) {
  if (!std::isfinite(value)) {
    out << (std::isnan(value) ? ".nan" : value > 0 ? ".inf" : "-.inf");
    return;
  }
  char buffer[64];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out << std::string(buffer, result.ptr);
}

void EmitValue(YAML::Emitter& out, const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kBoolValue:
      out << (value.bool_value() ? "true" : "false");
      return;
    case google::protobuf::Value::kNumberValue:
      EmitNumber(out, value.number_value());
      return;
    case google::protobuf::Value::kStringValue:
      EmitString(out, value.string_value());
      return;
    case google::protobuf::Value::kStructValue:
      out << YAML::BeginMap;
      EmitStructEntries(out, value.struct_value());
      out << YAML::EndMap;
      return;
    case google::protobuf::Value::kListValue:
      out << YAML::BeginSeq;
      for (const google::protobuf::Value& item : value.list_value().values()) {
        EmitValue(out, item);
      }
      out << YAML::EndSeq;
      return;
    default:
      out << YAML::Null;
      return;
  }
}

void EmitStructEntries(YAML::Emitter& out, const google::protobuf::Struct& fields,
                       std::string_view skip_key) {
  std::vector<const std::string*> keys;
  keys.reserve(fields.fields_size());
  for (const auto& [key, unused] : fields.fields()) {
    if (skip_key.empty() || key != skip_key) keys.push_back(&key);
  }
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  for (const std::string* key : keys) {
    EmitKey(out, *key);
    out << YAML::Value;
    EmitValue(out, fields.fields().at(*key));
  }
}

}  // namespace tessera::spec
