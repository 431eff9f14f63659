#pragma once
// The run YAML of `mcli run submit -f FILE`, parsed and checked on this machine so that its
// errors (with their line) show before anything is sent, then the command line's overrides.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessera/v1/run_spec.pb.h"

namespace tessera::cli {

// mcli's submit overrides (`mcli run -f FILE --gpus 16 --priority high ...`), each replacing
// the file's field.
struct SpecOverrides {
  std::optional<int> gpus;
  std::optional<std::string> cluster;
  std::optional<std::string> priority;  // lowest, low, medium, high, auto
  std::optional<std::string> name;
  std::optional<std::string> image;
  std::optional<std::string> gpu_type;
  std::optional<int> nodes;
  std::vector<std::string> node_names;  // replace the file's when not empty
  std::optional<bool> preemptible;
  std::optional<int> max_retries;  // also turns retry_on_system_failure on, as mcli's does
  std::optional<double> max_duration_hours;

  // Whether any override is set.
  bool Any() const;
};

// Adds the override flags to a command (mcli run, mcli run submit).
void AddOverrideFlags(CLI::App* command, SpecOverrides* overrides);

// Reads and parses the file. Throws CliError (exit 2): "run.yaml: line 4, column 9: ...".
// `notes` gets what was read otherwise than written (an older mcli field name ...).
tessera::v1::RunSpec LoadRunSpecFile(const std::string& path,
                                     std::vector<std::string>* notes = nullptr);

// Applies the overrides, then validates the result again. Throws CliError (exit 2).
void ApplyOverrides(const SpecOverrides& overrides, tessera::v1::RunSpec& spec,
                    std::vector<std::string>* notes = nullptr);

}  // namespace tessera::cli
