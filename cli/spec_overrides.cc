#include "cli/spec_overrides.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/errors.h"
#include "cli/names.h"
#include "runspec/run_spec_parser.h"

namespace tessera::cli {

tessera::v1::RunSpec LoadRunSpecFile(const std::string& path, std::vector<std::string>* notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowUsage("cannot read " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) ThrowUsage("cannot read " + path + ": " + std::strerror(errno));
  absl::StatusOr<tessera::v1::RunSpec> spec = tessera::spec::ParseRunSpec(text.str(), notes);
  if (!spec.ok()) ThrowUsage(path + ": " + std::string(spec.status().message()));
  return *std::move(spec);
}

bool SpecOverrides::Any() const {
  return gpus || cluster || priority || name || image || gpu_type || nodes || !node_names.empty() ||
         preemptible || max_retries || max_duration_hours;
}

void AddOverrideFlags(CLI::App* command, SpecOverrides* o) {
  command->add_option_function<int>(
      "--gpus", [o](const int& gpus) { o->gpus = gpus; }, "Override compute.gpus");
  command->add_option_function<std::string>(
      "--cluster", [o](const std::string& cluster) { o->cluster = cluster; },
      "Override compute.cluster");
  command->add_option_function<std::string>(
      "--gpu-type,--gpu_type", [o](const std::string& type) { o->gpu_type = type; },
      "Override compute.gpu_type");
  command->add_option_function<int>(
      "--nodes", [o](const int& nodes) { o->nodes = nodes; }, "Override compute.nodes");
  command
      ->add_option("--node-names,--node_names", o->node_names,
                   "Override compute.node_names (repeat, or separate with commas)")
      ->delimiter(',');
  command->add_option_function<std::string>(
      "--image", [o](const std::string& image) { o->image = image; }, "Override image");
  command->add_option_function<std::string>(
      "--priority", [o](const std::string& priority) { o->priority = priority; },
      "Override scheduling.priority (lowest, low, medium, high, auto)");
  command
      ->add_option_function<std::string>(
          "--preemptible", [o](const std::string& value) { o->preemptible = value == "true"; },
          "Override scheduling.preemptible (true when given alone)")
      ->expected(0, 1)
      ->default_str("true")
      ->check(CLI::IsMember({"true", "false"}));
  command->add_option_function<int>(
      "--max-retries,--max_retries", [o](const int& retries) { o->max_retries = retries; },
      "Override scheduling.max_retries (and retry on system failures)");
  command->add_option_function<double>(
      "--max-duration,--max_duration", [o](const double& hours) { o->max_duration_hours = hours; },
      "Override scheduling.max_duration, in hours (0: unlimited)");
  command->add_option_function<std::string>(
      "--name", [o](const std::string& name) { o->name = name; }, "Override name");
}

void ApplyOverrides(const SpecOverrides& overrides, tessera::v1::RunSpec& spec,
                    std::vector<std::string>* notes) {
  auto* compute = spec.mutable_compute();
  if (overrides.gpus) compute->set_gpus(*overrides.gpus);
  if (overrides.cluster) compute->set_cluster(*overrides.cluster);
  if (overrides.gpu_type) compute->set_gpu_type(*overrides.gpu_type);
  if (overrides.nodes) compute->set_nodes(*overrides.nodes);
  if (!overrides.node_names.empty()) {
    compute->clear_node_names();
    for (const std::string& node : overrides.node_names) compute->add_node_names(node);
  }
  if (overrides.image) spec.set_image(*overrides.image);
  auto* scheduling = spec.mutable_scheduling();
  if (overrides.priority) {
    scheduling->set_priority(ParsePriority("--priority", *overrides.priority));
  }
  if (overrides.preemptible) scheduling->set_preemptible(*overrides.preemptible);
  if (overrides.max_retries) {
    scheduling->set_max_retries(*overrides.max_retries);
    // mcli's --max-retries asks for retries: without this a run whose file turned them off
    // would still get none.
    scheduling->set_retry_on_system_failure(true);
  }
  if (overrides.max_duration_hours)
    scheduling->set_max_duration_hours(*overrides.max_duration_hours);
  if (overrides.name) spec.set_name(*overrides.name);
  // A --name is made valid the way mcli makes it, like the file's.
  const absl::Status valid = tessera::spec::NormalizeRunSpec(&spec, notes);
  if (!valid.ok()) ThrowUsage("after the command-line overrides: " + std::string(valid.message()));
}

}  // namespace tessera::cli
