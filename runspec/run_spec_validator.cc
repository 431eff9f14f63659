#include "runspec/run_spec_validator.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runspec/run_spec_parser.h"
#include "runspec/spec_limits.h"
#include "runspec/text_rules.h"

namespace tessera::spec {
namespace {

using tessera::v1::RunSpec;

constexpr std::string_view kMissing = "required field is missing or empty";

FieldError Error(FieldPath path, std::string message) {
  return FieldError{std::move(path), std::move(message)};
}

MaybeFieldError CheckText(const FieldPath& path, std::string_view text) {
  if (std::optional<std::string> problem = TextProblem(text)) return Error(path, *problem);
  return std::nullopt;
}

// The keys of a protobuf map in sorted order, so that the error reported for a spec does not
// depend on the map's iteration order.
template <typename Map>
std::vector<const std::string*> SortedKeys(const Map& map) {
  std::vector<const std::string*> keys;
  keys.reserve(map.size());
  for (const auto& [key, unused] : map) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  return keys;
}

// --- name, command ----------------------------------------------------------------------------

MaybeFieldError CheckName(const std::string& name) {
  const FieldPath path("name");
  if (name.empty()) return Error(path, std::string(kMissing));
  // mcli's rule (a Kubernetes label), shorter: Tessera adds a suffix of up to 8 characters.
  const std::string rule = absl::StrCat("a run name has 1-", kMaxRunNameLength,
                                        " characters: lowercase letters, digits and '-', starting "
                                        "and ending with a letter or digit");
  if (name.size() > kMaxRunNameLength) {
    return Error(path, absl::StrCat(Quoted(name), " is ", name.size(), " characters long; ", rule));
  }
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!absl::ascii_islower(u) && !absl::ascii_isdigit(u) && c != '-') {
      return Error(path, absl::StrCat(Quoted(name), " contains ", Quoted(std::string_view(&c, 1)),
                                      "; ", rule));
    }
  }
  if (name.front() == '-') {
    return Error(path, absl::StrCat(Quoted(name), " starts with '-'; ", rule));
  }
  if (name.back() == '-') return Error(path, absl::StrCat(Quoted(name), " ends with '-'; ", rule));
  return std::nullopt;
}

MaybeFieldError CheckCommand(const std::string& command) {
  const FieldPath path("command");
  if (command.empty()) return Error(path, std::string(kMissing));
  if (absl::StripAsciiWhitespace(command).empty()) {
    return Error(path, "must not be empty or only whitespace");
  }
  if (command.find('\0') != std::string::npos) {
    return Error(path, "must not contain a NUL character");
  }
  return CheckText(path, command);
}

// --- compute ----------------------------------------------------------------------------------

// A run that accepts fewer nodes says how many it asks for, and is not pinned to named nodes.
MaybeFieldError CheckMinNodes(const tessera::v1::ComputeSpec& compute) {
  const FieldPath path = FieldPath("compute").Field("min_nodes");
  if (compute.min_nodes() == 0) return std::nullopt;
  if (compute.min_nodes() < 0) {
    return Error(path, absl::StrCat("must be a positive integer, got ", compute.min_nodes()));
  }
  if (compute.nodes() <= 0) {
    return Error(path,
                 "needs compute.nodes: the number of nodes the run asks for, which "
                 "compute.min_nodes may go below");
  }
  if (compute.min_nodes() > compute.nodes()) {
    return Error(path, absl::StrCat("is ", compute.min_nodes(), " but compute.nodes is ",
                                    compute.nodes(), "; it must be at most compute.nodes"));
  }
  if (compute.node_names_size() > 0) {
    return Error(path,
                 "cannot go with compute.node_names: a run pinned to its nodes "
                 "cannot move to fewer of them");
  }
  return std::nullopt;
}

