#pragma once
// mcli connect's end on a node (shell.proto): a Listen stream to the scheduler for the sessions
// to open here, and for each an Attach stream that carries a shell's terminal. The shell runs
// inside the run's container on this node (container_shell.h) on a PTY; closing the session
// hangs it up (SIGHUP) and kills it; the run goes on.

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tessera/v1/shell.grpc.pb.h"
#include "transport/tls/grpc_credentials.h"

namespace tessera::worker {

struct ShellSessionsOptions {
  std::string endpoint;  // the scheduler's, or several (a:1,b:2): the leader answers
  std::string api_key;   // the node's
  tls::TlsFlags tls;
  // The ranks' seccomp filter (RankSeccompProgram), which the shell runs under too.
  std::string seccomp;
};

class ShellSessions {
 public:
  // `outer_pid`: the outermost process (bubblewrap) of the run's attempt on this node; NOT_FOUND
  // when the attempt has none here (it ended, or the node runs ranks without a sandbox).
  using OuterPid = std::function<absl::StatusOr<pid_t>(const std::string& run_id, int resumption)>;

  ShellSessions(ShellSessionsOptions options, OuterPid outer_pid);
  // Ends every session (their shells are hung up) and the Listen stream.
  ~ShellSessions();
  void Start();

 private:
  struct Session {
    std::thread thread;
    std::shared_ptr<grpc::ClientContext> ctx;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void ListenLoop();
  void Serve(const v1::ShellSessionStart& start, grpc::ClientContext& ctx,
             const std::string& endpoint);
  std::shared_ptr<grpc::ClientContext> Context() const;
  // Joins the threads of sessions that are over.
  void ReapSessionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShellSessionsOptions options_;
  OuterPid outer_pid_;
  std::vector<std::string> endpoints_;
  std::atomic<bool> stopping_{false};
  std::thread listener_;
  absl::Mutex mu_;
  std::shared_ptr<grpc::ClientContext> listen_ctx_ ABSL_GUARDED_BY(mu_);
  std::list<Session> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::worker
