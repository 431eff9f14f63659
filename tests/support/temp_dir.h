#pragma once
// A private temporary folder for a test: a fresh folder under the system's temporary folder
// ($TMPDIR, or /tmp), removed with everything in it when the TempDir is destroyed, also when the
// test failed (a REQUIRE unwinds through it).

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace tessera::testing {

class TempDir {
 public:
  // The folder is named `prefix` and a unique suffix, to tell whose it is while the test runs.
  explicit TempDir(const std::string& prefix = "tessera-test") : path(Make(prefix)) {}
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw; what cannot be removed stays
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` (bytes as they are) to `name` inside the folder, making the folders on the way;
  // returns the file's path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

  const std::string path;  // absolute, without a trailing slash

 private:
  static std::string Make(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    return pattern;
  }
};

// Folders made by tests are private (mkdtemp): lets other users (sandboxed ranks run as each
// user's uid) pass through `dir` and every folder above it, without listing or reading them.
inline void OpenToPassThrough(const std::filesystem::path& dir) {
  for (std::filesystem::path p = dir; p != p.root_path(); p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & 01) == 0) {
      std::filesystem::permissions(p, std::filesystem::perms::others_exec,
                                   std::filesystem::perm_options::add);
    }
  }
}

}  // namespace tessera::testing
