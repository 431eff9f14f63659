#pragma once
// A real OCI registry on loopback (Debian's docker-registry) and small images built on this
// machine with umoci and pushed with skopeo, for the sandbox and image tests.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/process.h"

namespace tessera::testing {

class OciRegistry {
 public:
  // Starts a registry on a free loopback port, its storage in `dir`.
  static absl::StatusOr<OciRegistry> Start(const std::string& dir);

  // host:port, for --insecure-registry and image references.
  const std::string& address() const { return address_; }

  // Builds an image whose root holds busybox (/bin/busybox and a link per `applets`), its
  // environment PATH=/bin, IMAGE_VAR=from-image and `env` ("KEY=VALUE"), pushes it as
  // `name:tag`, and returns the full reference (ADDRESS/name:tag).
  absl::StatusOr<std::string> PushBusyboxImage(const std::string& name, const std::string& tag,
                                               const std::vector<std::string>& applets,
                                               const std::vector<std::string>& env = {});

  // Builds the image examples/gpt-tiny.yaml runs in (deploy/train-image.sh: tessera-train and
  // tessera-data from `bin_dir` with their libraries, busybox, the text it trains on; about
  // 700 MB) and pushes it as name:tag.
  absl::StatusOr<std::string> PushTrainingImage(const std::string& name, const std::string& tag,
                                                const std::string& bin_dir);

 private:
  // Builds an image from an empty root: `fill` (shell commands, $ROOT the root folder) puts
  // files in it; `env` is its environment. Pushes it and returns ADDRESS/name:tag.
  absl::StatusOr<std::string> Push(const std::string& name, const std::string& tag,
                                   const std::string& fill, const std::vector<std::string>& env);
  OciRegistry(Process process, std::string address, std::string dir)
      : process_(std::move(process)), address_(std::move(address)), dir_(std::move(dir)) {}
  Process process_;
  std::string address_;
  std::string dir_;
};

}  // namespace tessera::testing
