#pragma once
// YAML nodes to google.protobuf.Struct / Value, for parameters and integration fields.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/struct.pb.h"
#include "runspec/field_path.h"
#include "yaml-cpp/yaml.h"

namespace tessera::spec {

// Any checked node: null, booleans, numbers (as number_value), strings, sequences (list_value)
// and mappings (struct_value). Scalars are typed with the YAML 1.2 core schema.
void YamlToValue(const YAML::Node& node, google::protobuf::Value* value);

// A mapping's entries, except the key `skip_key` (when not empty), into `out`. An error when the
// node is not a mapping.
absl::Status YamlToStruct(const YAML::Node& node, const FieldPath& path,
                          google::protobuf::Struct* out, std::string_view skip_key = {});

// Any checked node as compact JSON, mapping keys in the order written; scalars typed as
// YamlToValue types them (numbers that JSON cannot hold, such as .inf, as strings of their text).
std::string YamlToJson(const YAML::Node& node);

}  // namespace tessera::spec
