// The integrations' script, run for real with /bin/sh and git against a local repository.
#include "worker/daemon/integration_script.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace integration_script_test {

using testing::RunShell;
using testing::TempDir;

v1::Integration GitRepo(const std::string& repo, const std::string& branch = "",
                        const std::string& commit = "") {
  v1::Integration i;
  i.set_integration_type("git_repo");
  auto& f = *i.mutable_fields()->mutable_fields();
  f["git_repo"].set_string_value(repo);
  if (!branch.empty()) f["git_branch"].set_string_value(branch);
  if (!commit.empty()) f["git_commit"].set_string_value(commit);
  return i;
}

TEST_CASE("a shell word survives any text", "[integrations]") {
  CHECK(ShellQuote("it's $HOME `x`") == "'it'\\''s $HOME `x`'");
  TempDir dir;
  auto r = RunShell(absl::StrCat("printf %s ", ShellQuote("it's $HOME `x` \"q\"")));
  CHECK(r.output == "it's $HOME `x` \"q\"");
}

TEST_CASE("git_repo clones at a branch and a commit, a failure names the integration",
          "[integrations]") {
  TempDir dir;
  const std::string origin = dir.path + "/origin";
  const auto made = RunShell(absl::StrCat(
      "set -e; git init -q -b main ", origin, " && cd ", origin,
      " && git -c user.email=t@t -c user.name=t commit -q --allow-empty -m one"
      " && git rev-parse HEAD > ../first"
      " && git checkout -q -b feature && echo feature > f.txt && git add f.txt"
      " && git -c user.email=t@t -c user.name=t commit -q -m two && git checkout -q main"));
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  std::ifstream in(dir.path + "/first");
  std::string first;
  std::getline(in, first);

  google::protobuf::RepeatedPtrField<v1::Integration> list;
  *list.Add() = GitRepo("file://" + origin, "feature");
  v1::Integration wandb;
  wandb.set_integration_type("wandb");  // recorded only: no part of the script
  *list.Add() = wandb;
  *list.Add() = GitRepo("file://" + origin, "", first);
  (*list.Mutable(2)->mutable_fields()->mutable_fields())["path"].set_string_value("pinned");
  CHECK(HasRunIntegrations(list));
  const std::string script = IntegrationScript(list);
  CHECK_FALSE(absl::StrContains(script, "wandb"));
  const std::string work = dir.path + "/work";
  std::filesystem::create_directories(work);
  std::ofstream(work + "/setup.sh") << script;
  auto ran = RunShell(absl::StrCat("cd ", work, " && sh setup.sh"));
  INFO(ran.output);
  REQUIRE(ran.exit_code == 0);
  CHECK(std::filesystem::exists(work + "/origin/f.txt"));  // the branch, in the repo's name
  CHECK(absl::StrContains(ran.output, "integration 0: git_repo file://" + origin + "@feature"));
  auto head = RunShell(absl::StrCat("git -C ", work, "/pinned rev-parse HEAD"));
  CHECK(absl::StrContains(head.output, first));

  // A repository that is not there: exit 100 + its index, and its name in the output.
  google::protobuf::RepeatedPtrField<v1::Integration> bad;
  *bad.Add() = wandb;
  *bad.Add() = GitRepo("file://" + dir.path + "/missing");
  std::ofstream(work + "/bad.sh") << IntegrationScript(bad);
  auto failed = RunShell(absl::StrCat("cd ", work, " && sh bad.sh"));
  CHECK(failed.exit_code == kFirstIntegrationExit + 1);
  CHECK(absl::StrContains(failed.output, "integration 1 (git_repo file://" + dir.path +
                                             "/missing) failed with exit code"));
}

TEST_CASE("pip and apt integrations say what they install", "[integrations]") {
  google::protobuf::RepeatedPtrField<v1::Integration> list;
  v1::Integration pip;
  pip.set_integration_type("pip_packages");
  auto& f = *pip.mutable_fields()->mutable_fields();
  *f["packages"].mutable_list_value()->add_values() = [] {
    google::protobuf::Value v;
    v.set_string_value("numpy==1.26.4");
    return v;
  }();
  f["upgrade"].set_bool_value(true);
  *list.Add() = pip;
  v1::Integration apt = pip;
  apt.set_integration_type("apt_packages");
  *list.Add() = apt;
  const std::string script = IntegrationScript(list);
  // Each body is one quoted word for `sh -ec`: its own quotes are escaped in it.
  CHECK(absl::StrContains(
      script, "-m pip install --no-input $PIP_USER_FLAG --upgrade '\\''numpy==1.26.4'"));
  CHECK(absl::StrContains(script, "apt-get install -y -qq '\\''numpy==1.26.4'"));
  CHECK(absl::StrContains(script, "apt_packages needs root"));
}

TEST_CASE(
    "a local integration's files are unpacked into the working folder, the archive "
    "deleted, a broken archive named",
    "[integrations]") {
  TempDir dir;
  const std::string work = dir.path + "/work";
  std::filesystem::create_directories(dir.path + "/src/code");
  std::filesystem::create_directories(work);
  std::ofstream(dir.path + "/src/code/train.py") << "print(1)\n";
  // As mcli packs it: entries start with the target.
  REQUIRE(RunShell(absl::StrCat("tar -czf ", work, "/", LocalArchiveName(1), " -C ", dir.path,
                                "/src code"))
              .exit_code == 0);
  google::protobuf::RepeatedPtrField<v1::Integration> list;
  v1::Integration wandb;
  wandb.set_integration_type("wandb");
  *list.Add() = wandb;
  v1::Integration local;
  local.set_integration_type("local");
  (*local.mutable_fields()->mutable_fields())["path"].set_string_value("./code");
  *list.Add() = local;
  CHECK(HasRunIntegrations(list));
  std::ofstream(work + "/setup.sh") << IntegrationScript(list);
  auto ran = RunShell(absl::StrCat("cd ", work, " && sh setup.sh"));
  INFO(ran.output);
  REQUIRE(ran.exit_code == 0);
  std::ifstream train(work + "/code/train.py");
  CHECK(std::string(std::istreambuf_iterator<char>(train), {}) == "print(1)\n");
  CHECK_FALSE(std::filesystem::exists(work + "/" + LocalArchiveName(1)));
  CHECK(absl::StrContains(ran.output, "integration 1: local ./code"));
  CHECK(absl::StrContains(ran.output, "[tessera] unpacked ./code into " + work + "/code"));

  std::ofstream(work + "/" + LocalArchiveName(1)) << "not gzip";
  auto failed = RunShell(absl::StrCat("cd ", work, " && sh setup.sh"));
  CHECK(failed.exit_code == kFirstIntegrationExit + 1);
  CHECK(absl::StrContains(failed.output, "integration 1 (local ./code) failed"));
}

}  // namespace integration_script_test
}  // namespace tessera::worker
