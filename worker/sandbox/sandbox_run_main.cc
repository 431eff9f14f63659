// tessera-sandbox-run: runs one command in the sandbox a rank would get on this node, to check
// a node's set-up (is bubblewrap allowed here, does CUDA work inside the sandbox with the GPU
// given and fail without it, are the driver's libraries found for an image) without a control
// plane. It builds the sandbox with the same code as the worker (sandbox_spec.h,
// gpu_access.h) and prints what it built.
//
//   tessera-sandbox-run --gpu 0 -- nvidia-smi -L
//   tessera-sandbox-run --root /var/lib/images/x/rootfs --gpu 0 --uid 100000 -- ./cuda_check
#include <grp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "worker/sandbox/gpu_access.h"
#include "worker/sandbox/sandbox_spec.h"

namespace {
namespace fs = std::filesystem;
namespace sandbox = tessera::worker::sandbox;

std::string DefaultInit(const char* argv0) {
  std::error_code ec;
  const fs::path self = fs::canonical("/proc/self/exe", ec);
  return ec ? std::string(argv0) : (self.parent_path() / "tessera-sandbox-init").string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-sandbox-run: run a command in the sandbox a rank would get on this node"};
  sandbox::SandboxSpec spec;
  sandbox::GpuNodeOptions gpu_options;
  std::vector<int> gpus;
  std::string shm = "1GiB";
  std::vector<std::string> binds, extra_env, command;
  bool print_only = false;
  long uid = static_cast<long>(::geteuid()), gid = static_cast<long>(::getegid());
  app.add_option("--root", spec.root, "the root file system: an unpacked image, or / (the host)")
      ->capture_default_str();
  app.add_option("--gpu", gpus,
                 "the GPUs the command gets (device minor numbers; repeat it, or 0,1), in the "
                 "order CUDA_VISIBLE_DEVICES names them")
      ->delimiter(',');
  app.add_option("--gpu-device-dir", gpu_options.device_dir, "where the device nodes are")
      ->capture_default_str();
  app.add_option("--driver-gpus-dir", gpu_options.driver_gpus_dir,
                 "where the driver describes each GPU")
      ->capture_default_str();
  app.add_option("--bwrap", spec.bwrap, "the bubblewrap program")->capture_default_str();
  app.add_option("--sandbox-init", spec.init_path,
                 "tessera-sandbox-init (default: next to this program)");
  app.add_option("--shm-size", shm, "the size of /dev/shm")->capture_default_str();
  app.add_option("--bind", binds, "a host folder the command may write, at the same path");
  app.add_option("--env", extra_env, "KEY=VALUE for the command, as --rank-env gives a rank");
  app.add_option("--uid", uid, "the user to run as (root only)")->capture_default_str();
  app.add_option("--gid", gid, "the group to run as (root only)")->capture_default_str();
  app.add_flag("--print", print_only, "print bubblewrap's command line and environment only");
  // Everything from the first word that is not an option (or after "--") is the command.
  app.prefix_command();
  app.footer("COMMAND [ARG...]: what runs in the sandbox (after --, or the first non-option)");
  CLI11_PARSE(app, argc, argv);
  command = app.remaining();
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    std::cerr << "no command given (tessera-sandbox-run [OPTIONS] -- COMMAND [ARG...])\n";
    return 2;
  }

  if (spec.init_path.empty()) spec.init_path = DefaultInit(argv[0]);
  auto shm_bytes = tessera::ParseByteSize(shm);
  if (!shm_bytes.ok()) {
    std::cerr << "--shm-size: " << shm_bytes.status().message() << "\n";
    return 2;
  }
  spec.shm_bytes = *shm_bytes;
  auto entries = sandbox::ListRootEntries(spec.root);
  if (!entries.ok()) {
    std::cerr << entries.status().message() << "\n";
    return 2;
  }
  spec.root_entries = std::move(*entries);
  const bool in_image = spec.root != "/";
  const sandbox::GpuAccess access =
      sandbox::PlanGpuAccess(sandbox::GpuNode::Discover(gpu_options), gpus, in_image);
  spec.mounts = access.mounts;
  for (const auto& b : binds) spec.mounts.push_back({b, b, /*writable=*/true, false});
  spec.uid = static_cast<uid_t>(uid);
  spec.gid = static_cast<gid_t>(gid);
  std::map<std::string, std::string> env = {{"PATH", sandbox::kDefaultPath}, {"HOME", "/tmp"}};
  if (const char* term = std::getenv("TERM")) env["TERM"] = term;
  for (const auto& kv : extra_env) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos) {
      std::cerr << "--env '" << kv << "': not KEY=VALUE\n";
      return 2;
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  sandbox::ApplyGpuEnvironment(access, sandbox::kDefaultPath, env);

  auto args = sandbox::BwrapArgv(spec, command);
  if (!args.ok()) {
    std::cerr << args.status().message() << "\n";
    return 2;
  }
  std::vector<std::string> env_list;
  for (const auto& [k, v] : env) env_list.push_back(absl::StrCat(k, "=", v));
  std::cerr << "tessera-sandbox-run: " << absl::StrJoin(*args, " ") << "\n"
            << "tessera-sandbox-run: environment " << absl::StrJoin(env_list, " ") << "\n";
  if (print_only) return 0;

  if (::geteuid() == 0 && uid != 0) {
    // As the worker does for a user's rank: bubblewrap is started as that user, so its user
    // namespace maps only that uid.
    if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0 ||
        ::setuid(static_cast<uid_t>(uid)) != 0) {
      std::cerr << "cannot become uid " << uid << ": " << std::strerror(errno) << "\n";
      return 2;
    }
  }
  std::vector<char*> cargv, cenv;
  for (auto& a : *args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env_list) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  ::execve(cargv[0], cargv.data(), cenv.data());
  std::cerr << "cannot run " << spec.bwrap << ": " << std::strerror(errno) << "\n";
  return 127;
}
