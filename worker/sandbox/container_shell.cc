#include "worker/sandbox/container_shell.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h>
#endif
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/unique_fd.h"

namespace tessera::worker::sandbox {
namespace {

namespace fs = std::filesystem;

// A /proc file's text; empty when it cannot be read (the process is gone: callers say so).
std::string Slurp(const std::string& path) { return ReadWholeFile(path).value_or(""); }

ino_t PidNamespace(const std::string& proc, pid_t pid) {
  struct stat st {};
  if (::stat(absl::StrCat(proc, "/", pid, "/ns/pid").c_str(), &st) != 0) return 0;
  return st.st_ino;
}

// The process's real uid or gid ("Uid:" or "Gid:" of its status), as this side sees it.
std::optional<unsigned> StatusId(const std::string& status, const std::string& field) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, field)) continue;
    std::vector<absl::string_view> ids = absl::StrSplit(line, '\t', absl::SkipWhitespace());
    unsigned id = 0;
    if (!ids.empty() && absl::SimpleAtoi(ids[0], &id)) return id;
  }
  return std::nullopt;
}

// The cgroup.procs files of the process's cgroups (v1: each hierarchy's; v2: the unified one).
std::vector<std::string> CgroupProcsFiles(const std::string& cgroups) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(cgroups, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2] == "/") continue;
    std::string hierarchy = f[1];
    if (hierarchy.empty()) {
      out.push_back(absl::StrCat("/sys/fs/cgroup", f[2], "/cgroup.procs"));
      continue;
    }
    if (absl::StartsWith(hierarchy, "name=")) continue;
    // "cpu,cpuacct" is mounted at /sys/fs/cgroup/cpu,cpuacct.
    out.push_back(absl::StrCat("/sys/fs/cgroup/", hierarchy, f[2], "/cgroup.procs"));
  }
  return out;
}

// Writes `text` to the terminal and ends the child: what failed inside cannot be returned.
[[noreturn]] void Fail(int terminal, const char* what) {
  const int error = errno;
  const char* prefix = "tessera: cannot open a shell in the run's container: ";
  ssize_t unused = ::write(terminal, prefix, std::strlen(prefix));
  unused = ::write(terminal, what, std::strlen(what));
  unused = ::write(terminal, ": ", 2);
  const char* why = ::strerror(error);
  unused = ::write(terminal, why, std::strlen(why));
  unused = ::write(terminal, "\r\n", 2);
  (void)unused;
  ::_exit(126);
}

volatile pid_t g_shell = 0;
void KillShell(int) {
  if (g_shell > 0) ::kill(g_shell, SIGKILL);
}

// What a shell joins of the run's container, opened from /proc/PID before fork.
struct ContainerHandles {
  struct Namespace {
    const char* name;
    int type;
    UniqueFd fd;  // -1 only for the cgroup namespace, which older kernels lack
  };
  std::vector<Namespace> namespaces;  // the user namespace last: it is entered after chroot
  UniqueFd root, cwd;
  std::vector<UniqueFd> cgroup_procs;
  uid_t uid = 0;
  gid_t gid = 0;
};

absl::StatusOr<ContainerHandles> OpenContainer(const std::string& base) {
  ContainerHandles c;
  const std::string status = Slurp(base + "/status");
  const auto uid = StatusId(status, "Uid:");
  const auto gid = StatusId(status, "Gid:");
  if (!uid || !gid) return absl::NotFoundError("the run's container has ended");
  c.uid = *uid;
  c.gid = *gid;
  auto open_fd = [](const std::string& path, int flags) {
    return UniqueFd(::open(path.c_str(), flags | O_CLOEXEC));
  };
  const std::pair<const char*, int> kinds[] = {
      {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}, {"cgroup", CLONE_NEWCGROUP},
      {"pid", CLONE_NEWPID}, {"mnt", CLONE_NEWNS},  {"user", CLONE_NEWUSER}};
  for (const auto& [name, type] : kinds) {
    UniqueFd fd = open_fd(absl::StrCat(base, "/ns/", name), O_RDONLY);
    if (fd.get() < 0 && type != CLONE_NEWCGROUP) {
      return absl::NotFoundError(absl::StrCat("the run's container has ended (its ", name,
                                              " namespace cannot be opened)"));
    }
    c.namespaces.push_back({name, type, std::move(fd)});
  }
  c.root = open_fd(base + "/root", O_RDONLY | O_DIRECTORY);
  c.cwd = open_fd(base + "/cwd", O_RDONLY | O_DIRECTORY);
  for (const auto& file : CgroupProcsFiles(Slurp(base + "/cgroup"))) {
    if (UniqueFd fd = open_fd(file, O_WRONLY); fd.get() >= 0)
      c.cgroup_procs.push_back(std::move(fd));
  }
  if (c.root.get() < 0 || c.cwd.get() < 0) {
    return absl::NotFoundError("the run's container has ended");
  }
  return c;
}

// The environment of the container's process, its TERM replaced by the client's where it sent one.
std::vector<std::string> ContainerEnvironment(const std::string& base, const std::string& term) {
  std::vector<std::string> env;
  for (absl::string_view e : absl::StrSplit(Slurp(base + "/environ"), '\0', absl::SkipEmpty())) {
    if (absl::StartsWith(e, "TERM=") && !term.empty()) continue;
    env.emplace_back(e);
  }
  if (!term.empty()) env.push_back("TERM=" + term);
  return env;
}

// How the shell is started once inside: everything prepared before fork.
struct ShellExec {
  int terminal;  // the shell's output and error, and where a failure is told
  int input;
  bool tty;  // the terminal becomes the shell's controlling terminal
  int cwd;   // the container process's working folder
  const sock_fprog* filter;
  const std::string* command;  // empty: a login shell
  char* const* envp;
};

