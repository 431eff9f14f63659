#pragma once
// Readers for the sections of a run YAML that hold user-named entries: env_variables, metadata
// and integrations; and for Tessera's own `launch`. The fixed-schema sections of mcli's format
// are in run_spec_from_yaml.cc.

#include "absl/status/status.h"
#include "runspec/field_path.h"
#include "runspec/read_context.h"
#include "tessera/v1/run_spec.pb.h"
#include "yaml-cpp/yaml.h"

namespace tessera::spec {

// {NAME: value, ...} or mcli's [{key: NAME, value: v}, ...]. Values may be any scalar and are
// kept as written.
absl::Status ReadEnvVariables(const YAML::Node& node, const FieldPath& path,
                              tessera::v1::RunSpec* spec);

// {key: value, ...}. Scalars are kept as written; mcli takes any value (its metadata is
// Dict[str, Any]), so a sequence or mapping is kept as its JSON text, and a null is left out,
// each with a note.
absl::Status ReadMetadata(const YAML::Node& node, const FieldPath& path, ReadContext* ctx,
                          tessera::v1::RunSpec* spec);

// [{integration_type: t, other fields...}, ...]. `type`, the name mcli's API uses (mcli takes it
// too: mcli/utils/utils_config.py, IntegrationTranslation), is read as integration_type with a
// note. In JSON, the protobuf form {integration_type: t, fields: {...}} (integrationType too) is
// accepted as well.
absl::Status ReadIntegrations(const YAML::Node& node, const FieldPath& path, ReadContext* ctx,
                              tessera::v1::RunSpec* spec);

// `secrets: [name, ...]` (the owner's secrets the run gets) or `secrets: all` (every one, as
// under mcli), in any case.
absl::Status ReadSecrets(const YAML::Node& node, const FieldPath& path, tessera::v1::RunSpec* spec);

// `launch: node` or `launch: rank`, in any case; in JSON also the LAUNCH_MODE_* names and
// numbers.
absl::Status ReadLaunch(const YAML::Node& node, const FieldPath& path, const ReadContext& ctx,
                        tessera::v1::RunSpec* spec);

}  // namespace tessera::spec
