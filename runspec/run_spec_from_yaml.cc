// ParseRunSpec, ParseRunSpecJson, NormalizeRunSpec: the fixed-schema part of the run YAML (top
// level, compute, scheduling), with every field name and value form mcli accepts.
//
// What mcli accepts was read from mosaicml-cli's mcli/models/run_config.py (RunConfig: the
// fields, the deprecated ones and how they are mapped; FinalRunConfig.finalize_config: the name
// clean-up, gpu_type given as a number, env_variables as a list, command and entrypoint not
// both), mcli/utils/utils_config.py (ComputeConfig, SchedulingConfig: the keys of compute and
// scheduling; IntegrationTranslation) and mcli/utils/utils_string_functions.py (run names, see
// run_name.h), and checked against the mcli/*.yaml files of mosaicml/llm-foundry (run_name,
// gpu_num, gpu_type and cluster at the top level; dependent_deployment).

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runspec/absl_view.h"
#include "runspec/read_context.h"
#include "runspec/run_name.h"
#include "runspec/run_spec_parser.h"
#include "runspec/run_spec_sections.h"
#include "runspec/run_spec_validator.h"
#include "runspec/spec_field_readers.h"
#include "runspec/spec_limits.h"
#include "runspec/struct_yaml.h"
#include "runspec/yaml_document.h"
#include "runspec/yaml_emit.h"
#include "runspec/yaml_fields.h"
#include "runspec/yaml_scalar.h"

