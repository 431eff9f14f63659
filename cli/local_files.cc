#include "cli/local_files.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cli/errors.h"
#include "runspec/integrations.h"
#include "runspec/spec_limits.h"

namespace tessera::cli {
namespace {
namespace fs = std::filesystem;

// A gzip tar written as it is made: ustar headers, a pax header for names and link targets
// that do not fit one.
class TarGzWriter {
 public:
  explicit TarGzWriter(size_t max_bytes) : max_bytes_(max_bytes) {
    deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  }
  ~TarGzWriter() { deflateEnd(&z_); }

  absl::Status Entry(const std::string& name, char type, uint32_t mode, int64_t size, int64_t mtime,
                     const std::string& link) {
    if (name.size() > 99 || link.size() > 99) {
      std::string records;
      if (name.size() > 99) records += PaxRecord("path", name);
      if (link.size() > 99) records += PaxRecord("linkpath", link);
      if (auto st = Header("././@PaxHeader", 'x', 0644, records.size(), mtime, ""); !st.ok()) {
        return st;
      }
      if (auto st = Write(records.data(), records.size()); !st.ok()) return st;
      if (auto st = Pad(records.size()); !st.ok()) return st;
    }
    return Header(name.substr(0, 99), type, mode, size, mtime, link.substr(0, 99));
  }
  absl::Status Write(const char* data, size_t size) { return Deflate(data, size, Z_NO_FLUSH); }
  absl::Status Pad(int64_t size) {
    const std::string zeros(static_cast<size_t>((512 - size % 512) % 512), '\0');
    return Write(zeros.data(), zeros.size());
  }
  absl::StatusOr<std::string> Finish() {
    const std::string end(1024, '\0');
    if (auto st = Write(end.data(), end.size()); !st.ok()) return st;
    if (auto st = Deflate(nullptr, 0, Z_FINISH); !st.ok()) return st;
    return std::move(out_);
  }

 private:
  static std::string PaxRecord(const std::string& key, const std::string& value) {
    // "<length> key=value\n", the length counting its own digits.
    const size_t body = key.size() + value.size() + 3;
    size_t length = body + 1;
    while (std::to_string(length).size() + body != length) ++length;
    return absl::StrCat(length, " ", key, "=", value, "\n");
  }

  absl::Status Header(const std::string& name, char type, uint32_t mode, int64_t size,
                      int64_t mtime, const std::string& link) {
    char h[512] = {};
    const auto put = [&](size_t at, size_t width, const std::string& text) {
      std::memcpy(h + at, text.data(), std::min(width, text.size()));
    };
    const auto octal = [&](size_t at, size_t width, int64_t value) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%0*llo", static_cast<int>(width - 1),
                    static_cast<unsigned long long>(value));
      put(at, width - 1, buffer);
    };
    put(0, 100, name);
    octal(100, 8, mode & 07777);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, size);
    octal(136, 12, std::max<int64_t>(0, mtime));
    std::memset(h + 148, ' ', 8);
    h[156] = type;
    put(157, 100, link);
    put(257, 6, std::string("ustar\0", 6));
    put(263, 2, "00");
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    char checksum[8];
    std::snprintf(checksum, sizeof checksum, "%06o", sum);
    std::memcpy(h + 148, checksum, 7);
    return Write(h, sizeof h);
  }

  absl::Status Deflate(const char* data, size_t size, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z_.avail_in = static_cast<uInt>(size);
    char buffer[64 << 10];
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buffer);
      z_.avail_out = sizeof buffer;
      const int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) return absl::InternalError("gzip failed");
      out_.append(buffer, sizeof buffer - z_.avail_out);
      if (out_.size() > max_bytes_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "its files pack to more than the ", max_bytes_,
            " bytes a local integration may carry: put large files in the image, a git_repo "
            "or the shared folder"));
      }
    } while (z_.avail_out == 0 || (flush == Z_FINISH && z_.avail_in > 0));
    return absl::OkStatus();
  }

  size_t max_bytes_;
  z_stream z_{};
  std::string out_;
};

