#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "tests/support/temp_dir.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/checkpoint_saver.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::engine {
namespace checkpoint_test {
using tessera::testing::TempDir;
namespace fs = std::filesystem;

constexpr int64_t kNumel = 1001;  // not a multiple of the shard counts

// The three arrays of a flat buffer: params = i, exp_avg = -i, exp_avg_sq = step + i.
struct FlatState {
  std::vector<float> arrays[3];
  explicit FlatState(int64_t step) {
    for (auto& a : arrays) a.resize(kNumel);
    for (int64_t i = 0; i < kNumel; ++i) {
      arrays[0][static_cast<size_t>(i)] = static_cast<float>(i);
      arrays[1][static_cast<size_t>(i)] = -static_cast<float>(i);
      arrays[2][static_cast<size_t>(i)] = static_cast<float>(step + i);
    }
  }
};

CheckpointManifest Template(int64_t step, int world) {
  CheckpointManifest m;
  m.step = step;
  m.world_size = world;
  m.sharding = "FULL_SHARD";
  m.shard_group_size = world;
  m.numel = kNumel;
  m.arrays = {"params", "exp_avg", "exp_avg_sq"};
  m.data = DataState{1, step * 8};
  m.tokens_seen = step * 64;
  m.seed = 17;
  m.config_hash = "shape-a";
  return m;
}

// Saves `step` as `world` ranks (threads), each writing its shard; rank 0 commits.
void SaveAsRanks(const std::string& root, int64_t step, int world, bool background) {
  InProcessCommitChannel channel;
  FlatState state(step);
  const int64_t shard = (kNumel + world - 1) / world;
  std::vector<std::thread> ranks;
  std::vector<absl::Status> results(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      SaveRole role{true, r, world, r == 0};
      CheckpointSaver saver(CheckpointFolder(root), &channel, role, 0, absl::Seconds(20));
      SaveJob job;
      job.manifest = Template(step, world);
      job.payload.offset = std::min(kNumel, r * shard);
      job.payload.count = std::min(kNumel, (r + 1) * shard) - job.payload.offset;
      for (auto& a : state.arrays) job.payload.arrays.push_back(a.data() + job.payload.offset);
      absl::Status st = saver.Save(job, background);
      if (st.ok()) st = saver.Wait();
      results[static_cast<size_t>(r)] = st;
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& st : results) REQUIRE(st.ok());
}

absl::Status Compatible(const CheckpointManifest& m) {
  return m.config_hash == "shape-a" ? absl::OkStatus()
                                    : absl::FailedPreconditionError("another shape");
}

TEST_CASE("a checkpoint saved by 4 ranks loads on 3, 2 or 1: shards are re-split") {
  TempDir tmp;
  SaveAsRanks(tmp.path, 30, 4, /*background=*/true);
  CheckpointFolder folder(tmp.path);
  CHECK(folder.CommittedSteps() == std::vector<int64_t>{30});
  auto m = folder.ReadManifest(30);
  REQUIRE(m.ok());
  CHECK(m->shards.size() == 4);
  CHECK(m->data == DataState{1, 240});
  CHECK(m->tokens_seen == 1920);
  FlatState expected(30);
  for (int ranks : {3, 2, 1}) {
    const int64_t shard = (kNumel + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
      const int64_t begin = std::min(kNumel, r * shard), end = std::min(kNumel, (r + 1) * shard);
      for (int a = 0; a < 3; ++a) {
        std::vector<float> got(static_cast<size_t>(end - begin));
        REQUIRE(ReadFlatRange(folder.StepFolder(30), *m, a, begin, end, got.data()).ok());
        CHECK(std::equal(got.begin(), got.end(), expected.arrays[a].begin() + begin));
      }
    }
  }
  CHECK(ReadFlatRange(folder.StepFolder(30), *m, 3, 0, 1, nullptr).code() ==
        absl::StatusCode::kOutOfRange);
}

TEST_CASE("a missing or truncated shard is refused and the previous checkpoint is used") {
  TempDir tmp;
  SaveAsRanks(tmp.path, 10, 2, false);
  SaveAsRanks(tmp.path, 20, 2, false);
  SaveAsRanks(tmp.path, 30, 2, false);
  CheckpointFolder folder(tmp.path);
  CHECK(folder.CommittedSteps() == std::vector<int64_t>{30, 20, 10});
  std::vector<std::string> refused;
  auto latest = folder.LatestValid(Compatible, &refused);
  REQUIRE(latest.has_value());
  CHECK(latest->step == 30);
  CHECK(refused.empty());

  fs::resize_file(folder.StepFolder(30) + "/" + ShardFileName(1, 2), 100);
  fs::remove(folder.StepFolder(20) + "/" + ShardFileName(0, 2));
  latest = folder.LatestValid(Compatible, &refused);
  REQUIRE(latest.has_value());
  CHECK(latest->step == 10);
  REQUIRE(refused.size() == 2);
  CHECK(refused[0].find("step 30: ") == 0);
  CHECK(refused[0].find("shard-00001-of-00002.bin: 100 bytes, the manifest says") !=
        std::string::npos);
  CHECK(refused[1].find("step 20: ") == 0);
  CHECK(refused[1].find("shard-00000-of-00002.bin: missing") != std::string::npos);
}

TEST_CASE("a corrupted shard of the right size is caught by its hash") {
  TempDir tmp;
  SaveAsRanks(tmp.path, 5, 1, false);
  SaveAsRanks(tmp.path, 6, 1, false);
  CheckpointFolder folder(tmp.path);
  {
    std::fstream f(folder.StepFolder(6) + "/" + ShardFileName(0, 1),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kShardHeaderBytes + 40);
    f.put('\x55');
  }
  std::vector<std::string> refused;
  auto latest = folder.LatestValid(Compatible, &refused);
  REQUIRE(latest.has_value());
  CHECK(latest->step == 5);
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].find("content hash") != std::string::npos);
}

