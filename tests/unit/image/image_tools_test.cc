// The image cache with the real tools: an image built with umoci, served by a real registry
// (docker-registry, plain HTTP on loopback), pulled over HTTP and with skopeo. Returns early, with
// a warning, on a machine without the tools.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "tests/support/free_port.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/image/image_cache.h"

namespace tessera::worker::image {
namespace image_tools_test {
namespace fs = std::filesystem;

// The real tools, with every command they were asked to run recorded.
struct RecordingRunner final : ToolRunner {
  absl::StatusOr<ToolResult> Run(const std::vector<std::string>& argv,
                                 absl::Duration timeout) override {
    {
      absl::MutexLock lock(&mu);
      commands.push_back(argv.size() > 1 ? argv[0] + " " + argv[1] : argv[0]);
    }
    return real.Run(argv, timeout);
  }
  bool Ran(const std::string& prefix) {
    absl::MutexLock lock(&mu);
    return std::any_of(commands.begin(), commands.end(),
                       [&](const std::string& c) { return c.rfind(prefix, 0) == 0; });
  }
  ProcessToolRunner real;
  absl::Mutex mu;
  std::vector<std::string> commands;
};

void Must(const std::vector<std::string>& argv) {
  ProcessToolRunner runner;
  auto result = runner.Run(argv, absl::Minutes(2));
  REQUIRE(result.ok());
  INFO(argv[0] << " " << argv[1] << ": " << result->output);
  REQUIRE(result->exit_code == 0);
}

// A registry on a free loopback port, killed when this goes out of scope (also on a failed
// REQUIRE).
struct Registry {
  explicit Registry(const tessera::testing::TempDir& tmp) {
    port = tessera::testing::FreePort();
    address = absl::StrCat("127.0.0.1:", port);
    const std::string config = tmp.Write("registry.yml", absl::StrCat(R"(version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: )",
                                                                      tmp.path, R"(/registry
http:
  addr: )",
                                                                      address, "\n"));
    auto started = tessera::testing::Process::Start({"/usr/bin/docker-registry", "serve", config},
                                                    tmp.path + "/registry.log");
    REQUIRE(started.ok());
    process = std::move(*started);
    auto line = process.WaitForLine("listening on", absl::Seconds(30));
    INFO(process.Log());
    REQUIRE(line.ok());
  }
  int port = 0;
  std::string address;
  tessera::testing::Process process;  // SIGKILLed by its destructor
};

TEST_CASE("an image of layers made by umoci is streamed from a real registry into its root",
          "[tools]") {
  for (const char* tool :
       {"/usr/bin/skopeo", "/usr/bin/umoci", "/usr/bin/docker-registry", "/bin/busybox"}) {
    if (!fs::exists(tool)) {
      WARN("skipped: " << tool << " is not installed");
      return;
    }
  }
  // Over the registry's HTTP API (the worker's way) and by skopeo copy (its fallback).
  const bool over_http = GENERATE(true, false);
  INFO("pull_over_http " << over_http);
  tessera::testing::TempDir tmp{"image_tools_test"};
  const std::string layout = tmp.path + "/layout";
  const std::string bundle = tmp.path + "/bundle";
  Must({"umoci", "init", "--layout", layout});
  Must({"umoci", "new", "--image", layout + ":t"});
  Must({"umoci", "config", "--image", layout + ":t", "--config.workingdir=/srv",
        "--config.env=FOO=bar"});
  Must({"umoci", "unpack", "--rootless", "--image", layout + ":t", bundle});
  fs::create_directories(bundle + "/rootfs/bin");
  fs::copy_file("/bin/busybox", bundle + "/rootfs/bin/busybox");
  fs::create_directories(bundle + "/rootfs/etc/old");
  std::ofstream(bundle + "/rootfs/etc/old/file") << "lower";
  std::ofstream(bundle + "/rootfs/etc/motd") << "lower";
  Must({"umoci", "repack", "--image", layout + ":t", bundle});
  // A second layer, as umoci writes one: a whiteout for a deleted folder, a changed file.
  fs::remove_all(bundle);
  Must({"umoci", "unpack", "--rootless", "--image", layout + ":t", bundle});
  fs::remove_all(bundle + "/rootfs/etc/old");
  std::ofstream(bundle + "/rootfs/etc/motd") << "upper";
  Must({"umoci", "repack", "--image", layout + ":t", bundle});

  Registry registry(tmp);
  const std::string name = registry.address + "/test/busybox";
  Must({"skopeo", "copy", "--dest-tls-verify=false", "oci:" + layout + ":t",
        "docker://" + name + ":1"});

  ImageCacheOptions options;
  options.dir = tmp.path + "/cache";
  options.insecure_registries = {registry.address};
  options.pull_timeout = absl::Minutes(2);
  options.pull_over_http = over_http;
  auto tools = std::make_shared<RecordingRunner>();
  ImageCache cache(options, tools, SystemClock::Shared());
  std::vector<std::string> said;
  const auto progress = [&](const std::string& text) { said.push_back(text); };

  auto image = cache.Acquire(name + ":1", "", progress);
  INFO((image.ok() ? "" : image.status().ToString()));
  REQUIRE(image.ok());
  CHECK(image->pulled);
  CHECK(IsValidDigest(image->digest));
  CHECK(fs::file_size(image->rootfs + "/bin/busybox") == fs::file_size("/bin/busybox"));
  CHECK(std::find(image->env.begin(), image->env.end(), "FOO=bar") != image->env.end());
  CHECK(image->working_dir == "/srv");
  CHECK_FALSE(fs::exists(image->rootfs + "/etc/old"));
  std::ifstream motd(image->rootfs + "/etc/motd");
  CHECK(std::string((std::istreambuf_iterator<char>(motd)), std::istreambuf_iterator<char>()) ==
        "upper");
  REQUIRE(said.size() == 2);
  CHECK(said[0] == "Pulling image " + name + ":1");
  // skopeo resolved the tag; only the fallback copies with it ("skopeo --tmpdir DIR copy").
  CHECK(tools->Ran("skopeo inspect"));
  CHECK(tools->Ran("skopeo --tmpdir") == !over_http);
  CHECK(cache.TotalBytes() > static_cast<int64_t>(fs::file_size("/bin/busybox")));
  CHECK(fs::is_empty(options.dir + "/tmp"));

  // An image that unpacks to more than the whole cache is refused (over HTTP, as it unpacks).
  if (over_http) {
    ImageCacheOptions tiny = options;
    tiny.dir = tmp.path + "/cache-tiny";
    tiny.max_bytes = 100'000;
    ImageCache small(tiny, tools, SystemClock::Shared());
    auto too_big = small.Acquire(name + ":1", "", progress);
    CHECK(too_big.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(too_big.status().message()),
               Catch::Contains("is larger than the node's image cache (100000 bytes"));
    CHECK(fs::is_empty(tiny.dir + "/tmp"));
    said.pop_back();  // its "Pulling image"
  }

  // The node's disk limits hold on both paths: files of one image, and the disk's reserve.
  {
    ImageCacheOptions few = options;
    few.dir = tmp.path + "/cache-few";
    few.max_files = 2;
    ImageCache limited(few, tools, SystemClock::Shared());
    auto many = limited.Acquire(name + ":1", "", progress);
    CHECK(many.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(many.status().message()),
               Catch::Contains("has more than 2 files") && Catch::Contains("--image-max-files"));
    CHECK(fs::is_empty(few.dir + "/tmp"));
    ImageCacheOptions full = options;
    full.dir = tmp.path + "/cache-full";
    auto space = StatDiskSpace(tmp.path);
    REQUIRE(space.ok());
    full.min_free_bytes = space->free_bytes + (int64_t{1} << 40);
    ImageCache no_room(full, tools, SystemClock::Shared());
    auto refused = no_room.Acquire(name + ":1", "", progress);
    CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(refused.status().message()), Catch::Contains("--image-min-free-disk"));
    CHECK(fs::is_empty(full.dir + "/tmp"));
    said.resize(2);  // their "Pulling image"
  }

