// What a rank's child process becomes, made ready before the fork: the forked child of a
// multi-threaded daemon may not allocate or take a lock, so every string, descriptor and array
// it needs exists beforehand. RankProcess::Start (rank_launcher.h) prepares a RankExec, forks,
// and the child calls ExecInChild; a child that fails before its exec says where through the
// error pipe, and Failure turns that into the error Start returns.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/unique_fd.h"
#include "worker/daemon/rank_identity.h"

namespace tessera::worker {

struct RankSpec;

// The strerror text of `err`.
std::string ErrnoText(int err);

// Where a child failed before its exec, as it reports it through the error pipe.
enum class ChildStage : int { kSetsid = 1, kChdir, kDup, kExec, kSetuid, kCgroup };
struct ChildError {
  ChildStage stage;
  int err;
};

class RankExec {
 public:
  RankExec() = default;
  // Pointers into its own strings are handed to the child: it stays where it was built.
  RankExec(const RankExec&) = delete;
  RankExec& operator=(const RankExec&) = delete;

  // Opens the rank's stdin, stdout and stderr, creates its working folder, builds its argv
  // (`shell -c command`, or bubblewrap reading its options, the command and the seccomp filter
  // from memory files) and environment, and opens its cgroups' procs files. An error names the
  // path or variable at fault; nothing has started then.
  absl::Status Prepare(const RankSpec& spec);

  // In the forked child: a session of its own, default signals, its cgroups, its user, folder
  // and stdio, then the exec. Only async-signal-safe calls; a failure is written to
  // `error_pipe` as a ChildError and the child exits 127.
  [[noreturn]] void ExecInChild(int error_pipe) const;

  // A child's report of a failure before or at its exec, as the error Start returns.
  absl::Status Failure(const ChildError& error) const;

 private:
  // The descriptors a sandboxed rank's bubblewrap reads: its options (--args), the command
  // and the seccomp filter; -1 where not used.
  struct SealedFiles {
    UniqueFd args, command, seccomp;
  };
  absl::Status PrepareSealed(const RankSpec& spec);

  int rank_ = 0;
  std::string working_dir_;
  std::optional<RankIdentity> identity_;
  bool sandboxed_ = false;
  int nice_ = 0;
  UniqueFd in_, out_, err_;
  std::vector<std::string> argv_strings_, env_strings_;
  std::vector<char*> argv_, envp_;
  SealedFiles sealed_;
  std::vector<int> passed_fds_;  // kept across the exec: the sealed files
  std::vector<UniqueFd> cgroup_files_;
  std::vector<int> cgroup_fds_;
};

}  // namespace tessera::worker
