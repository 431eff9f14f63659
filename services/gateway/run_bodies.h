#pragma once
// Request bodies of the run routes that carry run spec values, read the way the run YAML is read
// (runspec/run_spec_parser.h), so that REST takes what `mcli run -f` takes: the run spec's older
// mcli field names, value forms ("priority": "low" as well as "PRIORITY_LOW") and name
// normalization, with the same errors.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "services/gateway/http_types.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::gateway {

// Whether a body is a run YAML rather than JSON: a Content-Type of application/yaml,
// application/x-yaml, text/yaml or text/x-yaml; or, with any other type but JSON's
// (application/json, ...+json), a body that does not start like a JSON object or array.
bool IsYamlBody(const Request& request);

// The body of POST /api/v1/runs into `out`, as BindRequest binds it (the Idempotency-Key header
// included), with its spec read by the run spec parser: from the run YAML itself when the body is
// one (IsYamlBody), else from the JSON body's "spec" (spec::ParseRunSpecJson). What the parser
// changed or ignored is appended to `notes`. INVALID_ARGUMENT naming the field when the spec
// is wrong: "request body: spec: scheduling.priority: must be one of ...", or for YAML
// "request body: line 4, column 9: compute.gpus: ...".
absl::Status BindSubmitRun(const Request& request, v1::SubmitRunRequest* out,
                           std::vector<std::string>* notes);

// The body of PATCH /api/v1/runs/{name} into `out` (path and header bound as BindRequest binds
// them), its priority taking the run YAML's forms too ("low", "AUTO", "PRIORITY_LOW").
absl::Status BindUpdateRun(const Request& request, v1::UpdateRunRequest* out);

// Notes as the value of one HTTP Warning header (RFC 9110's obsolete but widely read form, which
// Kubernetes also uses for deprecated fields): 299 - "note", 299 - "note", ... Printable ASCII
// only; at most 20 notes, then a count of the rest.
std::string WarningHeader(const std::vector<std::string>& notes);

}  // namespace tessera::gateway
