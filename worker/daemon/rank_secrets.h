#pragma once
// A run's secrets on its node: environment variables in every rank's environment, files (mode
// 0400, the rank's user's) bound read-only where the secret says, and a git SSH key's
// GIT_SSH_COMMAND. The files live in the attempt's folder, inside the worker's state folder that
// no rank can see, only until the attempt ends (RemoveSecretFiles).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/sandbox/sandbox_spec.h"

namespace tessera::worker {

// Adds the secrets of `start` to every spec's environment (never over a variable the run or
// Tessera sets) and writes its files, returning the binds that put them in the sandbox.
// FAILED_PRECONDITION, naming the secret, for a file secret when the node has no sandbox.
absl::StatusOr<std::vector<sandbox::BindMount>> PlaceSecrets(
    const v1::StartAttempt& start, const AttemptPaths& paths,
    const std::optional<RankIdentity>& identity, bool sandboxed, std::vector<RankSpec>& specs);

// The registry credentials among the secrets for `image`'s registry, if any.
const v1::SecretValue* RegistrySecretFor(const v1::StartAttempt& start,
                                         const std::string& registry);

void RemoveSecretFiles(const AttemptPaths& paths);

// Writes a containers auth.json (mode 0600) with a docker-registry secret's credentials.
absl::Status WriteRegistryAuth(const std::string& path, const v1::SecretValue& secret);

}  // namespace tessera::worker
