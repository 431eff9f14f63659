#include "runspec/run_spec_sections.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runspec/struct_yaml.h"
#include "runspec/yaml_document.h"
#include "runspec/yaml_fields.h"

namespace tessera::spec {
namespace {

constexpr std::string_view kEnvShape =
    "a mapping {NAME: value} or a sequence of {key: NAME, value: value} entries";

constexpr std::string_view kScalarValue = "a string, number or boolean";

struct KeyValue {
  YAML::Node key;
  YAML::Node value;
};

// The entry `name` of a checked mapping, if it is there.
std::optional<KeyValue> Lookup(const YAML::Node& map, std::string_view name) {
  for (const auto& pair : map) {
    if (pair.first.Scalar() == name) return KeyValue{pair.first, pair.second};
  }
  return std::nullopt;
}

// A scalar entry value, kept as written.
absl::StatusOr<std::string> ReadEntryValue(const YAML::Node& key, const YAML::Node& value,
                                           const FieldPath& path) {
  if (value.IsNull()) return NullValue(key, path, kScalarValue);
  return ReadScalarText(value, path);
}

absl::Status MissingField(const YAML::Node& at, const FieldPath& path) {
  return SpecError(at.Mark(), path, "required field is missing");
}

absl::Status ReadEnvEntry(const YAML::Node& item, const FieldPath& path, tessera::v1::EnvVar* var) {
  const FieldReader fields[] = {
      {"key",
       [&](const YAML::Node& value, const FieldPath& field) -> absl::Status {
         TESSERA_ASSIGN_OR_RETURN(*var->mutable_key(), ReadScalarText(value, field));
         return absl::OkStatus();
       }},
      {"value",
       [&](const YAML::Node& value, const FieldPath& field) -> absl::Status {
         TESSERA_ASSIGN_OR_RETURN(*var->mutable_value(), ReadScalarText(value, field));
         return absl::OkStatus();
       }},
  };
  TESSERA_RETURN_IF_ERROR(ReadMapping(item, path, fields));
  for (std::string_view name : {"key", "value"}) {
    const std::optional<KeyValue> entry = Lookup(item, name);
    if (!entry) return MissingField(item, path.Field(name));
    if (entry->value.IsNull()) return NullValue(entry->key, path.Field(name), kScalarValue);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadEnvVariables(const YAML::Node& node, const FieldPath& path,
                              tessera::v1::RunSpec* spec) {
  if (node.IsMap()) {
    int index = 0;
    for (const auto& pair : node) {
      const FieldPath entry = path.Index(index++);
      tessera::v1::EnvVar* var = spec->add_env_variables();
      var->set_key(pair.first.Scalar());
      TESSERA_ASSIGN_OR_RETURN(*var->mutable_value(),
                               ReadEntryValue(pair.first, pair.second, entry.Field("value")));
    }
    return absl::OkStatus();
  }
  if (!node.IsSequence()) return WrongValue(node, path, kEnvShape);
  int index = 0;
  for (const auto& item : node) {
    const FieldPath entry = path.Index(index++);
    if (!item.IsMap()) return WrongValue(item, entry, "a mapping {key: NAME, value: value}");
    TESSERA_RETURN_IF_ERROR(ReadEnvEntry(item, entry, spec->add_env_variables()));
  }
  return absl::OkStatus();
}

absl::Status ReadMetadata(const YAML::Node& node, const FieldPath& path,
                          tessera::v1::RunSpec* spec) {
  TESSERA_RETURN_IF_ERROR(ExpectMapping(node, path));
  auto* metadata = spec->mutable_metadata();
  for (const auto& pair : node) {
    const std::string& key = pair.first.Scalar();
    TESSERA_ASSIGN_OR_RETURN((*metadata)[key],
                             ReadEntryValue(pair.first, pair.second, path.Field(key)));
  }
  return absl::OkStatus();
}

absl::Status ReadIntegrations(const YAML::Node& node, const FieldPath& path,
                              tessera::v1::RunSpec* spec) {
  TESSERA_RETURN_IF_ERROR(ExpectSequence(node, path));
  constexpr std::string_view kType = "integration_type";
  int index = 0;
  for (const auto& item : node) {
    const FieldPath entry = path.Index(index++);
    TESSERA_RETURN_IF_ERROR(ExpectMapping(item, entry));
    tessera::v1::Integration* integration = spec->add_integrations();
    const std::optional<KeyValue> type = Lookup(item, kType);
    if (!type) return MissingField(item, entry.Field(kType));
    if (type->value.IsNull()) return NullValue(type->key, entry.Field(kType), "a string");
    TESSERA_ASSIGN_OR_RETURN(*integration->mutable_integration_type(),
                             ReadString(type->value, entry.Field(kType)));
    // Only integrations with other fields get a fields Struct, so that one without any round
    // trips through YAML unchanged.
    if (item.size() > 1) {
      TESSERA_RETURN_IF_ERROR(YamlToStruct(item, entry, integration->mutable_fields(), kType));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::spec
