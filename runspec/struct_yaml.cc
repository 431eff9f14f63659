#include "runspec/struct_yaml.h"

#include <charconv>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runspec/yaml_fields.h"
#include "runspec/yaml_scalar.h"

namespace tessera::spec {
namespace {

void FillStruct(const YAML::Node& node, std::string_view skip_key, google::protobuf::Struct* out) {
  auto* fields = out->mutable_fields();
  for (const auto& pair : node) {
    const std::string& key = pair.first.Scalar();
    if (!skip_key.empty() && key == skip_key) continue;
    YamlToValue(pair.second, &(*fields)[key]);
  }
}

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\r':
        *out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);  // UTF-8 is kept as it is
        }
    }
  }
  out->push_back('"');
}

// Recursion is bounded: the document check limits nesting to kMaxNestingDepth.
void AppendJson(const YAML::Node& node, std::string* out) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      out->push_back('{');
      bool first = true;
      for (const auto& pair : node) {
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(pair.first.Scalar(), out);
        out->push_back(':');
        AppendJson(pair.second, out);
      }
      out->push_back('}');
      return;
    }
    case YAML::NodeType::Sequence: {
      out->push_back('[');
      bool first = true;
      for (const auto& item : node) {
        if (!first) out->push_back(',');
        first = false;
        AppendJson(item, out);
      }
      out->push_back(']');
      return;
    }
    case YAML::NodeType::Scalar: {
      const TypedScalar scalar = ResolveScalar(node);
      switch (scalar.kind) {
        case ScalarKind::kNull:
          *out += "null";
          return;
        case ScalarKind::kBool:
          *out += scalar.bool_value ? "true" : "false";
          return;
        case ScalarKind::kInt:
        case ScalarKind::kFloat:
          if (scalar.int_value) {
            absl::StrAppend(out, *scalar.int_value);
          } else if (std::isfinite(scalar.number)) {
            char buffer[64];
            const auto result = std::to_chars(buffer, buffer + sizeof(buffer), scalar.number);
            out->append(buffer, result.ptr);
          } else {
            AppendJsonString(scalar.text, out);
          }
          return;
        case ScalarKind::kString:
          AppendJsonString(scalar.text, out);
          return;
      }
      return;
    }
    default:
      *out += "null";
      return;
  }
}

}  // namespace

// Recursion is bounded: the document check limits nesting to kMaxNestingDepth.
void YamlToValue(const YAML::Node& node, google::protobuf::Value* value) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      FillStruct(node, {}, value->mutable_struct_value());
      return;
    case YAML::NodeType::Sequence: {
      google::protobuf::ListValue* list = value->mutable_list_value();
      for (const auto& item : node) YamlToValue(item, list->add_values());
      return;
    }
    case YAML::NodeType::Scalar: {
      const TypedScalar scalar = ResolveScalar(node);
      switch (scalar.kind) {
        case ScalarKind::kNull:
          value->set_null_value(google::protobuf::NULL_VALUE);
          return;
        case ScalarKind::kBool:
          value->set_bool_value(scalar.bool_value);
          return;
        case ScalarKind::kInt:
        case ScalarKind::kFloat:
          value->set_number_value(scalar.number);
          return;
        case ScalarKind::kString:
          value->set_string_value(std::string(scalar.text));
          return;
      }
      return;
    }
    default:
      value->set_null_value(google::protobuf::NULL_VALUE);
      return;
  }
}

std::string YamlToJson(const YAML::Node& node) {
  std::string out;
  AppendJson(node, &out);
  return out;
}

absl::Status YamlToStruct(const YAML::Node& node, const FieldPath& path,
                          google::protobuf::Struct* out, std::string_view skip_key) {
  TESSERA_RETURN_IF_ERROR(ExpectMapping(node, path));
  FillStruct(node, skip_key, out);
  return absl::OkStatus();
}

}  // namespace tessera::spec
