// tessera-worker's flags as an operator gives them: registered on a real CLI11 parser, and each
// mistake refused before anything starts, with the flag named.
#include "worker/daemon/worker_flags.h"

#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

namespace tessera::worker {
namespace worker_flags_test {

// Parses `args` (after the program's name) into fresh flags.
WorkerFlags Parse(std::vector<std::string> args) {
  CLI::App app;
  WorkerFlags flags;
  AddWorkerFlags(app, flags);
  args.insert(args.begin(), "tessera-worker");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return flags;
}

TEST_CASE("the worker's flags land where the daemon reads them") {
  const WorkerFlags f = Parse({"--scheduler-endpoint", "127.0.0.1:7000", "--node-name", "n1",
                               "--label", "rack=r1", "--rank-env", "NCCL_DEBUG=INFO",
                               "--procs-per-node", "4", "--preflight-min-shm", "128MiB"});
  CHECK(f.options.scheduler_endpoint == "127.0.0.1:7000");
  CHECK(f.options.node_name == "n1");
  CHECK(f.options.state_dir == "/var/lib/tessera-worker");
  CHECK(f.labels == std::vector<std::string>{"rack=r1"});
  CHECK(f.rank_env == std::vector<std::string>{"NCCL_DEBUG=INFO"});
  CHECK(f.procs_per_node == 4);
  CHECK(f.min_shm == "128MiB");
  CHECK(f.fence_margin_ms == 500);
  CHECK(f.finish_log_wait_ms == 5000);
  CHECK(f.options.rank_nice == 10);
  CHECK_THROWS_AS(Parse({"--node-name", "n1"}), CLI::RequiredError);  // no scheduler
  CHECK_THROWS_AS(Parse({"--scheduler-endpoint", "x:1", "--simulate-gpus", "65"}),
                  CLI::ValidationError);
  CHECK_THROWS_AS(Parse({"--scheduler-endpoint", "x:1", "--finish-log-wait-ms", "-1"}),
                  CLI::ValidationError);
  CHECK_THROWS_AS(Parse({"--scheduler-endpoint", "x:1", "--rank-nice", "20"}),
                  CLI::ValidationError);
}

TEST_CASE("a malformed node flag is refused with the flag and the value named") {
  const auto refused = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--scheduler-endpoint", "127.0.0.1:7000"});
    WorkerFlags f = Parse(args);
    WorkerOptions o;
    const absl::Status st = ApplyNodeFlags(f, o);
    REQUIRE_FALSE(st.ok());
    return std::string(st.message());
  };
  CHECK(refused({"--label", "rack"}) == "--label: expected KEY=VALUE, got \"rack\"");
  CHECK(refused({"--label", "=r1"}) == "--label: expected KEY=VALUE, got \"=r1\"");
  CHECK(refused({"--rank-env", "RANK=3"}) == "--rank-env: RANK is set by Tessera for every rank");
  CHECK(refused({"--rank-env", "NOVALUE"}) == "--rank-env: expected KEY=VALUE, got \"NOVALUE\"");
  CHECK(refused({"--preflight-min-free-disk", "lots"}).rfind("--preflight-min-free-disk: ", 0) ==
        0);
  CHECK(refused({"--preflight-min-shm", "3 cups"}).rfind("--preflight-min-shm: ", 0) == 0);
  CHECK(refused({"--network-wall", "not an address"}).rfind("--network-wall: ", 0) == 0);
  CHECK(refused({"--memory-checkpoint-bytes", "lots"}).rfind("--memory-checkpoint-bytes: ", 0) ==
        0);
  CHECK(refused({"--memory-checkpoint-dir", "shm/m"}) ==
        "--memory-checkpoint-dir: an absolute path, please");
}

TEST_CASE("plain text goes only to loopback, and a key comes from one place") {
  // The TLS flags also read the environment: an operator's shell must not change what is tested.
  for (const char* v : {"TESSERA_TLS_CA", "TESSERA_TLS_CERT", "TESSERA_TLS_KEY"}) {
    ::unsetenv(v);
  }
  const auto finish = [](std::vector<std::string> args) {
    return FinishWorkerFlags(Parse(args)).status();
  };
  auto st = finish({"--scheduler-endpoint", "10.0.0.1:7000", "--plaintext"});
  REQUIRE_FALSE(st.ok());
  CHECK(std::string(st.message()).find("10.0.0.1:7000") != std::string::npos);
  st = finish({"--scheduler-endpoint", "10.0.0.1:7000"});
  CHECK(std::string(st.message()).rfind("--tls-ca is required", 0) == 0);
  st = finish({"--scheduler-endpoint", "127.0.0.1:7000", "--plaintext", "--api-key-file",
               "/nonexistent/key", "--join-token-file", "/nonexistent/token"});
  CHECK(std::string(st.message()) ==
        "--api-key-file and --join-token-file: give one (a joined node keeps its key in "
        "--credentials-dir)");
}

TEST_CASE("/metrics over TLS is served with a server certificate of its own, never the node's") {
  for (const char* v : {"TESSERA_TLS_CA", "TESSERA_TLS_CERT", "TESSERA_TLS_KEY"}) {
    ::unsetenv(v);
  }
  const auto finish = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--node-name", "gpu-7"});
    return std::string(FinishWorkerFlags(Parse(args)).status().message());
  };
  // TLS and /metrics, no certificate for it: refused, saying what to give and how to make it.
  const std::string missing = finish({"--scheduler-endpoint", "10.0.0.1:7000", "--tls-ca",
                                      "/etc/tessera/ca.pem", "--metrics-listen", "0.0.0.0:9470"});
  CHECK(missing.rfind("--metrics-listen 0.0.0.0:9470 over TLS needs --metrics-tls-cert and "
                      "--metrics-tls-key",
                      0) == 0);
  CHECK(missing.find("deploy/tls-certs.sh metrics DIR gpu-7") != std::string::npos);
  // One of the two is not enough.
  CHECK(finish({"--scheduler-endpoint", "10.0.0.1:7000", "--tls-ca", "/etc/tessera/ca.pem",
                "--metrics-listen", "0.0.0.0:9470", "--metrics-tls-cert", "/m.pem"})
            .rfind("--metrics-listen", 0) == 0);
  // A certificate that cannot be read is named.
  CHECK(finish({"--scheduler-endpoint", "10.0.0.1:7000", "--tls-ca", "/etc/tessera/ca.pem",
                "--metrics-listen", "0.0.0.0:9470", "--metrics-tls-cert", "/nonexistent/m.pem",
                "--metrics-tls-key", "/nonexistent/m.key"}) ==
        "--metrics-tls-cert: /nonexistent/m.pem: cannot be read");
  // In plain text there is nothing to serve it with; without /metrics, nothing to serve.
  CHECK(finish({"--scheduler-endpoint", "127.0.0.1:7000", "--plaintext", "--metrics-listen",
                "127.0.0.1:9470", "--metrics-tls-cert", "/m.pem", "--metrics-tls-key", "/m.key"}) ==
        "--plaintext and --metrics-tls-cert contradict each other: choose one");
  CHECK(finish({"--scheduler-endpoint", "10.0.0.1:7000", "--tls-ca", "/etc/tessera/ca.pem",
                "--metrics-tls-cert", "/m.pem", "--metrics-tls-key", "/m.key"})
            .rfind("--metrics-tls-cert and --metrics-tls-key are for --metrics-listen", 0) == 0);
}

}  // namespace worker_flags_test
}  // namespace tessera::worker
