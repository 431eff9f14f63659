// The rank's sandbox is sealed (real bubblewrap, real processes): what a run says (its variables,
// its command) reaches only the processes inside it. A library loaded through LD_PRELOAD or
// LD_AUDIT marks every process it is loaded into with that process's mount namespace: none may be
// the host's. A command of any size runs.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/rank_sandbox.h"

namespace tessera::worker {
namespace sealed_sandbox_test {
namespace fs = std::filesystem;

std::string MountNamespace() {
  char buf[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/mnt", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One rank of a run on the host's root, in the sandbox the worker builds for it.
struct SandboxedRank {
  testing::TempDir tmp{"sealed_sandbox_test"};
  AttemptPaths paths = PathsFor(tmp.path + "/state", "run-1", 0);
  RankSandbox sandbox;
  RankSpec spec;

  explicit SandboxedRank(const std::string& command, int64_t tmp_bytes = 0)
      : sandbox([&] {
          RankSandboxOptions o;
          o.init_path = std::string(TESSERA_BIN_DIR) + "/tessera-sandbox-init";
          o.state_dir = tmp.path + "/state";
          o.tmp_bytes = tmp_bytes;
          return o;
        }()) {
    REQUIRE(sandbox.Check().ok());
    for (const auto& dir : {paths.work_dir, paths.progress_dir, paths.logs_dir}) {
      fs::create_directories(dir);
    }
    std::ofstream(paths.parameters_path) << "{}";
    spec.command = command;
    spec.working_dir = paths.work_dir;
    spec.stdout_path = paths.logs_dir + "/stdout";
    spec.stderr_path = paths.logs_dir + "/stderr";
  }
  // Runs it to its end; returns how it ended.
  ExitInfo Run() {
    v1::StartAttempt start;
    start.set_run_id("run-1");
    REQUIRE(sandbox.Apply(start, paths, RankRoot{}, {}, {}, spec).ok());
    auto proc = RankProcess::Start(spec);
    INFO(proc.status().ToString());
    REQUIRE(proc.ok());
    auto exit = (*proc)->WaitFor(absl::Seconds(60));
    REQUIRE(exit.ok());
    return *exit;
  }
  std::string Output() const { return Slurp(paths.logs_dir + "/stdout"); }
  std::string Errors() const { return Slurp(paths.logs_dir + "/stderr"); }
};

// The lines the marker library wrote: "NAMESPACE HOW PROGRAM".
std::vector<std::string> Marks(const std::string& file) {
  std::vector<std::string> lines = absl::StrSplit(Slurp(file), '\n', absl::SkipEmpty());
  return lines;
}

TEST_CASE("sealed: LD_PRELOAD and LD_AUDIT among a rank's variables load only inside its sandbox",
          "[sandbox][sealed]") {
  const std::string variable = GENERATE("LD_PRELOAD", "LD_AUDIT");
  SandboxedRank r("echo inside");
  const std::string marks = r.paths.work_dir + "/marks";
  // Where both sides of the sandbox see it at the same path (the build folder may be under
  // /tmp, which is the sandbox's own).
  const std::string library = r.paths.work_dir + "/preload_marker.so";
  fs::copy_file(TESSERA_PRELOAD_MARKER, library);
  r.spec.env[variable] = library;
  r.spec.env["TESSERA_PRELOAD_MARK"] = marks;
  const ExitInfo exit = r.Run();
  INFO(r.Errors());
  CHECK(exit == ExitInfo{.exit_code = 0});
  CHECK(r.Output() == "inside\n");
  const std::vector<std::string> lines = Marks(marks);
  INFO(Slurp(marks));
  REQUIRE_FALSE(lines.empty());  // the variable took effect: inside
  const std::string host = MountNamespace();
  for (const std::string& line : lines) {
    CHECK_FALSE(absl::StartsWith(line, host + " "));  // never in a process outside
  }
}

TEST_CASE("sealed: the rank's variables are its own, whatever the worker's environment holds",
          "[sandbox][sealed]") {
  SandboxedRank r("echo \"$GREETING|${WORKER_ONLY-unset}\"");
  r.spec.env["GREETING"] = "hello world; $(not run)";
  ::setenv("WORKER_ONLY", "leaked", 1);
  const ExitInfo exit = r.Run();
  ::unsetenv("WORKER_ONLY");
  INFO(r.Errors());
  CHECK(exit == ExitInfo{.exit_code = 0});
  CHECK(r.Output() == "hello world; $(not run)|unset\n");
}

TEST_CASE("sealed: a command of 1 MB runs, and its exit code is the rank's", "[sandbox][sealed]") {
  // Eight times the kernel's limit on one argument (128 KiB): it never is one.
  std::string command = "# " + std::string(1 << 20, 'x') + "\n";
  command += "printf 'ran %s\\n' \"$0\"\nexit 7\n";
  SandboxedRank r(command);
  const ExitInfo exit = r.Run();
  INFO(r.Errors());
  CHECK(exit == ExitInfo{.exit_code = 7});
  CHECK(r.Output() == "ran /run/tessera/command\n");
}

TEST_CASE(
    "sealed: /tmp holds its size and no more, and the kernel's OOM killer picks the rank first",
    "[sandbox][sealed]") {
  SandboxedRank r(
      "df -k /tmp | tail -n 1 | awk '{print \"size \" $2}'; "
      "dd if=/dev/zero of=/tmp/fill bs=1M count=16 2>&1 | grep -o 'No space left on device'; "
      "echo oom $(cat /proc/self/oom_score_adj)",
      int64_t{8} << 20);
  const ExitInfo exit = r.Run();
  INFO(r.Errors());
  CHECK(exit == ExitInfo{.exit_code = 0});
  CHECK(r.Output() == "size 8192\nNo space left on device\noom 500\n");
}

TEST_CASE("a rank's share of the node's memory leaves the system a reserve", "[sandbox]") {
  constexpr int64_t kGiB = int64_t{1} << 30;
  CHECK(RankMemoryShare(18 * kGiB, 2) == 8 * kGiB);      // 2 GiB reserved
  CHECK(RankMemoryShare(2048 * kGiB, 8) == 240 * kGiB);  // 1/16 reserved
  CHECK(RankMemoryShare(10 * kGiB, 0) == 8 * kGiB);      // no GPUs: one rank
  CHECK(RankMemoryShare(2 * kGiB, 1) == 0);              // nothing left: no limit
  // Whole pages, whatever the node's memory (this one's share is 11,564,513,280 unrounded,
  // which the kernel kept as 11,564,511,232).
  CHECK(RankMemoryShare(25'276'510'208, 2) == 11'564'482'560);
  CHECK(RankMemoryShare(25'276'510'208 + 4096, 2) % 65536 == 0);
}

TEST_CASE("sealed: a command that names a missing program fails as the rank, with the shell's word",
          "[sandbox][sealed]") {
  SandboxedRank r("no-such-program-anywhere --flag");
  const ExitInfo exit = r.Run();
  CHECK(exit == ExitInfo{.exit_code = 127});
  CHECK(absl::StrContains(r.Errors(), "no-such-program-anywhere"));
}

TEST_CASE(
    "sealed: the seccomp filter refuses user namespaces, keyrings, BPF, perf counters and "
    "TIOCSTI, and lets processes start",
    "[sandbox][sealed]") {
  // Each call as a rank would make it (Python's ctypes; x86-64 numbers), and what came back.
  SandboxedRank r(R"(/usr/bin/python3 - <<'EOF'
import ctypes, errno, fcntl, subprocess, termios
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    if libc.syscall(nr, *[ctypes.c_long(a) for a in args]) >= 0:
        return "ok"
    return errno.errorcode[ctypes.get_errno()]
print("unshare-user", call(272, 0x10000000))
print("keyctl", call(250, 0, -3, 0))
print("bpf", call(321, 5, 0, 0))
print("perf_event_open", call(298, 0, 0, -1, -1, 0))
print("mount", call(165, 0, 0, 0, 0, 0))
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("tiocsti ok")
except OSError as e:
    print("tiocsti", errno.errorcode[e.errno])
print("getpid", call(39))
print("child", subprocess.run(["/bin/sh", "-c", "exit 3"]).returncode)
EOF
)");
  const ExitInfo exit = r.Run();
  INFO(r.Errors());
  CHECK(exit == ExitInfo{.exit_code = 0});
  CHECK(r.Output() ==
        "unshare-user EPERM\nkeyctl EPERM\nbpf EPERM\nperf_event_open EPERM\nmount EPERM\n"
        "tiocsti EPERM\ngetpid ok\nchild 3\n");
}

// int 0x80 from a 64-bit process: getpid (20) of the 32-bit table; then "python: STATUS".
constexpr char kInt80Call[] = R"(/usr/bin/python3 - <<'EOF'
import ctypes, mmap
code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax, 20; int 0x80; ret
buf = mmap.mmap(-1, len(code), prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
print("calling", flush=True)
ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
print("survived")
EOF
echo "python: $?")";

TEST_CASE("sealed: a 32-bit system call, which the filter cannot read, kills the process",
          "[sandbox][sealed]") {
  SandboxedRank r(kInt80Call);
  const ExitInfo exit = r.Run();
  INFO(r.Errors());
  CHECK(exit == ExitInfo{.exit_code = 0});
  const std::string out = r.Output();
  INFO(out);
  CHECK(absl::StrContains(out, "calling\n"));
  CHECK_FALSE(absl::StrContains(out, "survived"));
  if (absl::StrContains(out, "python: 139")) {
    // A kernel without 32-bit emulation (ia32_emulation=0) has no int 0x80 to filter: the
    // instruction faults (SIGSEGV) before any system call, in the sandbox or out of it.
    const testing::ShellResult outside = testing::RunShell(kInt80Call);
    INFO("outside the sandbox: " << outside.output);
    CHECK(absl::StrContains(outside.output, "python: 139"));
  } else {
    CHECK(absl::StrContains(out, "python: 159"));  // 128 + SIGSYS (31)
  }
}

TEST_CASE("unsandboxed: a command over the kernel's argument limit is the run's error, said so",
          "[sandbox][sealed]") {
  RankSpec spec;
  spec.command = "# " + std::string(1 << 20, 'x');
  auto proc = RankProcess::Start(spec);
  REQUIRE_FALSE(proc.ok());
  CHECK(proc.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(proc.status().message(), "over the kernel's limits"));
}

}  // namespace sealed_sandbox_test
}  // namespace tessera::worker