TEST_CASE("an incompatible checkpoint is refused with the reason") {
  TempDir tmp;
  SaveAsRanks(tmp.path, 8, 1, false);
  std::vector<std::string> refused;
  auto latest = CheckpointFolder(tmp.path).LatestValid(
      [](const CheckpointManifest&) { return absl::FailedPreconditionError("another shape"); },
      &refused);
  CHECK_FALSE(latest.has_value());
  CHECK(refused == std::vector<std::string>{"step 8: another shape"});
}

TEST_CASE("a step is not committed until every shard is written") {
  TempDir tmp;
  InProcessCommitChannel channel;
  FlatState state(40);
  // Rank 0 of 2 writes its shard; rank 1 never does (it died): no manifest, nothing loads.
  CheckpointSaver saver(CheckpointFolder(tmp.path), &channel, SaveRole{true, 0, 2, true}, 0,
                        absl::Milliseconds(200));
  SaveJob job;
  job.manifest = Template(40, 2);
  job.payload.count = 501;
  for (auto& a : state.arrays) job.payload.arrays.push_back(a.data());
  REQUIRE(saver.Save(job, true).ok());
  const absl::Status st = saver.Wait();
  CHECK(st.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(st.message().find("step 40 not committed: shard 1 of step 40") != std::string::npos);
  CheckpointFolder folder(tmp.path);
  CHECK(folder.CommittedSteps().empty());
  CHECK(fs::exists(folder.StepFolder(40) + "/" + ShardFileName(0, 2)));
  CHECK_FALSE(fs::exists(folder.StepFolder(40) + "/" + kManifestFile));
  CHECK(saver.last_committed_step() == -1);
}

TEST_CASE("retention keeps the newest N and removes abandoned saves") {
  TempDir tmp;
  CheckpointFolder folder(tmp.path);
  REQUIRE(folder.PrepareStep(3).ok());  // a save cut short by a crash
  for (int64_t step : {5, 10, 15, 20}) SaveAsRanks(tmp.path, step, 2, true);
  REQUIRE(folder.Retain(2).ok());
  CHECK(folder.CommittedSteps() == std::vector<int64_t>{20, 15});
  CHECK_FALSE(fs::exists(folder.StepFolder(3)));
  CHECK_FALSE(fs::exists(folder.StepFolder(5)));
  // `latest` names the newest commit.
  std::ifstream latest(tmp.path + "/" + kLatestFile);
  std::string name;
  latest >> name;
  CHECK(name == "step-00000020");
}

TEST_CASE("a background save copies the shard: later changes do not reach the file") {
  TempDir tmp;
  InProcessCommitChannel channel;
  CheckpointSaver saver(CheckpointFolder(tmp.path), &channel, SaveRole{true, 0, 1, true}, 0,
                        absl::Seconds(5));
  FlatState state(1);
  SaveJob job;
  job.manifest = Template(1, 1);
  job.payload.count = kNumel;
  for (auto& a : state.arrays) job.payload.arrays.push_back(a.data());
  REQUIRE(saver.Save(job, true).ok());
  for (auto& a : state.arrays) std::fill(a.begin(), a.end(), 99.0f);  // training goes on
  REQUIRE(saver.Wait().ok());
  CHECK(saver.last_committed_step() == 1);
  CheckpointFolder folder(tmp.path);
  auto m = folder.ReadManifest(1);
  REQUIRE(m.ok());
  std::vector<float> params(kNumel);
  REQUIRE(ReadFlatRange(folder.StepFolder(1), *m, 0, 0, kNumel, params.data()).ok());
  CHECK(params[500] == 500.0f);
}

TEST_CASE("manifest errors name the field") {
  auto j = Template(3, 1).ToJson();
  j["shards"] = nlohmann::json::array({{{"index", 0},
                                        {"file", "a"},
                                        {"offset", 0},
                                        {"count", 10},
                                        {"bytes", 1},
                                        {"xxh3_128", "x"}}});
  CHECK(CheckpointManifest::FromJson(j, "m.json").status().message() ==
        "m.json: shards: the shards cover 10 of 1001 elements");
  j.erase("data");
  CHECK(CheckpointManifest::FromJson(j, "m.json").status().message() == "m.json: data: required");
  j = Template(3, 1).ToJson();
  j["step"] = "three";
  CHECK(CheckpointManifest::FromJson(j, "m.json")
            .status()
            .message()
            .find("m.json: step: has the wrong type") == 0);
  j = Template(3, 1).ToJson();
  j["skipped_batches"] = nlohmann::json::array({{{"epoch", 0}}});
  CHECK(CheckpointManifest::FromJson(j, "m.json")
            .status()
            .message()
            .find("m.json: skipped_batches[0].sample_in_epoch") == 0);
}

TEST_CASE("loss rollbacks and the batches they skip round-trip, and older manifests have none") {
  CheckpointManifest m = Template(3, 1);
  m.shards = {ShardRecord{0, "shard-00000-of-00001.bin", 0, kNumel, 12, "h"}};
  m.loss_rollbacks = 2;
  m.skipped_batches = {DataState{0, 200}, DataState{1, 16}};
  auto j = m.ToJson();
  auto back = CheckpointManifest::FromJson(j, "m.json");
  REQUIRE(back.ok());
  CHECK(back->loss_rollbacks == 2);
  CHECK(back->skipped_batches == m.skipped_batches);
  j.erase("loss_rollbacks");
  j.erase("skipped_batches");
  back = CheckpointManifest::FromJson(j, "m.json");
  REQUIRE(back.ok());
  CHECK(back->loss_rollbacks == 0);
  CHECK(back->skipped_batches.empty());
}

// Commits step `step` (one shard) into `folder` as its owner would: a saver on rank 0.
absl::Status CommitOne(const CheckpointFolder& folder, int64_t step) {
  InProcessCommitChannel channel;
  FlatState state(step);
  CheckpointSaver saver(folder, &channel, SaveRole{true, 0, 1, true}, 0, absl::Seconds(20));
  SaveJob job;
  job.manifest = Template(step, 1);
  job.payload.count = kNumel;
  for (auto& a : state.arrays) job.payload.arrays.push_back(a.data());
  return saver.Save(job, /*background=*/false);
}

TEST_CASE("an attempt superseded by a newer one of its run commits nothing more") {
  TempDir tmp;
  const CheckpointFolder first(tmp.path, FolderOwner{"run-1", 0});
  const CheckpointFolder second(tmp.path, FolderOwner{"run-1", 1});
  REQUIRE(first.Claim().ok());
  REQUIRE(CommitOne(first, 10).ok());
  // Attempt 1 starts while attempt 0's ranks still run on a node declared lost.
  REQUIRE(second.Claim().ok());
  const absl::Status late = CommitOne(first, 20);
  CHECK(absl::IsFailedPrecondition(late));
  CHECK(late.message().find("attempt 1 of run run-1") != std::string::npos);
  CHECK(late.message().find("superseded") != std::string::npos);
  // Neither its manifest nor `latest` moved: the successor's view is intact.
  CHECK(first.CommittedSteps() == std::vector<int64_t>{10});
  REQUIRE(CommitOne(second, 20).ok());
  CHECK(first.CommittedSteps() == std::vector<int64_t>{20, 10});
  // The older attempt cannot take the folder back.
  const absl::Status back = first.Claim();
  CHECK(absl::IsFailedPrecondition(back));
  CHECK(back.message().find("newer") != std::string::npos);
}

TEST_CASE("a superseded attempt's retention deletes nothing") {
  TempDir tmp;
  const CheckpointFolder first(tmp.path, FolderOwner{"run-1", 2});
  REQUIRE(first.Claim().ok());
  for (int64_t step : {10, 20, 30}) REQUIRE(CommitOne(first, step).ok());
  REQUIRE(CheckpointFolder(tmp.path, FolderOwner{"run-1", 3}).Claim().ok());
  CHECK(absl::IsFailedPrecondition(first.Retain(1)));
  CHECK(first.CommittedSteps().size() == 3);
}

TEST_CASE("another run may take a folder over, and a folder without a claim is not checked") {
  TempDir tmp;
  const CheckpointFolder by_hand(tmp.path);  // no owner: a rank run without a worker
  REQUIRE(CommitOne(by_hand, 5).ok());
  const CheckpointFolder old_run(tmp.path, FolderOwner{"run-a", 4});
  REQUIRE(old_run.Claim().ok());
  // A new run resuming from run-a's folder (its attempt numbers start again at 0).
  const CheckpointFolder new_run(tmp.path, FolderOwner{"run-b", 0});
  REQUIRE(new_run.Claim().ok());
  REQUIRE(CommitOne(new_run, 10).ok());
  CHECK(absl::IsFailedPrecondition(CommitOne(old_run, 15)));
  CHECK(CommitOne(by_hand, 15).ok());
}

TEST_CASE("a damaged owner file is an error that names it, not a silent claim") {
  TempDir tmp;
  { std::ofstream(tmp.path + "/owner") << "run-1\n"; }
  const absl::Status st = CheckpointFolder(tmp.path, FolderOwner{"run-1", 0}).Claim();
  CHECK(absl::IsDataLoss(st));
  CHECK(st.message().find("owner") != std::string::npos);
  CHECK(st.message().find("RUN_ID ATTEMPT") != std::string::npos);
}

}  // namespace checkpoint_test
}  // namespace tessera::engine
