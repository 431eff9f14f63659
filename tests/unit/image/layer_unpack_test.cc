// Image layers applied as they stream in: the tar reader in any chunking, the OCI layer rules
// (replacement, whiteouts, opaque folders, links, modes), hostile layers that try to write
// outside the root, and the docker-archive stream with its layers out of order.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"
#include "tests/unit/image/tar_builder.h"
#include "worker/image/archive_unpacker.h"
#include "worker/image/layer_writer.h"
#include "worker/image/tar_stream.h"

namespace tessera::worker::image {
namespace layer_unpack_test {

namespace fs = std::filesystem;
using tessera::testing::TempDir;
using testing::TarBuilder;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

unsigned Mode(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// A root folder and layers applied to it, each fed `chunk` bytes at a time.
struct Root {
  TempDir dir{"tessera-layers"};
  std::string root = dir.path + "/rootfs";
  int fd = -1;
  RootFinish finish;
  Root() {
    fs::create_directories(root);
    fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  }
  ~Root() { ::close(fd); }
  absl::Status Apply(const std::string& layer, size_t chunk = 4096) {
    LayerWriter writer(fd, &finish);
    TarStreamReader reader(&writer);
    for (size_t i = 0; i < layer.size(); i += chunk) {
      if (absl::Status st = reader.Feed(layer.data() + i, std::min(chunk, layer.size() - i));
          !st.ok()) {
        return st;
      }
    }
    return reader.Finish();
  }
  absl::Status Done() { return FinishRoot(fd, finish); }
  std::string Path(const std::string& p) const { return root + "/" + p; }
};

TEST_CASE("a layer's files, folders and links land in the root, in any chunking", "[image]") {
  const std::string big(70'000, 'b');
  const std::string long_name = std::string(120, 'n') + "/file";
  const std::string layer = TarBuilder()
                                .Dir("./usr/", 0755)
                                .File("./usr/bin/tool", "#!/bin/sh\necho hi\n", 0755)
                                .File("big", big, 0600)
                                .Symlink("usr/bin/link", "tool")
                                .HardLink("usr/bin/again", "./usr/bin/tool")
                                .File(long_name, "long", 0644)
                                .Fifo("dev-fifo")
                                .File("suid", "x", 04755)
                                .Finish();
  for (size_t chunk : {size_t{1}, size_t{511}, size_t{512}, size_t{100'000}}) {
    Root r;
    REQUIRE(r.Apply(layer, chunk).ok());
    REQUIRE(r.Done().ok());
    CHECK(Read(r.Path("usr/bin/tool")) == "#!/bin/sh\necho hi\n");
    CHECK(Mode(r.Path("usr/bin/tool")) == 0755);
    CHECK(Read(r.Path("big")) == big);
    CHECK(Mode(r.Path("big")) == 0600);
    CHECK(fs::read_symlink(r.Path("usr/bin/link")) == "tool");
    CHECK(fs::equivalent(r.Path("usr/bin/again"), r.Path("usr/bin/tool")));
    CHECK(Read(r.Path(long_name)) == "long");
    CHECK_FALSE(fs::exists(r.Path("dev-fifo")));  // no device nodes or fifos, as rootless umoci
    CHECK(Mode(r.Path("suid")) == 0755);          // no set-uid bit
    struct stat st;
    REQUIRE(::stat(r.Path("usr/bin/tool").c_str(), &st) == 0);
    CHECK(st.st_mtime == 1700000000);
  }
}

TEST_CASE("upper layers replace, whiteouts delete, opaque folders hide what was below", "[image]") {
  Root r;
  REQUIRE(r.Apply(TarBuilder()
                      .File("etc/keep", "lower")
                      .File("etc/gone", "lower")
                      .Dir("opt/app", 0755)
                      .File("opt/app/old", "old")
                      .File("opt/app/older/deep", "old")
                      .Dir("was-dir")
                      .File("was-dir/x", "x")
                      .File("was-file", "f")
                      .Finish())
              .ok());
  REQUIRE(r.Apply(TarBuilder()
                      .File("etc/keep", "upper")
                      .File("etc/.wh.gone", "")
                      .File("opt/app/new", "new")  // before the marker: this layer's, kept
                      .File("opt/app/.wh..wh..opq", "")
                      .File("was-dir", "now a file")
                      .Dir("was-file", 0700)
                      .Finish())
              .ok());
  REQUIRE(r.Done().ok());
  CHECK(Read(r.Path("etc/keep")) == "upper");
  CHECK_FALSE(fs::exists(r.Path("etc/gone")));
  CHECK_FALSE(fs::exists(r.Path("etc/.wh.gone")));
  CHECK(Read(r.Path("opt/app/new")) == "new");
  CHECK_FALSE(fs::exists(r.Path("opt/app/old")));
  CHECK_FALSE(fs::exists(r.Path("opt/app/older")));
  CHECK(Read(r.Path("was-dir")) == "now a file");
  CHECK(fs::is_directory(r.Path("was-file")));
  CHECK(Mode(r.Path("was-file")) == 0700);
}

TEST_CASE("read-only folders take their mode only once every layer is in", "[image]") {
  Root r;
  REQUIRE(r.Apply(TarBuilder().Dir("ro", 0555).File("ro/a", "a").Finish()).ok());
  REQUIRE(r.Apply(TarBuilder().File("ro/b", "b").File("ro/.wh.a", "").Finish()).ok());
  REQUIRE(r.Done().ok());
  CHECK(Mode(r.Path("ro")) == 0555);
  CHECK(Read(r.Path("ro/b")) == "b");
  CHECK_FALSE(fs::exists(r.Path("ro/a")));
}

TEST_CASE("a hostile layer cannot write outside the root", "[image][security]") {
  TempDir outside("tessera-outside");
  std::ofstream(outside.path + "/precious") << "keep";
  Root r;
  // A link to a folder outside, then a file "through" it: the link is resolved inside the root,
  // where that folder does not exist, so the layer fails.
  absl::Status through =
      r.Apply(TarBuilder().Symlink("escape", outside.path).File("escape/pwned", "x").Finish());
  CHECK(through.code() == absl::StatusCode::kInternal);
  CHECK(through.message() == "cannot open /escape: No such file or directory");
  // Climbing out with "..": a link's ".." stops at the root; an entry's is refused.
  REQUIRE(r.Apply(TarBuilder().Symlink("up", "../../../../..").File("up/x", "x").Finish()).ok());
  CHECK(Read(r.Path("x")) == "x");
  absl::Status dots = r.Apply(TarBuilder().File("a/../../x", "x").Finish());
  CHECK(dots.code() == absl::StatusCode::kInvalidArgument);
  CHECK(dots.message() == "a layer entry leaves the root: \"a/../../x\"");
  // Absolute paths are the root's.
  REQUIRE(r.Apply(TarBuilder().File("/abs-path", "mine").Finish()).ok());
  CHECK(Read(r.Path("abs-path")) == "mine");
  // Hard links to files outside: refused, or resolved inside the root (where there is none).
  CHECK(r.Apply(TarBuilder().HardLink("h", "../etc/passwd").Finish()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(r.Apply(TarBuilder().HardLink("h", outside.path + "/precious").Finish()).code() ==
        absl::StatusCode::kInternal);
  CHECK_FALSE(fs::exists(r.Path("h")));
  // A whiteout cannot delete outside either.
  CHECK_FALSE(r.Apply(TarBuilder().File("escape/.wh.precious", "").Finish()).ok());
  CHECK(Read(outside.path + "/precious") == "keep");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(outside.path)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("malformed tar streams are refused with what is wrong", "[image]") {
  Root r;
  std::string layer = TarBuilder().File("a", "hello").Finish();
  std::string bad_sum = layer;
  bad_sum[0] = 'b';
  CHECK(r.Apply(bad_sum).message() == "a tar header's checksum is wrong (not a tar stream?)");
  CHECK(r.Apply(layer.substr(0, 700)).message() == "the tar stream ended inside an entry");
  CHECK(r.Apply("").ok());  // an empty layer
  std::string big_pax =
      TarBuilder().Entry("x", 'x', std::string(2 << 20, 'p'), "", 0644, 0).bytes();
  CHECK(r.Apply(big_pax).code() == absl::StatusCode::kInvalidArgument);
}

// An archive as skopeo writes it: layers named by their diff ids, then the config.
std::string Archive(const std::vector<std::pair<std::string, std::string>>& layers) {
  TarBuilder b;
  for (const auto& [hex, layer] : layers) b.File(hex + ".tar", layer, 0444);
  b.File("config.json", "{}").File("manifest.json", "[]");
  return b.Finish();
}

std::string Hex(char c) { return std::string(64, c); }

TEST_CASE("an archive's layers are applied in the image's order, early ones spooled", "[image]") {
  const std::string lower = TarBuilder().File("f", "lower").File("only-lower", "1").Finish();
  const std::string upper = TarBuilder().File("f", "upper").File(".wh.only-lower", "").Finish();
  const std::string empty = TarBuilder().Finish();
  for (bool reversed : {false, true}) {
    Root r;
    ArchiveUnpacker unpacker(
        r.fd,
        {"sha256:" + Hex('a'), "sha256:" + Hex('e'), "sha256:" + Hex('b'), "sha256:" + Hex('e')},
        r.dir.path);
    TarStreamReader reader(&unpacker);
    const std::string archive =
        reversed ? Archive({{Hex('e'), empty}, {Hex('b'), upper}, {Hex('a'), lower}})
                 : Archive({{Hex('a'), lower}, {Hex('e'), empty}, {Hex('b'), upper}});
    for (size_t i = 0; i < archive.size(); i += 1000) {
      REQUIRE(reader.Feed(archive.data() + i, std::min<size_t>(1000, archive.size() - i)).ok());
    }
    REQUIRE(reader.Finish().ok());
    REQUIRE(unpacker.Finish().ok());
    CHECK(Read(r.Path("f")) == "upper");
    CHECK_FALSE(fs::exists(r.Path("only-lower")));
  }
}

TEST_CASE("an archive without one of the image's layers is refused, naming it", "[image]") {
  Root r;
  ArchiveUnpacker unpacker(r.fd, {"sha256:" + Hex('a'), "sha256:" + Hex('b')}, r.dir.path);
  TarStreamReader reader(&unpacker);
  const std::string archive = Archive({{Hex('a'), TarBuilder().File("x", "x").Finish()}});
  REQUIRE(reader.Feed(archive.data(), archive.size()).ok());
  REQUIRE(reader.Finish().ok());
  CHECK(unpacker.Finish().message() == "the image archive lacks layer 1 (sha256:" + Hex('b') + ")");
}

}  // namespace layer_unpack_test
}  // namespace tessera::worker::image
