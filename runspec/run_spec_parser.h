#pragma once
// The run spec: what a user writes in a run YAML (mcli-compatible), parsed into
// tessera::v1::RunSpec, validated, and written back out.
//
// YAML fields:
//   name, image, command,
//   compute{cluster, gpus, gpu_type, nodes, node_names, instance, procs_per_node},
//   scheduling{priority, preemptible, retry_on_system_failure, max_retries, max_duration (hours),
//              hang_timeout (seconds), mfu_threshold},
//   env_variables ({NAME: value} or [{key: NAME, value: v}]), parameters (any mapping),
//   metadata ({key: value}), integrations ([{integration_type: t, ...}]).
//
// Everything else mcli accepts is accepted too, each with a note (see below):
//   older names: run_name (name), entrypoint (command; not with command), gpu_num
//     (compute.gpus), gpu_type, cluster and platform (compute.gpu_type, compute.cluster) at the
//     top level; the current name wins when both are given;
//     scheduling.retryOnSystemFailure and scheduling.watchdogEnabled
//     (scheduling.retry_on_system_failure); integrations[].type (integration_type);
//   fields that mean nothing to Tessera, checked and ignored: cpus and compute.cpus,
//     optimization_level (0-3), partitions, parent_name, dependent_deployment,
//     scheduling.resumable;
//   value forms: a gpu_type written as a number; YAML 1.1 booleans yes/no/on/off for boolean
//     fields (mcli reads YAML with PyYAML); metadata values that are sequences or mappings (kept
//     as JSON text); priorities also as the enum's names (PRIORITY_LOW);
//   a run name that is not valid is changed as mcli changes it (run_name.h): lower-cased, other
//     characters replaced by '-', ends fixed, cut to 54 characters.
// What mcli refuses is refused: a name longer than 56 characters, command with entrypoint,
// optimization_level outside 0-3, unknown fields (mcli warns and drops unknown top-level fields;
// Tessera keeps refusing them, with a "did you mean", so that a typo is not silently dropped).
//
// Scalars are typed as the YAML 1.2 core schema types them: true/false are booleans, null/~ is
// null, 12 / 0x1f / 1.5e3 / .inf are numbers, everything else (and anything quoted) is a string.
// A field written as null is treated as absent.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/run_spec.pb.h"

namespace tessera::spec {

// Parses and validates a run YAML. Every failure is one InvalidArgument error whose message
// starts with the 1-based position and names the field, e.g.
//   line 4, column 9: compute.gpus: must be a non-negative integer, got -4
//   line 7, column 3: unknown field "compute.gpu" (known: cluster, gpus, ...)
//   line 2, column 1: YAML syntax error: end of sequence flow not found
// Never throws. Inputs over 1 MiB and documents nested deeper than 64 levels are rejected.
// The result always has scheduling.priority set (MEDIUM when the YAML gives none).
absl::StatusOr<tessera::v1::RunSpec> ParseRunSpec(std::string_view yaml_text);

// The same, and appends to `notes` (when not null) one line for each thing read otherwise than
// as written: an older field name mapped, a value form converted, a field ignored, the name
// changed. Each starts with the field as written, e.g.
//   run_name: read as name (an older mcli name for it)
//   name: "My_Run" changed to "my-run", as mcli changes a name that is not valid (...)
//   scheduling.preemptible: yes read as true (a YAML 1.1 boolean, as mcli reads it)
//   optimization_level: ignored: an older mcli field that mcli itself stopped sending
// mcli prints such things as warnings; the run manager records them as an event of the run.
// Notes are only given for a spec that parses.
absl::StatusOr<tessera::v1::RunSpec> ParseRunSpec(std::string_view yaml_text,
                                                  std::vector<std::string>* notes);

// A run spec sent as a JSON object (the `spec` of the REST API's SubmitRunRequest): the same
// fields, older names, value forms, normalization, notes and errors as the YAML, and also the
// forms of protobuf's JSON mapping of RunSpec, so that what the API prints is taken back:
// lowerCamelCase names (gpuType, maxRetries, envVariables, ...), max_duration_hours and
// hang_timeout_seconds, numbers as strings ("8"), the priority's enum name in any case or its
// number, PRIORITY_UNSPECIFIED, 0 and "" meaning "not set", and integrations as
// {integration_type, fields: {...}}. Errors name the field by path, without a position
// ("scheduling.priority: must be one of ..."). At most 4 MiB of JSON (kMaxJsonSpecBytes).
absl::StatusOr<tessera::v1::RunSpec> ParseRunSpecJson(std::string_view json_text,
                                                      std::vector<std::string>* notes = nullptr);

// For a spec that did not come from YAML or JSON (gRPC): changes a name that is not valid as
// mcli would (noting it in `notes` when not null), then validates the spec as ValidateRunSpec
// does.
absl::Status NormalizeRunSpec(tessera::v1::RunSpec* spec, std::vector<std::string>* notes);

// A priority by the name a run YAML gives it: high, medium, low, lowest, auto (medium), in any
// case, or the enum's name (PRIORITY_LOW); nullopt for anything else (PRIORITY_UNSPECIFIED too).
std::optional<tessera::v1::Priority> PriorityFromName(std::string_view name);

// Checks the semantic rules of a spec that did not come from YAML (e.g. over gRPC). The rules are
// the ones ParseRunSpec applies; errors name the field path as it is written in YAML
// ("scheduling.max_duration", "env_variables[2].key") but carry no line.
absl::Status ValidateRunSpec(const tessera::v1::RunSpec& spec);

// Writes a spec as YAML that ParseRunSpec parses back to an equal message (for any spec that
// ParseRunSpec produced or that passes ValidateRunSpec with priority set).
std::string RunSpecToYaml(const tessera::v1::RunSpec& spec);

}  // namespace tessera::spec
