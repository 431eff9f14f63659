#pragma once
// Readers for the sections of a run YAML that hold user-named entries: env_variables, metadata
// and integrations. The fixed-schema sections are in run_spec_from_yaml.cc.

#include "absl/status/status.h"
#include "runspec/field_path.h"
#include "tessera/v1/run_spec.pb.h"
#include "yaml-cpp/yaml.h"

namespace tessera::spec {

// {NAME: value, ...} or mcli's [{key: NAME, value: v}, ...]. Values may be any scalar and are
// kept as written.
absl::Status ReadEnvVariables(const YAML::Node& node, const FieldPath& path,
                              tessera::v1::RunSpec* spec);

// {key: scalar, ...}; values are kept as written.
absl::Status ReadMetadata(const YAML::Node& node, const FieldPath& path,
                          tessera::v1::RunSpec* spec);

// [{integration_type: t, other fields...}, ...].
absl::Status ReadIntegrations(const YAML::Node& node, const FieldPath& path,
                              tessera::v1::RunSpec* spec);

}  // namespace tessera::spec
