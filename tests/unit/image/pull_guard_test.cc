// PullGuard with a scripted disk: what a manifest declares, what arrives, how many files, and
// how often the disk is looked at.
#include "worker/image/pull_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/support/temp_dir.h"
#include "tests/unit/image/tar_builder.h"
#include "worker/image/blob_stream.h"
#include "worker/image/layer_applier.h"

namespace tessera::worker::image {
namespace pull_guard_test {

// A disk whose free space the test sets; counts how often it was asked.
struct ScriptedDisk {
  DiskSpace space{int64_t{10} << 30, 1'000'000};
  int probes = 0;
  DiskSpaceProbe Probe() {
    return [this](const std::string&) -> absl::StatusOr<DiskSpace> {
      ++probes;
      return space;
    };
  }
};

PullLimits Limits() {
  PullLimits l;
  l.max_image_bytes = int64_t{4} << 30;
  l.max_files = 100;
  l.min_free_bytes = int64_t{1} << 30;
  l.min_free_inodes = 5'000;
  return l;
}

TEST_CASE("what a manifest declares is refused before a byte when it cannot fit") {
  ScriptedDisk disk;
  PullGuard guard("r.example/evil:1", "/cache", Limits(), disk.Probe());
  CHECK(guard.CheckDeclared(int64_t{3} << 30).ok());

  const absl::Status huge = guard.CheckDeclared(int64_t{1} << 40);
  CHECK(huge.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(huge.message()),
             Catch::Contains("Image r.example/evil:1 declares layers of 1099511627776 bytes") &&
                 Catch::Contains("(4294967296 bytes, --image-cache-size)"));

  disk.space.free_bytes = int64_t{4} << 30;  // 3 GiB and a byte would leave under 1 GiB
  const absl::Status tight = guard.CheckDeclared((int64_t{3} << 30) + 1);
  CHECK(tight.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(tight.message()),
             Catch::Contains("has 4294967296 bytes free and keeps 1073741824 of them "
                             "(--image-min-free-disk)"));
  CHECK(guard.CheckDeclared(int64_t{3} << 30).ok());
}

TEST_CASE(
    "what arrives is counted: the disk is looked at every 16 MiB, and the pull stops at "
    "the reserve") {
  ScriptedDisk disk;
  PullGuard guard("img", "/cache", Limits(), disk.Probe());
  constexpr int64_t kChunk = 1 << 20;
  for (int i = 0; i < 15; ++i) REQUIRE(guard.Wrote(kChunk).ok());
  CHECK(disk.probes == 0);
  REQUIRE(guard.Wrote(kChunk).ok());
  CHECK(disk.probes == 1);
  for (int i = 0; i < 16; ++i) REQUIRE(guard.Wrote(kChunk).ok());
  CHECK(disk.probes == 2);

  disk.space.free_bytes = (int64_t{1} << 30) - 1;  // something else filled the disk meanwhile
  absl::Status st;
  int chunks = 0;
  while (st.ok() && chunks < 100) {
    st = guard.Wrote(kChunk);
    ++chunks;
  }
  CHECK(chunks == 16);  // found at the next look, not later
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(st.message()),
             Catch::Contains("Image img was stopped: the node's disk (/cache) is down to "
                             "1073741823 bytes free, under the 1073741824 it keeps "
                             "(--image-min-free-disk)"));
}

TEST_CASE("files are counted against --image-max-files, inodes against the reserve") {
  ScriptedDisk disk;
  PullLimits limits = Limits();
  limits.max_files = 3000;
  PullGuard guard("img", "/cache", limits, disk.Probe());
  for (int i = 0; i < 1023; ++i) REQUIRE(guard.AddedFile().ok());
  CHECK(disk.probes == 0);
  disk.space.free_inodes = 4'999;
  const absl::Status inodes = guard.AddedFile();
  CHECK(disk.probes == 1);
  CHECK(inodes.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(inodes.message()),
             Catch::Contains("is down to 4999 free inodes, under the 5000 it keeps "
                             "(--image-min-free-inodes)"));

  disk.space.free_inodes = 1'000'000;
  PullGuard few("img", "/cache", Limits(), disk.Probe());
  for (int i = 0; i < 100; ++i) REQUIRE(few.AddedFile().ok());
  const absl::Status many = few.AddedFile();
  CHECK(many.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(many.message()),
             Catch::Contains("Image img has more than 100 files, the most a node unpacks of "
                             "one image (--image-max-files)"));
}

TEST_CASE("a layer of many empty files stops at the limit, having created no more") {
  tessera::testing::TempDir tmp{"pull_guard_test"};
  testing::TarBuilder tar;
  for (int i = 0; i < 50; ++i) tar.File("f" + std::to_string(i), "");
  const std::string layer = tar.Finish();
  ScriptedDisk disk;
  PullLimits limits = Limits();
  limits.max_files = 20;
  PullGuard guard("img", tmp.path, limits, disk.Probe());
  RootFinish finish;
  const int root = ::open(tmp.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(root >= 0);
  LayerApplier applier(root, &finish, LayerCompression::kNone, Sha256Digest(layer), -1, &guard);
  const absl::Status st = applier.Feed(layer.data(), layer.size());
  ::close(root);
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(st.message()), Catch::Contains("--image-max-files"));
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(tmp.path)) ++files;
  CHECK(files == 20);
}

TEST_CASE("the real disk is read: free bytes and inodes of the folder's file system") {
  tessera::testing::TempDir tmp{"pull_guard_test"};
  auto space = StatDiskSpace(tmp.path);
  REQUIRE(space.ok());
  CHECK(space->free_bytes > 0);
  CHECK(space->free_inodes > 0);
  CHECK(StatDiskSpace(tmp.path + "/missing").status().code() == absl::StatusCode::kInternal);
}

}  // namespace pull_guard_test
}  // namespace tessera::worker::image
