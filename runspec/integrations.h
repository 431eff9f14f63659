#pragma once
// mcli's integrations that Tessera runs on every node before the command: git_repo (clone a
// repository, optionally pip-install it), pip_packages, apt_packages and local (files from the
// submitting machine: `path` there, `target` in the rank's working folder; mcli packs them into
// `archive`, a base64 gzip tar whose entries are relative to the working folder). Every other
// type (wandb, comet_ml, mlflow ...) is accepted and kept on the run, and only recorded.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/run_spec.pb.h"

namespace tessera::spec {

bool IsRunIntegration(std::string_view type);

// The fields of the integrations Tessera runs, checked the way mcli documents them: one error
// naming the field ("integrations[1].git_repo: required").
absl::Status ValidateIntegrations(const tessera::v1::RunSpec& spec);

// A short description for events and errors: "git_repo mosaicml/composer@v0.7.1",
// "pip_packages numpy, torch".
std::string DescribeIntegration(const tessera::v1::Integration& integration);

// An integration's field as text ("" when absent or not text), as a flag, as its list of
// packages: what the worker's script reads.
std::string IntegrationText(const tessera::v1::Integration& integration, const char* name);
bool IntegrationFlag(const tessera::v1::Integration& integration, const char* name);
std::vector<std::string> IntegrationPackages(const tessera::v1::Integration& integration);

// Where a `local` integration's files land, relative to the working folder: `target`, else the
// base name of `path`. INVALID_ARGUMENT for a target that is absolute or leaves the folder.
absl::StatusOr<std::string> LocalTarget(const tessera::v1::Integration& integration);

// The types of `spec`'s integrations that Tessera only records.
std::vector<std::string> RecordedOnlyIntegrations(const tessera::v1::RunSpec& spec);

}  // namespace tessera::spec
