#include "worker/image/layer_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tessera::worker::image {
namespace {

constexpr char kWhiteoutPrefix[] = ".wh.";
constexpr char kOpaqueWhiteout[] = ".wh..wh..opq";

// `path` (relative) opened inside the root: no component, symbolic links included, can leave it.
int OpenInRoot(int root_fd, const std::string& path, int flags) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(
      ::syscall(SYS_openat2, root_fd, path.empty() ? "." : path.c_str(), &how, sizeof how));
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " /", path, ": ", std::strerror(errno)));
}

// Deletes `name` in `dir_fd`, a folder with everything in it included.
bool RemoveAt(int dir_fd, const std::string& name) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR && errno != EPERM) return false;
  const int sub = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return false;
  ::fchmod(sub, 0700);  // a read-only folder of a lower layer
  DIR* d = ::fdopendir(sub);
  if (d == nullptr) {
    ::close(sub);
    return false;
  }
  std::vector<std::string> children;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      children.emplace_back(e->d_name);
    }
  }
  bool ok = true;
  for (const auto& c : children) ok = RemoveAt(::dirfd(d), c) && ok;
  ::closedir(d);
  return ok && ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

bool IsDirectoryAt(int dir_fd, const std::string& name) {
  struct stat st;
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

bool CleanLayerPath(const std::string& path, std::string* clean) {
  std::vector<absl::string_view> parts;
  for (absl::string_view p : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (p == ".") continue;
    if (p == "..") return false;
    parts.push_back(p);
  }
  *clean = absl::StrJoin(parts, "/");
  return true;
}

LayerWriter::~LayerWriter() {
  if (file_fd_ >= 0) ::close(file_fd_);
}

absl::Status LayerWriter::OpenParent(const std::string& path, int* dir_fd, std::string* name,
                                     bool create) {
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
  *name = slash == std::string::npos ? path : path.substr(slash + 1);
  int fd = OpenInRoot(root_fd_, parent, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    *dir_fd = fd;
    return absl::OkStatus();
  }
  if (errno != ENOENT || !create) return Errno("cannot open", parent);
  // Make the missing folders, one at a time, each opened inside the root.
  std::string prefix;
  int at = OpenInRoot(root_fd_, "", O_RDONLY | O_DIRECTORY);
  if (at < 0) return Errno("cannot open", "");
  for (absl::string_view part : absl::StrSplit(parent, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    if (::mkdirat(at, std::string(part).c_str(), 0755) != 0 && errno != EEXIST) {
      ::close(at);
      return Errno("cannot create", prefix);
    }
    ::close(at);
    at = OpenInRoot(root_fd_, prefix, O_RDONLY | O_DIRECTORY);
    if (at < 0) return Errno("cannot open", prefix);
  }
  *dir_fd = at;
  return absl::OkStatus();
}

void LayerWriter::ForgetModes(const std::string& path) {
  auto& modes = finish_->dir_modes;
  for (auto it = modes.lower_bound(path); it != modes.end();) {
    if (it->first != path && !absl::StartsWith(it->first, path + "/")) break;
    it = modes.erase(it);
  }
}

absl::Status LayerWriter::Whiteout(const std::string& parent, int dir_fd, const std::string& name) {
  if (name != kOpaqueWhiteout) {
    const std::string target = name.substr(std::strlen(kWhiteoutPrefix));
    if (target.empty() || target == "." || target == "..") return absl::OkStatus();
    ForgetModes(parent.empty() ? target : absl::StrCat(parent, "/", target));
    if (!RemoveAt(dir_fd, target)) return Errno("cannot delete", parent + "/" + target);
    return absl::OkStatus();
  }
  // Opaque: what lower layers put in the folder goes; what this layer put there stays.
  const int sub = ::dup(dir_fd);
  DIR* d = sub < 0 ? nullptr : ::fdopendir(sub);
  if (d == nullptr) return Errno("cannot list", parent);
  std::vector<std::string> lower;
  while (dirent* e = ::readdir(d)) {
    const std::string child = e->d_name;
    if (child == "." || child == "..") continue;
    if (!created_.count(parent.empty() ? child : absl::StrCat(parent, "/", child))) {
      lower.push_back(child);
    }
  }
  ::closedir(d);
  for (const auto& c : lower) {
    ForgetModes(parent.empty() ? c : absl::StrCat(parent, "/", c));
    if (!RemoveAt(dir_fd, c)) return Errno("cannot delete", parent + "/" + c);
  }
  return absl::OkStatus();
}

absl::Status LayerWriter::Begin(const TarEntry& entry) {
  entry_ = entry;
  std::string path;
  if (!CleanLayerPath(entry.path, &path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a layer entry leaves the root: \"", entry.path.substr(0, 200), "\""));
  }
  if (path.empty()) return absl::OkStatus();  // the root itself
  if (entry.type == TarEntry::Type::kOther) return absl::OkStatus();
  int dir_fd = -1;
  std::string name;
  if (absl::Status st = OpenParent(path, &dir_fd, &name); !st.ok()) return st;
  const std::string parent = path.substr(0, path.size() - name.size());
  const std::string parent_clean = parent.empty() ? "" : parent.substr(0, parent.size() - 1);
  absl::Status st;
  if (absl::StartsWith(name, kWhiteoutPrefix)) {
    st = Whiteout(parent_clean, dir_fd, name);
    ::close(dir_fd);
    return st;
  }
  if (guard_ != nullptr) {
    if (absl::Status counted = guard_->AddedFile(); !counted.ok()) {
      ::close(dir_fd);
      return counted;
    }
  }
  created_.insert(path);
  if (entry.type != TarEntry::Type::kDirectory) ForgetModes(path);
  switch (entry.type) {
    case TarEntry::Type::kDirectory:
      if (!IsDirectoryAt(dir_fd, name)) {
        if (!RemoveAt(dir_fd, name) || ::mkdirat(dir_fd, name.c_str(), 0700) != 0) {
          st = Errno("cannot create the folder", path);
        }
      }
      // Writable by us until every layer is in; its own mode then.
      finish_->dir_modes[path] = entry.mode & 01777;
      break;
    case TarEntry::Type::kFile:
      if (!RemoveAt(dir_fd, name)) {
        st = Errno("cannot replace", path);
        break;
      }
      file_fd_ = ::openat(dir_fd, name.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (file_fd_ < 0) st = Errno("cannot create", path);
      file_path_ = path;
      break;
    case TarEntry::Type::kSymlink:
      if (!RemoveAt(dir_fd, name) || ::symlinkat(entry.link.c_str(), dir_fd, name.c_str()) != 0) {
        st = Errno("cannot make the link", path);
      }
      break;
    case TarEntry::Type::kHardLink: {
      std::string target, target_name;
      int target_dir = -1;
      if (!CleanLayerPath(entry.link, &target) || target.empty()) {
        st = absl::InvalidArgumentError(absl::StrCat("a hard link ", path, " leaves the root"));
        break;
      }
      st = OpenParent(target, &target_dir, &target_name, /*create=*/false);
      if (!st.ok()) break;
      if (!RemoveAt(dir_fd, name) ||
          ::linkat(target_dir, target_name.c_str(), dir_fd, name.c_str(), 0) != 0) {
        st = Errno("cannot make the hard link", path);
      }
      ::close(target_dir);
      break;
    }
    case TarEntry::Type::kOther:
      break;
  }
  ::close(dir_fd);
  return st;
}

absl::Status LayerWriter::Data(const char* data, size_t size) {
  if (file_fd_ < 0) return absl::OkStatus();
  if (guard_ != nullptr) {
    if (absl::Status st = guard_->Wrote(static_cast<int64_t>(size)); !st.ok()) return st;
  }
  while (size > 0) {
    const ssize_t n = ::write(file_fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", file_path_);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status LayerWriter::End() {
  if (file_fd_ < 0) return absl::OkStatus();
  const struct timespec times[2] = {{entry_.mtime, 0}, {entry_.mtime, 0}};
  absl::Status st;
  // No set-uid or set-gid bit: a rank's uid owns every file of its image.
  if (::fchmod(file_fd_, entry_.mode & 01777) != 0 || ::futimens(file_fd_, times) != 0) {
    st = Errno("cannot set the mode of", file_path_);
  }
  ::close(file_fd_);
  file_fd_ = -1;
  return st;
}

absl::Status FinishRoot(int root_fd, const RootFinish& finish) {
  std::vector<std::pair<std::string, uint32_t>> dirs(finish.dir_modes.begin(),
                                                     finish.dir_modes.end());
  // Deepest first: a folder made read-only must not stop its children's modes being set.
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) {
    return std::count(a.first.begin(), a.first.end(), '/') >
           std::count(b.first.begin(), b.first.end(), '/');
  });
  for (const auto& [path, mode] : dirs) {
    const int fd = OpenInRoot(root_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) continue;  // deleted by a later layer, or replaced by a non-folder
    const int rc = ::fchmod(fd, mode);
    ::close(fd);
    if (rc != 0) return Errno("cannot set the mode of", path);
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
