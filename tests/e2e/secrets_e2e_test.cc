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
namespace secrets_e2e_test {

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

  // A run gets the secrets its YAML names (`secrets:`), or all of them (`secrets: all`, mcli's
  // way), each value as read, without its trailing newline; one that names none gets none.
  const std::string print =
      "echo \"[${STDIN_TOKEN:-unset}] [${ENV_TOKEN:-unset}] [${FILE_TOKEN:-unset}]\"";
  for (const auto& [secrets, expected] : std::vector<std::pair<std::string, std::string>>{
           {"secrets: [stdin-token, env-token]\n", "[from-stdin] [from-env] [unset]"},
           {"secrets: all\n", "[from-stdin] [from-env] [from-a-file]"},
           {"", "[unset] [unset] [unset]"}}) {
    dir.Write("run.yaml", absl::StrCat("name: secrets-read\nimage: host\ncommand: '", print,
                                       "'\ncompute: {gpus: 1, cluster: local}\n", secrets));
    const ShellResult ran = mcli("", "run -f run.yaml --follow");
    INFO(secrets << ran.output);
    CHECK(ran.exit_code == 0);
    CHECK(absl::StrContains(ran.output, expected));
  }
  // Naming a secret you do not have: refused at submit, naming it.
  dir.Write("run.yaml",
            "name: secrets-read\nimage: host\ncommand: 'true'\n"
            "compute: {gpus: 1, cluster: local}\nsecrets: [hf]\n");
  const ShellResult unknown = mcli("", "run -f run.yaml");
  INFO(unknown.output);
  CHECK(unknown.exit_code != 0);
  CHECK(absl::StrContains(unknown.output, "no secret named 'hf'"));

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

}  // namespace secrets_e2e_test
}  // namespace tessera::testing
