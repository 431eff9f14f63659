#pragma once
// The semantic rules of a run spec, shared by ParseRunSpec (which turns the field path into a
// line) and ValidateRunSpec (which reports the path alone).

#include "runspec/field_path.h"
#include "tessera/v1/run_spec.pb.h"

namespace tessera::spec {

// The first rule `spec` breaks, checking fields in the order of the YAML reference (name, image,
// command, compute, scheduling, env_variables, parameters, metadata, integrations); nullopt when
// the spec is valid. Paths use the YAML spelling of fields.
MaybeFieldError FindRunSpecError(const tessera::v1::RunSpec& spec);

}  // namespace tessera::spec
