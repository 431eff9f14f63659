// Escapes from a rank's sandbox through what a run says, all real (tessera-server, PostgreSQL,
// tessera-worker with bubblewrap, a docker-registry on loopback): its variables, secrets and
// image may not load a library into any process outside the sandbox, and its command, of any
// size, is its own.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tessera/v1/secrets.grpc.pb.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/oci_registry.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace escape_test {

namespace fs = std::filesystem;

// The lines the preload marker wrote ("NAMESPACE HOW PROGRAM") into any attempt's work folder
// on `worker`, as preload-marks (the rank's variable TESSERA_PRELOAD_MARK is relative: bubblewrap
// starts in that folder, and the command inside it at the same path).
std::vector<std::string> PreloadMarks(LocalCluster& c, const std::string& worker) {
  std::vector<std::string> lines;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(c.worker(worker).state_dir + "/runs", ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->path().filename() != "preload-marks") continue;
    std::ifstream in(it->path());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  return lines;
}

std::string HostMountNamespace() {
  char buf[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/mnt", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

TEST_CASE(
    "a run's LD_PRELOAD and LD_AUDIT, from its variables, a secret or its image, load only inside "
    "its sandbox",
    "[sandbox][escape]") {
  TempDir keys("tessera-keys"), registry_dir("tessera-registry");
  const std::string key_file = keys.path + "/secrets.key";
  std::ofstream(key_file) << std::string(64, 'd') << "\n";
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);
  // The library where both sides of a sandbox see it at the same path, and every user reads it
  // (the build folder may be under /tmp, which is each sandbox's own).
  SharedScratch scratch;
  const std::string library = scratch.path + "/preload_marker.so";
  fs::copy_file(TESSERA_PRELOAD_MARKER, library);
  fs::permissions(library, fs::perms(0644));
  auto registry = OciRegistry::Start(registry_dir.path);
  REQUIRE(registry.ok());
  auto image =
      registry->PushBusyboxImage("test/preloading", "1", {"sh", "echo", "cat"},
                                 {"LD_PRELOAD=" + library, "TESSERA_PRELOAD_MARK=preload-marks"});
  INFO(image.status().ToString());
  REQUIRE(image.ok());
  LocalCluster c({"--secrets-key-file", key_file});
  c.StartWorker(
      "node-a", 1,
      {"--sandbox", "bwrap", "--rank-user", "", "--insecure-registry", registry->address()});
  OpenToPassThrough(c.worker("node-a").state_dir);
  Client mallory(c.server.endpoint(), CreateKey(c.database_url, "mallory", "user"));
  v1::CreateSecretRequest audit;
  audit.mutable_secret()->set_name("audit");
  audit.mutable_secret()->set_type(v1::SECRET_TYPE_ENVIRONMENT);
  audit.mutable_secret()->set_env_key("LD_AUDIT");
  audit.set_value(library);
  v1::CreateSecretResponse created;
  REQUIRE(mallory.secrets->CreateSecret(mallory.Ctx().get(), audit, &created).ok());

  // On the host's root, where the library can load: it must, inside, and only there.
  const v1::Run on_host =
      SubmitAs(mallory, "preload-host", "host", "echo preload-ran", 1,
               {{"LD_PRELOAD", library}, {"TESSERA_PRELOAD_MARK", "preload-marks"}}, {"audit"});
  mallory.WaitForStatus(on_host.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  // In its image (static busybox: nothing loads the library inside, and nothing may outside).
  const v1::Run in_image =
      SubmitAs(mallory, "preload-image", *image, "echo image-ran", 1, {}, {"audit"});
  mallory.WaitForStatus(in_image.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));

  const std::vector<std::string> marks = PreloadMarks(c, "node-a");
  std::string all;
  for (const auto& line : marks) all += line + "\n";
  INFO(all);
  const std::string host = HostMountNamespace();
  bool preloaded = false, audited = false;
  for (const std::string& line : marks) {
    CHECK_FALSE(absl::StartsWith(line, host + " "));  // a process outside the sandbox
    preloaded |= absl::StrContains(line, " preload ");
    audited |= absl::StrContains(line, " audit ");
  }
  // Both took effect where they belong, so the test could have seen an escape.
  CHECK(preloaded);
  CHECK(audited);
  CHECK(absl::StrContains(WaitForOutput(c, on_host.name(), "preload-ran"), "preload-ran"));
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
}

TEST_CASE("a command of 1 MB runs in its sandbox, as the run's command, not a node's fault",
          "[sandbox]") {
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap"});
  OpenToPassThrough(c.worker("node-a").state_dir);
  // Under the spec's 1 MiB limit, eight times the kernel's limit on one argument.
  const std::string command =
      "# " + std::string(1000 * 1000, 'x') + "\necho long-command-ran\nno-such-program-9\n";
  const v1::Run run = SubmitAs(*c.client, "long-command", "host", command, 1);
  const v1::Run failed =
      c.client->WaitForStatus(run.name(), v1::RUN_STATUS_FAILED, absl::Seconds(60));
  INFO(failed.status_reason());
  CHECK(absl::StrContains(WaitForOutput(c, run.name(), "long-command-ran"), "long-command-ran"));
  CHECK(failed.resumption_index() == 0);  // the run's failure: not retried as a node's
  CHECK_FALSE(absl::StrContains(failed.status_reason(), "NODE_FAILURE"));
  CHECK(absl::StrContains(failed.status_reason(), "127"));
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
  CHECK(c.Node("node-a").admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
}

}  // namespace escape_test
}  // namespace tessera::testing
