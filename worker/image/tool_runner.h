#pragma once
// Running the command-line tools that pull and unpack images (skopeo, umoci) behind an interface,
// so that the image cache is tested with a fake and no registry.

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::worker::image {

struct ToolResult {
  int exit_code = -1;  // 128 + the signal when the tool was killed by one
  std::string output;  // stdout and stderr together, as interleaved; at most the last 64 KiB
};

class ToolRunner {
 public:
  virtual ~ToolRunner() = default;
  // Runs argv[0] (looked up in PATH) with the arguments and waits for it. A tool that ran and
  // failed is a ToolResult with its exit code, not an error: only the caller knows what its output
  // means. Errors: the tool could not be started (FAILED_PRECONDITION), or it ran past `timeout`
  // and was killed (DEADLINE_EXCEEDED).
  virtual absl::StatusOr<ToolResult> Run(const std::vector<std::string>& argv,
                                         absl::Duration timeout) = 0;
  // Run, and the tool is also killed as soon as `keep_going` (asked every few tens of
  // milliseconds while it runs) returns an error, which is then returned: a pull stops the tool
  // that fills the node's disk. This default ignores `keep_going`.
  virtual absl::StatusOr<ToolResult> RunWatched(const std::vector<std::string>& argv,
                                                absl::Duration timeout,
                                                const std::function<absl::Status()>& keep_going) {
    (void)keep_going;
    return Run(argv, timeout);
  }
  // Kills the tools running now, whose Run returns CANCELLED, and refuses every later Run: the
  // worker is shutting down and must not wait for a pull that can take minutes.
  virtual void CancelAll() {}
};

// The last non-blank line of a tool's output, trimmed: where skopeo and umoci print their error.
std::string LastLine(const std::string& output);

// Runs tools as child processes: stdin is /dev/null, the tool gets a process group of its own so
// that a timeout kills whatever it started too. Thread-safe.
class ProcessToolRunner final : public ToolRunner {
 public:
  // How the child is forked. A process that reaps children it does not own (the worker daemon is
  // a subreaper: ReapUnownedZombies) passes ForkOwnedChild and ReleaseOwnedChild here, or it could
  // reap a tool before this runner reads its exit status. `fork` runs `in_child` in the child
  // (which never returns) and returns fork()'s result; `reaped` is told once the pid was waited.
  struct ForkHooks {
    std::function<pid_t(const std::function<void()>& in_child)> fork;
    std::function<void(pid_t)> reaped;
  };

  ProcessToolRunner() = default;
  explicit ProcessToolRunner(ForkHooks hooks) : hooks_(std::move(hooks)) {}

  absl::StatusOr<ToolResult> Run(const std::vector<std::string>& argv,
                                 absl::Duration timeout) override {
    return RunWatched(argv, timeout, nullptr);
  }
  absl::StatusOr<ToolResult> RunWatched(const std::vector<std::string>& argv,
                                        absl::Duration timeout,
                                        const std::function<absl::Status()>& keep_going) override;
  void CancelAll() override { cancelled_ = true; }

 private:
  struct Spawned {
    pid_t pid = -1;   // the tool, leading its own process group
    int output = -1;  // the read end of its output (stdout and stderr)
  };
  // Forks `argv` with its output on a pipe and its input /dev/null; FAILED_PRECONDITION, naming
  // `tool`, when it cannot be run.
  absl::StatusOr<Spawned> Spawn(const std::vector<std::string>& argv, const std::string& tool);

  ForkHooks hooks_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tessera::worker::image
