#include "worker/daemon/rank_launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h>
#endif

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "worker/daemon/owned_children.h"
#include "worker/sandbox/sandbox_spec.h"

namespace tessera::worker {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(10);
constexpr const char* kInheritedEnv[] = {"PATH", "HOME", "USER", "LANG"};

// What a child that failed before exec reports through the error pipe.
enum class ChildStage : int { kSetsid = 1, kChdir, kDup, kExec, kSetuid, kCgroup };
struct ChildError {
  ChildStage stage;
  int err;
};

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

ExitInfo DecodeStatus(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signal = WTERMSIG(status);
  }
  return info;
}

absl::StatusOr<int> OpenOutput(const std::string& path, const std::filesystem::path& dir,
                               const char* what) {
  if (path.empty()) {
    int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return absl::InternalError(absl::StrCat("cannot open /dev/null: ", ErrnoText(errno)));
    return fd;
  }
  std::filesystem::path p(path);
  if (p.is_relative() && !dir.empty()) p = dir / p;
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", what, " file '", p.string(), "': ", ErrnoText(errno)));
  }
  return fd;
}

absl::StatusOr<int> CopyDescriptor(int fd, const char* what) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) {
    return absl::InternalError(
        absl::StrCat("cannot pass the ", what, " descriptor: ", ErrnoText(errno)));
  }
  return copy;
}

// Runs in the forked child: only async-signal-safe calls, no allocation.
// `passed_fds` are the descriptors the program reads (bubblewrap's --args and data), the only
// ones above stderr that survive the exec.
[[noreturn]] void ExecChild(const char* dir, int out_fd, int err_fd, int in_fd, int pipe_fd,
                            const RankIdentity* identity, const char* program, char* const argv[],
                            char* const envp[], bool sandboxed, int nice, const int* cgroup_fds,
                            size_t cgroup_count, const int* passed_fds, size_t passed_count) {
  auto fail = [pipe_fd](ChildStage stage) {
    ChildError e{stage, errno};
    ssize_t unused = ::write(pipe_fd, &e, sizeof e);
    (void)unused;
    ::_exit(127);
  };
  // A session of its own, and so a process group of its own (what a stop signals): and no
  // controlling terminal, so no rank can reach the terminal a worker was started from.
  if (::setsid() < 0) fail(ChildStage::kSetsid);
  // Signals: the daemon's mask and ignored signals would otherwise be inherited through exec.
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // KILL/STOP: EINVAL
  if (sandboxed) {
    // tessera-sandbox-init restores them for the command.
    struct sigaction ign;
    std::memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &ign, nullptr);
  }
  // Into its cgroups while still privileged: everything it starts is limited.
  for (size_t i = 0; i < cgroup_count; ++i) {
    if (::write(cgroup_fds[i], "0", 1) != 1) fail(ChildStage::kCgroup);
  }
  // Where the node itself runs out of memory, the kernel kills a rank before the worker or
  // anything of the system's (best effort: a node may forbid it).
  if (int oom = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); oom >= 0) {
    ssize_t unused = ::write(oom, "500", 3);
    (void)unused;
    ::close(oom);
  }
  // Where every core is busy, the node's own daemons run first: a rank (or its data loaders)
  // saturating the CPUs must not delay the worker's heartbeats until its lease lapses and its
  // ranks are fenced. Raising one's own nice value cannot be refused, and a rank cannot lower
  // it again (RLIMIT_NICE).
  if (nice > 0) (void)::setpriority(PRIO_PROCESS, 0, nice);
  // Groups first, then the gid, then the uid: after setuid nothing else may be changed.
  if (identity != nullptr) {
    const gid_t gid = identity->gid;
    if (::setgroups(1, &gid) != 0 || ::setgid(gid) != 0 || ::setuid(identity->uid) != 0) {
      fail(ChildStage::kSetuid);
    }
  }
  if (dir != nullptr && ::chdir(dir) != 0) fail(ChildStage::kChdir);
  if (::dup2(in_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
      ::dup2(err_fd, STDERR_FILENO) < 0) {
    fail(ChildStage::kDup);
  }
#ifdef CLOSE_RANGE_CLOEXEC
  // Descriptors the daemon leaked without O_CLOEXEC must not reach the rank.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
#endif
  for (size_t i = 0; i < passed_count; ++i) {
    if (::fcntl(passed_fds[i], F_SETFD, 0) != 0) fail(ChildStage::kDup);
  }
  ::execve(program, argv, envp);
  fail(ChildStage::kExec);
  ::_exit(127);  // not reached
}

