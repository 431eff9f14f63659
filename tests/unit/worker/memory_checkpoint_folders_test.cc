// The node's memory for in-memory checkpoints: a folder per run, kept across its attempts, the
// bound over all runs kept by removing idle runs' folders first, and a run id that cannot
// name a folder refused. Time is a fake clock's.
#include "worker/daemon/memory_checkpoint_folders.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace memory_checkpoint_folders_test {
namespace fs = std::filesystem;
using tessera::testing::TempDir;

// Writes `bytes` bytes into the run's folder, stamped as written at `when`.
void Fill(const std::string& folder, int64_t bytes, absl::Time when) {
  const std::string file = folder + "/step-00000010/shard-00000-of-00001.bin";
  fs::create_directories(fs::path(file).parent_path());
  std::ofstream(file) << std::string(static_cast<size_t>(bytes), 'x');
  const timespec t = absl::ToTimespec(when);
  const struct timespec times[2] = {t, t};
  for (const std::string& path : {file, fs::path(file).parent_path().string(), folder}) {
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  }
}

TEST_CASE("a run's memory folder is its own, kept across attempts, and refused for a bad id") {
  TempDir tmp;
  auto clock = std::make_shared<FakeClock>();
  const MemoryCheckpointFolders folders({tmp.path + "/memory", 1 << 20}, clock);
  auto first = folders.Prepare("run-1", std::nullopt);
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK((*first)->path == tmp.path + "/memory/run-1");
  CHECK((*first)->bytes == 1 << 20);
  CHECK((fs::status((*first)->path).permissions() & fs::perms::all) == fs::perms::owner_all);
  Fill((*first)->path, 1000, clock->Now());
  auto again = folders.Prepare("run-1", std::nullopt);  // its next attempt
  REQUIRE(again.ok());
  CHECK((*again)->path == (*first)->path);
  CHECK(fs::exists((*first)->path + "/step-00000010/shard-00000-of-00001.bin"));

  for (const std::string& bad :
       std::vector<std::string>{"", "..", "a/b", "../x", std::string(200, 'a')}) {
    INFO(bad);
    CHECK(folders.Prepare(bad, std::nullopt).status().code() == absl::StatusCode::kInvalidArgument);
  }
  folders.Release("run-1");  // it trained to its end here
  CHECK_FALSE(fs::exists((*first)->path));
  folders.Release("../memory");  // not a run's folder: nothing happens
  CHECK(fs::exists(tmp.path + "/memory"));

  const MemoryCheckpointFolders off({tmp.path + "/memory", 0}, clock);
  auto none = off.Prepare("run-1", std::nullopt);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("all runs' memory folders stay within the bound: idle ones go first, then the oldest") {
  TempDir tmp;
  auto clock = std::make_shared<FakeClock>();
  const std::string root = tmp.path + "/memory";
  const MemoryCheckpointFolders folders({root, 10'000, absl::Hours(1)}, clock);
  const absl::Time start = clock->Now();
  // Three other runs: one idle for two hours, two written 30 and 10 minutes ago.
  for (const std::string run : {"idle", "older", "newer"}) REQUIRE(folders.Prepare(run, {}).ok());
  Fill(root + "/idle", 1000, start - absl::Hours(2));
  Fill(root + "/older", 4000, start - absl::Minutes(30));
  Fill(root + "/newer", 4000, start - absl::Minutes(10));

  // A new run: the idle folder goes, and, as the two others leave it less than a third of the
  // bound, the longer idle of them.
  auto mine = folders.Prepare("mine", {});
  REQUIRE(mine.ok());
  REQUIRE(mine->has_value());
  CHECK_FALSE(fs::exists(root + "/idle"));
  CHECK_FALSE(fs::exists(root + "/older"));
  CHECK(fs::exists(root + "/newer"));
  CHECK((*mine)->bytes == 6000);

  // The new run filled 2000; another run is left 4000, over a third: nothing goes.
  Fill(root + "/mine", 2000, start);
  auto later = folders.Prepare("later", {});
  REQUIRE(later.ok());
  REQUIRE(later->has_value());
  CHECK(fs::exists(root + "/newer"));
  CHECK(fs::exists(root + "/mine"));
  CHECK((*later)->bytes == 4000);

  // Past the idle limit of everything but its own, a run gets the whole bound back.
  clock->Advance(absl::Hours(2));
  auto alone = folders.Prepare("later", {});
  REQUIRE(alone.ok());
  CHECK((*alone)->bytes == 10'000);
  CHECK_FALSE(fs::exists(root + "/newer"));
  CHECK_FALSE(fs::exists(root + "/mine"));
}

}  // namespace memory_checkpoint_folders_test
}  // namespace tessera::worker