int64_t MtimeOf(const struct stat& st) { return static_cast<int64_t>(st.st_mtim.tv_sec); }

}  // namespace

absl::StatusOr<PackedFiles> PackLocalFiles(const std::string& path, const std::string& target,
                                           size_t max_bytes) {
  struct stat top;
  if (::lstat(path.c_str(), &top) != 0) {
    return absl::NotFoundError(std::strerror(errno));
  }
  TarGzWriter tar(max_bytes);
  PackedFiles packed;
  const auto add = [&](const fs::path& on_disk, const std::string& name) -> absl::Status {
    struct stat st;
    if (::lstat(on_disk.c_str(), &st) != 0) {
      return absl::InternalError(absl::StrCat(on_disk.string(), ": ", std::strerror(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
      ++packed.entries;
      return tar.Entry(name + "/", '5', st.st_mode, 0, MtimeOf(st), "");
    }
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const fs::path to = fs::read_symlink(on_disk, ec);
      if (ec) return absl::InternalError(absl::StrCat(on_disk.string(), ": ", ec.message()));
      ++packed.entries;
      return tar.Entry(name, '2', 0777, 0, MtimeOf(st), to.string());
    }
    if (!S_ISREG(st.st_mode)) {
      ++packed.skipped;
      return absl::OkStatus();
    }
    std::ifstream in(on_disk, std::ios::binary);
    if (!in) {
      return absl::PermissionDeniedError(
          absl::StrCat(on_disk.string(), ": ", std::strerror(errno)));
    }
    if (auto s = tar.Entry(name, '0', st.st_mode, st.st_size, MtimeOf(st), ""); !s.ok()) return s;
    std::vector<char> buffer(1 << 20);
    int64_t left = st.st_size;
    while (left > 0) {
      in.read(buffer.data(), static_cast<std::streamsize>(
                                 std::min<int64_t>(left, static_cast<int64_t>(buffer.size()))));
      const std::streamsize n = in.gcount();
      if (n <= 0) {
        return absl::DataLossError(absl::StrCat(on_disk.string(), " shrank while it was packed"));
      }
      if (auto s = tar.Write(buffer.data(), static_cast<size_t>(n)); !s.ok()) return s;
      left -= n;
    }
    ++packed.entries;
    packed.bytes += st.st_size;
    return tar.Pad(st.st_size);
  };

  if (auto st = add(path, target); !st.ok()) return st;
  if (S_ISDIR(top.st_mode)) {
    // Sorted, so that the same folder packs to the same archive.
    std::vector<fs::path> below;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      below.push_back(it->path());
    }
    if (ec) return absl::InternalError(absl::StrCat(path, ": ", ec.message()));
    std::sort(below.begin(), below.end());
    for (const fs::path& p : below) {
      const std::string relative = p.lexically_relative(path).generic_string();
      if (auto st = add(p, target + "/" + relative); !st.ok()) return st;
    }
  }
  auto archive = tar.Finish();
  if (!archive.ok()) return archive.status();
  packed.archive = *std::move(archive);
  return packed;
}

void PackLocalIntegrations(tessera::v1::RunSpec& spec) {
  for (int n = 0; n < spec.integrations_size(); ++n) {
    tessera::v1::Integration& i = *spec.mutable_integrations(n);
    if (i.integration_type() != "local" || !spec::IntegrationText(i, "archive").empty()) continue;
    const std::string where = absl::StrCat("integrations[", n, "]");
    const std::string path = spec::IntegrationText(i, "path");
    if (path.empty()) ThrowUsage(where + ".path: required (the file or folder to send)");
    auto target = spec::LocalTarget(i);
    if (!target.ok()) ThrowUsage(absl::StrCat(where, ".target: ", target.status().message()));
    auto packed = PackLocalFiles(path, *target, spec::kMaxLocalArchiveBytes);
    if (!packed.ok()) {
      ThrowUsage(absl::StrCat(where, ".path: ", path, ": ", packed.status().message()));
    }
    (*i.mutable_fields()->mutable_fields())["archive"].set_string_value(
        absl::Base64Escape(packed->archive));
  }
}

}  // namespace tessera::cli
