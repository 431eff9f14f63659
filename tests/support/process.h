#pragma once
// A child process for integration tests: started with arguments, its stdout and stderr
// captured to a file, killed with a real signal.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::testing {

class Process {
 public:
  // Starts `argv[0]` with the arguments; output goes to `log_path`.
  static absl::StatusOr<Process> Start(const std::vector<std::string>& argv,
                                       const std::string& log_path);
  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  ~Process();  // SIGKILL if still running

  pid_t pid() const { return pid_; }
  // Sends `signal`; for SIGKILL and SIGTERM waits for the exit (up to `timeout`).
  absl::StatusOr<int> Kill(int signal, absl::Duration timeout = absl::Seconds(15));
  bool Running();
  // Waits until the log contains `needle`, returning the line that has it.
  absl::StatusOr<std::string> WaitForLine(const std::string& needle,
                                          absl::Duration timeout = absl::Seconds(30));
  std::string Log() const;

 private:
  Process(pid_t pid, std::string log) : pid_(pid), log_path_(std::move(log)) {}
  pid_t pid_ = -1;
  std::string log_path_;
  int exit_status_ = -1;
};

struct ShellResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs `command` with /bin/sh to completion.
ShellResult RunShell(const std::string& command);

// Runs a command to completion; returns its stdout, or an error with its output.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

}  // namespace tessera::testing