// In the shell's process, inside every namespace: its session, terminal, descriptors, signals,
// no_new_privs and seccomp, then the exec.
[[noreturn]] void ExecShell(const ShellExec& e) {
  int terminal = e.terminal;  // where a failure is told
  if (::setsid() < 0) Fail(terminal, "setsid");
  if (e.tty && ::ioctl(terminal, TIOCSCTTY, 0) != 0) Fail(terminal, "its terminal");
  if (::dup2(e.input, 0) < 0 || ::dup2(terminal, 1) < 0 || ::dup2(terminal, 2) < 0) {
    Fail(terminal, "its input and output");
  }
  if (terminal > 2) ::close(terminal);
  if (e.input > 2 && e.input != terminal) ::close(e.input);
  terminal = 2;  // the terminal, under the number it keeps
#ifdef CLOSE_RANGE_CLOEXEC
  // Descriptors the worker leaked without O_CLOEXEC must not reach the shell.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
#endif
  if (::fchdir(e.cwd) != 0) (void)::chdir("/");
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(terminal, "no_new_privs");
  if (e.filter->len > 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, e.filter) != 0) {
    Fail(terminal, "the seccomp filter");
  }
  if (!e.command->empty()) {
    const char* sh_argv[] = {"/bin/sh", "-c", e.command->c_str(), nullptr};
    ::execve("/bin/sh", const_cast<char**>(sh_argv), e.envp);
  } else if (::access("/bin/bash", X_OK) == 0) {
    const char* bash_login[] = {"-bash", nullptr};
    ::execve("/bin/bash", const_cast<char**>(bash_login), e.envp);
  } else {
    const char* sh_login[] = {"-sh", nullptr};
    ::execve("/bin/sh", const_cast<char**>(sh_login), e.envp);
  }
  Fail(terminal, "/bin/sh");
}

}  // namespace

absl::StatusOr<pid_t> ProcessInsideSandbox(pid_t outer, const std::string& proc) {
  const ino_t outside = PidNamespace(proc, outer);
  if (outside == 0) return absl::NotFoundError(absl::StrCat("process ", outer, " has ended"));
  std::map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (fs::directory_iterator it(proc, ec), end; !ec && it != end; it.increment(ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(it->path().filename().string(), &pid)) continue;
    // stat: "pid (comm) state ppid ...": the command may hold spaces and parentheses.
    const std::string stat = Slurp(it->path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    pid_t parent = 0;
    if (f.size() > 1 && absl::SimpleAtoi(f[1], &parent)) children[parent].push_back(pid);
  }
  std::deque<pid_t> next = {outer};
  while (!next.empty()) {
    const pid_t p = next.front();
    next.pop_front();
    for (pid_t c : children[p]) {
      const ino_t ns = PidNamespace(proc, c);
      // bubblewrap's own process is the namespace's first, with bubblewrap's environment; its
      // child (the sandbox's init) has the run's environment and working folder.
      if (ns != 0 && ns != outside) return children[c].empty() ? c : children[c].front();
      next.push_back(c);
    }
  }
  return absl::NotFoundError(absl::StrCat("no process of sandbox ", outer, " was found inside it"));
}

absl::StatusOr<pid_t> StartContainerShell(const ContainerShell& shell, ForkChild fork_child) {
  const std::string base = absl::StrCat("/proc/", shell.inside);
  // Everything the child needs is read and opened here: after fork it may not allocate.
  absl::StatusOr<ContainerHandles> container = OpenContainer(base);
  if (!container.ok()) return container.status();
  std::vector<std::string> env = ContainerEnvironment(base, shell.term);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  sock_fprog filter{};
  filter.len = static_cast<unsigned short>(shell.seccomp.size() / sizeof(sock_filter));
  filter.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(shell.seccomp.data()));
  const ContainerHandles& c = *container;
  const ShellExec exec{.terminal = shell.output,  // where the child's errors go
                       .input = shell.input,
                       .tty = shell.tty,
                       .cwd = c.cwd.get(),
                       .filter = &filter,
                       .command = &shell.command,
                       .envp = envp.data()};

  const pid_t keeper = fork_child([&] {
    const int terminal = exec.terminal;
    // Out of the worker's groups first, while still privileged: none of them come inside.
    if (::setgroups(0, nullptr) != 0) Fail(terminal, "setgroups");
    for (const UniqueFd& fd : c.cgroup_procs) {
      if (::write(fd.get(), "0", 1) != 1) Fail(terminal, "joining the run's cgroup");
    }
    for (const auto& ns : c.namespaces) {
      if (ns.fd.get() < 0 || ns.type == CLONE_NEWUSER) continue;
      if (::setns(ns.fd.get(), ns.type) != 0) Fail(terminal, ns.name);
    }
    if (::fchdir(c.root.get()) != 0 || ::chroot(".") != 0) Fail(terminal, "its root");
    if (::setns(c.namespaces.back().fd.get(), CLONE_NEWUSER) != 0) Fail(terminal, "user namespace");
    if (::setresgid(c.gid, c.gid, c.gid) != 0) Fail(terminal, "the run's gid");
    if (::setresuid(c.uid, c.uid, c.uid) != 0) Fail(terminal, "the run's uid");
    // The shell itself is a child: only children enter the PID namespace.
    const pid_t child = ::fork();
    if (child < 0) Fail(terminal, "fork");
    if (child == 0) ExecShell(exec);
    g_shell = child;
    struct sigaction kill_shell {};
    kill_shell.sa_handler = KillShell;
    ::sigaction(SIGTERM, &kill_shell, nullptr);
    ::close(terminal);
    ::close(exec.input);
    int st = 0;
    while (::waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  });
  if (keeper < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  return keeper;
}

}  // namespace tessera::worker::sandbox
