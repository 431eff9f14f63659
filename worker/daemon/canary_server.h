// One `tessera-canary serve` process and the socket to it: checks asked one at a time, each
// answered with its result line. The process runs as a canary always has (in a process group of
// its own, so that injected faults slow or stop it as they do ranks), but it stays up between
// checks, so that a measurement does not pay for a process start and LibTorch's load.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "worker/daemon/rank_launcher.h"

namespace tessera::worker {

class CanaryServer {
 public:
  // Starts `binary serve`; its stderr goes to `stderr_path` (removed when the server ends).
  static absl::StatusOr<std::unique_ptr<CanaryServer>> Start(const std::string& binary,
                                                             const std::string& node_name,
                                                             const std::string& stderr_path);
  // Closes the socket (a server that is waiting ends) and kills the group.
  ~CanaryServer();
  CanaryServer(const CanaryServer&) = delete;
  CanaryServer& operator=(const CanaryServer&) = delete;

  // Asks one check (tessera-canary's arguments) and waits up to `limit` for its answer, the
  // result's JSON line. DEADLINE_EXCEEDED: no answer in time (the server is then of no more use);
  // UNAVAILABLE: the server ended or closed without answering, with how it ended and its stderr.
  absl::StatusOr<std::string> Ask(const std::vector<std::string>& args, absl::Duration limit);

  pid_t pid() const { return process_->pid(); }  // also its process group
  // False once it has exited (killed by a fault, or ended after a timeout).
  bool Running() { return socket_.get() >= 0 && !process_->Poll(); }
  // Checks answered so far.
  int answered() const { return answered_; }

 private:
  CanaryServer(std::unique_ptr<RankProcess> process, UniqueFd socket, std::string stderr_path)
      : process_(std::move(process)),
        socket_(std::move(socket)),
        stderr_path_(std::move(stderr_path)) {}
  absl::Status Ended(const std::string& what);

  std::unique_ptr<RankProcess> process_;
  UniqueFd socket_;
  const std::string stderr_path_;
  std::string unread_;  // what was read past the last answer
  int answered_ = 0;
};

}  // namespace tessera::worker
