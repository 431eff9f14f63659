// tessera-train as real multi-process jobs on real text: exact resumption after SIGKILL on the
// same and on a different number of ranks, refused checkpoints, hybrid sharding, bad configs.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_replace.h"
#include "tests/integration/engine/scratch.h"
#include "tests/support/control_plane.h"
#include "tests/support/engine_job.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::testing {
namespace engine_test {
namespace fs = std::filesystem;

TEST_CASE(
    "killed at step 37 and resumed from step 30: bit-identical on 4 ranks, within 1e-4 on 2") {
  Scratch s;
  // Run A: 60 steps on 4 ranks without interruption.
  EngineJob a(s.path + "/a", s.Config("a", s.path + "/ckpt-a"), 4);
  RequireAllExitedZero(a, 4);
  const auto reference = a.Progress(0);
  REQUIRE(reference.size() == 60);
  CHECK(reference.at(60).loss < reference.at(1).loss - 1.0);  // it learns the licences
  CHECK(reference.at(60).tokens_per_second > 0);
  CHECK(reference.at(60).mfu > 0);
  CHECK(a.Log(0).find("training finished: 60 steps") != std::string::npos);

  // Run B: the same, SIGKILLed on every rank once step 37 is done.
  const std::string ckpt_b = s.path + "/ckpt-b";
  const std::string config_b = s.Config("b", ckpt_b);
  {
    EngineJob b(s.path + "/b", config_b, 4, {{"TESSERA_DEBUG_STOP_AFTER_STEP", "37"}});
    b.KillWhenStopped();
    CHECK(b.Progress(0).rbegin()->first == 37);
  }
  engine::CheckpointFolder folder(ckpt_b);
  REQUIRE(folder.CommittedSteps() == std::vector<int64_t>{30, 20, 10});
  // Keep the step-30 checkpoint for the 2-rank resumption.
  fs::copy(ckpt_b, s.path + "/ckpt-c", fs::copy_options::recursive);

  EngineJob b2(s.path + "/b2", config_b, 4);
  RequireAllExitedZero(b2, 4);
  CHECK(b2.Log(0).find("resumed from step 30") != std::string::npos);
  const auto resumed = b2.Progress(0);
  REQUIRE(resumed.begin()->first == 31);
  REQUIRE(resumed.rbegin()->first == 60);
  for (const auto& [step, record] : resumed) {
    INFO("step " << step);
    CHECK(record.loss == reference.at(step).loss);  // bit for bit
    CHECK(record.learning_rate == reference.at(step).learning_rate);
    CHECK(record.resumed_from_step == 30);
  }

  // Run C: resume the step-30 checkpoint on 2 ranks (4 samples each, same global batch).
  EngineJob c(s.path + "/c", s.Config("c", s.path + "/ckpt-c"), 2);
  RequireAllExitedZero(c, 2);
  CHECK(c.Log(0).find("resumed from step 30") != std::string::npos);
  CHECK(c.Log(0).find("saved by 4 ranks") != std::string::npos);
  const auto two_ranks = c.Progress(0);
  REQUIRE(two_ranks.size() == 30);
  double worst = 0;
  for (const auto& [step, record] : two_ranks) {
    const double want = reference.at(step).loss;
    worst = std::max(worst, std::abs(record.loss - want) / want);
  }
  std::printf("2-rank resumption: worst relative loss difference %.3g over 30 steps\n", worst);
  CHECK(worst < 1e-4);
}

TEST_CASE("started once per node, tessera-train starts its ranks: the same losses, step for step") {
  Scratch s;
  // Run A: 4 processes, one per rank (launch: rank). Run B: 2 nodes of 2, tessera-train started
  // once per node (launch: node, mcli's contract) starting its 2 local ranks.
  EngineJob a(s.path + "/a", s.Config("a", s.path + "/ckpt-a"), 4);
  RequireAllExitedZero(a, 4);
  EngineJob b(s.path + "/b", s.Config("b", s.path + "/ckpt-b"), 4, {}, /*ranks_per_node=*/2);
  const auto codes = b.Wait();
  REQUIRE(codes.size() == 2);
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node << " log:\n" << b.Log(node * 2));
    REQUIRE(codes[static_cast<size_t>(node)] == 0);
  }
  for (int rank : {0, 3}) {
    const auto want = a.Progress(rank);
    const auto got = b.Progress(rank);  // each rank found its progress file by RANK
    REQUIRE(want.size() == 60);
    REQUIRE(got.size() == want.size());
    for (const auto& [step, record] : want) {
      INFO("rank " << rank << " step " << step);
      CHECK(got.at(step).loss == record.loss);
    }
  }
}

