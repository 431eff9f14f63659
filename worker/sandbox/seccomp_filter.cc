#include "worker/sandbox/seccomp_filter.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace tessera::worker::sandbox {
namespace {

absl::Status Failed(const char* what, int rc) {
  return absl::InternalError(absl::StrCat("seccomp: ", what, ": ", std::strerror(-rc)));
}

}  // namespace

const std::vector<std::string>& RefusedSystemCalls() {
  static const std::vector<std::string> calls = {
      // Keyrings: shared by every process of a uid on the node, and a history of bugs.
      "keyctl", "add_key", "request_key",
      // BPF programs and performance counters: reading other processes, and kernel attack surface.
      "bpf", "perf_event_open",
      // File systems and the root: the sandbox's mounts are bubblewrap's, made before this.
      "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig",
      "fspick", "mount_setattr",
      // Joining other namespaces (with a descriptor of them).
      "setns",
      // The kernel itself.
      "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
      "swapon", "swapoff", "acct", "quotactl", "syslog", "lookup_dcookie", "open_by_handle_at",
      "userfaultfd", "iopl", "ioperm", "vhangup", "nfsservctl"};
  return calls;
}

absl::StatusOr<std::string> RankSeccompProgram() {
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx(seccomp_init(SCMP_ACT_ALLOW),
                                                       seccomp_release);
  if (!ctx) return absl::InternalError("seccomp: seccomp_init failed");
  // A call through another architecture's entry (int 0x80 on x86-64) is numbered from another
  // table, which the rules below do not describe: it ends the process.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
      rc < 0) {
    return Failed("the action for other architectures", rc);
  }
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  for (const std::string& name : RefusedSystemCalls()) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // not a call on this architecture
    if (int rc = seccomp_rule_add(ctx.get(), refuse, nr, 0); rc < 0) {
      return Failed(name.c_str(), rc);
    }
  }
  // New user namespaces, by unshare or clone (its flags are its first argument on x86-64).
  const scmp_datum_t newuser = CLONE_NEWUSER;
  if (int rc = seccomp_rule_add(ctx.get(), refuse, SCMP_SYS(unshare), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, newuser, newuser));
      rc < 0) {
    return Failed("unshare", rc);
  }
  if (int rc = seccomp_rule_add(ctx.get(), refuse, SCMP_SYS(clone), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, newuser, newuser));
      rc < 0) {
    return Failed("clone", rc);
  }
  // clone3 passes its flags in memory a filter cannot read: ENOSYS makes the C library fall back
  // to clone, whose flags it can (what the container runtimes do).
  if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc < 0) {
    return Failed("clone3", rc);
  }
  // Characters pushed into a terminal's input: another session's shell would run them.
  const scmp_datum_t tiocsti = TIOCSTI;
  if (int rc = seccomp_rule_add(ctx.get(), refuse, SCMP_SYS(ioctl), 1,
                                SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, tiocsti));
      rc < 0) {
    return Failed("ioctl", rc);
  }
  // The program, through a memory file (libseccomp writes it to a descriptor).
  const int fd = ::memfd_create("tessera-seccomp", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  std::string program;
  if (int rc = seccomp_export_bpf(ctx.get(), fd); rc < 0) {
    ::close(fd);
    return Failed("export", rc);
  }
  ::lseek(fd, 0, SEEK_SET);
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    program.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (program.empty()) return absl::InternalError("seccomp: the exported program is empty");
  return program;
}

}  // namespace tessera::worker::sandbox
