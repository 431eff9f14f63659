#include "runspec/struct_yaml.h"

#include <string>

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

absl::Status YamlToStruct(const YAML::Node& node, const FieldPath& path,
                          google::protobuf::Struct* out, std::string_view skip_key) {
  TESSERA_RETURN_IF_ERROR(ExpectMapping(node, path));
  FillStruct(node, skip_key, out);
  return absl::OkStatus();
}

}  // namespace tessera::spec
