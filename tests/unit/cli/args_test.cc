// mcli run in-process: argument errors (exit 2, one "Error:" line), help, and the commands that
// need no server.

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli/app.h"
#include "cli/client.h"
#include "tests/support/temp_dir.h"

namespace args_test {

struct Result {
  int exit_code;
  std::string out;
  std::string err;
};

using tessera::testing::TempDir;

// Runs mcli with a private config file and, unless given, an endpoint nothing listens on.
Result Mcli(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  static TempDir home;
  env.emplace("HOME", home.path);
  env.emplace("TESSERA_CONFIG", home.path + "/config.yaml");
  env.emplace("TESSERA_ENDPOINT", "127.0.0.1:1");
  std::vector<const char*> argv = {"mcli"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const int code =
      tessera::cli::RunMcli(static_cast<int>(argv.size()), argv.data(), out, err,
                            [env](const std::string& name) -> std::optional<std::string> {
                              auto it = env.find(name);
                              if (it == env.end() || it->second.empty()) return std::nullopt;
                              return it->second;
                            });
  return {code, out.str(), err.str()};
}

void CheckUsageError(const Result& result, const std::string& fragment) {
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("Error: ") && Catch::Contains(fragment));
  // One line.
  CHECK(result.err.find('\n') == result.err.size() - 1);
}

TEST_CASE("argument errors exit 2 with one line", "[cli][args]") {
  CheckUsageError(Mcli({}), "subcommand is required");
  CheckUsageError(Mcli({"frobnicate"}), "frobnicate");
  CheckUsageError(Mcli({"get"}), "mcli get --help");
  CheckUsageError(Mcli({"get", "runs", "--limit", "-1"}), "--limit");
  CheckUsageError(Mcli({"get", "runs", "--limit", "many"}), "--limit");
  CheckUsageError(Mcli({"get", "runs", "--status", "bogus"}), "--status");
  CheckUsageError(Mcli({"get", "runs", "--before", "yesterday"}), "--before");
  CheckUsageError(Mcli({"get", "runs", "-o", "xml"}), "xml");
  CheckUsageError(Mcli({"describe", "run"}), "NAME");
  CheckUsageError(Mcli({"stop", "run"}), "NAME");
  CheckUsageError(Mcli({"cordon", "node-a"}), "--reason");
  CheckUsageError(Mcli({"update", "run", "r"}), "nothing to update");
  CheckUsageError(Mcli({"update", "run", "r", "--preemptible", "maybe"}), "--preemptible");
  CheckUsageError(Mcli({"update", "run", "r", "--priority", "urgent"}), "--priority");
  CheckUsageError(Mcli({"admin", "create-api-key"}), "--user");
  CheckUsageError(Mcli({"admin", "create-api-key", "--user", "u", "--role", "root"}), "--role");
  CheckUsageError(Mcli({"run"}), "-f FILE");
  CheckUsageError(Mcli({"run", "submit"}), "-f FILE");
  CheckUsageError(Mcli({"run", "-f", "/nonexistent.yaml"}), "/nonexistent.yaml");
  // mcli's other ways to submit, and their overrides, checked before any call.
  CheckUsageError(Mcli({"run", "-f", "a.yaml", "-r", "old"}), "give one of -f FILE");
  CheckUsageError(Mcli({"run", "-r", "old", "--clone", "other"}), "give one of -f FILE");
  CheckUsageError(Mcli({"run", "-r", "old", "--gpus", "8"}), "--clone old and the overrides");
  CheckUsageError(Mcli({"run", "-f", "a.yaml", "--preemptible", "maybe"}), "--preemptible");
  CheckUsageError(Mcli({"run", "-f", "a.yaml", "--max_retries", "many"}), "retries");
  CheckUsageError(Mcli({"get", "runs", "-m", "team"}), "-m/--metadata: expected KEY=VALUE");
  CheckUsageError(Mcli({"get", "runs", "-m", "=nlp"}), "-m/--metadata: expected KEY=VALUE");
  CheckUsageError(Mcli({"watchdog"}), "RUN");
  CheckUsageError(Mcli({"watchdog", "r", "--disable", "--max-retries", "3"}), "not with --disable");
  CheckUsageError(Mcli({"watchdog", "r", "--max-retries", "-1"}), "--max-retries");
  CheckUsageError(Mcli({"update", "run", "r", "--max-retries", "-2"}), "--max-retries");
  CheckUsageError(Mcli({"diff", "run", "a"}), "RUN_B");
}

TEST_CASE("a bad run YAML fails before any server is dialled", "[cli][args]") {
  TempDir dir;
  const std::string path = dir.path + "/run.yaml";
  std::ofstream(path) << "name: x\ncommand: y\ncompute:\n  gpu: 8\n";
  // The endpoint is unreachable: an error about it would mean the file went unchecked.
  const Result result = Mcli({"run", "submit", "-f", path});
  CheckUsageError(result, path + ": line 4");

  std::ofstream(path, std::ios::trunc) << "name: x\ncommand: y\n";
  CheckUsageError(Mcli({"run", "-f", path, "--gpus", "-2"}), "compute.gpus");
}

TEST_CASE("mcli logs: bad flags exit 2 with one line naming them, before any call",
          "[cli][args][logs]") {
  // The endpoint is unreachable: getting past the arguments would be exit 1, not 2.
  CheckUsageError(Mcli({"logs"}), "RUN");
  CheckUsageError(Mcli({"logs", "r", "--prev", "--resumption", "1"}), "--prev and --resumption");
  CheckUsageError(Mcli({"logs", "r", "--rank", "-1"}), "--rank: expected a whole number");
  CheckUsageError(Mcli({"logs", "r", "--node-rank", "one"}), "--node-rank");
  CheckUsageError(Mcli({"logs", "r", "--resumption", "-2"}), "--resumption");
  CheckUsageError(Mcli({"logs", "r", "--tail", "0"}), "at least 1");
  CheckUsageError(Mcli({"logs", "r", "--since", "an hour ago"}), "--since");
  CheckUsageError(Mcli({"logs", "r", "--until", "2024-13-40"}), "--until");
  CheckUsageError(Mcli({"logs", "r", "--lines", "10"}), "--lines");
  const Result help = Mcli({"logs", "--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--first-exception") && Catch::Contains("--prev") &&
                           Catch::Contains("--grep") && Catch::Contains("--since"));
}

TEST_CASE("help and version exit 0", "[cli][args]") {
  Result help = Mcli({"--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("Usage: mcli") && Catch::Contains("describe"));
  help = Mcli({"get", "runs", "--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--status") && Catch::Contains("-o table|json|yaml"));
  const Result version = Mcli({"--version"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.out, Catch::StartsWith("mcli "));
}

TEST_CASE("set api-key writes the config file 0600 and config shows it masked", "[cli][args]") {
  TempDir dir;
  const std::string path = dir.path + "/sub/config.yaml";
  const std::map<std::string, std::string> env = {{"TESSERA_CONFIG", path},
                                                  {"TESSERA_ENDPOINT", ""}};
  Result set = Mcli({"set", "api-key", "tsk_abcdefghijklmnop"}, env);
  INFO(set.err);
  REQUIRE(set.exit_code == 0);
  CHECK_THAT(set.out, Catch::Contains(path));
  struct stat info {};
  REQUIRE(stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);

  REQUIRE(Mcli({"set", "endpoint", "tessera.example:443"}, env).exit_code == 0);

  const Result shown = Mcli({"config"}, env);
  CHECK(shown.exit_code == 0);
  CHECK_THAT(shown.out, Catch::Contains("tessera.example:443") && Catch::Contains("tsk_****mnop") &&
                            !Catch::Contains("abcdefghijkl"));

  const Result json = Mcli({"config", "-o", "json"}, env);
  REQUIRE(json.exit_code == 0);
  const auto document = nlohmann::json::parse(json.out);
  CHECK(document["endpoint"]["value"] == "tessera.example:443");
  CHECK(document["endpoint"]["source"] == "config file " + path);
  CHECK(document["api_key"]["value"] == "tsk_****mnop");

  // The environment beats the file, and config says so.
  auto with_env = env;
  with_env["TESSERA_API_KEY"] = "env-key-0123456789";
  const Result overridden = Mcli({"config", "-o", "json"}, with_env);
  CHECK(nlohmann::json::parse(overridden.out)["api_key"]["source"] == "TESSERA_API_KEY");
  // And the flag beats the environment.
  const Result flagged = Mcli({"--endpoint", "flag:1", "config", "-o", "json"}, with_env);
  CHECK(nlohmann::json::parse(flagged.out)["endpoint"]["value"] == "flag:1");
}

TEST_CASE("server errors become one clear line", "[cli][args]") {
  using tessera::cli::DescribeRpcError;
  const std::string unauthenticated =
      DescribeRpcError(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid key"), "h:1", true);
  CHECK_THAT(unauthenticated,
             Catch::Contains("mcli set api-key") && Catch::Contains("invalid key"));
  CHECK_THAT(DescribeRpcError(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, ""), "h:1", false),
             Catch::Contains("no API key is set"));
  CHECK_THAT(DescribeRpcError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused"), "h:1", true),
             Catch::Contains("h:1") && Catch::Contains("refused"));
  CHECK(DescribeRpcError(grpc::Status(grpc::StatusCode::NOT_FOUND, "run \"x\" not found"), "h:1",
                         true) == "run \"x\" not found");
  CHECK(DescribeRpcError(grpc::Status(grpc::StatusCode::INTERNAL, "boom"), "h:1", true) ==
        "boom (INTERNAL)");
}

TEST_CASE("a server that cannot be reached is exit 1 naming the endpoint", "[cli][args]") {
  const Result result = Mcli({"get", "runs"});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err,
             Catch::StartsWith("Error: cannot reach the Tessera server at 127.0.0.1:1"));
}

TEST_CASE("idempotency keys are random UUIDs", "[cli][args]") {
  const std::string a = tessera::cli::NewUuid();
  const std::string b = tessera::cli::NewUuid();
  CHECK(a != b);
  REQUIRE(a.size() == 36);
  CHECK(a[8] == '-');
  CHECK(a[14] == '4');
  CHECK(std::string("89ab").find(a[19]) != std::string::npos);
}

}  // namespace args_test