MaybeFieldError CheckCompute(const tessera::v1::ComputeSpec& compute) {
  const FieldPath path("compute");
  if (auto error = CheckText(path.Field("cluster"), compute.cluster())) return error;
  if (auto error = CheckText(path.Field("gpu_type"), compute.gpu_type())) return error;
  if (auto error = CheckText(path.Field("instance"), compute.instance())) return error;
  if (compute.gpus() < 0) {
    return Error(path.Field("gpus"),
                 absl::StrCat("must be a non-negative integer, got ", compute.gpus()));
  }
  if (compute.nodes() < 0) {
    return Error(path.Field("nodes"),
                 absl::StrCat("must be a positive integer, got ", compute.nodes()));
  }
  if (compute.procs_per_node() < 0) {
    return Error(path.Field("procs_per_node"),
                 absl::StrCat("must be a positive integer, got ", compute.procs_per_node()));
  }
  if (compute.gpus() > 0 && compute.nodes() > 0 && compute.gpus() % compute.nodes() != 0) {
    return Error(path.Field("gpus"),
                 absl::StrCat(compute.gpus(), " GPUs cannot be spread evenly over compute.nodes = ",
                              compute.nodes(),
                              " nodes (compute.gpus must be a multiple of "
                              "compute.nodes)"));
  }
  if (auto error = CheckMinNodes(compute)) return error;
  absl::flat_hash_map<std::string_view, int> seen;
  for (int i = 0; i < compute.node_names_size(); ++i) {
    const std::string& node = compute.node_names(i);
    const FieldPath item = path.Field("node_names").Index(i);
    if (node.empty()) return Error(item, "a node name must not be empty");
    if (auto error = CheckText(item, node)) return error;
    const auto [it, inserted] = seen.emplace(node, i);
    if (!inserted) {
      return Error(item, absl::StrCat("duplicate node name ", Quoted(node),
                                      " (also compute.node_names[", it->second, "])"));
    }
  }
  if (compute.nodes() > 0 && compute.node_names_size() > 0 &&
      compute.node_names_size() != compute.nodes()) {
    return Error(
        path.Field("node_names"),
        absl::StrCat("has ", compute.node_names_size(), " node name(s) but compute.nodes is ",
                     compute.nodes(), "; the counts must match"));
  }
  return std::nullopt;
}

// --- scheduling -------------------------------------------------------------------------------

MaybeFieldError CheckScheduling(const tessera::v1::SchedulingSpec& scheduling) {
  const FieldPath path("scheduling");
  if (!tessera::v1::Priority_IsValid(scheduling.priority())) {
    return Error(path.Field("priority"), absl::StrCat("unknown priority ", scheduling.priority()));
  }
  if (scheduling.has_max_retries() &&
      (scheduling.max_retries() < 0 || scheduling.max_retries() > kMaxRetriesLimit)) {
    return Error(path.Field("max_retries"),
                 absl::StrCat("must be an integer between 0 and ", kMaxRetriesLimit, ", got ",
                              scheduling.max_retries()));
  }
  if (scheduling.retry_on_exit_codes_size() > kMaxRetryExitCodes) {
    return Error(path.Field("retry_on_exit_codes"),
                 absl::StrCat("at most ", kMaxRetryExitCodes, " exit codes, got ",
                              scheduling.retry_on_exit_codes_size()));
  }
  for (int i = 0; i < scheduling.retry_on_exit_codes_size(); ++i) {
    const int code = scheduling.retry_on_exit_codes(i);
    if (code < 1 || code > 255) {
      return Error(
          path.Field("retry_on_exit_codes").Index(i),
          absl::StrCat("must be an exit code from 1 to 255 (a signal N is 128 + N), got ", code));
    }
  }
  // 0 means "not set" for the three numbers below.
  const double duration = scheduling.max_duration_hours();
  if (!std::isfinite(duration) || duration < 0) {
    return Error(path.Field("max_duration"),
                 absl::StrCat("must be a positive number of hours, got ", duration));
  }
  const double hang = scheduling.hang_timeout_seconds();
  if (!std::isfinite(hang) || hang < 0) {
    return Error(path.Field("hang_timeout"),
                 absl::StrCat("must be a positive number of seconds, got ", hang));
  }
  const double mfu = scheduling.mfu_threshold();
  if (mfu != 0 && !(mfu > 0 && mfu < 1)) {
    return Error(path.Field("mfu_threshold"),
                 absl::StrCat("must be a number between 0 and 1 (exclusive), got ", mfu));
  }
  return std::nullopt;
}

