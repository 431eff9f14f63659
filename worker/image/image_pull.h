// The two ways an image gets from its registry into a bundle folder (config.json and rootfs/),
// which ImageCache tries in order: over the registry's HTTP API (HttpImagePuller, each layer
// applied as it downloads) and, for an image that path does not read, or every image when the
// node says so, by skopeo (SkopeoImagePuller, which also resolves a tag to its digest). Neither
// keeps a cache or any state between pulls: that is ImageCache's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/image/image_reference.h"
#include "worker/image/pull_guard.h"

namespace tessera::worker::image {

// What the pullers need of the node's settings (ImageCacheOptions).
struct PullSettings {
  // Registries (host:port) spoken to over plain HTTP.
  std::vector<std::string> insecure_registries;
  // Registries' own CA certificates: <certs_dir>/<host:port>/*.crt.
  std::string certs_dir;
  // The most bytes of one unpacked image (the cache's size).
  int64_t max_bytes = 0;
  // A pull's whole time, for the message of one that ran out of it.
  absl::Duration pull_timeout;

  bool IsInsecure(const std::string& registry) const {
    return std::find(insecure_registries.begin(), insecure_registries.end(), registry) !=
           insecure_registries.end();
  }
};

// One pull, as ImageCache sets it up.
struct ImagePull {
  ImageReference ref;          // as the run named it: what messages say
  ImageReference exact;        // with the digest resolved: what is pulled, even if the tag moved
  std::string auth_file;       // a containers auth.json for the registry; empty: anonymous
  std::string work;            // the pull's private scratch folder
  std::string bundle;          // config.json and rootfs/ (made, empty) are written here
  absl::Time deadline;         // on the cache's clock
  PullGuard* guard = nullptr;  // counts what the pull writes against the node's limits
};

}  // namespace tessera::worker::image
