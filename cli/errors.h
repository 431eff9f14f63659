#pragma once
// How mcli fails: one exception type carrying the exit code; main prints "Error: <message>".

#include <stdexcept>
#include <string>

namespace tessera::cli {

// Exit codes: 0 success, 1 the server (or the run being followed) reported a failure,
// 2 the command line or a local input (file, config) is wrong.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// Ctrl-C ended a followed stream (128 + SIGINT, what a shell reports for a process it stopped).
inline constexpr int kExitInterrupted = 130;

class CliError : public std::runtime_error {
 public:
  CliError(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A bad command line or local input (exit 2).
[[noreturn]] inline void ThrowUsage(const std::string& message) {
  throw CliError(kExitUsage, message);
}
// A failure reported by the server or by the run being followed (exit 1).
[[noreturn]] inline void ThrowFailure(const std::string& message) {
  throw CliError(kExitFailure, message);
}

}  // namespace tessera::cli
