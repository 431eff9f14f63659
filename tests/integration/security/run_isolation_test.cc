// The security suite, from inside a run and from another user (real tessera-server, real
// workers, real ranks): a run's command reaches no credential on its node, cannot freeze its
// worker, a revoked worker key ends the worker's stream, and other users' runs stay private.

#include <pwd.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {
namespace run_isolation_test {

namespace fs = std::filesystem;

// Waits for the run to end and returns everything its rank 0 printed.
std::string OutputOf(LocalCluster& c, const v1::Run& run) {
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  std::string text;
  for (int i = 0; i < 100; ++i) {  // the last batch may still be on its way
    text = c.LogText(run.name(), 0);
    if (absl::StrContains(text, "done-reading")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return text;
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(s.str()));
}

TEST_CASE("a run's command reaches no credential on its node", "[security]") {
  LocalCluster c;
  const struct passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  c.StartWorker("node-a", 1, {"--rank-user", "nobody"});
  // The test's own folders are private (mkdtemp): let the rank pass through to its own.
  const fs::path root = fs::path(c.worker("node-a").state_dir).parent_path();
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const std::string state = c.worker("node-a").state_dir;
  const std::string key_file = c.worker("node-a").key_file;
  const std::string worker_key = FileText(key_file);
  REQUIRE(absl::StartsWith(worker_key, "tsk_"));
  const std::string worker_pid = std::to_string(c.worker("node-a").process->pid());
  // Everywhere a credential could be: every process's environment and command line, the
  // worker's state folder and key file, mcli's config in the home folders, `ps e`.
  const std::string command = absl::StrCat(
      "echo uid=$(id -u); "
      "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' ' ' <\"$f\" 2>/dev/null; "
      "echo; done; "
      "cat /proc/",
      worker_pid, "/environ 2>&1; ", "ls -la ", state, " 2>&1; cat ", state, "/* ", key_file,
      " 2>&1; ", "find ", root.string(), " -name '*.key' 2>/dev/null | xargs cat 2>&1; ",
      "cat ~/.tessera/* /root/.tessera/* /root/.config/tessera/* 2>&1; ",
      "ps e -A 2>&1 | head -200; env; echo done-reading");
  const v1::Run run = c.Submit("snoop", command, 1, 1);
  const std::string out = OutputOf(c, run);
  INFO(out.substr(0, 4000));
  CHECK(absl::StrContains(out, absl::StrCat("uid=", nobody->pw_uid)));
  CHECK(absl::StrContains(out, "done-reading"));
  CHECK_FALSE(absl::StrContains(out, worker_key));
  CHECK_FALSE(absl::StrContains(out, c.admin_key));
  CHECK_FALSE(absl::StrContains(out, "tsk_"));
  // What protects it: the key file is the worker's alone, its state folder unlistable.
  struct stat st;
  REQUIRE(::stat(key_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  REQUIRE(::stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 07) == 01);  // others may pass through, not list or read
}

TEST_CASE("a run's progress file linked to /dev/zero freezes nothing and costs no one else",
          "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 2);
  const v1::Run other = c.Submit("bystander", "sleep 30", 1, 1);
  c.client->WaitForStatus(other.name(), v1::RUN_STATUS_RUNNING);
  const v1::Run attack =
      c.Submit("attack", "ln -sf /dev/zero \"$TESSERA_PROGRESS_FILE\"; sleep 12", 1, 1);
  c.client->WaitForStatus(attack.name(), v1::RUN_STATUS_RUNNING);
  // Longer than the lease (2.8 s) several times over: a frozen heartbeat would fence the node.
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
  }
  const v1::Run bystander = c.client->Get(other.name());
  CHECK(bystander.status() == v1::RUN_STATUS_RUNNING);
  CHECK(bystander.resumption_index() == 0);
  c.client->WaitForStatus(attack.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(30));
}

TEST_CASE("a worker whose key is revoked loses its stream", "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 1);
  v1::ListApiKeysRequest list;
  list.set_user("node-a");
  v1::ListApiKeysResponse keys;
  REQUIRE(c.client->admin->ListApiKeys(c.client->Ctx().get(), list, &keys).ok());
  REQUIRE(keys.keys_size() == 1);
  CHECK(keys.keys(0).role() == v1::ROLE_NODE);
  CHECK(keys.keys(0).node() == "node-a");
  v1::RevokeApiKeyRequest revoke;
  revoke.set_id(keys.keys(0).id());
  v1::RevokeApiKeyResponse revoked;
  REQUIRE(c.client->admin->RevokeApiKey(c.client->Ctx().get(), revoke, &revoked).ok());
  // The cached answer lasts 5 s, the lease 2.8 s.
  c.WaitForLiveness("node-a", v1::NODE_LIVENESS_LOST, absl::Seconds(20));
  auto line = c.worker("node-a").process->WaitForLine("revoked", absl::Seconds(10));
  CHECK(line.ok());
}

TEST_CASE("another user's runs stay private: queue, runs, logs, nodes", "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 1);
  const v1::Run running = c.Submit("secret-project", "echo secret-line; sleep 30", 1, 1);
  c.client->WaitForStatus(running.name(), v1::RUN_STATUS_RUNNING);
  const v1::Run queued = c.Submit("secret-queued", "sleep 1", 1, 1);
  c.client->WaitForStatus(queued.name(), v1::RUN_STATUS_QUEUED);
  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));

