// The pull over the registry's HTTP API (registry_client.h): the manifest (this node's
// platform's, for an index), the config, then the layers in order, each inflated, checked and
// applied to the root as it downloads. The next layers download at the same time into spool
// files (compressed), so that an image of many layers is not fetched one connection at a time.
// Images this path does not read (zstd or encrypted layers, schema 1, foreign layers) are
// UNIMPLEMENTED, with nothing written, and ImageCache has skopeo pull them.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "worker/image/image_config.h"
#include "worker/image/image_manifest.h"
#include "worker/image/image_pull.h"
#include "worker/image/registry_auth.h"
#include "worker/image/registry_client.h"

namespace tessera::worker::image {

class HttpImagePuller {
 public:
  // `cancelled` (the cache's) stops every transfer when it becomes true.
  HttpImagePuller(PullSettings settings, std::shared_ptr<Clock> clock,
                  const std::atomic<bool>* cancelled);

  absl::Status Pull(const ImagePull& pull) const;

 private:
  // The credentials `auth_file` holds for `ref`'s registry (none without a file).
  static absl::StatusOr<RegistryCredentials> CredentialsOf(const ImageReference& ref,
                                                           const std::string& auth_file);
  // The layers of `manifest` downloaded (three at a time), checked against `config`'s
  // diff ids and applied in order to the bundle's root, within the cache's size; `stop` ends
  // the downloads ahead once one fails.
  absl::Status ApplyLayers(RegistryClient& client, const ImagePull& pull,
                           const ParsedManifest& manifest, const ImageConfig& config,
                           std::atomic<bool>& stop) const;

  const PullSettings settings_;
  const std::shared_ptr<Clock> clock_;
  const std::atomic<bool>* const cancelled_;
};

}  // namespace tessera::worker::image
