#pragma once
// Image references as people write them in a run ("pytorch/pytorch:2.3",
// "registry.internal:5000/team/trainer@sha256:..."), parsed and normalized the way Docker does, so
// that the same name means the same image here as on a developer's machine.

#include <string>

#include "absl/status/statusor.h"

namespace tessera::worker::image {

struct ImageReference {
  std::string registry;    // host[:port], e.g. "docker.io", "127.0.0.1:5000"
  std::string repository;  // path below the registry, e.g. "library/ubuntu"
  std::string tag;         // "latest" when neither a tag nor a digest was given
  std::string digest;      // "sha256:<64 hex>", or empty

  // registry/repository[:tag][@digest]: the normalized name, for messages and logs.
  std::string Name() const;
  // skopeo's docker transport: "docker://registry/repository" + "@digest", or ":tag" without one.
  std::string DockerTransport() const;
};

// Parses `ref` with Docker's normalization: the first path component names a registry only when it
// contains '.' or ':' or is "localhost" (otherwise `default_registry` is used); on docker.io a
// one-component name is an official image under "library/"; the tag defaults to "latest" unless a
// digest is given. INVALID_ARGUMENT, naming the reference, for anything Docker would refuse.
absl::StatusOr<ImageReference> ParseImageReference(const std::string& ref,
                                                   const std::string& default_registry);

// "sha256:" followed by 64 lower-case hex digits: the only digest form Tessera accepts, since the
// digest names a folder of the image cache.
bool IsValidDigest(const std::string& digest);

}  // namespace tessera::worker::image
