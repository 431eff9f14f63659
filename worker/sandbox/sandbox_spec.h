// The sandbox a rank runs in, and the bubblewrap command line that builds it.
//
// Every rank runs under bubblewrap (bwrap) in its own user, mount, PID, IPC, UTS and cgroup
// namespaces, with the host's network (NCCL needs it). Its root is built on an empty tmpfs:
// each top-level entry of the image's root file system (or of the host's, for `image: host`)
// is bound read-only, so every mount point the rank needs can be made and the image's files
// are shared, unchanged, by every run of that image. Then come a private /proc, a minimal
// /dev, a private /tmp, a sized /dev/shm, the GPU device nodes the rank was given (and no
// other), the folders the rank writes (its work and progress folders, the user's shared
// folder), each at the same path as on the host so that paths in the run contract stay true,
// and tmpfs over every host path it must not see (the worker's state folder).
//
// Pure: the caller lists the root's top-level entries (ListRootEntries), so the rules are
// unit-tested without a file system.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::worker::sandbox {

// One top-level entry of a root file system.
struct RootEntry {
  enum class Kind { kDirectory, kFile, kSymlink };
  std::string name;
  Kind kind = Kind::kDirectory;
  std::string link_target;  // kSymlink
};

struct BindMount {
  std::string source;  // host path
  std::string target;  // path inside the sandbox
  bool writable = false;
  bool device = false;  // a device node (--dev-bind)
};

struct SandboxSpec {
  std::string bwrap = "/usr/bin/bwrap";
  // The host path of tessera-sandbox-init, bound at kInitPath.
  std::string init_path;
  // The root file system: an unpacked image, or "/" for the host.
  std::string root = "/";
  std::vector<RootEntry> root_entries;
  // Top-level folders of the root rebuilt on a tmpfs, each of their entries bound one by one, so
  // that a mount point can be made in them: mcli's /mnt/config/parameters.yaml in an image (or
  // on a host) whose /mnt is read-only. By folder name (no slash).
  std::map<std::string, std::vector<RootEntry>> opened_entries;
  // Host paths covered by an empty tmpfs before `mounts` (the worker's state folder).
  std::vector<std::string> hidden;
  std::vector<BindMount> mounts;
  int64_t shm_bytes = 0;  // 0: bwrap's default /dev/shm of the minimal /dev
  int64_t tmp_bytes = 0;  // /tmp's size; 0: the kernel's tmpfs default (half of the memory)
  uid_t uid = 0;          // the ids inside, which are also the ids outside (the caller's)
  gid_t gid = 0;
  std::string hostname;
  std::string working_dir;  // inside
};

// PATH inside a sandbox whose image sets none.
inline constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Where tessera-sandbox-init is inside every sandbox.
inline constexpr char kInitPath[] = "/run/tessera/init";
// Where a rank's command is inside its sandbox: a script for the shell, handed to bubblewrap
// through a descriptor (--ro-bind-data), never as an argument (RankProcess::Start).
inline constexpr char kCommandPath[] = "/run/tessera/command";

// Top-level entries of a root that are never bound from it: the sandbox makes its own.
bool IsSandboxOwned(const std::string& name);

// bwrap's options for the sandbox, without the program and the command. INVALID_ARGUMENT for a
// relative path, a path with "..", or a mount onto a path the sandbox owns (/proc, /dev itself).
absl::StatusOr<std::vector<std::string>> BwrapOptions(const SandboxSpec& spec);

// bwrap's argv (argv[0] the bwrap binary) to run `command` in the sandbox; the command runs as
// `kInitPath command...`. As BwrapOptions, and INVALID_ARGUMENT for an empty command.
absl::StatusOr<std::vector<std::string>> BwrapArgv(const SandboxSpec& spec,
                                                   const std::vector<std::string>& command);

// The top-level entries of `root` (a folder), sorted by name.
absl::StatusOr<std::vector<RootEntry>> ListRootEntries(const std::string& root);

}  // namespace tessera::worker::sandbox
