#include "services/gateway/console_assets.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "services/gateway/errors.h"

namespace tessera::gateway {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kIndex = "index.html";
constexpr std::string_view kAssetsPrefix = "/assets/";

// The first 16 bytes of the content's SHA-256, in hex and quoted: the same file gets the same
// tag from every gateway and after a restart.
std::string EtagOf(const std::string& content) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(content.data(), content.size(), digest.data(), &length, EVP_sha256(), nullptr) !=
      1) {
    length = 0;
  }
  const std::string raw(reinterpret_cast<const char*>(digest.data()), std::min(length, 16u));
  return absl::StrCat("\"", absl::BytesToHexString(raw), "\"");
}

// If-None-Match holds one tag, a list of them, or "*".
bool Matches(std::string_view if_none_match, std::string_view etag) {
  if (if_none_match.empty()) return false;
  if (if_none_match == "*") return true;
  return if_none_match.find(etag) != std::string_view::npos;
}

}  // namespace

std::string ContentTypeForFile(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
      {".woff2", "font/woff2"},
  };
  for (const auto& [extension, type] : kTypes) {
    if (name.ends_with(extension)) return std::string(type);
  }
  return "application/octet-stream";
}

void AddConsoleHeaders(Response& response) {
  response.headers.emplace_back("Cache-Control", "no-cache");
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  response.headers.emplace_back("X-Frame-Options", "DENY");
  // uPlot sizes its elements through the style attribute, hence 'unsafe-inline' for styles only.
  response.headers.emplace_back(
      "Content-Security-Policy",
      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
      "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
}

absl::StatusOr<std::shared_ptr<const ConsoleAssets>> ConsoleAssets::Load(
    const std::string& folder) {
  const std::string what = absl::StrCat("the web console's folder ", folder);
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    return absl::NotFoundError(absl::StrCat(what, " is not a folder"));
  }
  auto assets = std::make_shared<ConsoleAssets>();
  assets->folder_ = folder;
  std::size_t total = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (assets->files_.size() == kMaxFiles) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, " holds more than ", kMaxFiles, " files"));
    }
    std::ifstream in(entry.path(), std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::PermissionDeniedError(absl::StrCat(what, ": cannot read ", name));
    }
    total += content.size();
    if (total > kMaxTotalBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, " holds more than ", kMaxTotalBytes >> 20, " MiB"));
    }
    File file{.content = std::move(content), .content_type = ContentTypeForFile(name), .etag = ""};
    file.etag = EtagOf(file.content);
    assets->files_.emplace(name, std::move(file));
  }
  if (ec) return absl::PermissionDeniedError(absl::StrCat(what, ": ", ec.message()));
  if (!assets->files_.contains(kIndex)) {
    return absl::NotFoundError(absl::StrCat(what, " has no ", std::string(kIndex)));
  }
  return std::shared_ptr<const ConsoleAssets>(std::move(assets));
}

std::optional<std::string> ConsoleAssets::DefaultFolder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path folder = exe.parent_path() / ".." / "share" / "tessera" / "console";
  if (!fs::is_regular_file(folder / kIndex, ec)) return std::nullopt;
  return fs::weakly_canonical(folder, ec).string();
}

std::string ConsoleAssets::ResolveFlag(const std::string& flag) {
  if (flag == "none") return "";
  if (flag != "auto") return flag;
  if (std::optional<std::string> folder = DefaultFolder()) return *folder;
  spdlog::warn(
      "gateway: no web console beside this binary (BIN/../share/tessera/console): the REST API "
      "is served without it (deploy/install-deps.sh, then deploy/build.sh, builds it)");
  return "";
}

Response ConsoleAssets::Answer(const File& file, std::string_view if_none_match) const {
  Response response;
  response.headers.emplace_back("ETag", file.etag);
  AddConsoleHeaders(response);
  if (Matches(if_none_match, file.etag)) {
    response.status = 304;
    response.content_type.clear();
    return response;
  }
  response.content_type = file.content_type;
  response.body = file.content;
  return response;
}

Response ConsoleAssets::Serve(std::string_view path, std::string_view if_none_match) const {
  if (path.starts_with(kAssetsPrefix)) {
    const std::string_view name = path.substr(kAssetsPrefix.size());
    // Names are looked up, never joined to a path: "../x" or "a/b" simply is not there.
    auto it = files_.find(name);
    if (it == files_.end()) {
      Response missing =
          ErrorResponse(404, "NOT_FOUND", "the console has no file " + std::string(name));
      AddConsoleHeaders(missing);
      return missing;
    }
    return Answer(it->second, if_none_match);
  }
  return Answer(files_.find(kIndex)->second, if_none_match);
}

}  // namespace tessera::gateway
