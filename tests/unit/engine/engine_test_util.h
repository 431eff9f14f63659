#pragma once
// A temporary folder per test case, removed afterwards.

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::engine::testing {

struct TempFolder {
  std::string path;
  TempFolder() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera_engine.XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = path + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

}  // namespace tessera::engine::testing
