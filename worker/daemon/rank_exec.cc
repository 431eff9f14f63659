#include "worker/daemon/rank_exec.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h>
#endif

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/sandbox/sandbox_spec.h"

namespace tessera::worker {
namespace {

constexpr const char* kInheritedEnv[] = {"PATH", "HOME", "USER", "LANG"};

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

}  // namespace

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

absl::Status RankExec::Prepare(const RankSpec& spec) {
  rank_ = spec.rank;
  working_dir_ = spec.working_dir;
  identity_ = spec.identity;
  sandboxed_ = !spec.sandbox_program.empty();
  nice_ = spec.nice;
  absl::StatusOr<std::vector<std::string>> environment = RankEnvironmentStrings(spec);
  if (!environment.ok()) return environment.status();
  env_strings_ = *std::move(environment);

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
  out_.Adopt(*out);
  absl::StatusOr<int> err = OpenOutput(spec.stderr_path, dir, "stderr");
  if (!err.ok()) return err.status();
  err_.Adopt(*err);
  in_.Adopt(spec.stdin_fd >= 0 ? ::fcntl(spec.stdin_fd, F_DUPFD_CLOEXEC, 3)
                               : ::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (in_.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot open the rank's stdin: ", ErrnoText(errno)));
  }

  argv_strings_ = {spec.shell, "-c", spec.command};
  if (sandboxed_) {
    // bubblewrap starts with an empty environment and reads everything of the run's from
    // descriptors; the run's variables are set by bubblewrap for the command inside only.
    if (absl::Status st = PrepareSealed(spec); !st.ok()) return st;
    env_strings_.clear();
  }
  for (std::string& s : argv_strings_) argv_.push_back(s.data());
  argv_.push_back(nullptr);
  for (std::string& s : env_strings_) envp_.push_back(s.data());
  envp_.push_back(nullptr);
  absl::StatusOr<std::vector<UniqueFd>> cgroup_files = OpenCgroupProcs(spec);
  if (!cgroup_files.ok()) return cgroup_files.status();
  cgroup_files_ = *std::move(cgroup_files);
  for (const UniqueFd& f : cgroup_files_) cgroup_fds_.push_back(f.get());
  return absl::OkStatus();
}

// bubblewrap's argv of fixed words, and the memory files it reads its options (with the run's
// variables), the command and the seccomp filter from.
absl::Status RankExec::PrepareSealed(const RankSpec& spec) {
  absl::StatusOr<int> fd = MemoryFile("tessera-command", spec.command);
  if (!fd.ok()) return fd.status();
  sealed_.command.Adopt(*fd);
  std::vector<std::string> options = spec.sandbox_options;
  options.push_back("--clearenv");
  for (const std::string& kv : env_strings_) {
    const size_t eq = kv.find('=');
    options.insert(options.end(), {"--setenv", kv.substr(0, eq), kv.substr(eq + 1)});
  }
  options.insert(options.end(),
                 {"--ro-bind-data", std::to_string(sealed_.command.get()), sandbox::kCommandPath});
  if (!spec.sandbox_seccomp.empty()) {
    fd = MemoryFile("tessera-seccomp", spec.sandbox_seccomp);
    if (!fd.ok()) return fd.status();
    sealed_.seccomp.Adopt(*fd);
    options.insert(options.end(), {"--seccomp", std::to_string(sealed_.seccomp.get())});
  }
  fd = MemoryFile("tessera-sandbox-args", NulSeparated(options));
  if (!fd.ok()) return fd.status();
  sealed_.args.Adopt(*fd);
  // bubblewrap takes only options from --args: the command, fixed words, follows on argv.
  argv_strings_ = {spec.sandbox_program, "--args",   std::to_string(sealed_.args.get()),
                   sandbox::kInitPath,   spec.shell, sandbox::kCommandPath};
  for (const UniqueFd* f : {&sealed_.args, &sealed_.command, &sealed_.seccomp}) {
    if (f->get() >= 0) passed_fds_.push_back(f->get());
  }
  return absl::OkStatus();
}

void RankExec::ExecInChild(int error_pipe) const {
  auto fail = [error_pipe](ChildStage stage) {
    ChildError e{stage, errno};
    ssize_t unused = ::write(error_pipe, &e, sizeof e);
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
  if (sandboxed_) {
    // tessera-sandbox-init restores them for the command.
    struct sigaction ign;
    std::memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &ign, nullptr);
  }
  // Into its cgroups while still privileged: everything it starts is limited.
  for (const int fd : cgroup_fds_) {
    if (::write(fd, "0", 1) != 1) fail(ChildStage::kCgroup);
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
  if (nice_ > 0) (void)::setpriority(PRIO_PROCESS, 0, nice_);
  // Groups first, then the gid, then the uid: after setuid nothing else may be changed.
  if (identity_.has_value()) {
    const gid_t gid = identity_->gid;
    if (::setgroups(1, &gid) != 0 || ::setgid(gid) != 0 || ::setuid(identity_->uid) != 0) {
      fail(ChildStage::kSetuid);
    }
  }
  if (!working_dir_.empty() && ::chdir(working_dir_.c_str()) != 0) fail(ChildStage::kChdir);
  if (::dup2(in_.get(), STDIN_FILENO) < 0 || ::dup2(out_.get(), STDOUT_FILENO) < 0 ||
      ::dup2(err_.get(), STDERR_FILENO) < 0) {
    fail(ChildStage::kDup);
  }
#ifdef CLOSE_RANGE_CLOEXEC
  // Descriptors the daemon leaked without O_CLOEXEC must not reach the rank.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
#endif
  for (const int fd : passed_fds_) {
    if (::fcntl(fd, F_SETFD, 0) != 0) fail(ChildStage::kDup);
  }
  ::execve(argv_.front(), argv_.data(), envp_.data());
  fail(ChildStage::kExec);
  ::_exit(127);  // not reached
}

absl::Status RankExec::Failure(const ChildError& child_error) const {
  std::string why = ErrnoText(child_error.err);
  switch (child_error.stage) {
    case ChildStage::kSetsid:
      return absl::InternalError(absl::StrCat("setsid for rank ", rank_, ": ", why));
    case ChildStage::kChdir:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot enter working folder '", working_dir_, "': ", why));
    case ChildStage::kDup:
      return absl::InternalError(absl::StrCat("dup2 for rank ", rank_, ": ", why));
    case ChildStage::kSetuid:
      return absl::InternalError(absl::StrCat("running rank ", rank_, " as user ",
                                              identity_ ? identity_->name : "?", ": ", why));
    case ChildStage::kExec:
      if (child_error.err == E2BIG) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the command and environment are over the kernel's limits for a program's "
            "arguments (each at most 128 KiB, all at most a quarter of the stack limit); a "
            "node with a sandbox (--sandbox bwrap) takes a command of any size"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("cannot execute '", argv_strings_.front(), "': ", why));
    case ChildStage::kCgroup:
      return absl::InternalError(absl::StrCat("rank ", rank_, " could not join its cgroup: ", why));
  }
  return absl::InternalError(absl::StrCat("rank ", rank_, " failed to start: ", why));
}

}  // namespace tessera::worker