// A descriptor of an anonymous file holding `data`, read from its start; never on a disk.
absl::StatusOr<int> MemoryFile(const char* name, const std::string& data) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("memfd_create: ", ErrnoText(errno)));
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("write to memfd: ", ErrnoText(errno)));
    done += static_cast<size_t>(n);
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) {
    return absl::InternalError(absl::StrCat("lseek: ", ErrnoText(errno)));
  }
  const int raw = fd.get();
  fd.Release();
  return raw;
}

// NUL-separated, as bubblewrap's --args reads them.
std::string NulSeparated(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) {
    out += a;
    out.push_back('\0');
  }
  return out;
}

// How a sandboxed rank is started: bubblewrap's argv of fixed words, and the memory files it
// reads its options (with the run's variables), the command and the seccomp filter from.
struct SealedLaunch {
  std::vector<std::string> argv;
  UniqueFd args, command, seccomp;

  absl::Status Prepare(const RankSpec& spec, const std::vector<std::string>& env) {
    absl::StatusOr<int> fd = MemoryFile("tessera-command", spec.command);
    if (!fd.ok()) return fd.status();
    command.Adopt(*fd);
    std::vector<std::string> options = spec.sandbox_options;
    options.push_back("--clearenv");
    for (const std::string& kv : env) {
      const size_t eq = kv.find('=');
      options.insert(options.end(), {"--setenv", kv.substr(0, eq), kv.substr(eq + 1)});
    }
    options.insert(options.end(),
                   {"--ro-bind-data", std::to_string(command.get()), sandbox::kCommandPath});
    if (!spec.sandbox_seccomp.empty()) {
      fd = MemoryFile("tessera-seccomp", spec.sandbox_seccomp);
      if (!fd.ok()) return fd.status();
      seccomp.Adopt(*fd);
      options.insert(options.end(), {"--seccomp", std::to_string(seccomp.get())});
    }
    fd = MemoryFile("tessera-sandbox-args", NulSeparated(options));
    if (!fd.ok()) return fd.status();
    args.Adopt(*fd);
    // bubblewrap takes only options from --args: the command, fixed words, follows on argv.
    argv = {spec.sandbox_program, "--args",   std::to_string(args.get()),
            sandbox::kInitPath,   spec.shell, sandbox::kCommandPath};
    return absl::OkStatus();
  }
  // The descriptors the child keeps across its exec.
  std::vector<int> fds() const {
    std::vector<int> out;
    for (const UniqueFd* f : {&args, &command, &seccomp}) {
      if (f->get() >= 0) out.push_back(f->get());
    }
    return out;
  }
};

// The rank's variables as NAME=value strings, and the few the worker's own environment gives
// every rank (kInheritedEnv) where the spec does not set them.
absl::StatusOr<std::vector<std::string>> RankEnvironmentStrings(const RankSpec& spec) {
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid environment variable name '", key, "'"));
    }
    env_strings.push_back(key + "=" + value);
  }
  for (const char* key : kInheritedEnv) {
    if (spec.env.count(key) != 0) continue;
    if (const char* value = std::getenv(key)) env_strings.push_back(absl::StrCat(key, "=", value));
  }
  return env_strings;
}

// The cgroup.procs files the child writes itself into, opened before fork (the child may not
// allocate, and a rank whose cgroup is missing must not start outside it).
absl::StatusOr<std::vector<UniqueFd>> OpenCgroupProcs(const RankSpec& spec) {
  std::vector<UniqueFd> files;
  for (const std::string& path : spec.cgroup_procs) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open ", path, " for rank ", spec.rank, ": ", ErrnoText(errno)));
    }
    files.push_back(std::move(fd));
  }
  return files;
}

// What a child that failed before or at its exec reported, as the error Start returns.
absl::Status ChildErrorStatus(const ChildError& child_error, const RankSpec& spec,
                              const std::string& program) {
  std::string why = ErrnoText(child_error.err);
  switch (child_error.stage) {
    case ChildStage::kSetsid:
      return absl::InternalError(absl::StrCat("setsid for rank ", spec.rank, ": ", why));
    case ChildStage::kChdir:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot enter working folder '", spec.working_dir, "': ", why));
    case ChildStage::kDup:
      return absl::InternalError(absl::StrCat("dup2 for rank ", spec.rank, ": ", why));
    case ChildStage::kSetuid:
      return absl::InternalError(absl::StrCat("running rank ", spec.rank, " as user ",
                                              spec.identity ? spec.identity->name : "?", ": ",
                                              why));
    case ChildStage::kExec:
      if (child_error.err == E2BIG) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the command and environment are over the kernel's limits for a program's "
            "arguments (each at most 128 KiB, all at most a quarter of the stack limit); a "
            "node with a sandbox (--sandbox bwrap) takes a command of any size"));
      }
      return absl::FailedPreconditionError(absl::StrCat("cannot execute '", program, "': ", why));
    case ChildStage::kCgroup:
      return absl::InternalError(
          absl::StrCat("rank ", spec.rank, " could not join its cgroup: ", why));
  }
  return absl::InternalError(absl::StrCat("rank ", spec.rank, " failed to start: ", why));
}

}  // namespace

