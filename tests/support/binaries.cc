#include "tests/support/binaries.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/process.h"

namespace tessera::testing {

std::string BinaryPath(const std::string& name) {
  return std::string(TESSERA_BIN_DIR) + "/" + name;
}

std::vector<std::string> WorkerArgv(const std::string& name, const std::string& scheduler_endpoint,
                                    const std::string& key_file, const std::string& state_dir,
                                    int gpus) {
  return {BinaryPath("tessera-worker"), "--scheduler-endpoint", scheduler_endpoint,
          "--api-key-file", key_file, "--rank-user", ::geteuid() == 0 ? "root" : "", "--node-name",
          name, "--cluster", "local", "--address", "127.0.0.1", "--simulate-gpus",
          std::to_string(gpus), "--state-dir", state_dir,
          // Tests talk over loopback; the security suite swaps this for TLS (tls_fixture.h).
          "--plaintext",
          // Ranks on the host, where tests watch them by pid and markers in the test's folders;
          // the sandbox has its own suite (sandbox_test), and the local cluster's scripts run
          // in it.
          "--sandbox", "off",
          // Every test's workers share this machine's disk, which CI machines sometimes have
          // little of: the pre-flight thresholds a real node gets (1 GiB, 64 MiB) would fail
          // them all. The checks themselves are tested in preflight_test and control_plane_test.
          "--preflight-min-free-disk", "16MiB", "--preflight-min-shm", "1MiB",
          // The node's memory for in-memory checkpoints, the test's own (beside its state
          // folder, removed with it): test clusters share node names.
          "--memory-checkpoint-dir", state_dir + "-memory"};
}

std::vector<std::string> TrainingRankEnv(const std::string& shared) {
  return {"--rank-env", absl::StrCat("PATH=", TESSERA_BIN_DIR, ":/usr/bin:/bin"),
          "--rank-env", "TESSERA_SHARED_DIR=" + shared,
          "--rank-env", "TESSERA_CACHE_DIR=" + shared + "/cache"};
}

absl::StatusOr<std::string> CreateApiKey(const std::string& database_url, const std::string& user,
                                         const std::string& role, const std::string& node,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {BinaryPath("tessera-server"),
                                   "--database-url",
                                   database_url,
                                   "--log-level",
                                   "warn",
                                   "create-api-key",
                                   "--user",
                                   user,
                                   "--role",
                                   role};
  if (!node.empty()) {
    argv.push_back("--node");
    argv.push_back(node);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto out = RunCommand(argv);
  if (!out.ok()) return out.status();
  std::string key(absl::StripAsciiWhitespace(*out));
  if (const size_t nl = key.rfind('\n'); nl != std::string::npos) key = key.substr(nl + 1);
  if (key.rfind("tsk_", 0) != 0) {
    return absl::InternalError("create-api-key printed no key: " + *out);
  }
  return key;
}

absl::StatusOr<std::string> NodeKeyFile(const std::string& database_url, const std::string& node,
                                        const std::string& dir) {
  auto key = CreateApiKey(database_url, node, "node", node);
  if (!key.ok()) return key.status();
  const std::string path = absl::StrCat(dir, "/", node, ".key");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", path));
  const std::string line = *key + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return absl::InternalError(absl::StrCat("cannot write ", path));
  return path;
}

absl::Status TlsCerts(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TESSERA_SOURCE_DIR "/deploy/tls-certs.sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv).status();
}

absl::Status MakeClusterCertificates(const std::string& dir) {
  for (const char* kind : {"ca", "services"}) {
    if (absl::Status made = TlsCerts({kind, dir}); !made.ok()) {
      return absl::Status(made.code(),
                          absl::StrCat("deploy/tls-certs.sh ", kind, ": ", made.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::testing
