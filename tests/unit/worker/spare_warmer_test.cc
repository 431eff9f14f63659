// A node warmed as a hot spare: its pre-flight checks over all of its GPUs, then its pool's
// images pulled into the real image cache (the image tools are fakes, tests/unit/image/
// fake_tools.h) so that a resumption placed there starts without a pull; the warm-ups on their
// own thread, a newer one replacing one still waiting; and the command acknowledged once done.
#include "worker/daemon/spare_warmer.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "proto/policy/preflight.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/image/fake_tools.h"
#include "worker/daemon/control_commands.h"

namespace tessera::worker {
namespace spare_warmer_test {

using image::testing::Digest;
using image::testing::FakeTools;

struct Fixture {
  testing::TempDir tmp{"spare_warmer_test"};
  std::shared_ptr<FakeTools> tools = std::make_shared<FakeTools>();
  std::shared_ptr<image::ImageCache> images;
  std::vector<v1::StartAttempt> checked;  // what each pre-flight run was given
  bool checks_pass = true;
  Fixture() {
    tools->digests["docker://docker.io/library/busybox:1"] = Digest('b');
    image::ImageCacheOptions cache;
    cache.dir = tmp.path + "/images";
    cache.pull_over_http = false;  // the fake skopeo serves the images
    images = std::make_shared<image::ImageCache>(cache, tools, SystemClock::Shared());
  }
  SpareWarmerOptions Options() {
    return {.state_dir = tmp.path + "/state",
            .preflight =
                [this](const v1::StartAttempt& start) {
                  checked.push_back(start);
                  v1::PreflightCheck shm;
                  shm.set_name("shm");
                  shm.set_passed(checks_pass);
                  shm.set_detail(checks_pass ? "8 GiB free" : "/dev/shm has 0.06 GiB free");
                  return std::vector<v1::PreflightCheck>{shm};
                },
            .images = images};
  }
  size_t Copies() { return tools->Calls("skopeo copy").size(); }
};

v1::WarmSpare BusyboxWarm() {
  v1::WarmSpare warm;
  for (int i = 0; i < 4; ++i) warm.add_gpu_indices(i);
  warm.mutable_preflight()->add_gpu_uuids("GPU-0");
  warm.mutable_preflight()->set_driver_version("580.1");
  auto* image = warm.add_images();
  image->set_image("busybox:1");
  image->set_image_digest(Digest('b'));
  return warm;
}

TEST_CASE("a warmed spare holds its pool's image: the resumption's acquire pulls nothing") {
  Fixture f;
  SpareWarmer warmer(f.Options());
  CHECK(warmer.WarmNow(BusyboxWarm()) == "");
  // The checks covered every GPU it was given, with the expectations.
  REQUIRE(f.checked.size() == 1);
  CHECK(f.checked[0].gpu_indices_size() == 4);
  CHECK(f.checked[0].preflight().driver_version() == "580.1");
  CHECK(f.Copies() == 1);
  std::vector<std::string> progress;
  auto acquired = f.images->Acquire("busybox:1", Digest('b'),
                                    [&](const std::string& p) { progress.push_back(p); });
  REQUIRE(acquired.ok());
  CHECK(acquired->digest == Digest('b'));
  CHECK(f.Copies() == 1);
  for (const auto& p : progress) CHECK_FALSE(absl::StartsWith(p, "Pulling image"));
  f.images->Release(acquired->digest);
}

TEST_CASE("a spare whose checks fail says so first, and pulls nothing") {
  Fixture f;
  f.checks_pass = false;
  SpareWarmer warmer(f.Options());
  const std::string error = warmer.WarmNow(BusyboxWarm());
  CHECK(absl::StartsWith(error, kSpareChecksFailedPrefix));
  CHECK(absl::StrContains(error, "/dev/shm has 0.06 GiB free"));
  CHECK(f.Copies() == 0);
}

TEST_CASE("a spare pulls with the owner's credentials for that registry only, then removes them") {
  Fixture f;
  SpareWarmer warmer(f.Options());
  v1::WarmSpare warm = BusyboxWarm();
  auto* other = warm.mutable_images(0)->add_registry_credentials();
  other->mutable_secret()->set_type(v1::SECRET_TYPE_DOCKER_REGISTRY);
  other->mutable_secret()->set_server("r.example.com");
  other->set_value("not-for-docker-io");
  CHECK(warmer.WarmNow(warm) == "");
  REQUIRE(f.Copies() == 1);
  const auto first_copy = f.tools->Calls("skopeo copy")[0];  // a copy: Calls returns by value
  for (const auto& arg : first_copy) {
    CHECK_FALSE(absl::StrContains(arg, "authfile"));
  }

  Fixture g;
  SpareWarmer second(g.Options());
  auto* mine = warm.mutable_images(0)->add_registry_credentials();
  mine->mutable_secret()->set_type(v1::SECRET_TYPE_DOCKER_REGISTRY);
  mine->mutable_secret()->set_server("docker.io");
  mine->mutable_secret()->set_username("alice");
  mine->set_value("alice-registry-token");
  CHECK(second.WarmNow(warm) == "");
  REQUIRE(g.Copies() == 1);
  const auto copy = g.tools->Calls("skopeo copy")[0];
  const auto flag = std::find(copy.begin(), copy.end(), "--src-authfile");
  REQUIRE(flag != copy.end());
  REQUIRE(flag + 1 != copy.end());
  CHECK_FALSE(std::filesystem::exists(*(flag + 1)));  // only for the pull
}

TEST_CASE("a spare with no image cache refuses images, naming why") {
  Fixture f;
  SpareWarmerOptions options = f.Options();
  options.images = nullptr;
  SpareWarmer warmer(options);
  CHECK(warmer.WarmNow(BusyboxWarm()) ==
        "this node runs no images (its worker has no image cache)");
  v1::WarmSpare checks_only = BusyboxWarm();
  checks_only.clear_images();
  CHECK(warmer.WarmNow(checks_only) == "");
}

TEST_CASE(
    "warm-ups run one at a time off the caller's thread, a newer one replacing a waiting one") {
  Fixture f;
  absl::Notification copying, go_on;
  f.tools->before_copy = [&] {
    if (!copying.HasBeenNotified()) copying.Notify();
    go_on.WaitForNotification();
  };
  SpareWarmer warmer(f.Options());
  absl::Mutex mu;
  std::vector<std::string> outcomes;
  const auto told = [&](const std::string& name) {
    return [&, name](const std::string& error) {
      absl::MutexLock lock(&mu);
      outcomes.push_back(name + ":" + error);
    };
  };
  warmer.Warm(BusyboxWarm(), told("first"));
  copying.WaitForNotification();  // the first is pulling
  warmer.Warm(BusyboxWarm(), told("second"));
  warmer.Warm(BusyboxWarm(), told("third"));
  {
    absl::MutexLock lock(&mu);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0] == "second:superseded by a newer warm-up");
  }
  go_on.Notify();
  REQUIRE(testing::PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return outcomes.size() == 3;
      },
      absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  CHECK(outcomes[1] == "first:");
  CHECK(outcomes[2] == "third:");
}

