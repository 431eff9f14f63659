// RunSpecToYaml: a spec back to the run YAML that ParseRunSpec reads.

#include <algorithm>
#include <string>
#include <vector>

#include "runspec/run_spec_parser.h"
#include "runspec/yaml_emit.h"

namespace tessera::spec {
namespace {

using tessera::v1::RunSpec;

void EmitStringField(YAML::Emitter& out, std::string_view key, const std::string& value) {
  if (value.empty()) return;
  out << YAML::Key << std::string(key) << YAML::Value;
  EmitString(out, value);
}

void EmitIntField(YAML::Emitter& out, std::string_view key, int32_t value) {
  if (value != 0) out << YAML::Key << std::string(key) << YAML::Value << value;
}

void EmitNumberField(YAML::Emitter& out, std::string_view key, double value) {
  if (value == 0) return;
  out << YAML::Key << std::string(key) << YAML::Value;
  EmitNumber(out, value);
}

void EmitCompute(YAML::Emitter& out, const tessera::v1::ComputeSpec& compute) {
  out << YAML::Key << "compute" << YAML::Value << YAML::BeginMap;
  EmitStringField(out, "cluster", compute.cluster());
  EmitIntField(out, "gpus", compute.gpus());
  EmitStringField(out, "gpu_type", compute.gpu_type());
  EmitIntField(out, "nodes", compute.nodes());
  if (compute.node_names_size() > 0) {
    out << YAML::Key << "node_names" << YAML::Value << YAML::BeginSeq;
    for (const std::string& node : compute.node_names()) EmitString(out, node);
    out << YAML::EndSeq;
  }
  EmitStringField(out, "instance", compute.instance());
  EmitIntField(out, "procs_per_node", compute.procs_per_node());
  EmitIntField(out, "min_nodes", compute.min_nodes());
  out << YAML::EndMap;
}

std::string PriorityName(tessera::v1::Priority priority) {
  switch (priority) {
    case tessera::v1::PRIORITY_HIGH:
      return "high";
    case tessera::v1::PRIORITY_MEDIUM:
      return "medium";
    case tessera::v1::PRIORITY_LOW:
      return "low";
    case tessera::v1::PRIORITY_LOWEST:
      return "lowest";
    default:
      return "";
  }
}

void EmitScheduling(YAML::Emitter& out, const tessera::v1::SchedulingSpec& scheduling) {
  out << YAML::Key << "scheduling" << YAML::Value << YAML::BeginMap;
  EmitStringField(out, "priority", PriorityName(scheduling.priority()));
  if (scheduling.preemptible()) out << YAML::Key << "preemptible" << YAML::Value << true;
  if (scheduling.has_retry_on_system_failure()) {
    out << YAML::Key << "retry_on_system_failure" << YAML::Value
        << scheduling.retry_on_system_failure();
  }
  if (scheduling.has_max_retries()) {
    out << YAML::Key << "max_retries" << YAML::Value << scheduling.max_retries();
  }
  if (scheduling.retry_on_exit_codes_size() > 0) {
    out << YAML::Key << "retry_on_exit_codes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int code : scheduling.retry_on_exit_codes()) out << code;
    out << YAML::EndSeq;
  }
  EmitNumberField(out, "max_duration", scheduling.max_duration_hours());
  EmitNumberField(out, "hang_timeout", scheduling.hang_timeout_seconds());
  EmitNumberField(out, "mfu_threshold", scheduling.mfu_threshold());
  out << YAML::EndMap;
}

void EmitEnv(YAML::Emitter& out, const RunSpec& spec) {
  if (spec.env_variables_size() == 0) return;
  out << YAML::Key << "env_variables" << YAML::Value << YAML::BeginMap;
  for (const tessera::v1::EnvVar& var : spec.env_variables()) {
    EmitKey(out, var.key());
    out << YAML::Value;
    EmitString(out, var.value());
  }
  out << YAML::EndMap;
}

void EmitMetadata(YAML::Emitter& out, const RunSpec& spec) {
  if (spec.metadata_size() == 0) return;
  std::vector<const std::string*> keys;
  for (const auto& [key, unused] : spec.metadata()) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  for (const std::string* key : keys) {
    EmitKey(out, *key);
    out << YAML::Value;
    EmitString(out, spec.metadata().at(*key));
  }
  out << YAML::EndMap;
}

void EmitIntegrations(YAML::Emitter& out, const RunSpec& spec) {
  if (spec.integrations_size() == 0) return;
  constexpr std::string_view kType = "integration_type";
  out << YAML::Key << "integrations" << YAML::Value << YAML::BeginSeq;
  for (const tessera::v1::Integration& integration : spec.integrations()) {
    out << YAML::BeginMap << YAML::Key << std::string(kType) << YAML::Value;
    EmitString(out, integration.integration_type());
    EmitStructEntries(out, integration.fields(), kType);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace

std::string RunSpecToYaml(const RunSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  EmitStringField(out, "name", spec.name());
  EmitStringField(out, "image", spec.image());
  EmitStringField(out, "command", spec.command());
  if (spec.launch() == tessera::v1::LAUNCH_MODE_NODE) EmitStringField(out, "launch", "node");
  if (spec.launch() == tessera::v1::LAUNCH_MODE_RANK) EmitStringField(out, "launch", "rank");
  if (spec.all_secrets()) EmitStringField(out, "secrets", "all");
  if (spec.secrets_size() > 0) {
    out << YAML::Key << "secrets" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& name : spec.secrets()) EmitString(out, name);
    out << YAML::EndSeq;
  }
  if (spec.has_compute()) EmitCompute(out, spec.compute());
  if (spec.has_scheduling()) EmitScheduling(out, spec.scheduling());
  EmitEnv(out, spec);
  if (spec.has_parameters()) {
    out << YAML::Key << "parameters" << YAML::Value << YAML::BeginMap;
    EmitStructEntries(out, spec.parameters());
    out << YAML::EndMap;
  }
  EmitMetadata(out, spec);
  EmitIntegrations(out, spec);
  out << YAML::EndMap;
  std::string yaml = out.c_str();
  yaml += '\n';
  return yaml;
}

}  // namespace tessera::spec