TEST_CASE("a checkpoint with a truncated shard is refused and the previous one resumes") {
  Scratch s;
  const std::string ckpt = s.path + "/ckpt";
  EngineJob first(s.path + "/1", s.Config("first", ckpt, "num_checkpoints_to_keep: 0\n"), 2,
                  {{"TESSERA_DEBUG_STOP_AFTER_STEP", "20"}});
  first.KillWhenStopped();
  engine::CheckpointFolder folder(ckpt);
  REQUIRE(folder.CommittedSteps() == std::vector<int64_t>{20, 10});
  fs::resize_file(folder.StepFolder(20) + "/" + engine::ShardFileName(1, 2), 1000);

  EngineJob second(s.path + "/2", s.Config("second", ckpt, "num_checkpoints_to_keep: 0\n"), 2);
  RequireAllExitedZero(second, 2);
  const std::string log = second.Log(0);
  CHECK(log.find("checkpoint refused: step 20:") != std::string::npos);
  CHECK(log.find("shard-00001-of-00002.bin: 1000 bytes, the manifest says") != std::string::npos);
  CHECK(log.find("resumed from step 10") != std::string::npos);
  CHECK(second.Progress(0).begin()->first == 11);
}

TEST_CASE("hybrid sharding: shards inside groups of 2, replicas across, the first replica writes") {
  Scratch s;
  EngineJob full(s.path + "/full", s.Config("full", s.path + "/ckpt-full"), 4);
  RequireAllExitedZero(full, 4);
  std::string hybrid_config =
      s.Config("hybrid", s.path + "/ckpt-hybrid",
               "fsdp: {sharding_strategy: HYBRID_SHARD, shard_group_size: 2}\n");
  EngineJob hybrid(s.path + "/hybrid", hybrid_config, 4);
  RequireAllExitedZero(hybrid, 4);
  CHECK(hybrid.Log(0).find("HYBRID_SHARD, 2 shard groups of 2") != std::string::npos);
  const auto f = full.Progress(0), h = hybrid.Progress(0);
  REQUIRE(h.size() == 60);
  for (int64_t step : {1, 10, 30, 60}) {
    CHECK(h.at(step).loss == Approx(f.at(step).loss).epsilon(1e-4));
  }
  engine::CheckpointFolder folder(s.path + "/ckpt-hybrid");
  auto m = folder.ReadManifest(60);
  REQUIRE(m.ok());
  CHECK(m->shards.size() == 2);
  CHECK(m->sharding == "HYBRID_SHARD");
  CHECK(m->world_size == 4);
}

TEST_CASE("activation checkpointing in a real job: the same losses, step for step") {
  Scratch s;
  EngineJob plain(s.path + "/plain", s.Config("plain", s.path + "/ckpt-plain"), 2);
  RequireAllExitedZero(plain, 2);
  EngineJob recomputed(s.path + "/recomputed",
                       s.Config("recomputed", s.path + "/ckpt-recomputed",
                                "fsdp: {activation_checkpointing: true}\n"),
                       2);
  RequireAllExitedZero(recomputed, 2);
  CHECK(recomputed.Log(0).find("activation checkpointing: every block of 2 recomputed") !=
        std::string::npos);
  const auto want = plain.Progress(0), got = recomputed.Progress(0);
  REQUIRE(want.size() == 60);
  REQUIRE(got.size() == want.size());
  for (const auto& [step, record] : want) {
    INFO("step " << step);
    CHECK(got.at(step).loss == record.loss);  // bit for bit
  }
}

