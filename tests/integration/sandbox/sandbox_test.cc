// The rank sandbox, all real: tessera-server, PostgreSQL, tessera-worker with bubblewrap, a
// docker-registry on loopback serving images built here. Two users' runs on one node cannot
// see or touch each other; a rank sees only its own GPU's device node; a rank that leaves its
// process group is still stopped; a run runs in its image, by digest; a bad image fails the run.

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "proto/policy/run_status.h"
#include "tessera/v1/secrets.grpc.pb.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"
#include "tests/support/oci_registry.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/rank_sandbox.h"

namespace tessera::testing {
namespace sandbox_test {

namespace fs = std::filesystem;

TEST_CASE("two users' runs on one node: neither sees nor touches the other's", "[sandbox]") {
  LocalCluster c;
  TempDir dev("tessera-dev"), shared("tessera-shared");
  for (const char* name : {"nvidia0", "nvidia1", "nvidiactl"}) {
    std::ofstream(dev.path + "/" + name) << "";
  }
  OpenToPassThrough(shared.path);
  OpenToPassThrough(dev.path);
  // No --rank-user: each user's ranks run as the uid the control plane gave that user.
  c.StartWorker("node-a", 2,
                {"--sandbox", "bwrap", "--rank-user", "", "--shared-dir", shared.path,
                 "--gpu-device-dir", dev.path});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const std::string state = c.worker("node-a").state_dir;

  const v1::Run alice = SubmitAs(
      *c.client, "alice-run", "host",
      "echo alice-secret-file > \"$TESSERA_SHARED_DIR/secret\"; echo shared=$TESSERA_SHARED_DIR; "
      "echo uid=$(id -u); ls /dev; echo alice-ready; sleep 60",
      1, {{"ALICE_TOKEN", "alice-env-secret"}});
  const std::string alice_out = WaitForOutput(c, alice.name(), "alice-ready");
  INFO(alice_out);
  REQUIRE(absl::StrContains(alice_out, "alice-ready"));
  const std::string alice_shared = alice_out.substr(
      alice_out.find("shared=") + 7,
      alice_out.find('\n', alice_out.find("shared=")) - alice_out.find("shared=") - 7);
  REQUIRE(absl::StartsWith(alice_shared, shared.path + "/"));

  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));
  const std::string attack = absl::StrCat(
      "echo uid=$(id -u); echo procs:; ps -e -o pid=,comm= 2>&1; "
      "cat ",
      alice_shared, "/secret 2>&1; ls ", alice_shared, " 2>&1; ",
      "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep ALICE; ", "ls -a ", state,
      " 2>&1; kill -TERM -1 2>&1; echo gpus:; ls /dev | grep nvidia; ", "echo bob-done");
  const v1::Run bob_run = SubmitAs(bob, "bob-run", "host", attack, 1);
  bob.WaitForStatus(bob_run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(40));
  const std::string bob_out = WaitForOutput(c, bob_run.name(), "bob-done");
  INFO(bob_out);
  REQUIRE(absl::StrContains(bob_out, "bob-done"));
  // Each user has a uid of their own, and neither is root.
  const std::string alice_uid = alice_out.substr(alice_out.find("uid=") + 4, 6);
  const std::string bob_uid = bob_out.substr(bob_out.find("uid=") + 4, 6);
  CHECK(alice_uid != bob_uid);
  CHECK(alice_uid.front() != '0');
  // Bob sees none of Alice's files, environment or processes, nor the worker's state.
  CHECK_FALSE(absl::StrContains(bob_out, "alice-secret-file"));
  CHECK_FALSE(absl::StrContains(bob_out, "alice-env-secret"));
  CHECK_FALSE(absl::StrContains(bob_out, "sleep"));
  CHECK_FALSE(absl::StrContains(bob_out, "tessera-worker"));
  CHECK_FALSE(absl::StrContains(bob_out, "attempt-"));
  CHECK_FALSE(absl::StrContains(bob_out, "credentials"));
  // Each rank sees its own GPU's node and the control node, not the other GPU's.
  for (const std::string* out : {&alice_out, &bob_out}) {
    const bool gpu0 = absl::StrContains(*out, "nvidia0\n");
    const bool gpu1 = absl::StrContains(*out, "nvidia1\n");
    CHECK(gpu0 != gpu1);
    CHECK(absl::StrContains(*out, "nvidiactl"));
  }
  // Bob's kill -1 reached nothing of Alice's: her run goes on.
  CHECK(c.client->Get(alice.name()).status() == v1::RUN_STATUS_RUNNING);
  CHECK(c.worker("node-a").process->Running());
}