namespace tessera::spec {
namespace {

using tessera::v1::RunSpec;

// --- compute, scheduling -----------------------------------------------------------------------

absl::Status ReadNodeNames(const YAML::Node& node, const FieldPath& path,
                           tessera::v1::ComputeSpec* compute) {
  TESSERA_RETURN_IF_ERROR(ExpectSequence(node, path));
  int index = 0;
  for (const auto& item : node) {
    TESSERA_ASSIGN_OR_RETURN(*compute->add_node_names(), ReadString(item, path.Index(index++)));
  }
  return absl::OkStatus();
}

absl::Status ReadExitCodes(const YAML::Node& node, const FieldPath& path,
                           tessera::v1::SchedulingSpec* scheduling) {
  TESSERA_RETURN_IF_ERROR(ExpectSequence(node, path));
  int index = 0;
  for (const auto& item : node) {
    TESSERA_ASSIGN_OR_RETURN(const int32_t code,
                             ReadInt32(item, path.Index(index++), "an exit code from 1 to 255"));
    scheduling->add_retry_on_exit_codes(code);
  }
  return absl::OkStatus();
}

absl::Status ReadCompute(const YAML::Node& node, const FieldPath& path, ReadContext* ctx,
                         tessera::v1::ComputeSpec* c) {
  std::vector<FieldReader> fields = {
      {"cluster", StringInto(c->mutable_cluster())},
      {"gpus", Int32Into(
                   ctx, [c](int32_t v) { c->set_gpus(v); }, "a non-negative integer", true)},
      {"gpu_type", TextInto(c->mutable_gpu_type())},
      {"nodes", Int32Into(
                    ctx, [c](int32_t v) { c->set_nodes(v); }, "a positive integer", false)},
      {"node_names",
       [c](const YAML::Node& n, const FieldPath& p) { return ReadNodeNames(n, p, c); }},
      {"instance", StringInto(c->mutable_instance())},
      {"procs_per_node",
       Int32Into(
           ctx, [c](int32_t v) { c->set_procs_per_node(v); }, "a positive integer", false)},
      {"min_nodes", Int32Into(
                        ctx, [c](int32_t v) { c->set_min_nodes(v); }, "a positive integer", false)},
      // mcli's ComputeConfig asks for CPUs; Tessera places CPU runs by procs_per_node.
      Ignored("cpus", ctx, "Tessera does not reserve CPUs (procs_per_node sets a CPU run's ranks)",
              CheckCount),
  };
  AddAlias(fields, "gpuType", "gpu_type", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "nodeNames", "node_names", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "procsPerNode", "procs_per_node", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "minNodes", "min_nodes", Spelling::kProtobufJson, ctx);
  return ReadMapping(node, path, fields);
}

// mcli's priorities by name, in any case, with or without the protobuf enum's PRIORITY_ prefix;
// auto (mcli's default) is medium. PRIORITY_UNSPECIFIED for "unspecified".
std::optional<tessera::v1::Priority> PriorityByName(std::string_view text) {
  std::string name = absl::AsciiStrToLower(AbslView(text));
  if (name.starts_with("priority_")) name.erase(0, 9);
  if (name == "high") return tessera::v1::PRIORITY_HIGH;
  if (name == "medium" || name == "auto") return tessera::v1::PRIORITY_MEDIUM;
  if (name == "low") return tessera::v1::PRIORITY_LOW;
  if (name == "lowest") return tessera::v1::PRIORITY_LOWEST;
  if (name == "unspecified") return tessera::v1::PRIORITY_UNSPECIFIED;
  return std::nullopt;
}

absl::Status ReadPriority(const YAML::Node& node, const FieldPath& path, const ReadContext& ctx,
                          tessera::v1::SchedulingSpec* scheduling) {
  constexpr std::string_view kExpected =
      "one of high, medium, low, lowest, auto (in any case; PRIORITY_LOW and the like too)";
  if (!node.IsScalar()) return WrongValue(node, path, kExpected);
  const TypedScalar scalar = ResolveScalar(node);
  std::optional<tessera::v1::Priority> priority;
  if (scalar.kind == ScalarKind::kString) {
    priority = PriorityByName(scalar.text);
    // "unspecified" is protobuf JSON's way of leaving the field out.
    if (priority == tessera::v1::PRIORITY_UNSPECIFIED && !ctx.json) priority.reset();
  } else if (ctx.json && scalar.kind == ScalarKind::kInt && scalar.int_value &&
             tessera::v1::Priority_IsValid(static_cast<int>(*scalar.int_value))) {
    priority = static_cast<tessera::v1::Priority>(*scalar.int_value);  // protobuf JSON's number
  }
  if (!priority) return WrongValue(node, path, kExpected);
  scheduling->set_priority(*priority);
  return absl::OkStatus();
}

absl::Status ReadScheduling(const YAML::Node& node, const FieldPath& path, ReadContext* ctx,
                            tessera::v1::SchedulingSpec* s) {
  std::vector<FieldReader> fields = {
      {"priority",
       [s, ctx](const YAML::Node& n, const FieldPath& p) { return ReadPriority(n, p, *ctx, s); }},
      {"preemptible", BoolInto(ctx, [s](bool v) { s->set_preemptible(v); })},
      {"retry_on_system_failure",
       BoolInto(ctx, [s](bool v) { s->set_retry_on_system_failure(v); })},
      {"max_retries", Int32Into(
                          ctx, [s](int32_t v) { s->set_max_retries(v); },
                          absl::StrCat("an integer between 0 and ", kMaxRetriesLimit), true)},
      {"retry_on_exit_codes",
       [s](const YAML::Node& n, const FieldPath& p) { return ReadExitCodes(n, p, s); }},
      {"max_duration",
       NumberInto(
           ctx, [s](double v) { s->set_max_duration_hours(v); }, "a positive number of hours")},
      {"hang_timeout",
       NumberInto(
           ctx, [s](double v) { s->set_hang_timeout_seconds(v); }, "a positive number of seconds")},
      {"mfu_threshold", NumberInto(
                            ctx, [s](double v) { s->set_mfu_threshold(v); },
                            "a number between 0 and 1 (exclusive)")},
      // mcli's SchedulingConfig still lists it, marked for removal; it never said what it did.
      Ignored("resumable", ctx, "an mcli field marked for removal; Tessera has no use for it",
              [](const YAML::Node& n, const FieldPath& p) { return ReadBool(n, p).status(); }),
  };
  // mcli's SchedulingConfig takes retryOnSystemFailure too, and its API's newer name for it.
  AddAlias(fields, "retryOnSystemFailure", "retry_on_system_failure", Spelling::kMcliAndJson, ctx);
  AddAlias(fields, "watchdogEnabled", "retry_on_system_failure", Spelling::kMcli, ctx);
  AddAlias(fields, "maxRetries", "max_retries", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "retryOnExitCodes", "retry_on_exit_codes", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "max_duration_hours", "max_duration", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "maxDurationHours", "max_duration", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "hang_timeout_seconds", "hang_timeout", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "hangTimeoutSeconds", "hang_timeout", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "mfuThreshold", "mfu_threshold", Spelling::kProtobufJson, ctx);
  return ReadMapping(node, path, fields);
}

// --- The top level -------------------------------------------------------------------------------

// A value written under a deprecated top-level name, and where.
template <typename T>
struct Written {
  T value;
  FieldPath path;
};

template <typename T>
FieldReader::Read Remember(
    std::optional<Written<T>>* out,
    std::function<absl::StatusOr<T>(const YAML::Node&, const FieldPath&)> read) {
  return [out, read](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(T value, read(node, path));
    *out = Written<T>{std::move(value), path};
    return absl::OkStatus();
  };
}

// The top-level fields older mcli versions took for what is now elsewhere (RunConfig in
// mcli/models/run_config.py: "backwards compatible support" and "deprecated fields").
struct OlderFields {
  std::optional<Written<std::string>> run_name, entrypoint, gpu_type, cluster, platform;
  std::optional<Written<int32_t>> gpu_num;
};

// Whether `map` gives one of `names` (a value that is not null).
bool Gives(const YAML::Node& map, std::initializer_list<std::string_view> names) {
  if (!map.IsMap()) return false;
  for (const auto& pair : map) {
    for (std::string_view name : names) {
      if (pair.first.Scalar() == name && !pair.second.IsNull()) return true;
    }
  }
  return false;
}

// The value of `name` in `map`, or a null node.
YAML::Node ValueOf(const YAML::Node& map, std::string_view name) {
  if (map.IsMap()) {
    for (const auto& pair : map) {
      if (pair.first.Scalar() == name) return pair.second;
    }
  }
  return YAML::Node();
}

// An older field: used for `field` unless `given` (what is given instead, by its name) is not
// empty; mcli lets the current name win too.
template <typename T, typename Set>
void UseOlder(const std::optional<Written<T>>& older, std::string_view given,
              const FieldPath& field, Set set, ReadContext* ctx) {
  if (!older) return;
  if (!given.empty()) {
    ctx->Note(older->path, absl::StrCat("not used: ", AbslView(given), " is given"));
    return;
  }
  set(older->value);
  ctx->Note(older->path,
            absl::StrCat("read as ", field.ToString(), " (an older mcli name for it)"));
  ctx->written_as.emplace_back(field, older->path);
}

absl::Status ApplyOlderFields(const YAML::Node& root, const OlderFields& older, ReadContext* ctx,
                              RunSpec* spec) {
  if (older.entrypoint && !spec->command().empty()) {
    // mcli refused both ("Specifying both a command and entrypoint as input is not supported").
    return SpecError(LocateField(root, older.entrypoint->path), older.entrypoint->path,
                     "give command or entrypoint (its older name), not both");
  }
  auto given_if = [](bool given, std::string_view name) { return given ? name : ""; };
  UseOlder(
      older.run_name, given_if(!spec->name().empty(), "name"), FieldPath("name"),
      [spec](const std::string& v) { spec->set_name(v); }, ctx);
  UseOlder(
      older.entrypoint, "", FieldPath("command"),
      [spec](const std::string& v) { spec->set_command(v); }, ctx);
  const YAML::Node compute = ValueOf(root, "compute");
  auto in_compute = [&compute](std::initializer_list<std::string_view> names) {
    return Gives(compute, names);
  };
  const FieldPath compute_path("compute");
  UseOlder(
      older.gpu_num, given_if(in_compute({"gpus"}), "compute.gpus"), compute_path.Field("gpus"),
      [spec](int32_t v) { spec->mutable_compute()->set_gpus(v); }, ctx);
  UseOlder(
      older.gpu_type, given_if(in_compute({"gpu_type", "gpuType"}), "compute.gpu_type"),
      compute_path.Field("gpu_type"),
      [spec](const std::string& v) { spec->mutable_compute()->set_gpu_type(v); }, ctx);
  const bool cluster_given = in_compute({"cluster"});
  UseOlder(
      older.cluster, given_if(cluster_given, "compute.cluster"), compute_path.Field("cluster"),
      [spec](const std::string& v) { spec->mutable_compute()->set_cluster(v); }, ctx);
  // platform is the older name of cluster, at the top level: either cluster wins.
  UseOlder(
      older.platform,
      cluster_given ? "compute.cluster" : given_if(older.cluster.has_value(), "cluster"),
      compute_path.Field("cluster"),
      [spec](const std::string& v) { spec->mutable_compute()->set_cluster(v); }, ctx);
  return absl::OkStatus();
}

absl::Status ReadRunSpec(const YAML::Node& root, ReadContext* ctx, RunSpec* spec) {
  OlderFields older;
  auto string = [](const YAML::Node& n, const FieldPath& p) { return ReadString(n, p); };
  auto text = [](const YAML::Node& n, const FieldPath& p) -> absl::StatusOr<std::string> {
    std::string out;
    TESSERA_RETURN_IF_ERROR(TextInto(&out)(n, p));
    return out;
  };
  auto count = [ctx](const YAML::Node& n, const FieldPath& p) {
    return ReadInt32(JsonNumber(n, *ctx), p, "a non-negative integer");
  };
  std::vector<FieldReader> fields = {
      {"name", StringInto(spec->mutable_name())},
      {"image", StringInto(spec->mutable_image())},
      {"command", StringInto(spec->mutable_command())},
      {"compute",
       [spec, ctx](const YAML::Node& n, const FieldPath& p) {
         return ReadCompute(n, p, ctx, spec->mutable_compute());
       }},
      {"scheduling",
       [spec, ctx](const YAML::Node& n, const FieldPath& p) {
         return ReadScheduling(n, p, ctx, spec->mutable_scheduling());
       }},
      {"env_variables",
       [spec](const YAML::Node& n, const FieldPath& p) { return ReadEnvVariables(n, p, spec); }},
      {"parameters",
       [spec](const YAML::Node& n, const FieldPath& p) {
         return YamlToStruct(n, p, spec->mutable_parameters());
       }},
      {"metadata", [spec, ctx](const YAML::Node& n,
                               const FieldPath& p) { return ReadMetadata(n, p, ctx, spec); }},
      {"integrations",
       [spec, ctx](const YAML::Node& n, const FieldPath& p) {
         return ReadIntegrations(n, p, ctx, spec);
       }},
      {"launch", [spec, ctx](const YAML::Node& n,
                             const FieldPath& p) { return ReadLaunch(n, p, *ctx, spec); }},
      {"secrets",
       [spec](const YAML::Node& n, const FieldPath& p) { return ReadSecrets(n, p, spec); }},
      // The API's form of `secrets: all` (what a printed run shows): taken, not offered.
      {"all_secrets", BoolInto(ctx, [spec](bool v) { spec->set_all_secrets(v); }), {}, true},
      // Older names of fields that are now elsewhere; applied once the whole mapping is read.
      {"run_name", Remember<std::string>(&older.run_name, string), {}, true},
      {"entrypoint", Remember<std::string>(&older.entrypoint, string), {}, true},
      {"gpu_num", Remember<int32_t>(&older.gpu_num, count), {}, true},
      {"gpu_type", Remember<std::string>(&older.gpu_type, text), {}, true},
      {"cluster", Remember<std::string>(&older.cluster, string), {}, true},
      {"platform", Remember<std::string>(&older.platform, string), {}, true},
      // Fields mcli takes (or took) that mean nothing to Tessera.
      Ignored("cpus", ctx,
              "Tessera does not reserve CPUs (compute.procs_per_node sets a CPU run's ranks)",
              CheckCount),
      Ignored("optimization_level", ctx, "an older mcli field that mcli itself stopped sending",
              [](const YAML::Node& n, const FieldPath& p) -> absl::Status {
                // mcli checked it against its valid levels, 0 to 3.
                TESSERA_ASSIGN_OR_RETURN(const int32_t level,
                                         ReadInt32(n, p, "an optimization level: 0, 1, 2 or 3"));
                if (level < 0 || level > 3) {
                  return WrongValue(n, p, "an optimization level: 0, 1, 2 or 3");
                }
                return absl::OkStatus();
              }),
      Ignored("partitions", ctx, "an older mcli field that was never used",
              [](const YAML::Node& n, const FieldPath& p) -> absl::Status {
                if (!n.IsSequence()) return ReadScalarText(n, p).status();
                int index = 0;
                for (const auto& item : n) {
                  TESSERA_RETURN_IF_ERROR(ReadScalarText(item, p.Index(index++)).status());
                }
                return absl::OkStatus();
              }),
      Ignored("parent_name", ctx, "Tessera does not link a run to the run that submitted it",
              CheckString),
      Ignored("dependent_deployment", ctx,
              "Tessera does not start inference deployments; the run starts without one",
              [](const YAML::Node& n, const FieldPath& p) { return ExpectMapping(n, p); }),
  };
  AddAlias(fields, "envVariables", "env_variables", Spelling::kProtobufJson, ctx);
  AddAlias(fields, "allSecrets", "all_secrets", Spelling::kProtobufJson, ctx);
  TESSERA_RETURN_IF_ERROR(ReadMapping(root, FieldPath(), fields));
  return ApplyOlderFields(root, older, ctx, spec);
}

// --- Parsing -------------------------------------------------------------------------------------

// The error for a rule the finished spec breaks, where its field was written: under another name
// (gpu_num for compute.gpus), the message names both.
absl::Status RuleError(const YAML::Node& root, const ReadContext& ctx, const FieldError& error) {
  for (const auto& [field, written] : ctx.written_as) {
    if (field.ToString() == error.path.ToString()) {
      return SpecError(
          LocateField(root, written),
          absl::StrCat(written.ToString(), " (read as ", field.ToString(), "): ", error.message));
    }
  }
  return SpecError(LocateField(root, error.path), error.path, error.message);
}

// Makes the name valid the way mcli does (run_name.h), saying so.
void NormalizeName(ReadContext* ctx, RunSpec* spec) {
  const std::string normalized = NormalizeRunName(spec->name());
  if (normalized == spec->name()) return;
  FieldPath written("name");
  for (const auto& [field, where] : ctx->written_as) {
    if (field.ToString() == "name") written = where;
  }
  ctx->Note(written,
            absl::StrCat(Quoted(spec->name()), " changed to ", Quoted(normalized),
                         ", as mcli changes a name that is not valid (a run name has 1-",
                         kMaxRunNameLength,
                         " characters: lowercase letters, digits and '-', starting and ending "
                         "with a letter or digit)"));
  spec->set_name(normalized);
}

absl::StatusOr<RunSpec> ParseDocument(const YAML::Node& root, ReadContext* ctx) {
  RunSpec spec;
  TESSERA_RETURN_IF_ERROR(ReadRunSpec(root, ctx, &spec));
  if (spec.scheduling().priority() == tessera::v1::PRIORITY_UNSPECIFIED) {
    spec.mutable_scheduling()->set_priority(tessera::v1::PRIORITY_MEDIUM);
  }
  NormalizeName(ctx, &spec);
  if (MaybeFieldError error = FindRunSpecError(spec)) return RuleError(root, *ctx, *error);
  return spec;
}

void GiveNotes(ReadContext& ctx, std::vector<std::string>* notes) {
  if (notes == nullptr) return;
  notes->insert(notes->end(), std::make_move_iterator(ctx.notes.begin()),
                std::make_move_iterator(ctx.notes.end()));
}

absl::StatusOr<RunSpec> Parse(std::string_view yaml_text, std::vector<std::string>* notes) {
  TESSERA_ASSIGN_OR_RETURN(const YAML::Node root, LoadSpecDocument(yaml_text));
  ReadContext ctx;
  TESSERA_ASSIGN_OR_RETURN(RunSpec spec, ParseDocument(root, &ctx));
  GiveNotes(ctx, notes);
  return spec;
}

// "line L, column C: rest" -> "rest": positions in the YAML that a JSON spec is turned into mean
// nothing to whoever wrote the JSON.
absl::Status WithoutPosition(const absl::Status& status) {
  std::string_view message(status.message().data(), status.message().size());
  if (message.starts_with("line ")) {
    const std::size_t colon = message.find(": ");
    if (colon != std::string_view::npos) message.remove_prefix(colon + 2);
  }
  return absl::Status(status.code(), AbslView(message));
}

absl::StatusOr<RunSpec> ParseJson(std::string_view json_text, std::vector<std::string>* notes) {
  if (json_text.size() > kMaxJsonSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the run spec is ", json_text.size(),
                                                   " bytes of JSON, more than the limit of ",
                                                   kMaxJsonSpecBytes, " bytes"));
  }
  // protobuf reads any JSON (UTF-16 surrogate escapes included) into a Value; it is then written
  // as YAML, which the readers take with every check of a YAML document.
  google::protobuf::Value value;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json_text.data(), json_text.size()), &value);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not valid JSON: ", std::string(parsed.message())));
  }
  if (value.kind_case() != google::protobuf::Value::kStructValue) {
    return absl::InvalidArgumentError(
        "the run spec must be a JSON object of fields (name, image, command, compute, ...)");
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  EmitStructEntries(out, value.struct_value());
  out << YAML::EndMap;
  TESSERA_ASSIGN_OR_RETURN(const YAML::Node root, LoadSpecDocument(out.c_str(), kMaxJsonSpecBytes));
  ReadContext ctx;
  ctx.json = true;
  TESSERA_ASSIGN_OR_RETURN(RunSpec spec, ParseDocument(root, &ctx));
  GiveNotes(ctx, notes);
  return spec;
}

}  // namespace