TEST_CASE("a warm-up command is acknowledged once it is done, and refused without a warmer") {
  Fixture f;
  f.checks_pass = false;
  SpareWarmer warmer(f.Options());
  AttemptManagerOptions options;
  options.state_dir = f.tmp.path + "/attempts";
  options.node_name = "n1";
  AttemptManager attempts(
      options, SystemClock::Shared(), [](const RankOutput&) {}, [](const RankOutput&) {});
  absl::Mutex mu;
  std::vector<v1::CommandAck> acks;
  const auto send = [&](const v1::WorkerMessage& m) {
    absl::MutexLock lock(&mu);
    if (m.has_ack()) acks.push_back(m.ack());
    return true;
  };
  v1::ControlMessage command;
  command.set_command_id("cmd-7");
  *command.mutable_warm_spare() = BusyboxWarm();

  ControlCommands without(attempts, nullptr, nullptr, nullptr, send);
  without.Execute(command);
  {
    absl::MutexLock lock(&mu);
    REQUIRE(acks.size() == 1);
    CHECK_FALSE(acks[0].ok());
    CHECK(acks[0].error() == "this worker cannot stand in as a hot spare");
    acks.clear();
  }

  ControlCommands with(attempts, nullptr, nullptr, &warmer, send);
  with.Execute(command);
  REQUIRE(testing::PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return !acks.empty();
      },
      absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  REQUIRE(acks.size() == 1);
  CHECK(acks[0].command_id() == "cmd-7");
  CHECK_FALSE(acks[0].ok());
  CHECK(absl::StartsWith(acks[0].error(), kSpareChecksFailedPrefix));
}

}  // namespace spare_warmer_test
}  // namespace tessera::worker
