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
#include "tests/support/temp_dir.h"
#include "worker/daemon/rank_sandbox.h"

namespace tessera::worker {
namespace {
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
  RankSandbox sandbox{[&] {
    RankSandboxOptions o;
    o.init_path = std::string(TESSERA_BIN_DIR) + "/tessera-sandbox-init";
    o.state_dir = tmp.path + "/state";
    return o;
  }()};
  RankSpec spec;

  explicit SandboxedRank(const std::string& command) {
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
    REQUIRE(sandbox.Apply(start, paths, RankRoot{}, std::nullopt, {}, spec).ok());
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
  r.spec.env[variable] = TESSERA_PRELOAD_MARKER;
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

TEST_CASE("sealed: a command that names a missing program fails as the rank, with the shell's word",
          "[sandbox][sealed]") {
  SandboxedRank r("no-such-program-anywhere --flag");
  const ExitInfo exit = r.Run();
  CHECK(exit == ExitInfo{.exit_code = 127});
  CHECK(absl::StrContains(r.Errors(), "no-such-program-anywhere"));
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

}  // namespace
}  // namespace tessera::worker
