// The node's side of in-memory checkpoints: snapshots kept in a folder within a byte bound, old
// ones dropped, inventories across nodes, and the choice of the newest step that survives whole
// (committed and loaded through the save folder like any checkpoint).
#include "worker/engine/checkpoint/memory_checkpoints.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/support/temp_dir.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::engine {
namespace memory_checkpoints_test {
using tessera::testing::TempDir;
namespace fs = std::filesystem;

constexpr int64_t kNumel = 103;
constexpr int kShards = 4;
constexpr int64_t kShardLength = (kNumel + kShards - 1) / kShards;  // the last is shorter

CheckpointManifest StepManifest(int64_t step) {
  CheckpointManifest m;
  m.step = step;
  m.world_size = kShards;
  m.sharding = "FULL_SHARD";
  m.shard_group_size = kShards;
  m.numel = kNumel;
  m.arrays = {"params", "exp_avg", "exp_avg_sq"};
  m.data = DataState{0, step * 8};
  m.tokens_seen = step * 64;
  m.seed = 17;
  m.config_hash = "shape-a";
  return m;
}

// The three arrays of a step: params = step + i, exp_avg = -i, exp_avg_sq = i / 2.
struct StepArrays {
  std::vector<float> arrays[3];
  explicit StepArrays(int64_t step) {
    for (auto& a : arrays) a.resize(kNumel);
    for (int64_t i = 0; i < kNumel; ++i) {
      const auto k = static_cast<size_t>(i);
      arrays[0][k] = static_cast<float>(step + i);
      arrays[1][k] = -static_cast<float>(i);
      arrays[2][k] = static_cast<float>(i) / 2;
    }
  }
};

// Keeps shard `index` of `step` in `store`.
absl::Status PutShard(const MemoryCheckpointStore& store, int64_t step, int index,
                      CheckpointManifest manifest) {
  static std::map<int64_t, StepArrays> states;
  const StepArrays& state = states.try_emplace(step, step).first->second;
  ShardPayload payload;
  payload.offset = std::min(kNumel, index * kShardLength);
  payload.count = std::min(kNumel, (index + 1) * kShardLength) - payload.offset;
  for (const auto& a : state.arrays) payload.arrays.push_back(a.data() + payload.offset);
  return store.Put(manifest, index, kShards, payload);
}
absl::Status PutShard(const MemoryCheckpointStore& store, int64_t step, int index) {
  return PutShard(store, step, index, StepManifest(step));
}

absl::Status Compatible(const CheckpointManifest& m) {
  return m.config_hash == "shape-a" ? absl::OkStatus()
                                    : absl::FailedPreconditionError("another shape");
}

std::vector<std::pair<int64_t, int>> Listed(const MemoryCheckpointStore& store) {
  std::vector<std::pair<int64_t, int>> listed;
  for (const auto& s : store.Inventory()) {
    listed.emplace_back(s.manifest.step, s.manifest.shards.at(0).index);
  }
  return listed;
}

TEST_CASE("a node's snapshots: listed newest first, old steps dropped, a half-written one unseen") {
  TempDir tmp;
  const MemoryCheckpointStore store(tmp.path + "/run", 0);
  CHECK(store.Inventory().empty());  // no folder yet
  for (int64_t step : {4, 8, 12}) {
    REQUIRE(PutShard(store, step, 0).ok());
    REQUIRE(PutShard(store, step, 3).ok());
  }
  CHECK(Listed(store) ==
        std::vector<std::pair<int64_t, int>>{{12, 0}, {12, 3}, {8, 0}, {8, 3}, {4, 0}, {4, 3}});
  const auto shards = store.Inventory();
  CHECK(shards[0].shard_count == kShards);
  CHECK(shards[0].manifest.tokens_seen == 12 * 64);
  CHECK(static_cast<uintmax_t>(shards[0].manifest.shards[0].bytes) ==
        fs::file_size(store.ShardPath(12, ShardFileName(0, kShards))));

  store.DropAllBut({8, 12});
  CHECK(Listed(store) == std::vector<std::pair<int64_t, int>>{{12, 0}, {12, 3}, {8, 0}, {8, 3}});

  // A shard whose description was never written (a rank killed mid-write) is not listed; a
  // damaged description is skipped, not fatal.
  fs::remove(store.ShardPath(12, ShardFileName(3, kShards) + ".json"));
  std::ofstream(store.ShardPath(8, ShardFileName(0, kShards) + ".json")) << "{not json";
  CHECK(Listed(store) == std::vector<std::pair<int64_t, int>>{{12, 0}, {8, 3}});
}

TEST_CASE("a snapshot that would take the node's folder past its byte bound is refused whole") {
  TempDir tmp;
  const int64_t shard_bytes = kShardHeaderBytes + 3 * kShardLength * 4;
  // What two shards and their descriptions take, measured; the bound leaves room for them and
  // half a third.
  const MemoryCheckpointStore measure(tmp.path + "/measure", 0);
  REQUIRE(PutShard(measure, 4, 0).ok());
  REQUIRE(PutShard(measure, 4, 1).ok());
  const int64_t bound = measure.BytesUsed() + shard_bytes / 2;
  const MemoryCheckpointStore store(tmp.path + "/run", bound);
  REQUIRE(PutShard(store, 4, 0).ok());
  REQUIRE(PutShard(store, 4, 1).ok());
  const absl::Status third = PutShard(store, 4, 2);
  CHECK(third.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(third.message()),
             Catch::Contains("past its limit of") && Catch::Contains("--memory-checkpoint-bytes"));
  CHECK(Listed(store) == std::vector<std::pair<int64_t, int>>{{4, 0}, {4, 1}});
  CHECK(store.BytesUsed() <= bound);
}

TEST_CASE("the newest step held whole across nodes is chosen, each shard from its first holder") {
  TempDir tmp;
  // Node 0 holds its shards 0, 1 and node 1's copies 2, 3 of steps 8 and 12; node 1 lost its
  // memory. Node 2 holds all of step 4 and shard 2 of step 16 (a snapshot cut short).
  const MemoryCheckpointStore node0(tmp.path + "/n0", 0), node1(tmp.path + "/n1", 0),
      node2(tmp.path + "/n2", 0);
  for (int64_t step : {8, 12}) {
    for (int i = 0; i < kShards; ++i) REQUIRE(PutShard(node0, step, i).ok());
  }
  for (int i = 0; i < kShards; ++i) REQUIRE(PutShard(node2, 4, i).ok());
  REQUIRE(PutShard(node2, 16, 2).ok());
  REQUIRE(PutShard(node2, 12, 2).ok());  // a second holder of shard 2 of 12
  const std::vector<std::vector<MemoryShard>> inventories = {node0.Inventory(), node1.Inventory(),
                                                             node2.Inventory()};

  std::vector<std::string> refused;
  auto choice = ChooseMemoryCheckpoint(inventories, -1, Compatible, &refused);
  REQUIRE(choice.has_value());
  CHECK(choice->manifest.step == 12);
  REQUIRE(choice->manifest.shards.size() == kShards);
  CHECK(choice->holders == std::vector<int>{0, 0, 0, 0});
  CHECK(choice->manifest.CheckCoverage().ok());
  CHECK(refused == std::vector<std::string>{"step 16 in memory: shards 0, 1, 3 of 4 on no node "
                                            "of this attempt"});

  // Committed into a save folder by its holders' copies, it loads and validates like any other.
  TempDir save;
  CheckpointFolder folder(save.path);
  REQUIRE(folder.PrepareStep(12).ok());
  const MemoryCheckpointStore* nodes[] = {&node0, &node1, &node2};
  for (size_t k = 0; k < choice->manifest.shards.size(); ++k) {
    const MemoryCheckpointStore* holder = nodes[choice->holders[k]];
    REQUIRE(CopyShardDurably(holder->ShardPath(12, choice->manifest.shards[k].file),
                             folder.StepFolder(12))
                .ok());
  }
  REQUIRE(folder.Commit(choice->manifest).ok());
  std::vector<std::string> disk_refused;
  const auto loaded = folder.LatestValid(Compatible, &disk_refused);
  REQUIRE(loaded.has_value());
  CHECK(loaded->step == 12);
  CHECK(disk_refused.empty());
  std::vector<float> params(kNumel);
  REQUIRE(ReadFlatRange(folder.StepFolder(12), *loaded, 0, 0, kNumel, params.data()).ok());
  CHECK(params == StepArrays(12).arrays[0]);

  // Only steps newer than the disk's count; with none left, nothing is chosen.
  refused.clear();
  CHECK_FALSE(ChooseMemoryCheckpoint(inventories, 12, Compatible, &refused).has_value());
  choice = ChooseMemoryCheckpoint({node2.Inventory()}, -1, Compatible, &refused);
  REQUIRE(choice.has_value());
  CHECK(choice->manifest.step == 4);
}

TEST_CASE("shards of one step that disagree, or a step of another shape, are refused") {
  TempDir tmp;
  const MemoryCheckpointStore node0(tmp.path + "/n0", 0), node1(tmp.path + "/n1", 0);
  for (int i = 0; i < kShards; ++i) REQUIRE(PutShard(node0, 8, i).ok());
  // Step 12: node 1's shard 3 says another data position than the others.
  for (int i = 0; i < 3; ++i) REQUIRE(PutShard(node0, 12, i).ok());
  CheckpointManifest other = StepManifest(12);
  other.data.sample_in_epoch += 1;
  REQUIRE(PutShard(node1, 12, 3, other).ok());
  // Step 16: whole, but of another model.
  CheckpointManifest shape = StepManifest(16);
  shape.config_hash = "shape-b";
  for (int i = 0; i < kShards; ++i) REQUIRE(PutShard(node1, 16, i, shape).ok());

  std::vector<std::string> refused;
  const auto choice =
      ChooseMemoryCheckpoint({node0.Inventory(), node1.Inventory()}, -1, Compatible, &refused);
  REQUIRE(choice.has_value());
  CHECK(choice->manifest.step == 8);
  REQUIRE(refused.size() == 2);
  CHECK(refused[0] == "step 16 in memory: another shape");
  CHECK(refused[1] ==
        "step 12 in memory: its 4 shards disagree about the step (different "
        "attempts)");
}

TEST_CASE("inventories travel as text: a damaged one is an error, an empty one holds nothing") {
  TempDir tmp;
  const MemoryCheckpointStore node(tmp.path + "/n", 0);
  REQUIRE(PutShard(node, 8, 1).ok());
  const auto inventory = node.Inventory();
  const auto back = DecodeInventory(EncodeInventory(inventory));
  REQUIRE(back.ok());
  REQUIRE(back->size() == 1);
  CHECK(back->at(0).manifest.ToJson() == inventory[0].manifest.ToJson());
  CHECK(back->at(0).shard_count == kShards);
  CHECK(DecodeInventory("")->empty());
  CHECK(DecodeInventory("{}").status().code() == absl::StatusCode::kDataLoss);
  CHECK(DecodeInventory(R"([{"shard_count": 4}])").status().code() == absl::StatusCode::kDataLoss);
}

}  // namespace memory_checkpoints_test
}  // namespace tessera::engine
