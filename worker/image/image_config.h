// An image's configuration (the OCI image config skopeo inspect --config --raw prints): the
// environment and working folder its processes start with, and its layers in order.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::worker::image {

struct ImageConfig {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string working_dir = "/";
  std::vector<std::string> diff_ids;  // "sha256:<hex>" of each uncompressed layer, lowest first
};

// INVALID_ARGUMENT naming what is wrong: not JSON, a non-string variable, a malformed layer id.
absl::StatusOr<ImageConfig> ParseImageConfig(const std::string& json);

// The bundle's config.json (the runtime spec's "process" part) that ReadProcessConfig reads.
std::string BundleConfigJson(const ImageConfig& config);

}  // namespace tessera::worker::image
