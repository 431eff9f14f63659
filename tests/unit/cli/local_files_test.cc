// The local integration's packing: what `tar -xzf` makes of the archive is the folder (or file)
// under its target, links kept, nothing over the limit.
#include "cli/local_files.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/escaping.h"
#include "cli/errors.h"
#include "runspec/integrations.h"
#include "tests/support/temp_dir.h"

namespace tessera::cli {
namespace local_files_test {
namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Unpacks `archive` with the real tar into `dir`; returns tar's exit status.
int Unpack(const std::string& archive, const std::string& dir) {
  fs::create_directories(dir);
  std::ofstream(dir + "/../archive.tar.gz", std::ios::binary) << archive;
  return std::system(("tar -xzf '" + dir + "/../archive.tar.gz' -C '" + dir + "'").c_str());
}

TEST_CASE("a folder is packed under its target, with long names, modes and links") {
  tessera::testing::TempDir tmp{"local_files_test"};
  const std::string src = tmp.path + "/code";
  const std::string deep = std::string(120, 'd');  // past ustar's 100 bytes
  fs::create_directories(src + "/sub/" + deep);
  std::ofstream(src + "/hello.txt") << "hello";
  std::ofstream(src + "/run.sh") << "#!/bin/sh\necho run\n";
  fs::permissions(src + "/run.sh", fs::perms(0755));
  std::ofstream(src + "/sub/" + deep + "/x.txt") << "deep";
  fs::create_symlink("hello.txt", src + "/link");

  auto packed = PackLocalFiles(src, "work/code", 1 << 20);
  REQUIRE(packed.ok());
  CHECK(packed->entries == 7);  // code, hello.txt, link, run.sh, sub, sub/ddd, sub/ddd/x.txt
  CHECK(packed->bytes == 5 + 19 + 4);
  const std::string out = tmp.path + "/out";
  REQUIRE(Unpack(packed->archive, out) == 0);
  CHECK(Read(out + "/work/code/hello.txt") == "hello");
  CHECK(Read(out + "/work/code/sub/" + deep + "/x.txt") == "deep");
  CHECK((fs::status(out + "/work/code/run.sh").permissions() & fs::perms::owner_exec) !=
        fs::perms::none);
  REQUIRE(fs::is_symlink(out + "/work/code/link"));
  CHECK(fs::read_symlink(out + "/work/code/link") == "hello.txt");

  // The same folder packs to the same bytes.
  CHECK(PackLocalFiles(src, "work/code", 1 << 20)->archive == packed->archive);
}

TEST_CASE("a single file is packed as its target") {
  tessera::testing::TempDir tmp{"local_files_test"};
  std::ofstream(tmp.path + "/settings.cfg") << "lr=0.1\n";
  auto packed = PackLocalFiles(tmp.path + "/settings.cfg", "configs/run.cfg", 1 << 20);
  REQUIRE(packed.ok());
  REQUIRE(Unpack(packed->archive, tmp.path + "/out") == 0);
  CHECK(Read(tmp.path + "/out/configs/run.cfg") == "lr=0.1\n");
}

TEST_CASE("a missing path or files over the limit are refused, naming the integration") {
  tessera::testing::TempDir tmp{"local_files_test"};
  CHECK(PackLocalFiles(tmp.path + "/missing", "x", 1 << 20).status().code() ==
        absl::StatusCode::kNotFound);
  // Random bytes do not compress: 64 KiB of them cannot fit in 16 KiB.
  std::string noise(64 << 10, '\0');
  std::mt19937 rng(7);
  for (char& c : noise) c = static_cast<char>(rng());
  std::ofstream(tmp.path + "/noise.bin", std::ios::binary) << noise;
  auto big = PackLocalFiles(tmp.path + "/noise.bin", "noise.bin", 16 << 10);
  CHECK(big.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(big.status().message()), Catch::Contains("more than the 16384 bytes"));

  tessera::v1::RunSpec spec;
  auto* i = spec.add_integrations();
  i->set_integration_type("local");
  (*i->mutable_fields()->mutable_fields())["path"].set_string_value(tmp.path + "/missing");
  try {
    PackLocalIntegrations(spec);
    FAIL("no error");
  } catch (const CliError& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::StartsWith("integrations[0].path: " + tmp.path + "/missing: No such file"));
  }
  (*i->mutable_fields()->mutable_fields())["path"].set_string_value(tmp.path + "/noise.bin");
  (*i->mutable_fields()->mutable_fields())["target"].set_string_value("../escape");
  try {
    PackLocalIntegrations(spec);
    FAIL("no error");
  } catch (const CliError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("integrations[0].target:") &&
                                          Catch::Contains("leaves the working folder"));
  }
}

TEST_CASE("PackLocalIntegrations fills archive, and leaves one given as it is") {
  tessera::testing::TempDir tmp{"local_files_test"};
  std::ofstream(tmp.path + "/train.py") << "print('hi')\n";
  tessera::v1::RunSpec spec;
  auto* local = spec.add_integrations();
  local->set_integration_type("local");
  (*local->mutable_fields()->mutable_fields())["path"].set_string_value(tmp.path + "/train.py");
  auto* given = spec.add_integrations();
  given->set_integration_type("local");
  (*given->mutable_fields()->mutable_fields())["path"].set_string_value("/elsewhere");
  (*given->mutable_fields()->mutable_fields())["archive"].set_string_value("H4sI");
  PackLocalIntegrations(spec);
  std::string archive;
  REQUIRE(absl::Base64Unescape(spec::IntegrationText(spec.integrations(0), "archive"), &archive));
  REQUIRE(Unpack(archive, tmp.path + "/out") == 0);
  CHECK(Read(tmp.path + "/out/train.py") == "print('hi')\n");
  CHECK(spec::IntegrationText(spec.integrations(1), "archive") == "H4sI");
}

}  // namespace local_files_test
}  // namespace tessera::cli