// Whether a process whose command line contains `needle` is alive on the host.
bool HostProcessWith(const std::string& needle) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (absl::StrContains(cmdline, needle) && !absl::StrContains(cmdline, "sh -c")) return true;
  }
  return false;
}

TEST_CASE("a rank that leaves its process group is stopped with its sandbox", "[sandbox]") {
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap"});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const v1::Run run =
      c.Submit("escape", "setsid sleep 1237 & sleep 1238 & echo escaped; wait", 1, 1);
  REQUIRE(absl::StrContains(WaitForOutput(c, run.name(), "escaped"), "escaped"));
  REQUIRE(HostProcessWith("sleep 1237"));
  v1::StopRunRequest stop;
  stop.set_name(run.name());
  v1::StopRunResponse stopped;
  REQUIRE(c.client->runs->StopRun(c.client->Ctx().get(), stop, &stopped).ok());
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_STOPPED, absl::Seconds(30));
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = !HostProcessWith("sleep 1237") && !HostProcessWith("sleep 1238");
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(gone);
}

TEST_CASE("a rank past its memory limit is stopped by the kernel, one within it runs",
          "[sandbox]") {
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap", "--rank-memory-limit", "96MiB"});
  OpenToPassThrough(c.worker("node-a").state_dir);
  // 512 MiB written (not only reserved), so every page counts against the limit.
  const v1::Run big = c.Submit(
      "too-big", "python3 -c \"x = b'1' * (512 << 20); print('allocated', len(x))\"", 1, 1);
  const v1::Run failed =
      c.client->WaitForStatus(big.name(), v1::RUN_STATUS_FAILED, absl::Seconds(60));
  CHECK(failed.status_reason() == "exit code 137");  // SIGKILL, as the shell reports it
  // The rank's log says why, which the exit code alone does not.
  const std::string said = WaitForOutput(c, big.name(), "out of memory");
  CHECK(absl::StrContains(said,
                          "[tessera] rank 0 was killed by the kernel: out of memory at its "
                          "limit of 96MiB (the node's --rank-memory-limit)"));
  CHECK_FALSE(absl::StrContains(said, "allocated"));
  const v1::Run small =
      c.Submit("fits", "python3 -c \"x = b'1' * (16 << 20); print('fits', len(x))\"", 1, 1);
  c.client->WaitForStatus(small.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  CHECK(absl::StrContains(WaitForOutput(c, small.name(), "fits"), "fits 16777216"));
}

// The limit the kernel holds a rank's cgroup to (v1 or v2); empty where it has none.
std::string CgroupMemoryLimit(const std::string& name) {
  for (const std::string& file :
       {"/sys/fs/cgroup/memory/tessera/" + name + "/memory.limit_in_bytes",
        "/sys/fs/cgroup/tessera/" + name + "/memory.max"}) {
    std::ifstream in(file);
    std::string limit;
    if (in >> limit) return limit;
  }
  return "";
}

TEST_CASE("by default a rank is held to its share of the node's memory", "[sandbox]") {
  LocalCluster c;
  c.StartWorker("node-a", 2, {"--sandbox", "bwrap"});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const v1::Run run = c.Submit("shared-node", "echo started; sleep 60", 1, 1);
  WaitForOutput(c, run.name(), "started");
  const int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  const std::string limit = CgroupMemoryLimit(absl::StrCat(run.id(), "-0-rank-0"));
  INFO("the rank's cgroup memory limit: " << limit);
  CHECK(limit == std::to_string(worker::RankMemoryShare(memory, 2)));
}

TEST_CASE("a run runs in its image, pulled once and pinned by digest, a bad image fails it",
          "[sandbox]") {
  TempDir registry_dir("tessera-registry");
  auto registry = OciRegistry::Start(registry_dir.path);
  REQUIRE(registry.ok());
  auto image =
      registry->PushBusyboxImage("test/busybox", "1", {"sh", "ls", "cat", "echo", "id", "sleep"});
  INFO(image.status().ToString());
  REQUIRE(image.ok());
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap", "--insecure-registry", registry->address()});
  OpenToPassThrough(c.worker("node-a").state_dir);

  v1::SubmitRunRequest req;
  const v1::Run first = SubmitAs(*c.client, "in-image", *image,
                                 "ls /; cat /etc/issue; echo var=$IMAGE_VAR; echo image-ok", 1);
  c.client->WaitForStatus(first.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  const std::string out = WaitForOutput(c, first.name(), "image-ok");
  INFO(out);
  CHECK(absl::StrContains(out, "Tessera test image"));
  CHECK(absl::StrContains(out, "var=from-image"));
  // The image's root, not the host's: no /home, no /var, no /work.
  CHECK_FALSE(absl::StrContains(out, "\nhome\n"));
  CHECK_FALSE(absl::StrContains(out, "\nvar\n"));
  const v1::RunDescription described = c.client->Describe(first.name());
  REQUIRE(described.attempts_size() == 1);
  CHECK(absl::StartsWith(described.attempts(0).image_digest(), "sha256:"));
  bool pulling = false, running_image = false;
  for (const auto& e : described.events()) {
    pulling |= absl::StartsWith(e.message(), "Pulling image");
    running_image |= absl::StrContains(e.message(), described.attempts(0).image_digest());
  }
  CHECK(pulling);
  CHECK(running_image);

  // The same image again starts without a pull.
  const v1::Run second = SubmitAs(*c.client, "in-image-again", *image, "echo again-ok", 1);
  c.client->WaitForStatus(second.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  const v1::RunDescription second_described = c.client->Describe(second.name());
  for (const auto& e : second_described.events()) {
    CHECK_FALSE(absl::StartsWith(e.message(), "Pulling image"));
  }

  // A tag that does not exist: the run fails, saying so, and is not retried.
  v1::SubmitRunRequest bad;
  const v1::Run missing =
      SubmitAs(*c.client, "bad-image", absl::StrCat(registry->address(), "/test/missing:9"),
               "echo never", 1);
  const v1::Run failed =
      c.client->WaitForStatus(missing.name(), v1::RUN_STATUS_FAILED, absl::Seconds(60));
  CHECK(absl::StrContains(failed.status_reason(), "Image not found"));
  CHECK(failed.resumption_index() == 0);
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
}

TEST_CASE("secrets reach only their owner's ranks, sealed everywhere else", "[sandbox]") {
  TempDir keys("tessera-keys");
  const std::string key_file = keys.path + "/secrets.key";
  std::ofstream(key_file) << std::string(64, 'c') << "\n";
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);
  LocalCluster c({"--secrets-key-file", key_file});
  c.StartWorker("node-a", 2, {"--sandbox", "bwrap", "--rank-user", ""});
  OpenToPassThrough(c.worker("node-a").state_dir);

  Client alice(c.server.endpoint(), CreateKey(c.database_url, "alice", "user"));
  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));
  {
    v1::CreateSecretRequest env;
    env.mutable_secret()->set_name("hf");
    env.mutable_secret()->set_type(v1::SECRET_TYPE_ENVIRONMENT);
    env.mutable_secret()->set_env_key("HF_TOKEN");
    env.set_value("alice-env-value-93");
    v1::CreateSecretResponse created;
    REQUIRE(alice.secrets->CreateSecret(alice.Ctx().get(), env, &created).ok());
    v1::CreateSecretRequest file;
    file.mutable_secret()->set_name("cfg");
    file.mutable_secret()->set_type(v1::SECRET_TYPE_MOUNTED);
    file.mutable_secret()->set_mount_path("/secrets/cfg.json");
    file.set_value("alice-file-value-17");
    REQUIRE(alice.secrets->CreateSecret(alice.Ctx().get(), file, &created).ok());
  }
  const v1::Run mine =
      SubmitAs(alice, "uses-secrets", "host",
               "echo env=$HF_TOKEN; echo file=$(cat /secrets/cfg.json); stat -c 'mode=%a' "
               "/secrets/cfg.json; echo secrets-done",
               1, {}, {"hf", "cfg"});
  alice.WaitForStatus(mine.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(40));
  const std::string out = WaitForOutput(c, mine.name(), "secrets-done");
  INFO(out);
  CHECK(absl::StrContains(out, "env=alice-env-value-93"));
  CHECK(absl::StrContains(out, "file=alice-file-value-17"));
  CHECK(absl::StrContains(out, "mode=400"));

  // A run of hers that names only hf: its node never gets the file secret.
  const v1::Run named_one =
      SubmitAs(alice, "names-one", "host",
               "echo env=$HF_TOKEN; cat /secrets/cfg.json 2>&1; echo one-done", 1, {}, {"hf"});
  alice.WaitForStatus(named_one.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(40));
  const std::string one_out = WaitForOutput(c, named_one.name(), "one-done");
  INFO(one_out);
  CHECK(absl::StrContains(one_out, "env=alice-env-value-93"));
  CHECK_FALSE(absl::StrContains(one_out, "alice-file-value-17"));

  const v1::Run theirs =
      SubmitAs(bob, "no-secrets", "host",
               "echo env=${HF_TOKEN:-none}; cat /secrets/cfg.json 2>&1; echo bob-done", 1);
  bob.WaitForStatus(theirs.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(40));
  const std::string bob_out = WaitForOutput(c, theirs.name(), "bob-done");
  INFO(bob_out);
  CHECK(absl::StrContains(bob_out, "env=none"));
  CHECK_FALSE(absl::StrContains(bob_out, "alice-file-value-17"));

  // Never in clear in the database (rows, audit), in describe, or in the worker's state.
  ShellResult dump = RunShell(absl::StrCat("pg_dump --data-only '", c.database_url,
                                           "' 2>&1 || /usr/lib/postgresql/15/bin/pg_dump "
                                           "--data-only '",
                                           c.database_url, "' 2>&1"));
  REQUIRE(absl::StrContains(dump.output, "secrets"));
  CHECK_FALSE(absl::StrContains(dump.output, "alice-env-value-93"));
  CHECK_FALSE(absl::StrContains(dump.output, "alice-file-value-17"));
  const v1::RunDescription described = alice.Describe(mine.name());
  CHECK_FALSE(absl::StrContains(described.DebugString(), "alice-env-value-93"));
  // The file the worker wrote for the rank is gone with the attempt (what the rank printed is
  // its log's, and so in the spool).
  ShellResult state = RunShell(absl::StrCat("grep -rl alice-file-value-17 ",
                                            c.worker("node-a").state_dir, " | grep -v /logs/"));
  CHECK(state.output.empty());
}

