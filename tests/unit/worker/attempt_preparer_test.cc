// The attempt preparer: pre-flight checks before the image, a stop noticed between steps, and the
// run's integrations run for real (/bin/sh, tar) as the first rank would run them.
#include "worker/daemon/attempt_preparer.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/attempt_record.h"
#include "worker/daemon/integration_script.h"

namespace tessera::worker {
namespace attempt_preparer_test {

using testing::RunShell;
using testing::TempDir;

v1::PreflightCheck Check(const std::string& name, bool passed) {
  v1::PreflightCheck c;
  c.set_name(name);
  c.set_passed(passed);
  c.set_detail(passed ? "fine" : "broken");
  return c;
}

v1::StartAttempt Start(const std::string& image) {
  v1::StartAttempt s;
  s.set_run_id("run-1");
  s.set_resumption_index(2);
  s.set_image(image);
  return s;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

AttemptPreparer Preparer(std::vector<v1::PreflightCheck> checks, int* preflights) {
  AttemptPreparerOptions options;
  options.clock = SystemClock::Shared();
  options.preflight = [checks, preflights](const v1::StartAttempt&) {
    ++*preflights;
    return checks;
  };
  // No image cache: a preparer that went on to the image after a failed check would crash.
  return AttemptPreparer(options);
}

TEST_CASE("a node that fails a pre-flight check reports every check and pulls nothing",
          "[attempts][preflight]") {
  int preflights = 0;
  const AttemptPreparer preparer =
      Preparer({Check("gpus", true), Check("shm", false)}, &preflights);
  const Preparation p = preparer.Prepare(
      Start("registry.local/train:1"), [] { return false; }, [](auto&) {});
  CHECK(preflights == 1);
  REQUIRE(p.outcome == Preparation::Outcome::kFailed);
  REQUIRE(p.failure.preflight_checks_size() == 2);
  CHECK(p.failure.preflight_checks(1).name() == "shm");
  CHECK_FALSE(p.failure.setup_failure());  // the node's fault, not the run's
  CHECK(absl::StrContains(p.failure.detail(), "pre-flight checks failed: "));
  CHECK(absl::StrContains(p.failure.detail(), "shm"));
  CHECK_FALSE(absl::StrContains(p.failure.detail(), "gpus"));
  CHECK(p.digest.empty());
}

TEST_CASE("a stop during the pre-flight checks ends the preparation there",
          "[attempts][preflight]") {
  int preflights = 0;
  const AttemptPreparer preparer = Preparer({Check("shm", false)}, &preflights);
  const Preparation p = preparer.Prepare(
      Start("registry.local/train:1"), [] { return true; }, [](auto&) {});
  CHECK(preflights == 1);
  CHECK(p.outcome == Preparation::Outcome::kCancelled);
  CHECK(p.failure.preflight_checks_size() == 0);  // its stop was reported; nothing else is
}

TEST_CASE("a host run that passes its checks is ready in the host's root", "[attempts]") {
  int preflights = 0;
  const AttemptPreparer preparer = Preparer({Check("gpus", true)}, &preflights);
  const Preparation p = preparer.Prepare(
      Start("host"), [] { return false; }, [](auto&) {});
  CHECK(preflights == 1);
  REQUIRE(p.outcome == Preparation::Outcome::kReady);
  CHECK(p.root.rootfs == "/");
  CHECK(p.digest.empty());  // nothing to release
}

struct IntegrationFixture {
  TempDir dir{"attempt_preparer_test"};
  AttemptPaths paths;
  RankSpec first;
  int begins = 0, ends = 0;
  IntegrationOutput output{[this] { ++begins; }, [this] { ++ends; }};
  AttemptPreparer preparer{AttemptPreparerOptions{
      .state_dir = "", .preflight = nullptr, .images = nullptr, .clock = SystemClock::Shared()}};

  IntegrationFixture() {
    paths.work_dir = dir.path + "/work";
    std::filesystem::create_directories(paths.work_dir);
    first.rank = 3;
    first.working_dir = paths.work_dir;
    first.stdout_path = dir.path + "/stdout";
    first.stderr_path = dir.path + "/stderr";
  }

  // A `local` integration of the files under src/code, packed as mcli packs them.
  v1::StartAttempt WithLocalCode(const std::string& archive_override = "") {
    std::string archive = archive_override;
    if (archive.empty()) {
      std::filesystem::create_directories(dir.path + "/src/code");
      std::ofstream(dir.path + "/src/code/train.py") << "print(1)\n";
      REQUIRE(RunShell(absl::StrCat("tar -czf ", dir.path, "/code.tgz -C ", dir.path, "/src code"))
                  .exit_code == 0);
      archive = Read(dir.path + "/code.tgz");
    }
    v1::StartAttempt start = Start("host");
    v1::Integration local;
    local.set_integration_type("local");
    auto& fields = *local.mutable_fields()->mutable_fields();
    fields["path"].set_string_value("./code");
    fields["archive"].set_string_value(absl::Base64Escape(archive));
    *start.add_integrations() = local;
    return start;
  }
};

TEST_CASE("integrations run in the first rank's working folder before it starts",
          "[attempts][integrations]") {
  IntegrationFixture f;
  const absl::Status st = f.preparer.RunIntegrations(
      f.WithLocalCode(), f.paths, f.first, [] { return false; }, f.output);
  INFO(Read(f.first.stdout_path) + Read(f.first.stderr_path));
  REQUIRE(st.ok());
  CHECK(Read(f.paths.work_dir + "/code/train.py") == "print(1)\n");
  CHECK_FALSE(std::filesystem::exists(f.paths.work_dir + "/" + LocalArchiveName(0)));
  CHECK(f.begins == 1);
  CHECK(f.ends == 0);  // the rank's own output follows in the same files
}

TEST_CASE("a failed integration is named as the run's doing and its output completed",
          "[attempts][integrations]") {
  IntegrationFixture f;
  const absl::Status st = f.preparer.RunIntegrations(
      f.WithLocalCode("not gzip"), f.paths, f.first, [] { return false; }, f.output);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(st.message() == "integration local ./code failed (its output is in rank 3's log)");
  CHECK(f.begins == 1);
  CHECK(f.ends == 1);
}

TEST_CASE("an archive that is not base64 fails before anything runs", "[attempts][integrations]") {
  IntegrationFixture f;
  v1::StartAttempt start = f.WithLocalCode("x");
  (*start.mutable_integrations(0)->mutable_fields()->mutable_fields())["archive"].set_string_value(
      "%%%");
  const absl::Status st = f.preparer.RunIntegrations(
      start, f.paths, f.first, [] { return false; }, f.output);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(st.message() ==
        "the integrations could not start: integration local ./code: its archive is not base64");
  CHECK(f.begins == 0);
}

TEST_CASE("a stop while the integrations run stops their script", "[attempts][integrations]") {
  IntegrationFixture f;
  // A shell that records its pid and then takes its time, whatever the script says.
  const std::string shell = f.dir.path + "/slow-shell";
  std::ofstream(shell) << "#!/bin/sh\necho $$ > " << f.dir.path << "/pid\nexec sleep 60\n";
  std::filesystem::permissions(shell, std::filesystem::perms::owner_all);
  f.first.shell = shell;
  const std::string pid_file = f.dir.path + "/pid";
  const absl::Status st = f.preparer.RunIntegrations(
      f.WithLocalCode(), f.paths, f.first,
      [&] { return std::filesystem::exists(pid_file) && !Read(pid_file).empty(); }, f.output);
  CHECK(absl::IsCancelled(st));
  const pid_t pid = std::stoi(Read(pid_file));
  CHECK_FALSE(ProcessAlive(pid));
  CHECK(f.ends == 0);
}

}  // namespace attempt_preparer_test
}  // namespace tessera::worker
