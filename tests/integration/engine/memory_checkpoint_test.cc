// In-memory checkpoints in real multi-process jobs: 4 ranks told they sit on 2 nodes of 2, each
// node with its own memory folder. A node lost between disk checkpoints takes its memory with
// it, and the run resumes from the newer step that the other node's memory still holds whole
// (its own shards and its buddy copies of the lost node's), bit for bit.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tests/integration/engine/scratch.h"
#include "tests/support/engine_job.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/memory_checkpoints.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::testing {
namespace memory_checkpoint_test {
namespace fs = std::filesystem;

constexpr char kEveryFour[] = "memory_checkpoint_interval: 4ba\n";

// The environment of a job whose two nodes keep their memory in `memory-NAME-0` and `-1`.
std::map<std::string, std::string> NodeMemories(const Scratch& s, const std::string& name) {
  return {{"TESSERA_MEMORY_CHECKPOINT_DIR", s.path + "/memory-" + name + "-{node}"}};
}

// Job `name`: 4 ranks as 2 nodes of 2, each node with its own memory, `extra` in its config.
std::unique_ptr<EngineJob> NodesJob(const Scratch& s, const std::string& name,
                                    const std::string& config, const std::string& memory_of,
                                    std::map<std::string, std::string> more_env = {}) {
  auto env = NodeMemories(s, memory_of);
  env.merge(more_env);
  return std::make_unique<EngineJob>(s.path + "/" + name, config, 4, env, 1, 2);
}

// The run trained through without a fault (job "a"): rank 0's progress, 60 steps.
std::map<int64_t, progress::ProgressRecord> Reference(const Scratch& s, const std::string& extra) {
  auto a = NodesJob(s, "a", s.Config("a", s.path + "/ckpt-a", extra), "a");
  RequireAllExitedZero(*a, 4);
  CHECK(a->ReadyStep(0) == std::optional<int64_t>(0));  // a fresh start's ready record
  auto reference = a->Progress(0);
  REQUIRE(reference.size() == 60);
  return reference;
}

// Job `name` stopped once step `step` is done, and killed: what a node's loss leaves.
void KilledAfter(const Scratch& s, const std::string& name, const std::string& config, int step) {
  NodesJob(s, name, config, name, {{"TESSERA_DEBUG_STOP_AFTER_STEP", std::to_string(step)}})
      ->KillWhenStopped();
}

// The losses of `resumed` from its first step on equal the reference's, bit for bit.
void CheckSameLosses(const std::map<int64_t, progress::ProgressRecord>& resumed,
                     const std::map<int64_t, progress::ProgressRecord>& reference, int64_t first) {
  REQUIRE(!resumed.empty());
  CHECK(resumed.begin()->first == first);
  CHECK(resumed.rbegin()->first == 60);
  for (const auto& [step, record] : resumed) {
    INFO("step " << step);
    CHECK(record.loss == reference.at(step).loss);
    CHECK(record.resumed_from_step == first - 1);
  }
}

TEST_CASE(
    "in-memory checkpoints: a node lost after step 37 resumes from step 36 in the other node's "
    "memory instead of step 30 on disk, bit for bit, and with a shard of 36 gone from step 32") {
  Scratch s;
  const auto reference = Reference(s, kEveryFour);
  // Stopped once step 37 is done and killed: on disk step 30, in memory 36 (and 32 before it).
  const std::string ckpt = s.path + "/ckpt-b", config = s.Config("b", ckpt, kEveryFour);
  KilledAfter(s, "b", config, 37);
  REQUIRE(engine::CheckpointFolder(ckpt).CommittedSteps() == std::vector<int64_t>{30, 20, 10});
  // Node 0 holds every shard of 36 and of 32: two of its own and two of node 1's.
  const engine::MemoryCheckpointStore node0(s.path + "/memory-b-0", 0);
  std::map<int64_t, std::vector<int>> held;
  for (const auto& shard : node0.Inventory()) {
    CHECK(shard.shard_count == 4);
    held[shard.manifest.step].push_back(shard.manifest.shards[0].index);
  }
  CHECK(held == std::map<int64_t, std::vector<int>>{{32, {0, 1, 2, 3}}, {36, {0, 1, 2, 3}}});
  // For the second resumption: the same state, but node 0 lost its copy of shard 2 of 36.
  fs::copy(ckpt, s.path + "/ckpt-c", fs::copy_options::recursive);
  fs::copy(s.path + "/memory-b-0", s.path + "/memory-c-0", fs::copy_options::recursive);
  fs::remove(engine::MemoryCheckpointStore(s.path + "/memory-c-0", 0)
                 .ShardPath(36, engine::ShardFileName(2, 4) + ".json"));

  // Node 1 is lost with its memory; its replacement's is empty.
  fs::remove_all(s.path + "/memory-b-1");
  auto b2 = NodesJob(s, "b2", config, "b");
  RequireAllExitedZero(*b2, 4);
  const std::string log = b2->Log(0);
  INFO(log);
  CHECK(log.find("recovered step 36 from the memory of node 0 of this attempt (4 shards)") !=
        std::string::npos);
  CHECK(log.find("resumed from step 36") != std::string::npos);
  CheckSameLosses(b2->Progress(0), reference, 37);
  // Set up, each rank said so before its first step: the worker's hang watch starts there.
  for (int rank = 0; rank < 4; ++rank) CHECK(b2->ReadyStep(rank) == std::optional<int64_t>(36));
  // It is a disk checkpoint now, for any later resumption.
  const auto steps = engine::CheckpointFolder(ckpt).CommittedSteps();
  CHECK(std::find(steps.begin(), steps.end(), 36) != steps.end());

  auto c = NodesJob(s, "c", s.Config("c", s.path + "/ckpt-c", kEveryFour), "c");
  RequireAllExitedZero(*c, 4);
  const std::string c_log = c->Log(0);
  INFO(c_log);
  CHECK(c_log.find("in-memory checkpoint refused: step 36 in memory: shard 2 of 4 on no node") !=
        std::string::npos);
  CHECK(c_log.find("recovered step 32 from the memory of node 0") != std::string::npos);
  CheckSameLosses(c->Progress(0), reference, 33);
}

TEST_CASE(
    "in-memory checkpoints under hybrid sharding: the first replica's node keeps its shards, the "
    "other node the copies, and either alone resumes the run") {
  Scratch s;
  const std::string hybrid =
      "memory_checkpoint_interval: 4ba\nfsdp: {sharding_strategy: HYBRID_SHARD, "
      "shard_group_size: 2}\n";
  const auto reference = Reference(s, hybrid);
  const std::string ckpt = s.path + "/ckpt-b", config = s.Config("b", ckpt, hybrid);
  KilledAfter(s, "b", config, 37);
  // Node 0 (the first replica: ranks 0 and 1 write shards 0 and 1) kept its own; node 1's ranks
  // write none and hold node 0's copies. Node 0 is lost.
  for (const int node : {0, 1}) {
    std::vector<int> held;
    for (const auto& shard :
         engine::MemoryCheckpointStore(s.path + "/memory-b-" + std::to_string(node), 0)
             .Inventory()) {
      if (shard.manifest.step == 36) held.push_back(shard.manifest.shards[0].index);
    }
    INFO("node " << node);
    CHECK(held == std::vector<int>{0, 1});
  }
  fs::remove_all(s.path + "/memory-b-0");
  auto b2 = NodesJob(s, "b2", config, "b");
  RequireAllExitedZero(*b2, 4);
  const std::string log = b2->Log(0);
  INFO(log);
  CHECK(log.find("recovered step 36 from the memory of node 1 of this attempt (2 shards)") !=
        std::string::npos);
  CheckSameLosses(b2->Progress(0), reference, 37);
}

TEST_CASE("in-memory checkpoints older than the disk's newest are passed over") {
  Scratch s;
  const std::string ckpt = s.path + "/ckpt";
  // Snapshots every 8: the newest in memory is 16, on disk 20.
  KilledAfter(s, "b", s.Config("b", ckpt, "memory_checkpoint_interval: 8ba\n"), 20);
  auto b2 = NodesJob(s, "b2", s.Config("b2", ckpt, "memory_checkpoint_interval: 8ba\n"), "b");
  RequireAllExitedZero(*b2, 4);
  const std::string log = b2->Log(0);
  INFO(log);
  CHECK(log.find("in-memory checkpoint of step 16 not used: the save folder has step 20") !=
        std::string::npos);
  CHECK(log.find("resumed from step 20") != std::string::npos);
}

}  // namespace memory_checkpoint_test
}  // namespace tessera::testing
