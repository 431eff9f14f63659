#include "worker/image/cache_files.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/random.h"

namespace tessera::worker::image {
namespace fs = std::filesystem;

int64_t TreeBytes(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  int64_t bytes = st.st_size;
  std::error_code ec;
  // recursive_directory_iterator does not follow symbolic links unless told to.
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (::lstat(it->path().c_str(), &st) == 0) bytes += st.st_size;
  }
  return bytes;
}

bool RemoveTree(const std::string& path) {
  std::error_code ec;
  const fs::file_status self = fs::symlink_status(path, ec);
  if (!fs::exists(self)) return true;
  if (!fs::is_directory(self)) {  // a file or a link: deleted itself, nothing it points to
    fs::remove(path, ec);
    if (ec) spdlog::warn("image cache: cannot delete {}: {}", path, ec.message());
    return !ec;
  }
  const auto make_writable = [](const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IRWXU) != S_IRWXU) {
      ::chmod(p.c_str(), (st.st_mode & 07777) | S_IRWXU);
    }
  };
  make_writable(path);
  // A folder is made writable when the iterator reaches it, before it descends into it.
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    make_writable(it->path());
  }
  fs::remove_all(path, ec);
  if (ec) {
    spdlog::warn("image cache: cannot delete {}: {}", path, ec.message());
    return false;
  }
  return true;
}

std::string RandomSuffix() {
  return absl::StrFormat("%08x", SystemRandom::Shared()->Uniform(uint64_t{1} << 32));
}

absl::Status MakePrivateFolder(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    if (absl::Status st = MakeFolders(parent.string()); !st.ok()) return st;
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("Cannot create the folder ", path, ": ", std::strerror(errno)));
  }
  if (!fs::is_directory(path)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a folder"));
  }
  return absl::OkStatus();
}

absl::Status MakePassThroughFolder(const std::string& path) {
  if (absl::Status st = MakePrivateFolder(path); !st.ok()) return st;
  if (::chmod(path.c_str(), 0711) != 0) {
    return absl::InternalError(
        absl::StrCat("Cannot open the folder ", path, " to ranks: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::optional<int64_t> ReadNumberFile(const std::string& path) {
  auto text = ReadWholeFile(path);
  int64_t value = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value)) {
    return std::nullopt;
  }
  return value;
}

absl::Status WriteNumberFile(const std::string& path, int64_t value) {
  // Not durable on purpose: these are written on every use, and after a crash a lost one only
  // makes an image look older (or its size is measured again).
  std::ofstream out(path, std::ios::trunc);
  out << value << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("Cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<ProcessConfig> ReadProcessConfig(const std::string& bundle) {
  const std::string path = bundle + "/config.json";
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InternalError(absl::StrCat("Cannot read ", path, ": ", text.status().message()));
  }
  const nlohmann::json spec = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) {
    return absl::InternalError(absl::StrCat(path, " is not a JSON object"));
  }
  ProcessConfig config;
  const auto process = spec.find("process");
  if (process == spec.end() || !process->is_object()) return config;
  if (const auto env = process->find("env"); env != process->end() && env->is_array()) {
    for (const nlohmann::json& e : *env) {
      if (!e.is_string())
        return absl::InternalError(absl::StrCat(path, ": process.env holds a non-string"));
      config.env.push_back(e.get<std::string>());
    }
  }
  if (const auto cwd = process->find("cwd");
      cwd != process->end() && cwd->is_string() && !cwd->get<std::string>().empty()) {
    config.cwd = cwd->get<std::string>();
  }
  return config;
}

}  // namespace tessera::worker::image
