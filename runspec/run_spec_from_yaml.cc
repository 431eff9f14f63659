// ParseRunSpec: the fixed-schema part of the run YAML (top level, compute, scheduling).

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runspec/absl_view.h"
#include "runspec/run_spec_parser.h"
#include "runspec/run_spec_sections.h"
#include "runspec/run_spec_validator.h"
#include "runspec/spec_limits.h"
#include "runspec/struct_yaml.h"
#include "runspec/yaml_document.h"
#include "runspec/yaml_fields.h"
#include "runspec/yaml_scalar.h"

namespace tessera::spec {
namespace {

using tessera::v1::RunSpec;

// Field readers that store what they read through a pointer or a setter.

FieldReader::Read StringInto(std::string* out) {
  return [out](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(*out, ReadString(node, path));
    return absl::OkStatus();
  };
}

template <typename Set>
FieldReader::Read Int32Into(Set set, std::string expected, bool allow_zero) {
  return
      [set, expected, allow_zero](const YAML::Node& node, const FieldPath& path) -> absl::Status {
        TESSERA_ASSIGN_OR_RETURN(const int32_t value, ReadInt32(node, path, expected, allow_zero));
        set(value);
        return absl::OkStatus();
      };
}

template <typename Set>
FieldReader::Read NumberInto(Set set, std::string expected) {
  // 0 is the proto's "not set" for every number field of scheduling, so it cannot be written.
  return [set, expected](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const double value,
                             ReadNumber(node, path, expected, /*allow_zero=*/false));
    set(value);
    return absl::OkStatus();
  };
}

template <typename Set>
FieldReader::Read BoolInto(Set set) {
  return [set](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const bool value, ReadBool(node, path));
    set(value);
    return absl::OkStatus();
  };
}

absl::Status ReadNodeNames(const YAML::Node& node, const FieldPath& path,
                           tessera::v1::ComputeSpec* compute) {
  TESSERA_RETURN_IF_ERROR(ExpectSequence(node, path));
  int index = 0;
  for (const auto& item : node) {
    TESSERA_ASSIGN_OR_RETURN(*compute->add_node_names(), ReadString(item, path.Index(index++)));
  }
  return absl::OkStatus();
}

absl::Status ReadCompute(const YAML::Node& node, const FieldPath& path,
                         tessera::v1::ComputeSpec* c) {
  const FieldReader fields[] = {
      {"cluster", StringInto(c->mutable_cluster())},
      {"gpus", Int32Into([c](int32_t v) { c->set_gpus(v); }, "a non-negative integer", true)},
      {"gpu_type", StringInto(c->mutable_gpu_type())},
      {"nodes", Int32Into([c](int32_t v) { c->set_nodes(v); }, "a positive integer", false)},
      {"node_names",
       [c](const YAML::Node& n, const FieldPath& p) { return ReadNodeNames(n, p, c); }},
      {"instance", StringInto(c->mutable_instance())},
      {"procs_per_node",
       Int32Into([c](int32_t v) { c->set_procs_per_node(v); }, "a positive integer", false)},
  };
  return ReadMapping(node, path, fields);
}

absl::Status ReadPriority(const YAML::Node& node, const FieldPath& path,
                          tessera::v1::SchedulingSpec* scheduling) {
  constexpr std::string_view kExpected = "one of high, medium, low, lowest, auto";
  const TypedScalar scalar = ResolveScalar(node);
  if (!node.IsScalar() || scalar.kind != ScalarKind::kString) {
    return WrongValue(node, path, kExpected);
  }
  const std::string name = absl::AsciiStrToLower(AbslView(scalar.text));
  if (name == "high") {
    scheduling->set_priority(tessera::v1::PRIORITY_HIGH);
  } else if (name == "medium" || name == "auto") {
    scheduling->set_priority(tessera::v1::PRIORITY_MEDIUM);
  } else if (name == "low") {
    scheduling->set_priority(tessera::v1::PRIORITY_LOW);
  } else if (name == "lowest") {
    scheduling->set_priority(tessera::v1::PRIORITY_LOWEST);
  } else {
    return WrongValue(node, path, kExpected);
  }
  return absl::OkStatus();
}

absl::Status ReadScheduling(const YAML::Node& node, const FieldPath& path,
                            tessera::v1::SchedulingSpec* s) {
  const FieldReader fields[] = {
      {"priority", [s](const YAML::Node& n, const FieldPath& p) { return ReadPriority(n, p, s); }},
      {"preemptible", BoolInto([s](bool v) { s->set_preemptible(v); })},
      {"retry_on_system_failure", BoolInto([s](bool v) { s->set_retry_on_system_failure(v); })},
      {"max_retries", Int32Into([s](int32_t v) { s->set_max_retries(v); },
                                absl::StrCat("an integer between 0 and ", kMaxRetriesLimit), true)},
      {"max_duration",
       NumberInto([s](double v) { s->set_max_duration_hours(v); }, "a positive number of hours")},
      {"hang_timeout", NumberInto([s](double v) { s->set_hang_timeout_seconds(v); },
                                  "a positive number of seconds")},
      {"mfu_threshold", NumberInto([s](double v) { s->set_mfu_threshold(v); },
                                   "a number between 0 and 1 (exclusive)")},
  };
  return ReadMapping(node, path, fields);
}

absl::Status ReadRunSpec(const YAML::Node& root, RunSpec* spec) {
  const FieldReader fields[] = {
      {"name", StringInto(spec->mutable_name())},
      {"image", StringInto(spec->mutable_image())},
      {"command", StringInto(spec->mutable_command())},
      {"compute",
       [spec](const YAML::Node& n, const FieldPath& p) {
         return ReadCompute(n, p, spec->mutable_compute());
       }},
      {"scheduling",
       [spec](const YAML::Node& n, const FieldPath& p) {
         return ReadScheduling(n, p, spec->mutable_scheduling());
       }},
      {"env_variables",
       [spec](const YAML::Node& n, const FieldPath& p) { return ReadEnvVariables(n, p, spec); }},
      {"parameters",
       [spec](const YAML::Node& n, const FieldPath& p) {
         return YamlToStruct(n, p, spec->mutable_parameters());
       }},
      {"metadata",
       [spec](const YAML::Node& n, const FieldPath& p) { return ReadMetadata(n, p, spec); }},
      {"integrations",
       [spec](const YAML::Node& n, const FieldPath& p) { return ReadIntegrations(n, p, spec); }},
  };
  return ReadMapping(root, FieldPath(), fields);
}

absl::StatusOr<RunSpec> Parse(std::string_view yaml_text) {
  TESSERA_ASSIGN_OR_RETURN(const YAML::Node root, LoadSpecDocument(yaml_text));
  RunSpec spec;
  TESSERA_RETURN_IF_ERROR(ReadRunSpec(root, &spec));
  if (spec.scheduling().priority() == tessera::v1::PRIORITY_UNSPECIFIED) {
    spec.mutable_scheduling()->set_priority(tessera::v1::PRIORITY_MEDIUM);
  }
  if (MaybeFieldError error = FindRunSpecError(spec)) {
    return SpecError(LocateField(root, error->path), error->path, error->message);
  }
  return spec;
}

}  // namespace

absl::StatusOr<RunSpec> ParseRunSpec(std::string_view yaml_text) {
  try {
    return Parse(yaml_text);
  } catch (const YAML::Exception& e) {
    return SpecError(e.mark, absl::StrCat("YAML error: ", e.msg));
  } catch (const std::exception& e) {
    return SpecError(YAML::Mark(), absl::StrCat("cannot read the run spec: ", e.what()));
  }
}

}  // namespace tessera::spec