  // Cached: resolved again, not pulled; pinned: the registry is not even asked.
  auto again = cache.Acquire(name + ":1", "", progress);
  REQUIRE(again.ok());
  CHECK_FALSE(again->pulled);
  CHECK(again->rootfs == image->rootfs);
  auto pinned = cache.Acquire(name + ":1", image->digest, progress);
  REQUIRE(pinned.ok());
  CHECK_FALSE(pinned->pulled);
  CHECK(said.size() == 2);

  auto missing = cache.Acquire(name + ":nope", "", progress);
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains("Image not found: " + name + ":nope: ") &&
                 Catch::Contains("manifest unknown"));

  // The registry without --tls-verify=false: skopeo speaks HTTPS to a plain HTTP server.
  ImageCacheOptions secure = options;
  secure.insecure_registries.clear();
  secure.dir = tmp.path + "/cache-strict";
  ImageCache strict(secure, std::make_shared<ProcessToolRunner>(), SystemClock::Shared());
  auto refused = strict.Acquire(name + ":1", "", progress);
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);

  // Nothing listens on the port any more.
  const std::string gone = registry.address;
  REQUIRE(registry.process.Kill(SIGKILL).ok());
  auto unreachable = cache.Acquire(gone + "/test/busybox:2", "", progress);
  CHECK(unreachable.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(unreachable.status().message()),
             Catch::Contains("Cannot reach the registry of " + gone));

  for (int i = 0; i < 3; ++i) cache.Release(image->digest);
}

}  // namespace image_tools_test
}  // namespace tessera::worker::image