TEST_CASE("integrations run before the command: git_repo at a branch and commit, a wheel",
          "[sandbox]") {
  SharedScratch scratch;
  const std::string origin = scratch.path + "/tiny-lib";
  ShellResult made = RunShell(absl::StrCat(
      "set -e; git init -q -b main ", origin, " && cd ", origin,
      " && echo v1 > version && git add version"
      " && git -c user.email=t@t -c user.name=t commit -q -m one"
      " && git rev-parse HEAD > ",
      scratch.path, "/first",
      " && git checkout -q -b feature && echo feature > version"
      " && git -c user.email=t@t -c user.name=t commit -q -am two && git checkout -q main"
      " && chmod -R a+rX ",
      scratch.path, " && cd ", scratch.path,
      " && /usr/bin/python3 - <<'PY'\n"
      "import zipfile\n"
      "name = 'tessera_probe-1.0'\n"
      "with zipfile.ZipFile('tessera_probe-1.0-py3-none-any.whl', 'w') as z:\n"
      "    z.writestr('tessera_probe/__init__.py', 'VALUE = 42\\n')\n"
      "    z.writestr(name + '.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: "
      "tessera-probe\\nVersion: 1.0\\n')\n"
      "    z.writestr(name + '.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: "
      "test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
      "    z.writestr(name + '.dist-info/RECORD', '')\n"
      "PY\n chmod a+r ",
      scratch.path, "/*.whl"));
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  std::ifstream in(scratch.path + "/first");
  std::string first;
  std::getline(in, first);

  const std::string git_config = scratch.path + "/gitconfig";
  std::ofstream(git_config) << "[safe]\n\tdirectory = *\n";
  fs::permissions(git_config, fs::perms(0644));
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap", "--rank-user", ""});
  OpenToPassThrough(c.worker("node-a").state_dir);
  v1::SubmitRunRequest req;
  auto* spec = req.mutable_spec();
  spec->set_name("integrated");
  spec->set_image("host");
  spec->set_command(
      "echo branch=$(cat tiny-lib/version); echo pinned=$(git -C pinned rev-parse HEAD); "
      "python3 -c 'import tessera_probe; print(\"probe\", tessera_probe.VALUE)'; echo run-done");
  spec->mutable_compute()->set_gpus(1);
  spec->mutable_compute()->set_cluster("local");
  for (auto [k, v] : {std::pair{"PATH", "/usr/bin:/bin"},
                      // The test's repository is root's, and git clones others' only when a
                      // global config says it may (safe.directory).
                      std::pair{"GIT_CONFIG_GLOBAL", git_config.c_str()},
                      // Debian's Python refuses pip installs outside a virtual environment.
                      std::pair{"PIP_BREAK_SYSTEM_PACKAGES", "1"},
                      std::pair{"PIP_DISABLE_PIP_VERSION_CHECK", "1"}}) {
    auto* e = spec->add_env_variables();
    e->set_key(k);
    e->set_value(v);
  }
  auto add = [&](const std::string& type) {
    auto* i = spec->add_integrations();
    i->set_integration_type(type);
    return i->mutable_fields()->mutable_fields();
  };
  auto* branch = add("git_repo");
  (*branch)["git_repo"].set_string_value("file://" + origin);
  (*branch)["git_branch"].set_string_value("feature");
  auto* pinned = add("git_repo");
  (*pinned)["git_repo"].set_string_value("file://" + origin);
  (*pinned)["git_commit"].set_string_value(first);
  (*pinned)["path"].set_string_value("pinned");
  auto* pip = add("pip_packages");
  (*pip)["packages"].mutable_list_value()->add_values()->set_string_value(
      scratch.path + "/tessera_probe-1.0-py3-none-any.whl");
  add("wandb");
  v1::SubmitRunResponse submitted;
  REQUIRE(c.client->runs->SubmitRun(c.client->Ctx().get(), req, &submitted).ok());
  const std::string name = submitted.run().name();
  const v1::Run ended = WaitForEnd(*c.client, name, absl::Seconds(90));
  const std::string out = WaitForOutput(c, name, "run-done", absl::Seconds(5));
  INFO(out);
  REQUIRE(ended.status() == v1::RUN_STATUS_COMPLETED);
  CHECK(absl::StrContains(out, "[tessera] integration 0: git_repo"));
  CHECK(absl::StrContains(out, "branch=feature"));
  CHECK(absl::StrContains(out, "pinned=" + first));
  CHECK(absl::StrContains(out, "probe 42"));

  // A failing integration fails the run, naming it; the command never runs.
  spec->set_name("bad-integration");
  spec->clear_integrations();
  (*add("git_repo"))["git_repo"].set_string_value("file://" + scratch.path + "/missing");
  REQUIRE(c.client->runs->SubmitRun(c.client->Ctx().get(), req, &submitted).ok());
  const v1::Run failed =
      c.client->WaitForStatus(submitted.run().name(), v1::RUN_STATUS_FAILED, absl::Seconds(60));
  CHECK(absl::StrContains(failed.status_reason(),
                          "integration git_repo file://" + scratch.path + "/missing failed"));
  CHECK(failed.resumption_index() == 0);
}
TEST_CASE("a local integration brings the submitter's files into the working folder", "[sandbox]") {
  SharedScratch scratch;
  fs::create_directories(scratch.path + "/code/sub");
  std::ofstream(scratch.path + "/code/hello.txt") << "hello-from-laptop\n";
  std::ofstream(scratch.path + "/code/sub/run.sh") << "echo script-ran\n";
  fs::permissions(scratch.path + "/code/sub/run.sh", fs::perms(0755));
  std::ofstream(scratch.path + "/settings.cfg") << "lr=0.25\n";
  const std::string yaml = scratch.path + "/run.yaml";
  std::ofstream(yaml) << "name: local-files\nimage: host\n"
                         "command: cat code/hello.txt; sh code/sub/run.sh; cat configs/run.cfg; "
                         "ls -a; echo run-done\n"
                         "compute:\n  gpus: 1\n  cluster: local\n"
                         "env_variables:\n  - key: PATH\n    value: /usr/bin:/bin\n"
                         "integrations:\n"
                         "  - integration_type: local\n    path: "
                      << scratch.path << "/code\n"
                      << "  - integration_type: local\n    path: " << scratch.path
                      << "/settings.cfg\n    target: configs/run.cfg\n";
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap", "--rank-user", ""});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const ShellResult submitted = c.Mcli("run -f " + yaml);
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  // mcli prints the run's name (the file's, with a suffix of its own).
  const std::string name(absl::StripAsciiWhitespace(submitted.output));
  REQUIRE(absl::StartsWith(name, "local-files-"));
  const v1::Run ended = WaitForEnd(*c.client, name, absl::Seconds(60));
  const std::string out = WaitForOutput(c, name, "run-done", absl::Seconds(5));
  INFO(out);
  REQUIRE(ended.status() == v1::RUN_STATUS_COMPLETED);
  CHECK(absl::StrContains(out, "hello-from-laptop"));
  CHECK(absl::StrContains(out, "script-ran"));
  CHECK(absl::StrContains(out, "lr=0.25"));
  CHECK(absl::StrContains(out, "[tessera] unpacked " + scratch.path + "/code into "));
  CHECK_FALSE(absl::StrContains(out, ".tessera-local-"));  // the archives were deleted

  // Files over the limit are refused by mcli, before anything is sent.
  std::string noise(700 << 10, '\0');
  std::mt19937 rng(13);  // random bytes do not compress
  for (char& byte : noise) byte = static_cast<char>(rng());
  std::ofstream(scratch.path + "/code/noise.bin", std::ios::binary) << noise;
  const ShellResult refused = c.Mcli("run -f " + yaml);
  CHECK(refused.exit_code == 2);
  CHECK(absl::StrContains(refused.output, "integrations[0].path: " + scratch.path +
                                              "/code: its files pack to more than the 524288"));
}

}  // namespace sandbox_test
}  // namespace tessera::testing
