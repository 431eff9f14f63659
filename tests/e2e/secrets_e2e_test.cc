// Secrets and the API key reach mcli without the command line (where others on the machine see
// them in ps, and shells keep them): from standard input, a file or the environment, on the real
// server, and a run's rank gets each value as it was read.
#include <catch2/catch.hpp>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace {

TEST_CASE("secrets and the API key reach mcli from stdin, a file or the environment", "[e2e]") {
  const TempDir dir("tessera-secrets-e2e");
  // The cluster's key for secrets (64 hex digits, mode 600).
  const std::string key_file = dir.Write("secrets.key", std::string(64, 'c') + "\n");
  std::filesystem::permissions(
      key_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  LocalCluster c({"--secrets-key-file", key_file});
  c.StartWorker("node-a", 1);
  dir.Write("token", "from-stdin\n");
  dir.Write("value", "from-a-file\n");
  // mcli in `dir`, with `env` before it and the server's address; as the admin unless `key`.
  auto mcli = [&](const std::string& env, const std::string& args, const std::string& key = "") {
    return RunShell(absl::StrCat("cd ", dir.path, " && ", env,
                                 " TESSERA_ENDPOINT=", c.server.endpoint(),
                                 key.empty() ? " TESSERA_CONFIG=/nonexistent" : "",
                                 key.empty() ? absl::StrCat(" TESSERA_API_KEY=", c.admin_key) : key,
                                 " ", BinaryPath("mcli"), " ", args, " 2>&1"));
  };
  for (const auto& [env, args] : std::vector<std::pair<std::string, std::string>>{
           {"", "create secret env STDIN_TOKEN=- < token"},
           {"ENV_TOKEN=from-env", "create secret env ENV_TOKEN"},
           {"", "create secret env FILE_TOKEN --from-file value"},
           {"",
            "create secret docker-registry --server r.example:5000 --username u "
            "--password-stdin < token"}}) {
    const ShellResult r = mcli(env, args);
    INFO(args << ": " << r.output);
    CHECK(r.exit_code == 0);
  }
  // Mistakes: one line that says what is wrong, exit 2, nothing created.
  const ShellResult unset = mcli("", "create secret env UNSET_TOKEN");
  CHECK(unset.exit_code == 2);
  CHECK(absl::StrContains(unset.output, "environment variable UNSET_TOKEN, which is not set"));
  const ShellResult no_password =
      mcli("", "create secret docker-registry --server r.example --username u");
  CHECK(no_password.exit_code == 2);
  CHECK(absl::StrContains(no_password.output, "give the password once: --password-stdin"));
  const ShellResult empty = mcli("", "create secret env EMPTY_TOKEN=- < /dev/null");
  CHECK(empty.exit_code == 2);
  CHECK(absl::StrContains(empty.output, "value of EMPTY_TOKEN read from standard input is empty"));
  const ShellResult listed = mcli("", "get secrets");
  INFO(listed.output);
  CHECK(absl::StrContains(listed.output, "docker-r-example-5000"));
  CHECK_FALSE(absl::StrContains(listed.output, "empty-token"));

  // The run's rank gets the values as read, without their trailing newlines.
  const v1::Run run =
      c.Submit("secrets-read", "echo \"[$STDIN_TOKEN] [$ENV_TOKEN] [$FILE_TOKEN]\"", 1, 1);
  c.client->WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  // The run's last log batch may reach the log service after its status does.
  const std::string printed = WaitForOutput(c, run.name(), "[from-stdin]");
  INFO(printed);
  CHECK(absl::StrContains(printed, "[from-stdin] [from-env] [from-a-file]"));

  // The API key from standard input, saved to the config file (mode 600) and used from it.
  const std::string config = dir.path + "/config.yaml";
  const ShellResult saved =
      RunShell(absl::StrCat("printf '%s\\n' ", c.admin_key, " | TESSERA_CONFIG=", config, " ",
                            BinaryPath("mcli"), " set api-key 2>&1"));
  INFO(saved.output);
  CHECK(saved.exit_code == 0);
  const ShellResult who = mcli("", "whoami", " TESSERA_CONFIG=" + config);
  INFO(who.output);
  CHECK(who.exit_code == 0);
  CHECK(absl::StrContains(who.output, "admin"));
}

}  // namespace
}  // namespace tessera::testing