absl::StatusOr<RunSpec> ParseRunSpec(std::string_view yaml_text) {
  return ParseRunSpec(yaml_text, nullptr);
}

absl::StatusOr<RunSpec> ParseRunSpec(std::string_view yaml_text, std::vector<std::string>* notes) {
  try {
    return Parse(yaml_text, notes);
  } catch (const YAML::Exception& e) {
    return SpecError(e.mark, absl::StrCat("YAML error: ", e.msg));
  } catch (const std::exception& e) {
    return SpecError(YAML::Mark(), absl::StrCat("cannot read the run spec: ", e.what()));
  }
}

absl::StatusOr<RunSpec> ParseRunSpecJson(std::string_view json_text,
                                         std::vector<std::string>* notes) {
  absl::StatusOr<RunSpec> spec;
  try {
    spec = ParseJson(json_text, notes);
  } catch (const std::exception& e) {
    spec = absl::InvalidArgumentError(absl::StrCat("cannot read the run spec: ", e.what()));
  }
  if (!spec.ok()) return WithoutPosition(spec.status());
  return spec;
}

absl::Status NormalizeRunSpec(RunSpec* spec, std::vector<std::string>* notes) {
  ReadContext ctx;
  NormalizeName(&ctx, spec);
  GiveNotes(ctx, notes);
  return ValidateRunSpec(*spec);
}

std::optional<tessera::v1::Priority> PriorityFromName(std::string_view name) {
  std::optional<tessera::v1::Priority> priority = PriorityByName(name);
  if (priority == tessera::v1::PRIORITY_UNSPECIFIED) return std::nullopt;
  return priority;
}

}  // namespace tessera::spec
