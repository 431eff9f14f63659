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
//   metadata ({key: scalar}), integrations ([{integration_type: t, ...}]).
//
// Scalars are typed as the YAML 1.2 core schema types them: true/false are booleans, null/~ is
// null, 12 / 0x1f / 1.5e3 / .inf are numbers, everything else (and anything quoted) is a string.
// A field written as null is treated as absent.
#include <string>
#include <string_view>

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

// Checks the semantic rules of a spec that did not come from YAML (e.g. over gRPC). The rules are
// the ones ParseRunSpec applies; errors name the field path as it is written in YAML
// ("scheduling.max_duration", "env_variables[2].key") but carry no line.
absl::Status ValidateRunSpec(const tessera::v1::RunSpec& spec);

// Writes a spec as YAML that ParseRunSpec parses back to an equal message (for any spec that
// ParseRunSpec produced or that passes ValidateRunSpec with priority set).
std::string RunSpecToYaml(const tessera::v1::RunSpec& spec);

}  // namespace tessera::spec
