#include "worker/daemon/progress_watcher.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace progress_watcher_test {
namespace fs = std::filesystem;

struct Fixture {
  testing::TempDir tmp{"progress_watcher_test"};
  const std::string dir = tmp.path;
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  ProgressWatcher watcher{clock, absl::Seconds(1)};
  RankOutput Rank(int rank) {
    RankOutput o;
    o.run_id = "run-1";
    o.resumption_index = 2;
    o.rank = rank;
    o.progress_path = dir + "/rank-" + std::to_string(rank) + ".progress";
    return o;
  }
  void Append(int rank, const std::string& text) {
    std::ofstream(Rank(rank).progress_path, std::ios::app) << text;
  }
  static std::string Record(int64_t step, double loss) {
    return "{\"step\":" + std::to_string(step) +
           ",\"total_steps\":100,\"loss\":" + std::to_string(loss) +
           ",\"lr\":0.001,\"tokens_per_second\":5000,\"mfu\":0.25," +
           "\"resumed_from_step\":40,\"time\":1700000000.5}\n";
  }
};

TEST_CASE("the lowest rank's newest record goes out, at most once per interval") {
  Fixture f;
  f.watcher.Watch(f.Rank(4));
  f.watcher.Watch(f.Rank(5));
  CHECK(f.watcher.Poll().empty());  // nothing reported yet (and no file: not an error)
  f.Append(5, Fixture::Record(41, 3.0));
  CHECK(f.watcher.Poll().empty());  // rank 4 speaks for the attempt
  f.Append(4, Fixture::Record(41, 2.5) + Fixture::Record(42, 2.25));
  auto updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].run_id() == "run-1");
  CHECK(updates[0].resumption_index() == 2);
  CHECK(updates[0].rank() == 4);
  CHECK(updates[0].progress().step() == 42);
  CHECK(updates[0].progress().loss() == 2.25);
  CHECK(updates[0].progress().total_steps() == 100);
  CHECK(updates[0].progress().mfu() == 0.25);
  CHECK(updates[0].progress().resumed_from_step() == 40);

  f.Append(4, Fixture::Record(43, 2.0));
  CHECK(f.watcher.Poll().empty());  // within the interval
  f.clock->Advance(absl::Seconds(1));
  updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].progress().step() == 43);
  f.clock->Advance(absl::Seconds(5));
  CHECK(f.watcher.Poll().empty());  // nothing new
}

TEST_CASE(
    "a user's own Python script reporting through tessera_sdk.progress is read as tessera-train's "
    "ranks are: ready, step, checkpoint, resumption") {
  Fixture f;
  f.watcher.Watch(f.Rank(4));
  // As a rank of a node's launcher sees it: TESSERA_PROGRESS_DIR and the RANK torchrun sets. The
  // SDK's sources alone, no grpcio: what a run's image has.
  const std::string script =
      "from tessera_sdk.progress import ProgressReporter\n"
      "p = ProgressReporter()\n"
      "p.resumed_from(40)\n"
      "p.ready()\n"
      "p.report(41, total_steps=100, loss=2.5, learning_rate=1e-3, tokens_per_second=5000,\n"
      "         mfu=0.25, compute_seconds=0.125)\n"
      "p.checkpoint_committed(50)\n"
      "p.report(52, total_steps=100, loss=2.25, checkpoint_interval_steps=25,\n"
      "         checkpoint_save_seconds=0.5)\n";
  const std::string script_path = f.dir + "/train.py";
  std::ofstream(script_path) << script;
  const std::string command =
      "env -i PYTHONPATH=" TESSERA_SOURCE_DIR "/sdk/python TESSERA_PROGRESS_DIR=" + f.dir +
      " RANK=4 /usr/bin/python3 " + script_path;
  REQUIRE(std::system(command.c_str()) == 0);
  auto updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  const auto& p = updates[0].progress();
  CHECK(updates[0].rank() == 4);
  CHECK(p.step() == 52);
  CHECK(p.total_steps() == 100);
  CHECK(p.loss() == 2.25);
  CHECK(p.resumed_from_step() == 40);
  CHECK(p.checkpoint_step() == 50);  // what lets a shrunk run grow back
  CHECK(p.checkpoint_interval_steps() == 25);
  CHECK(p.checkpoint_save_seconds() == 0.5);
  const auto ranks = f.watcher.Ranks();
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0].ready_step == std::optional<int64_t>(40));  // the hang watch's start
}

