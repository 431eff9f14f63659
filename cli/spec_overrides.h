#pragma once
// The run YAML of `mcli run submit -f FILE`, parsed and checked on this machine so that its
// errors (with their line) show before anything is sent, then the command line's overrides.

#include <optional>
#include <string>
#include <vector>

#include "tessera/v1/run_spec.pb.h"

namespace tessera::cli {

struct SpecOverrides {
  std::optional<int> gpus;
  std::optional<std::string> cluster;
  std::optional<std::string> priority;  // lowest, low, medium, high, auto
  std::optional<std::string> name;
};

// Reads and parses the file. Throws CliError (exit 2): "run.yaml: line 4, column 9: ...".
// `notes` gets what was read otherwise than written (an older mcli field name ...).
tessera::v1::RunSpec LoadRunSpecFile(const std::string& path,
                                     std::vector<std::string>* notes = nullptr);

// Applies the overrides, then validates the result again. Throws CliError (exit 2).
void ApplyOverrides(const SpecOverrides& overrides, tessera::v1::RunSpec& spec,
                    std::vector<std::string>* notes = nullptr);

}  // namespace tessera::cli
