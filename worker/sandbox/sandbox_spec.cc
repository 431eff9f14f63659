#include "worker/sandbox/sandbox_spec.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::worker::sandbox {
namespace fs = std::filesystem;
namespace {

absl::Status CheckPath(const std::string& what, const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not an absolute path"));
  }
  for (const auto& part : fs::path(path)) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' contains '..'"));
    }
  }
  return absl::OkStatus();
}

// One entry of the root, read-only at `target` (a symbolic link made anew).
void BindRootEntry(const std::string& root, const std::string& target, const RootEntry& e,
                   std::vector<std::string>& a) {
  if (e.kind == RootEntry::Kind::kSymlink) {
    a.insert(a.end(), {"--symlink", e.link_target, target});
  } else {
    a.insert(a.end(), {"--ro-bind", absl::StrCat(root, target), target});
  }
}

}  // namespace

bool IsSandboxOwned(const std::string& name) {
  // proc, dev and tmp are made fresh; sys and run are not shared with a rank (sysfs and the
  // host's sockets); lost+found is nobody's business; /tessera holds the rank's own folders
  // inside an image.
  static const char* const kOwned[] = {"proc", "dev", "tmp", "sys", "run", "lost+found", "tessera"};
  return std::any_of(std::begin(kOwned), std::end(kOwned),
                     [&](const char* n) { return name == n; });
}

absl::StatusOr<std::vector<std::string>> BwrapOptions(const SandboxSpec& spec) {
  if (auto st = CheckPath("sandbox root", spec.root); !st.ok()) return st;
  if (auto st = CheckPath("sandbox init", spec.init_path); !st.ok()) return st;
  std::vector<std::string> a = {"--unshare-user",
                                "--unshare-pid",
                                "--unshare-ipc",
                                "--unshare-uts",
                                "--unshare-cgroup-try",
                                "--share-net",
                                "--uid",
                                std::to_string(spec.uid),
                                "--gid",
                                std::to_string(spec.gid)};
  if (!spec.hostname.empty()) a.insert(a.end(), {"--hostname", spec.hostname});
  const std::string root = spec.root == "/" ? "" : spec.root;
  for (const RootEntry& e : spec.root_entries) {
    if (IsSandboxOwned(e.name) || e.name.empty() || e.name.find('/') != std::string::npos) {
      continue;
    }
    const std::string target = "/" + e.name;
    const auto opened = spec.opened_entries.find(e.name);
    if (opened != spec.opened_entries.end() && e.kind == RootEntry::Kind::kDirectory) {
      a.insert(a.end(), {"--perms", "0755", "--tmpfs", target});
      for (const RootEntry& inner : opened->second) {
        if (inner.name.empty() || inner.name.find('/') != std::string::npos) continue;
        BindRootEntry(root, absl::StrCat(target, "/", inner.name), inner, a);
      }
      continue;
    }
    BindRootEntry(root, target, e, a);
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
  if (spec.tmp_bytes > 0) a.insert(a.end(), {"--size", std::to_string(spec.tmp_bytes)});
  a.insert(a.end(), {"--perms", "1777", "--tmpfs", "/tmp"});
  if (spec.shm_bytes > 0) {
    a.insert(a.end(),
             {"--size", std::to_string(spec.shm_bytes), "--perms", "1777", "--tmpfs", "/dev/shm"});
  }
  a.insert(a.end(), {"--ro-bind", spec.init_path, kInitPath});
  for (const std::string& h : spec.hidden) {
    if (auto st = CheckPath("hidden path", h); !st.ok()) return st;
    a.insert(a.end(), {"--tmpfs", h});
  }
  for (const BindMount& m : spec.mounts) {
    if (auto st = CheckPath("mount source", m.source); !st.ok()) return st;
    if (auto st = CheckPath("mount target", m.target); !st.ok()) return st;
    if (m.target == "/proc" || m.target == "/dev" || m.target == "/" ||
        absl::StartsWith(m.target, "/proc/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("mount target '", m.target, "' belongs to the sandbox"));
    }
    a.insert(a.end(),
             {m.device ? "--dev-bind" : (m.writable ? "--bind" : "--ro-bind"), m.source, m.target});
  }
  if (!spec.working_dir.empty()) {
    if (auto st = CheckPath("working folder", spec.working_dir); !st.ok()) return st;
    a.insert(a.end(), {"--chdir", spec.working_dir});
  }
  return a;
}

absl::StatusOr<std::vector<std::string>> BwrapArgv(const SandboxSpec& spec,
                                                   const std::vector<std::string>& command) {
  if (command.empty()) return absl::InvalidArgumentError("the sandboxed command is empty");
  auto options = BwrapOptions(spec);
  if (!options.ok()) return options.status();
  std::vector<std::string> a = {spec.bwrap};
  a.insert(a.end(), options->begin(), options->end());
  a.push_back(kInitPath);
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

absl::StatusOr<std::vector<RootEntry>> ListRootEntries(const std::string& root) {
  std::error_code ec;
  std::vector<RootEntry> out;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    RootEntry e;
    e.name = it->path().filename().string();
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(st)) {
      e.kind = RootEntry::Kind::kSymlink;
      e.link_target = fs::read_symlink(it->path(), ec).string();
      if (ec) break;
    } else if (fs::is_directory(st)) {
      e.kind = RootEntry::Kind::kDirectory;
    } else if (fs::is_regular_file(st)) {
      e.kind = RootEntry::Kind::kFile;
    } else {
      continue;  // sockets, fifos, devices at the top of a root are not a rank's
    }
    out.push_back(std::move(e));
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list the root file system '", root, "': ", ec.message()));
  }
  std::sort(out.begin(), out.end(),
            [](const RootEntry& x, const RootEntry& y) { return x.name < y.name; });
  return out;
}

}  // namespace tessera::worker::sandbox
