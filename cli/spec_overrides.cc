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

void ApplyOverrides(const SpecOverrides& overrides, tessera::v1::RunSpec& spec,
                    std::vector<std::string>* notes) {
  if (overrides.gpus) spec.mutable_compute()->set_gpus(*overrides.gpus);
  if (overrides.cluster) spec.mutable_compute()->set_cluster(*overrides.cluster);
  if (overrides.priority) {
    spec.mutable_scheduling()->set_priority(ParsePriority("--priority", *overrides.priority));
  }
  if (overrides.name) spec.set_name(*overrides.name);
  // A --name is made valid the way mcli makes it, like the file's.
  const absl::Status valid = tessera::spec::NormalizeRunSpec(&spec, notes);
  if (!valid.ok()) ThrowUsage("after the command-line overrides: " + std::string(valid.message()));
}

}  // namespace tessera::cli
