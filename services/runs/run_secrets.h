#pragma once
// Which of its owner's secrets a run gets: the ones its spec names (`secrets: [hf]`), every one
// with `secrets: all` (mcli's way), and the ones the spec itself needs: a docker-registry
// secret for the registry its image names, git-ssh secrets when an integration clones over
// SSH. Only these reach the run's nodes, so a node (or whoever holds it) learns no more of a
// user's secrets than the runs it runs use.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "tessera/v1/run_spec.pb.h"
#include "tessera/v1/secrets.pb.h"

namespace tessera::runs {

// The registry host an image reference names ("ghcr.io", "127.0.0.1:5000"); empty for a name
// without one ("pytorch/pytorch"), which each node reads against its default registry, so no
// secret is given for it unless the spec names one.
std::string RegistryNamedBy(std::string_view image);

bool RunGetsSecret(const v1::RunSpec& spec, const v1::Secret& secret);

// NOT_FOUND naming the first secret `spec` names that is not among `owned` (the owner's
// secrets' names), and how to see them.
absl::Status CheckNamedSecretsExist(const v1::RunSpec& spec, const std::vector<std::string>& owned);

}  // namespace tessera::runs
