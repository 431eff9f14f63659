// The folders and files an attempt has on the node before its ranks start: its work, spool and
// progress folders with the ownership the ranks' uid needs, the parameters (JSON, and YAML for a
// node's launcher), the node rank a restarted worker's log shipper reads, and the user's folder
// in the cluster's shared folder.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_identity.h"

namespace tessera::worker {

// Makes the attempt's folders and writes its files. With `identity`, the ranks may pass through
// the worker's folders to theirs (not list them), write their work and progress folders, and
// not touch the spooled output, which stays the worker's.
absl::Status PrepareAttemptFolders(const v1::StartAttempt& start, const AttemptPaths& paths,
                                   const std::optional<RankIdentity>& identity);

// The user's own folder under the cluster's shared folder `shared_dir`, made and given to the
// ranks' uid: <shared_dir>/<user>, or uid-<uid> for a name that is not a plain folder name.
absl::StatusOr<std::string> PrepareUserSharedFolder(const std::string& shared_dir,
                                                    const v1::StartAttempt& start,
                                                    const std::optional<RankIdentity>& identity);

}  // namespace tessera::worker