std::string ExitInfo::ToString() const {
  if (status_lost) return "exit status lost";
  if (signal != 0) {
    const char* name = ::sigabbrev_np(signal);
    return absl::StrCat("killed by signal ", signal, name ? absl::StrCat(" (SIG", name, ")") : "");
  }
  return absl::StrCat("exit code ", exit_code);
}

absl::StatusOr<std::unique_ptr<RankProcess>> RankProcess::Start(const RankSpec& spec) {
  if (spec.command.empty()) return absl::InvalidArgumentError("rank command is empty");
  absl::StatusOr<std::vector<std::string>> environment = RankEnvironmentStrings(spec);
  if (!environment.ok()) return environment.status();
  const std::vector<std::string>& env_strings = *environment;

  std::filesystem::path dir(spec.working_dir);
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create working folder '", spec.working_dir,
                       "': ", ec ? ec.message() : "not a directory"));
    }
  }
  absl::StatusOr<int> out = spec.stdout_fd >= 0 ? CopyDescriptor(spec.stdout_fd, "stdout")
                                                : OpenOutput(spec.stdout_path, dir, "stdout");
  if (!out.ok()) return out.status();
  UniqueFd out_fd(*out);
  absl::StatusOr<int> err = OpenOutput(spec.stderr_path, dir, "stderr");
  if (!err.ok()) return err.status();
  UniqueFd err_fd(*err);
  UniqueFd in_fd(spec.stdin_fd >= 0 ? ::fcntl(spec.stdin_fd, F_DUPFD_CLOEXEC, 3)
                                    : ::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (in_fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot open the rank's stdin: ", ErrnoText(errno)));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", ErrnoText(errno)));
  }
  UniqueFd pipe_read(pipe_fds[0]);
  UniqueFd pipe_write(pipe_fds[1]);

  // Everything the child needs is built before fork: it must not allocate.
  std::vector<std::string> argv_strings = {spec.shell, "-c", spec.command};
  std::vector<std::string> env_for_exec = env_strings;
  SealedLaunch sealed;
  if (!spec.sandbox_program.empty()) {
    // bubblewrap starts with an empty environment and reads everything of the run's from
    // descriptors; the run's variables are set by bubblewrap for the command inside only.
    if (absl::Status st = sealed.Prepare(spec, env_strings); !st.ok()) return st;
    argv_strings = sealed.argv;
    env_for_exec.clear();
  }
  std::vector<int> passed_fds = sealed.fds();
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string& program = argv_strings.front();
  absl::StatusOr<std::vector<UniqueFd>> cgroup_files = OpenCgroupProcs(spec);
  if (!cgroup_files.ok()) return cgroup_files.status();
  std::vector<int> cgroup_fds;
  for (const UniqueFd& f : *cgroup_files) cgroup_fds.push_back(f.get());
  std::vector<char*> envp;
  for (std::string& s : env_for_exec) envp.push_back(s.data());
  envp.push_back(nullptr);
  const char* dir_c = dir.empty() ? nullptr : dir.c_str();

  const pid_t pid = ForkOwnedChild([&] {
    ExecChild(dir_c, out_fd.get(), err_fd.get(), in_fd.get(), pipe_write.get(),
              spec.identity ? &*spec.identity : nullptr, program.c_str(), argv.data(), envp.data(),
              !spec.sandbox_program.empty(), spec.nice, cgroup_fds.data(), cgroup_fds.size(),
              passed_fds.data(), passed_fds.size());
  });
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork: ", ErrnoText(errno)));
  // The read below returns once the child has exec'd (after its setsid) or failed: the group
  // exists when Start returns.
  pipe_write.Reset();

  ChildError child_error{};
  ssize_t n;
  do {
    n = ::read(pipe_read.get(), &child_error, sizeof child_error);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ReleaseOwnedChild(pid);
    return ChildErrorStatus(child_error, spec, program);
  }
  spdlog::info("rank {} (local rank {}) started: pid {} in '{}'", spec.rank, spec.local_rank, pid,
               spec.working_dir);
  return std::unique_ptr<RankProcess>(new RankProcess(pid, spec.rank));
}

