#include "runspec/run_spec_sections.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runspec/absl_view.h"
#include "runspec/struct_yaml.h"
#include "runspec/yaml_document.h"
#include "runspec/yaml_fields.h"
#include "runspec/yaml_scalar.h"

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

absl::Status ReadMetadata(const YAML::Node& node, const FieldPath& path, ReadContext* ctx,
                          tessera::v1::RunSpec* spec) {
  TESSERA_RETURN_IF_ERROR(ExpectMapping(node, path));
  auto* metadata = spec->mutable_metadata();
  for (const auto& pair : node) {
    const std::string& key = pair.first.Scalar();
    const FieldPath field = path.Field(key);
    if (pair.second.IsNull()) {
      ctx->Note(field, "null, left out (metadata values are text)");
      continue;
    }
    if (pair.second.IsScalar()) {
      TESSERA_ASSIGN_OR_RETURN((*metadata)[key], ReadScalarText(pair.second, field));
      continue;
    }
    ctx->Note(field, absl::StrCat(pair.second.IsSequence() ? "a sequence" : "a mapping",
                                  ", kept as its JSON text (metadata values are text)"));
    (*metadata)[key] = YamlToJson(pair.second);
  }
  return absl::OkStatus();
}

namespace {

constexpr std::string_view kType = "integration_type";

// The integration's type: integration_type, or one of its other spellings (`type`, mcli's API
// name; `integrationType` in JSON). Writing two of them is an error.
absl::StatusOr<std::string> ReadIntegrationType(const YAML::Node& item, const FieldPath& entry,
                                                ReadContext* ctx, std::string_view* type_key) {
  std::optional<KeyValue> found;
  for (std::string_view name :
       {kType, std::string_view("type"), std::string_view("integrationType")}) {
    if (name == "integrationType" && !ctx->json) continue;
    const std::optional<KeyValue> entry_kv = Lookup(item, name);
    if (!entry_kv) continue;
    if (found) {
      return SpecError(
          entry_kv->key.Mark(), entry.Field(name),
          absl::StrCat("is given twice (also as ", entry.Field(found->key.Scalar()).ToString(),
                       "); give one of them"));
    }
    found = entry_kv;
    *type_key = name;
  }
  if (!found) return MissingField(item, entry.Field(kType));
  const FieldPath field = entry.Field(*type_key);
  if (found->value.IsNull()) return NullValue(found->key, field, "a string");
  TESSERA_ASSIGN_OR_RETURN(std::string type, ReadString(found->value, field));
  if (*type_key == "type")
    ctx->Note(field, absl::StrCat("read as ", entry.Field(kType).ToString()));
  return type;
}

}  // namespace

absl::Status ReadIntegrations(const YAML::Node& node, const FieldPath& path, ReadContext* ctx,
                              tessera::v1::RunSpec* spec) {
  TESSERA_RETURN_IF_ERROR(ExpectSequence(node, path));
  int index = 0;
  for (const auto& item : node) {
    const FieldPath entry = path.Index(index++);
    TESSERA_RETURN_IF_ERROR(ExpectMapping(item, entry));
    tessera::v1::Integration* integration = spec->add_integrations();
    std::string_view type_key;
    TESSERA_ASSIGN_OR_RETURN(*integration->mutable_integration_type(),
                             ReadIntegrationType(item, entry, ctx, &type_key));
    // Only integrations with other fields get a fields Struct, so that one without any round
    // trips through YAML unchanged.
    if (item.size() > 1) {
      TESSERA_RETURN_IF_ERROR(YamlToStruct(item, entry, integration->mutable_fields(), type_key));
    }
    // mcli reads yes/no/on/off as booleans (PyYAML), and integrations such as git_repo's
    // ssh_clone or pip_packages' upgrade take booleans: so do they here.
    for (const auto& pair : item) {
      const std::string& key = pair.first.Scalar();
      if (key == type_key || !pair.second.IsScalar() || pair.second.Tag() != kPlainTag) continue;
      if (const std::optional<bool> value = Yaml11Bool(pair.second.Scalar())) {
        (*integration->mutable_fields()->mutable_fields())[key].set_bool_value(*value);
        ctx->Note(entry.Field(key),
                  absl::StrCat(pair.second.Scalar(), " read as ", *value ? "true" : "false",
                               " (a YAML 1.1 boolean, as mcli reads it)"));
      }
    }
    // JSON in the protobuf form: {"integration_type": t, "fields": {...}}.
    auto* fields = integration->mutable_fields()->mutable_fields();
    const auto nested = fields->find("fields");
    if (ctx->json && nested != fields->end() &&
        nested->second.kind_case() == google::protobuf::Value::kStructValue) {
      const google::protobuf::Struct inner = nested->second.struct_value();
      fields->erase(nested);
      for (const auto& [key, value] : inner.fields()) {
        if (!fields->emplace(key, value).second) {
          return SpecError(
              item.Mark(), entry.Field("fields").Field(key),
              absl::StrCat("is given twice (also as ", entry.Field(key).ToString(), ")"));
        }
      }
    }
    if (fields->empty()) integration->clear_fields();
  }
  return absl::OkStatus();
}

absl::Status ReadSecrets(const YAML::Node& node, const FieldPath& path,
                         tessera::v1::RunSpec* spec) {
  constexpr std::string_view kExpected =
      "a list of your secrets' names (mcli get secrets), or all (every one, as under mcli)";
  if (node.IsScalar()) {
    const TypedScalar scalar = ResolveScalar(node);
    if (scalar.kind != ScalarKind::kString ||
        absl::AsciiStrToLower(AbslView(scalar.text)) != "all") {
      return WrongValue(node, path, kExpected);
    }
    spec->set_all_secrets(true);
    return absl::OkStatus();
  }
  if (!node.IsSequence()) return WrongValue(node, path, kExpected);
  int index = 0;
  for (const auto& item : node) {
    TESSERA_ASSIGN_OR_RETURN(*spec->add_secrets(), ReadString(item, path.Index(index++)));
  }
  return absl::OkStatus();
}

// `launch: node` or `launch: rank`, in any case; protobuf JSON's LAUNCH_MODE_* names (and their
// numbers) too.
absl::Status ReadLaunch(const YAML::Node& node, const FieldPath& path, const ReadContext& ctx,
                        tessera::v1::RunSpec* spec) {
  constexpr std::string_view kExpected =
      "node (the command once per node, as mcli runs it) or rank (once per rank)";
  if (!node.IsScalar()) return WrongValue(node, path, kExpected);
  const TypedScalar scalar = ResolveScalar(node);
  std::optional<tessera::v1::LaunchMode> mode;
  if (scalar.kind == ScalarKind::kString) {
    std::string name = absl::AsciiStrToLower(AbslView(scalar.text));
    if (name.starts_with("launch_mode_")) name.erase(0, 12);
    if (name == "node") mode = tessera::v1::LAUNCH_MODE_NODE;
    if (name == "rank") mode = tessera::v1::LAUNCH_MODE_RANK;
    if (name == "unspecified" && ctx.json) mode = tessera::v1::LAUNCH_MODE_UNSPECIFIED;
  } else if (ctx.json && scalar.kind == ScalarKind::kInt && scalar.int_value &&
             tessera::v1::LaunchMode_IsValid(static_cast<int>(*scalar.int_value))) {
    mode = static_cast<tessera::v1::LaunchMode>(*scalar.int_value);
  }
  if (!mode) return WrongValue(node, path, kExpected);
  spec->set_launch(*mode);
  return absl::OkStatus();
}

}  // namespace tessera::spec