  v1::GetQueueResponse queue;
  REQUIRE(bob.scheduler->GetQueue(bob.Ctx().get(), v1::GetQueueRequest(), &queue).ok());
  REQUIRE(queue.entries_size() == 1);
  const v1::Run& shown = queue.entries(0).run();
  CHECK(shown.name() == "(another user's run)");
  CHECK(shown.id().empty());
  CHECK(shown.user().empty());
  CHECK(shown.spec().command().empty());
  CHECK(shown.spec().compute().gpus() == 1);  // what it waits for is no secret

  v1::GetRunRequest get;
  get.set_name(running.name());
  v1::GetRunResponse got;
  CHECK(bob.runs->GetRun(bob.Ctx().get(), get, &got).error_code() == grpc::StatusCode::NOT_FOUND);
  v1::ListRunsRequest list;
  list.mutable_filter()->set_user(running.user());
  v1::ListRunsResponse listed;
  CHECK(bob.runs->ListRuns(bob.Ctx().get(), list, &listed).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  REQUIRE(bob.runs->ListRuns(bob.Ctx().get(), v1::ListRunsRequest(), &listed).ok());
  CHECK(listed.runs_size() == 0);
  v1::GetNodeRequest node;
  node.set_name("node-a");
  v1::GetNodeResponse described;
  REQUIRE(bob.scheduler->GetNode(bob.Ctx().get(), node, &described).ok());
  CHECK(described.run_names_size() == 0);
  {
    auto logs = v1::LogService::NewStub(
        grpc::CreateChannel(c.server.endpoint(), grpc::InsecureChannelCredentials()));
    v1::GetLogsRequest req;
    req.set_run_name(running.name());
    auto ctx = bob.Ctx();
    auto reader = logs->GetLogs(ctx.get(), req);
    v1::LogLine line;
    CHECK_FALSE(reader->Read(&line));
    CHECK(reader->Finish().error_code() == grpc::StatusCode::NOT_FOUND);
  }
  // An operator sees every run but changes only their own.
  Client ops(c.server.endpoint(), CreateKey(c.database_url, "ops2", "operator"));
  REQUIRE(ops.runs->GetRun(ops.Ctx().get(), get, &got).ok());
  v1::StopRunRequest stop;
  stop.set_name(running.name());
  v1::StopRunResponse stopped;
  CHECK(ops.runs->StopRun(ops.Ctx().get(), stop, &stopped).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace run_isolation_test
}  // namespace tessera::testing
