#pragma once
// Tessera's own binaries as tests and benchmarks start them, without a test framework (the
// benchmarks use these too): where they are, a worker's command line, API keys.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::testing {

std::string BinaryPath(const std::string& name);  // build/bin/NAME

// The command line of a tessera-worker with `gpus` simulated GPUs in cluster "local", its node
// key in `key_file` (NodeKeyFile). Ranks run as the test's own user (root: --rank-user root).
std::vector<std::string> WorkerArgv(const std::string& name, const std::string& scheduler_endpoint,
                                    const std::string& key_file, const std::string& state_dir,
                                    int gpus);

// The worker flags with which ranks find tessera-train on PATH and share `shared` with the other
// nodes.
std::vector<std::string> TrainingRankEnv(const std::string& shared);

// An API key made with `tessera-server create-api-key` (its secret, tsk_...). `node` is the node
// a node key acts as; `extra`: more of the command's flags (a node key's --cluster, --gpu-type).
absl::StatusOr<std::string> CreateApiKey(const std::string& database_url, const std::string& user,
                                         const std::string& role, const std::string& node = "",
                                         const std::vector<std::string>& extra = {});

// A node key for `node` in a file of its own (mode 600) under `dir`; returns the file's path.
absl::StatusOr<std::string> NodeKeyFile(const std::string& database_url, const std::string& node,
                                        const std::string& dir);

// Runs deploy/tls-certs.sh with `args` (real openssl): "ca DIR", "services DIR [HOST...]",
// "node DIR NAME": a cluster's certificates as operators make them.
absl::Status TlsCerts(const std::vector<std::string>& args);

// A cluster's CA (ca.pem, ca.key) and the services' certificate (services.pem, services.key) in
// `dir`, made with deploy/tls-certs.sh.
absl::Status MakeClusterCertificates(const std::string& dir);

}  // namespace tessera::testing