TEST_CASE("a NaN loss rolls back to the newest checkpoint and skips the batch that gave it") {
  Scratch s;
  EngineJob reference(s.path + "/ref", s.Config("ref", s.path + "/ckpt-ref"), 2);
  RequireAllExitedZero(reference, 2);
  const auto want = reference.Progress(0);
  REQUIRE(want.size() == 60);

  // The batch of step 25 makes the loss and every gradient NaN (the parameters with them).
  const std::map<std::string, std::string> poison = {{"TESSERA_DEBUG_NAN_AT_STEP", "25"}};
  EngineJob rolled(s.path + "/rolled",
                   s.Config("rolled", s.path + "/ckpt-rolled", "loss_rollback: {on_nan: true}\n"),
                   2, poison);
  RequireAllExitedZero(rolled, 2);
  INFO(rolled.Log(0));
  CHECK(rolled.Log(0).find("loss rollback 1 of 3: the loss is nan at step 25: back to step 20, "
                           "skipping that step's batch") != std::string::npos);
  const auto got = rolled.Progress(0);
  REQUIRE(got.size() == 60);
  for (int64_t step = 1; step <= 24; ++step) {  // 21-24 trained again, as they were
    INFO("step " << step);
    CHECK(got.at(step).loss == want.at(step).loss);
  }
  CHECK(got.at(25).loss != want.at(25).loss);  // the next batch instead
  CHECK(got.at(25).resumed_from_step == 20);
  // Every report tells the checkpoint interval, and after the first save what it cost.
  CHECK(got.at(5).checkpoint_interval_steps == 10);
  CHECK(got.at(5).checkpoint_save_seconds == 0);
  CHECK(got.at(11).checkpoint_save_seconds > 0);
  // Every report after the rollback tells of it (the worker makes it a run event).
  CHECK(got.at(20).loss_rollbacks == 0);
  for (const int64_t step : {21, 25, 60}) {
    INFO("step " << step);
    CHECK(got.at(step).loss_rollbacks == 1);
    CHECK(got.at(step).last_rollback.number == 1);
    CHECK(got.at(step).last_rollback.max == 3);
    CHECK(got.at(step).last_rollback.bad_step == 25);
    CHECK(got.at(step).last_rollback.checkpoint_step == 20);
    CHECK(got.at(step).last_rollback.reason == "the loss is nan");
  }
  CHECK(got.at(60).loss < got.at(1).loss - 1.0);  // training went on, and learns
  CHECK(got.at(60).loss == Approx(want.at(60).loss).epsilon(0.1));
  // The checkpoints after it keep the rollback, for a resumed run to skip the batch too.
  auto manifest = engine::CheckpointFolder(s.path + "/ckpt-rolled").ReadManifest(60);
  REQUIRE(manifest.ok());
  CHECK(manifest->loss_rollbacks == 1);
  REQUIRE(manifest->skipped_batches.size() == 1);
  auto before = engine::CheckpointFolder(s.path + "/ckpt-ref").ReadManifest(20);
  REQUIRE(before.ok());
  CHECK(manifest->skipped_batches[0].epoch == before->data.epoch);  // step 25's batch: 4 after
  CHECK(manifest->skipped_batches[0].sample_in_epoch == before->data.sample_in_epoch + 4 * 8);

  // A spike: 100 x the loss at step 40, over 3 x the median of the last 10.
  EngineJob spiked(
      s.path + "/spiked",
      s.Config("spiked", s.path + "/ckpt-spiked", "loss_rollback: {spike_factor: 3, window: 10}\n"),
      2, {{"TESSERA_DEBUG_SPIKE_AT_STEP", "40"}});
  RequireAllExitedZero(spiked, 2);
  INFO(spiked.Log(0));
  CHECK(std::regex_search(
      spiked.Log(0), std::regex("loss rollback 1 of 3: the loss [0-9.e+]+ is [0-9.]+ x the "
                                "median [0-9.e+]+ of the last 10 at step 40: back to step 30")));
  const auto after_spike = spiked.Progress(0);
  REQUIRE(after_spike.size() == 60);
  CHECK(after_spike.at(39).loss == want.at(39).loss);
  CHECK(after_spike.at(40).loss != want.at(40).loss);

  // Without loss_rollback the run fails, the loss and the step named.
  EngineJob failed(s.path + "/failed", s.Config("failed", s.path + "/ckpt-failed"), 2, poison);
  const auto codes = failed.Wait();
  CHECK(codes[0] != 0);
  CHECK(failed.Log(0).find("the loss is nan at step 25") != std::string::npos);
}

TEST_CASE("a bad configuration fails every rank at once with the field named") {
  Scratch s;
  const std::string file = s.path + "/bad.yaml";
  std::ofstream(file) << "data: {path: " << LicenceDataset()
                      << "}\nmax_duration: 10ba\noptimiser: {lr: 1}\n";
  EngineJob job(s.path + "/bad", file, 2);
  const auto codes = job.Wait(absl::Seconds(30));
  CHECK(codes == std::vector<int>{2, 2});
  CHECK(job.Log(0).find(file + ":3: optimiser: unknown field") != std::string::npos);

  std::ofstream(s.path + "/batch.yaml")
      << "data: {path: " << LicenceDataset() << "}\nglobal_train_batch_size: 5\n";
  EngineJob uneven(s.path + "/uneven", s.path + "/batch.yaml", 2);
  CHECK(uneven.Wait(absl::Seconds(30)) == std::vector<int>{2, 2});
  CHECK(uneven.Log(1).find("global_train_batch_size: 5 does not split evenly over 2 ranks") !=
        std::string::npos);
}

}  // namespace engine_test
}  // namespace tessera::testing