TEST_CASE("a loss rollback goes out with the progress, its reason bounded and valid UTF-8") {
  Fixture f;
  f.watcher.Watch(f.Rank(0));
  f.Append(0, R"({"step":21,"loss_rollbacks":1,"last_rollback":{"number":1,"max":3,)"
              R"("bad_step":25,"checkpoint_step":20,"reason":"the loss is nan"}})"
              "\n");
  auto updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  const auto& p = updates[0].progress();
  CHECK(p.step() == 21);
  CHECK(p.loss_rollbacks() == 1);
  CHECK(p.last_loss_rollback().number() == 1);
  CHECK(p.last_loss_rollback().max_rollbacks() == 3);
  CHECK(p.last_loss_rollback().bad_step() == 25);
  CHECK(p.last_loss_rollback().checkpoint_step() == 20);
  CHECK(p.last_loss_rollback().reason() == "the loss is nan");

  // The next rollback goes at once, within the interval and at the same step.
  f.Append(0, R"({"step":21,"loss_rollbacks":2,"last_rollback":{"number":2,"max":3,)"
              R"("bad_step":23,"checkpoint_step":20,"reason":"the loss is inf"}})"
              "\n");
  updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].progress().last_loss_rollback().number() == 2);
  CHECK(f.watcher.Poll().empty());  // and once

  f.clock->Advance(absl::Seconds(1));
  // Cut at 300 bytes, inside the two bytes of an "é": what is left of it is replaced.
  f.Append(0, R"({"step":22,"last_rollback":{"number":3,"reason":")" + std::string(299, 'y') +
                  "\u00e9 and more\"}}\n");
  updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].progress().last_loss_rollback().reason() == std::string(299, 'y') + "\uFFFD");
  // A record without one says none.
  f.clock->Advance(absl::Seconds(1));
  f.Append(0, Fixture::Record(23, 2.0));
  updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  CHECK_FALSE(updates[0].progress().has_last_loss_rollback());
}

TEST_CASE("a partial line waits for its end, other lines are skipped, not fatal") {
  Fixture f;
  f.watcher.Watch(f.Rank(0));
  const std::string record = Fixture::Record(7, 1.5);
  f.Append(0, "warming up\n" + record.substr(0, 20));
  CHECK(f.watcher.Poll().empty());
  f.Append(0, record.substr(20));
  auto updates = f.watcher.Poll();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].progress().step() == 7);
}

TEST_CASE("a finished rank's last record goes out at once, then it is forgotten") {
  Fixture f;
  f.watcher.Watch(f.Rank(0));
  f.Append(0, Fixture::Record(10, 1.0));
  REQUIRE(f.watcher.Poll().size() == 1);
  f.Append(0, Fixture::Record(11, 0.9));
  f.watcher.RankDone(f.Rank(0));
  auto updates = f.watcher.Poll();  // within the interval, but the rank is done
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].progress().step() == 11);
  CHECK(f.watcher.Ranks().empty());
}

TEST_CASE("each rank's state says when its progress last moved") {
  Fixture f;
  f.watcher.Watch(f.Rank(0));
  f.watcher.Watch(f.Rank(1));
  const absl::Time start = f.clock->Now();
  f.clock->Advance(absl::Seconds(3));
  f.Append(1, Fixture::Record(1, 5.0));
  f.watcher.Poll();
  auto ranks = f.watcher.Ranks();
  REQUIRE(ranks.size() == 2);
  CHECK_FALSE(ranks[0].latest.has_value());
  CHECK(ranks[0].last_change == start);
  CHECK(ranks[1].latest->step() == 1);
  CHECK(ranks[1].last_change == start + absl::Seconds(3));
}

}  // namespace progress_watcher_test
}  // namespace tessera::worker
