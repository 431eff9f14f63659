#include "tests/support/oci_registry.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/support/loopback_port.h"

namespace tessera::testing {
namespace fs = std::filesystem;

absl::StatusOr<OciRegistry> OciRegistry::Start(const std::string& dir) {
  auto port_or = LoopbackPort();
  if (!port_or.ok()) return port_or.status();
  const int port = *port_or;
  const std::string address = absl::StrCat("127.0.0.1:", port);
  fs::create_directories(dir + "/storage");
  {
    std::ofstream config(dir + "/config.yml");
    config << "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "
           << dir << "/storage\nhttp:\n  addr: " << address << "\n";
  }
  auto p = Process::Start({"/usr/bin/docker-registry", "serve", dir + "/config.yml"},
                          dir + "/registry.log");
  if (!p.ok()) return p.status();
  for (int i = 0; i < 100; ++i) {
    ShellResult probe = RunShell(absl::StrCat("curl -fsS http://", address, "/v2/ >/dev/null"));
    if (probe.exit_code == 0) return OciRegistry(*std::move(p), address, dir);
    ::usleep(100000);
  }
  return absl::UnavailableError(absl::StrCat("docker-registry did not answer on ", address));
}

absl::StatusOr<std::string> OciRegistry::Push(const std::string& name, const std::string& tag,
                                              const std::string& fill,
                                              const std::vector<std::string>& env) {
  const std::string work =
      absl::StrCat(dir_, "/build-", name.substr(name.rfind('/') + 1), "-", tag);
  const std::string layout = work + "/layout";
  const std::string bundle = work + "/bundle";
  const std::string reference = absl::StrCat(address_, "/", name, ":", tag);
  std::string config;
  for (const auto& e : env) absl::StrAppend(&config, " --config.env '", e, "'");
  const std::string script = absl::StrCat(
      "rm -rf ", work, "; mkdir -p ", work, " && umoci init --layout ", layout,
      " && umoci new --image ", layout, ":", tag, " && umoci unpack --rootless --image ", layout,
      ":", tag, " ", bundle, " && ROOT=", bundle, "/rootfs && ", fill, " && umoci repack --image ",
      layout, ":", tag, " ", bundle, " && umoci config --image ", layout, ":", tag, config,
      " && skopeo copy --dest-tls-verify=false oci:", layout, ":", tag, " docker://", reference,
      " 2>&1; rc=$?; rm -rf ", bundle, "; exit $rc");
  ShellResult r = RunShell(script);
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("building image ", reference, ": ", r.output));
  }
  return reference;
}

absl::StatusOr<std::string> OciRegistry::PushBusyboxImage(const std::string& name,
                                                          const std::string& tag,
                                                          const std::vector<std::string>& applets,
                                                          const std::vector<std::string>& env) {
  std::string fill =
      "mkdir -p $ROOT/bin $ROOT/etc $ROOT/usr && cp /bin/busybox $ROOT/bin/busybox && echo "
      "'Tessera test image' > $ROOT/etc/issue";
  for (const auto& a : applets) absl::StrAppend(&fill, " && ln -s busybox $ROOT/bin/", a);
  std::vector<std::string> image_env = {"PATH=/bin", "IMAGE_VAR=from-image"};
  image_env.insert(image_env.end(), env.begin(), env.end());
  return Push(name, tag, fill, image_env);
}

absl::StatusOr<std::string> OciRegistry::PushTrainingImage(const std::string& name,
                                                           const std::string& tag,
                                                           const std::string& bin_dir) {
  // The quick start's image, built by the script deploy/cluster.sh uses.
  const std::string reference = absl::StrCat(address_, "/", name, ":", tag);
  ShellResult r =
      RunShell(absl::StrCat("TMPDIR=", dir_, " ", TESSERA_SOURCE_DIR, "/deploy/train-image.sh ",
                            reference, " ", bin_dir, " 2>&1"));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("building image ", reference, ": ", r.output));
  }
  return reference;
}

}  // namespace tessera::testing
