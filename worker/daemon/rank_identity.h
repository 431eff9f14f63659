#pragma once
// Who a rank runs as. A worker running as root starts its ranks as an unprivileged user
// (--rank-user), so that a run's command cannot read the worker's credential (its key file, its
// /proc entries), its state folder, or another user's files on the node. The folders a rank
// writes (its work folder and progress folder) are given to that user; everything else of the
// worker stays the worker's own.

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::worker {

struct RankIdentity {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The identity of --rank-user `name` for a worker running as `worker_uid`:
// - empty name, worker not root: nullopt (ranks run as the worker's own unprivileged user);
// - empty name, worker root: FAILED_PRECONDITION (ranks would run as root);
// - "root": nullopt, an explicit choice for a single-user development machine;
// - any other: that user, which must exist and not be root; a worker that is not root can only
//   name itself.
absl::StatusOr<std::optional<RankIdentity>> ResolveRankUser(const std::string& name,
                                                            uid_t worker_uid);

// Lets a rank pass through the worker's folder `path` (mode 0711: enter, not list or read) on
// the way to its own.
absl::Status LetRankPass(const std::string& path);

// Makes `path` (a folder the rank writes) the rank's own, mode 0700. OK without an identity.
absl::Status GiveToRank(const std::string& path, const std::optional<RankIdentity>& identity);

// The API key in `path`: the file must belong to the worker's user and be readable by nobody
// else (mode 0600 or 0400), since whoever reads it can act as this node.
absl::StatusOr<std::string> ReadKeyFile(const std::string& path);

// The same for another secret (a join token): the first line of `path`, named `flag` in errors.
absl::StatusOr<std::string> ReadSecretFile(const std::string& flag, const std::string& path);

// The same check for a file the worker does not read itself (its TLS key): FAILED_PRECONDITION
// naming `flag` when someone else could read it.
absl::Status CheckPrivateFile(const std::string& flag, const std::string& path);

}  // namespace tessera::worker