// --- env_variables ----------------------------------------------------------------------------

bool IsEnvName(std::string_view key) {
  if (key.empty() || absl::ascii_isdigit(static_cast<unsigned char>(key[0]))) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

MaybeFieldError CheckEnv(const RunSpec& spec) {
  absl::flat_hash_map<std::string_view, int> seen;
  for (int i = 0; i < spec.env_variables_size(); ++i) {
    const tessera::v1::EnvVar& var = spec.env_variables(i);
    const FieldPath path = FieldPath("env_variables").Index(i);
    if (var.key().empty()) return Error(path.Field("key"), std::string(kMissing));
    if (!IsEnvName(var.key())) {
      return Error(path.Field("key"),
                   absl::StrCat(Quoted(var.key()),
                                " is not a valid environment variable name (letters, digits and "
                                "'_', not starting with a digit)"));
    }
    if (std::find(kReservedEnvVars.begin(), kReservedEnvVars.end(), var.key()) !=
        kReservedEnvVars.end()) {
      return Error(path.Field("key"),
                   absl::StrCat(Quoted(var.key()),
                                " is set by the platform for every rank and cannot be overridden"));
    }
    const auto [it, inserted] = seen.emplace(var.key(), i);
    if (!inserted) {
      return Error(path.Field("key"),
                   absl::StrCat("duplicate environment variable ", Quoted(var.key()),
                                " (also env_variables[", it->second, "])"));
    }
    if (var.value().find('\0') != std::string::npos) {
      return Error(path.Field("value"), "must not contain a NUL character");
    }
    if (auto error = CheckText(path.Field("value"), var.value())) return error;
  }
  return std::nullopt;
}

// --- parameters, metadata, integrations -------------------------------------------------------

// Walks a Struct value at `depth` (the document root is depth 1). Keys are visited in sorted
// order so that the error reported is the same whatever the map's iteration order.
MaybeFieldError CheckValue(const google::protobuf::Value& value, int depth, FieldPath* path);

MaybeFieldError CheckStruct(const google::protobuf::Struct& fields, int depth, FieldPath* path,
                            std::string_view forbidden_key = {}) {
  for (const std::string* key : SortedKeys(fields.fields())) {
    path->Push(*key);
    if (auto error = CheckText(*path, *key)) return error;
    if (!forbidden_key.empty() && *key == forbidden_key) {
      return Error(*path, "is given twice (as a field and inside fields)");
    }
    if (auto error = CheckValue(fields.fields().at(*key), depth + 1, path)) return error;
    path->Pop();
  }
  return std::nullopt;
}

MaybeFieldError CheckValue(const google::protobuf::Value& value, int depth, FieldPath* path) {
  if (depth > kMaxNestingDepth) {
    return Error(*path, absl::StrCat("nesting is deeper than ", kMaxNestingDepth, " levels"));
  }
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      if (!std::isfinite(value.number_value())) {
        return Error(*path, absl::StrCat("must be a finite number, got ", value.number_value()));
      }
      return std::nullopt;
    case google::protobuf::Value::kStringValue:
      return CheckText(*path, value.string_value());
    case google::protobuf::Value::kStructValue:
      return CheckStruct(value.struct_value(), depth, path);
    case google::protobuf::Value::kListValue:
      for (int i = 0; i < value.list_value().values_size(); ++i) {
        path->PushIndex(i);
        if (auto error = CheckValue(value.list_value().values(i), depth + 1, path)) return error;
        path->Pop();
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

MaybeFieldError CheckMetadata(const RunSpec& spec) {
  for (const std::string* key : SortedKeys(spec.metadata())) {
    const FieldPath path = FieldPath("metadata").Field(*key);
    if (key->empty()) return Error(path, "keys must not be empty");
    if (auto error = CheckText(path, *key)) return error;
    if (auto error = CheckText(path, spec.metadata().at(*key))) return error;
  }
  return std::nullopt;
}

// mcli's secret names (lower-case letters, digits and '-', not first), each named once.
MaybeFieldError CheckSecrets(const RunSpec& spec) {
  constexpr int kMaxSecrets = 64;
  const FieldPath path("secrets");
  if (spec.secrets_size() > kMaxSecrets) {
    return Error(path, absl::StrCat("at most ", kMaxSecrets, " names (got ", spec.secrets_size(),
                                    "); all gives every one"));
  }
  if (spec.all_secrets() && spec.secrets_size() > 0) {
    return Error(path, "names secrets and asks for all of them; give one or the other");
  }
  std::set<std::string_view> seen;
  for (int i = 0; i < spec.secrets_size(); ++i) {
    const std::string& name = spec.secrets(i);
    if (!IsSecretName(name)) {
      return Error(path.Index(i),
                   absl::StrCat("'", name.substr(0, 80),
                                "' is not a secret's name (lower-case letters, digits and '-', "
                                "at most 63, not starting with '-')"));
    }
    if (!seen.insert(name).second) {
      return Error(path.Index(i), absl::StrCat("'", name, "' is named twice"));
    }
  }
  return std::nullopt;
}

MaybeFieldError CheckIntegrations(const RunSpec& spec) {
  for (int i = 0; i < spec.integrations_size(); ++i) {
    const tessera::v1::Integration& integration = spec.integrations(i);
    FieldPath path = FieldPath("integrations").Index(i);
    if (integration.integration_type().empty()) {
      return Error(path.Field("integration_type"), std::string(kMissing));
    }
    if (auto error = CheckText(path.Field("integration_type"), integration.integration_type())) {
      return error;
    }
    // integrations (2) > [i] (3) > fields (4).
    if (auto error = CheckStruct(integration.fields(), 3, &path, "integration_type")) return error;
  }
  return std::nullopt;
}

}  // namespace

MaybeFieldError FindRunSpecError(const RunSpec& spec) {
  if (auto error = CheckName(spec.name())) return error;
  if (auto error = CheckText(FieldPath("image"), spec.image())) return error;
  if (auto error = CheckCommand(spec.command())) return error;
  if (auto error = CheckCompute(spec.compute())) return error;
  if (auto error = CheckScheduling(spec.scheduling())) return error;
  if (auto error = CheckEnv(spec)) return error;
  FieldPath parameters("parameters");
  if (auto error = CheckStruct(spec.parameters(), 2, &parameters)) return error;
  if (auto error = CheckMetadata(spec)) return error;
  if (auto error = CheckSecrets(spec)) return error;
  return CheckIntegrations(spec);
}

absl::Status ValidateRunSpec(const RunSpec& spec) {
  // The same bound as a YAML document's, on the encoded spec however it arrived (gRPC, REST):
  // every run is read by the scheduler and the workers, so none may be unboundedly large.
  if (const size_t bytes = spec.ByteSizeLong(); bytes > kMaxSpecBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: ", bytes, " bytes encoded, more than the limit of ", kMaxSpecBytes,
                     " bytes (1 MiB); keep large parameters in a file the run reads"));
  }
  if (MaybeFieldError error = FindRunSpecError(spec)) {
    return absl::InvalidArgumentError(absl::StrCat(error->path.ToString(), ": ", error->message));
  }
  return absl::OkStatus();
}

}  // namespace tessera::spec