RankProcess::~RankProcess() {
  bool running;
  {
    absl::MutexLock lock(&mu_);
    running = !PollLocked();
  }
  if (running) spdlog::warn("rank {} (pid {}) still running at teardown: killing it", rank_, pid_);
  (void)SignalGroup(SIGKILL);  // also members that outlived the leader
  if (running) ReapBlocking();
}

bool RankProcess::PollLocked() {
  if (exit_.has_value()) return true;
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  if (r == pid_) {
    exit_ = DecodeStatus(status);
    spdlog::info("rank {} (pid {}) ended: {}", rank_, pid_, exit_->ToString());
  } else {
    // ECHILD: someone else reaped it, which the owned-children registry exists to prevent. The
    // status is lost, and that is Tessera's failure, never the rank's.
    spdlog::error("rank {} (pid {}): waitpid failed ({}); exit status lost", rank_, pid_,
                  ErrnoText(errno));
    exit_ = ExitInfo{.status_lost = true};
  }
  ReleaseOwnedChild(pid_);
  return true;
}

bool RankProcess::Poll() {
  absl::MutexLock lock(&mu_);
  return PollLocked();
}

std::optional<ExitInfo> RankProcess::exit() const {
  absl::MutexLock lock(&mu_);
  return exit_;
}

ExitInfo RankProcess::ReapBlocking() {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value()) return *exit_;
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exit_ = r == pid_ ? DecodeStatus(status) : ExitInfo{.status_lost = true};
  ReleaseOwnedChild(pid_);
  spdlog::info("rank {} (pid {}) ended: {}", rank_, pid_, exit_->ToString());
  return *exit_;
}

absl::Status RankProcess::SignalGroup(int sig) {
  if (::killpg(pid_, sig) != 0 && errno != ESRCH) {
    return absl::InternalError(
        absl::StrCat("signal ", sig, " to process group ", pid_, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::Status RankProcess::Terminate() { return SignalGroup(SIGTERM); }
absl::Status RankProcess::Kill() { return SignalGroup(SIGKILL); }

absl::StatusOr<ExitInfo> RankProcess::WaitFor(absl::Duration timeout, Clock& clock) {
  const absl::Time deadline = clock.Now() + timeout;
  while (true) {
    if (Poll()) return *exit();
    const absl::Time now = clock.Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, " (pid ", pid_, ") still running after ", absl::FormatDuration(timeout)));
    }
    clock.SleepFor(std::min(deadline - now, kPollInterval));
  }
}

absl::StatusOr<ExitInfo> RankProcess::Stop(absl::Duration grace, Clock& clock) {
  if (absl::Status s = Terminate(); !s.ok()) return s;
  absl::StatusOr<ExitInfo> exited = WaitFor(grace, clock);
  if (!exited.ok()) {
    spdlog::warn("rank {} (pid {}) did not stop within {}: SIGKILL", rank_, pid_,
                 absl::FormatDuration(grace));
  }
  if (absl::Status s = Kill(); !s.ok()) return s;
  return exited.ok() ? *exited : ReapBlocking();
}

std::vector<ExitInfo> StopAll(const std::vector<RankProcess*>& procs, absl::Duration grace,
                              Clock& clock) {
  for (RankProcess* p : procs) {
    if (p == nullptr) continue;
    if (absl::Status s = p->Terminate(); !s.ok()) spdlog::warn("StopAll: {}", s.ToString());
  }
  const absl::Time deadline = clock.Now() + grace;
  while (true) {
    bool all_exited = true;
    for (RankProcess* p : procs) {
      if (p != nullptr && !p->Poll()) all_exited = false;
    }
    if (all_exited) break;
    const absl::Time now = clock.Now();
    if (now >= deadline) break;
    clock.SleepFor(std::min(deadline - now, kPollInterval));
  }
  std::vector<ExitInfo> result;
  result.reserve(procs.size());
  for (RankProcess* p : procs) {
    if (p == nullptr) continue;
    if (!p->Poll())
      spdlog::warn("rank {} (pid {}) did not stop within grace: SIGKILL", p->rank(), p->pid());
    if (absl::Status s = p->Kill(); !s.ok()) spdlog::warn("StopAll: {}", s.ToString());
  }
  for (RankProcess* p : procs) {
    if (p == nullptr) {
      result.push_back(ExitInfo{});
      continue;
    }
    // SIGKILL was sent to every group: the wait is bounded by the kernel delivering it.
    absl::StatusOr<ExitInfo> e = p->WaitFor(absl::InfiniteDuration(), RealClock());
    result.push_back(e.ok() ? *e : ExitInfo{});
  }
  return result;
}

}  // namespace tessera::worker
