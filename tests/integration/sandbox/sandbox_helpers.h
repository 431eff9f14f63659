#pragma once
// What the sandbox's integration tests share: a run submitted as a user, waits for its output and
// its end, and a folder both sides of a sandbox see.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "proto/policy/run_status.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {

namespace sandbox_fs = std::filesystem;

// Waits until `rank` of the run printed `marker`; returns all it printed. Also after the run
// ended: its last lines may reach the log service after its status does.
inline std::string WaitForOutput(LocalCluster& c, const std::string& run, const std::string& marker,
                                 absl::Duration timeout = absl::Seconds(40), int rank = 0) {
  std::string text;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    text = c.LogText(run, rank);
    if (absl::StrContains(text, marker)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return text;
}

// Submits `spec` on the local cluster as `client`'s user.
inline v1::Run SubmitSpec(Client& client, v1::RunSpec spec) {
  spec.mutable_compute()->set_cluster("local");
  v1::SubmitRunRequest req;
  *req.mutable_spec() = std::move(spec);
  v1::SubmitRunResponse resp;
  grpc::Status st = client.runs->SubmitRun(client.Ctx().get(), req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp.run();
}

// `secrets`: the names of the owner's secrets the run gets (RunSpec.secrets).
inline v1::Run SubmitAs(Client& client, const std::string& name, const std::string& image,
                        const std::string& command, int gpus,
                        std::map<std::string, std::string> env = {},
                        const std::vector<std::string>& secrets = {}) {
  v1::RunSpec spec;
  for (const std::string& s : secrets) spec.add_secrets(s);
  spec.set_name(name);
  spec.set_image(image);
  spec.set_command(command);
  spec.mutable_compute()->set_gpus(gpus);
  spec.mutable_compute()->set_nodes(1);
  for (const auto& [k, v] : env) {
    auto* e = spec.add_env_variables();
    e->set_key(k);
    e->set_value(v);
  }
  return SubmitSpec(client, std::move(spec));
}

// Waits until the run has ended, however it ended.
inline v1::Run WaitForEnd(Client& client, const std::string& name, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::Run run = client.Get(name);
  while (absl::Now() < deadline && !IsTerminal(run.status())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    run = client.Get(name);
  }
  return run;
}

// A folder outside /tmp (each sandbox has its own /tmp), readable by every user's ranks.
class SharedScratch {
 public:
  SharedScratch() {
    char pattern[] = "/var/tmp/tessera-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
    sandbox_fs::permissions(path, sandbox_fs::perms(0755));
  }
  ~SharedScratch() {
    std::error_code ignored;
    sandbox_fs::remove_all(path, ignored);
  }
  std::string path;
};

}  // namespace tessera::testing
