#include "worker/daemon/rank_identity.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera::worker {

absl::StatusOr<std::optional<RankIdentity>> ResolveRankUser(const std::string& name,
                                                            uid_t worker_uid) {
  if (name.empty()) {
    if (worker_uid != 0) return std::optional<RankIdentity>();
    return absl::FailedPreconditionError(
        "--rank-user: required when the worker runs as root, so that ranks do not (create an "
        "unprivileged user, e.g. `useradd --system --no-create-home tessera-rank`, and pass "
        "--rank-user tessera-rank; --rank-user root runs them as root, for a single-user "
        "development machine only)");
  }
  if (name == "root") return std::optional<RankIdentity>();
  std::vector<char> buf(16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  const int err = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (err != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--rank-user: no user named \"", name, "\"",
                                                   err != 0 ? ": " : "",
                                                   err != 0 ? std::strerror(err) : ""));
  }
  if (found->pw_uid == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank-user: \"", name, "\" is root (uid 0); name an unprivileged user"));
  }
  if (worker_uid != 0 && found->pw_uid != worker_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("--rank-user: a worker that is not root cannot run ranks as \"", name, "\""));
  }
  if (worker_uid != 0) return std::optional<RankIdentity>();  // the worker's own user
  return std::optional<RankIdentity>(RankIdentity{name, found->pw_uid, found->pw_gid});
}

absl::Status LetRankPass(const std::string& path) {
  if (::chmod(path.c_str(), 0711) != 0) {
    return absl::InternalError(absl::StrCat("chmod 711 ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status GiveToRank(const std::string& path, const std::optional<RankIdentity>& identity) {
  if (!identity) return absl::OkStatus();
  if (::lchown(path.c_str(), identity->uid, identity->gid) != 0 ||
      ::chmod(path.c_str(), 0700) != 0) {
    return absl::InternalError(
        absl::StrCat("giving ", path, " to user ", identity->name, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// Opens `path` for reading when it is a regular file of this process's user that no one else
// may read: whoever reads it can act as this node.
absl::StatusOr<int> OpenPrivateFile(const std::string& flag, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is not a file"));
  }
  if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid()) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": ", path,
                     " must belong to this worker's user and be readable by it alone (chmod 600 ",
                     path, "): whoever reads it can act as this node"));
  }
  return fd;
}

}  // namespace

absl::Status CheckPrivateFile(const std::string& flag, const std::string& path) {
  auto fd = OpenPrivateFile(flag, path);
  if (!fd.ok()) return fd.status();
  ::close(*fd);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& flag, const std::string& path) {
  auto opened = OpenPrivateFile(flag, path);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  std::string secret(absl::StripAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n))));
  if (secret.empty() || secret.find_first_of(" \n\t") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " must hold one secret"));
  }
  return secret;
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  return ReadSecretFile("--api-key-file", path);
}

}  // namespace tessera::worker
