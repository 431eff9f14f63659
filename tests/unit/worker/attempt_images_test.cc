// The attempt manager with images: prepared on a thread of its own, reported as it goes, stopped
// while it pulls, failed as the run's own doing when its image cannot be had. The image tools
// are fakes (tests/unit/image/fake_tools.h); the sandbox is real bubblewrap.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/image/fake_tools.h"
#include "tests/unit/worker/attempt_polling.h"
#include "worker/daemon/attempt_manager.h"

namespace tessera::worker {
namespace attempt_images_test {

using image::testing::Digest;
using image::testing::FakeTools;

struct Fixture {
  testing::TempDir tmp{"attempt_images_test"};
  std::shared_ptr<FakeTools> tools = std::make_shared<FakeTools>();
  std::unique_ptr<AttemptManager> manager;
  Fixture() {
    tools->digests["docker://docker.io/library/busybox:1"] = Digest('b');
    image::ImageCacheOptions cache;
    cache.dir = tmp.path + "/images";
    cache.pull_over_http = false;  // the fake skopeo serves the images
    RankSandboxOptions sandbox;
    sandbox.init_path = std::string(TESSERA_BIN_DIR) + "/tessera-sandbox-init";
    sandbox.state_dir = tmp.path + "/state";
    AttemptManagerOptions options;
    options.state_dir = tmp.path + "/state";
    options.node_name = "n1";
    options.sandbox = std::make_shared<RankSandbox>(sandbox);
    options.images = std::make_shared<image::ImageCache>(cache, tools, SystemClock::Shared());
    manager = std::make_unique<AttemptManager>(
        options, SystemClock::Shared(), [](const RankOutput&) {}, [](const RankOutput&) {});
  }
  std::vector<v1::AttemptUpdate> PollFor(v1::AttemptPhase phase) {
    return testing::PollUntilPhase(*manager, phase);
  }
};

v1::StartAttempt ImageStart(const std::string& image) {
  v1::StartAttempt s;
  s.set_run_id("run-1");
  s.set_run_name("r");
  s.set_command("true");
  s.set_world_size(1);
  s.set_local_world_size(1);
  s.set_num_nodes(1);
  s.set_image(image);
  return s;
}

TEST_CASE("an image run is pulled off the control thread, said so, and started with its digest",
          "[attempts][images]") {
  Fixture f;
  REQUIRE(f.manager->Start(ImageStart("busybox:1")).ok());
  auto seen = f.PollFor(v1::ATTEMPT_PHASE_STARTED);
  std::vector<std::string> notes;
  for (const auto& u : seen) {
    if (u.phase() == v1::ATTEMPT_PHASE_PREPARING) notes.push_back(u.detail());
  }
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] == "Pulling image docker.io/library/busybox:1");
  CHECK(absl::StartsWith(notes[1], "Pulled image docker.io/library/busybox:1 (" + Digest('b')));
  // The rank (which finds no shell in the fake image) may have ended already: find STARTED.
  const auto started = std::find_if(seen.begin(), seen.end(), [](const v1::AttemptUpdate& u) {
    return u.phase() == v1::ATTEMPT_PHASE_STARTED;
  });
  REQUIRE(started != seen.end());
  CHECK(started->image_digest() == Digest('b'));
  // A second attempt of the same image: no pull.
  auto again = ImageStart("busybox:1");
  again.set_run_id("run-2");
  REQUIRE(f.manager->Start(again).ok());
  f.PollFor(v1::ATTEMPT_PHASE_STARTED);
  CHECK(f.tools->Calls("skopeo copy").size() == 1);
}

TEST_CASE("a worker shutting down stops a pull under way rather than waiting for it",
          "[attempts][images]") {
  Fixture f;
  absl::Notification copying;
  f.tools->before_copy = [&] {
    copying.Notify();
    // As the real runner does: the tool runs until it is cancelled (or for 30 s).
    f.tools->cancelled.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  REQUIRE(f.manager->Start(ImageStart("busybox:1")).ok());
  copying.WaitForNotification();
  const absl::Time start = absl::Now();
  f.manager.reset();
  CHECK(absl::Now() - start < absl::Seconds(5));
  CHECK(f.tools->cancelled.HasBeenNotified());
}

TEST_CASE("a stop while the image is pulled ends the attempt, and nothing starts after",
          "[attempts][images]") {
  Fixture f;
  absl::Notification copying, release;
  f.tools->before_copy = [&] {
    copying.Notify();
    release.WaitForNotification();
  };
  REQUIRE(f.manager->Start(ImageStart("busybox:1")).ok());
  copying.WaitForNotification();
  CHECK(f.manager->preparing() == 1);
  f.manager->Stop("run-1", 0, absl::Seconds(1));
  auto seen = f.PollFor(v1::ATTEMPT_PHASE_FINISHED);
  for (const auto& u : seen) {
    if (u.phase() == v1::ATTEMPT_PHASE_FINISHED) CHECK(u.rank_exits_size() == 0);
  }
  release.Notify();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  f.manager->Poll();
  for (const auto& u : f.manager->TakeUpdates()) {
    CHECK(u.phase() != v1::ATTEMPT_PHASE_STARTED);
  }
  CHECK(f.manager->running_ranks() == 0);
}

TEST_CASE("an image that cannot be had fails the start as the run's own doing",
          "[attempts][images]") {
  Fixture f;
  REQUIRE(f.manager->Start(ImageStart("nope:9")).ok());
  auto seen = f.PollFor(v1::ATTEMPT_PHASE_START_FAILED);
  const auto failed = std::find_if(seen.begin(), seen.end(), [](const v1::AttemptUpdate& u) {
    return u.phase() == v1::ATTEMPT_PHASE_START_FAILED;
  });
  REQUIRE(failed != seen.end());
  CHECK(failed->setup_failure());
  CHECK(absl::StrContains(failed->detail(), "Image not found: docker.io/library/nope:9"));
}

TEST_CASE("a node without a sandbox refuses image runs as its own failure", "[attempts][images]") {
  testing::TempDir tmp{"attempt_images_test"};
  AttemptManagerOptions options;
  options.state_dir = tmp.path;
  options.node_name = "n1";
  AttemptManager manager(
      options, SystemClock::Shared(), [](const RankOutput&) {}, [](const RankOutput&) {});
  CHECK_FALSE(manager.Start(ImageStart("busybox:1")).ok());
  auto updates = manager.TakeUpdates();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].phase() == v1::ATTEMPT_PHASE_START_FAILED);
  CHECK_FALSE(updates[0].setup_failure());
  CHECK(absl::StrContains(updates[0].detail(), "--sandbox off"));
}

}  // namespace attempt_images_test
}  // namespace tessera::worker
