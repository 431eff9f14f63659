#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace tessera::testing {

absl::StatusOr<Process> Process::Start(const std::vector<std::string>& argv,
                                       const std::string& log_path) {
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    // Signals blocked by the test (none usually) must not leak into the child.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fd);
  return Process(pid, log_path);
}

Process::Process(Process&& o) noexcept
    : pid_(o.pid_), log_path_(std::move(o.log_path_)), exit_status_(o.exit_status_) {
  o.pid_ = -1;
}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) (void)Kill(SIGKILL);
    pid_ = o.pid_;
    log_path_ = std::move(o.log_path_);
    exit_status_ = o.exit_status_;
    o.pid_ = -1;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && Running()) (void)Kill(SIGKILL);
}

bool Process::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    pid_ = -1;
    return false;
  }
  return r == 0;
}

absl::StatusOr<int> Process::Kill(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return exit_status_;
  ::kill(pid_, signal);
  if (signal != SIGKILL && signal != SIGTERM && signal != SIGINT) return 0;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("process ", pid_, " did not exit"));
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::string> Process::WaitForLine(const std::string& needle,
                                                 absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    const std::string log = Log();
    const auto at = log.find(needle);
    // Only a whole line: the process may be part way through writing it (another thread's
    // flush can put half of it in the file), and a caller parsing the half would fail.
    if (const auto end = log.find('\n', at); at != std::string::npos && end != std::string::npos) {
      const auto start = log.rfind('\n', at);
      const auto from = start == std::string::npos ? 0 : start + 1;
      return log.substr(from, end - from);
    }
    if (!Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the process exited before printing \"", needle, "\"; its log:\n", log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no \"", needle, "\" within the timeout; log:\n", Log()));
}

ShellResult RunShell(const std::string& command) {
  ShellResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  char templ[] = "/tmp/tessera-cmd-XXXXXX";
  const int fd = mkstemp(templ);
  if (fd < 0) return absl::InternalError("mkstemp failed");
  close(fd);
  auto p = Process::Start(argv, templ);
  if (!p.ok()) return p.status();
  int status = -1;
  while (p->Running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto code = p->Kill(SIGTERM);  // already exited: returns its status
  std::string out = p->Log();
  unlink(templ);
  if (!code.ok() || !WIFEXITED(*code) || WEXITSTATUS(*code) != 0) {
    status = code.ok() ? *code : -1;
    return absl::InternalError(
        absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (status ", status, "): ", out));
  }
  return out;
}

}  // namespace tessera::testing
