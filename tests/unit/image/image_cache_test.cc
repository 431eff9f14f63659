#include "worker/image/image_cache.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/image/fake_tools.h"
#include "worker/image/cache_files.h"

namespace tessera::worker::image {
namespace image_cache_test {
namespace fs = std::filesystem;
using testing::Digest;
using testing::FakeTools;

struct Cache {
  explicit Cache(ImageCacheOptions o = {}) : options(std::move(o)) {
    options.dir = tmp.path + "/cache";
    options.pull_over_http = false;  // the fake skopeo serves the images
    tools->digests["docker://docker.io/library/a:latest"] = Digest('a');
    tools->digests["docker://docker.io/library/b:latest"] = Digest('b');
    tools->digests["docker://docker.io/library/c:latest"] = Digest('c');
    tools->digests["docker://docker.io/library/d:latest"] = Digest('d');
    tools->digests["docker://registry.local:5000/team/img:1"] = Digest('1');
  }
  ImageCache& Get() {
    if (!cache) cache = std::make_unique<ImageCache>(options, tools, clock);
    return *cache;
  }
  absl::StatusOr<PreparedImage> Acquire(const std::string& ref, const std::string& pinned = "") {
    return Get().Acquire(ref, pinned, [this](const std::string& text) { said.push_back(text); });
  }
  std::string Bundle(char c) const { return options.dir + "/bundles/" + std::string(64, c); }
  bool TmpIsEmpty() const { return fs::is_empty(options.dir + "/tmp"); }

  tessera::testing::TempDir tmp{"image_cache_test"};
  ImageCacheOptions options;
  std::shared_ptr<FakeTools> tools = std::make_shared<FakeTools>();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::unique_ptr<ImageCache> cache;
  std::vector<std::string> said;
};

TEST_CASE("the first Acquire pulls with the registry's flags, the next ones use the cache") {
  ImageCacheOptions o;
  o.insecure_registries = {"registry.local:5000"};
  o.auth_file = "/etc/tessera/auth.json";
  Cache c(o);
  const std::string name = "registry.local:5000/team/img:1";

  auto image = c.Acquire(name);
  REQUIRE(image.ok());
  CHECK(image->pulled);
  CHECK(image->digest == Digest('1'));
  CHECK(image->rootfs == c.Bundle('1') + "/rootfs");
  CHECK(fs::file_size(image->rootfs + "/bin/tool") == 100'000);
  CHECK(image->env == std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"});
  CHECK(image->working_dir == "/workspace");
  CHECK(c.said ==
        std::vector<std::string>{"Pulling image " + name,
                                 "Pulled image " + name + " (" + Digest('1') + ") in 0.0 s"});

  REQUIRE(c.tools->calls.size() == 3);
  CHECK(c.tools->calls[0] == std::vector<std::string>{"skopeo", "inspect", "--format",
                                                      "{{.Digest}}", "--tls-verify=false",
                                                      "--authfile", "/etc/tessera/auth.json",
                                                      "docker://" + name});
  CHECK(c.tools->calls[1] ==
        std::vector<std::string>{"skopeo", "inspect", "--config", "--raw", "--tls-verify=false",
                                 "--authfile", "/etc/tessera/auth.json",
                                 "docker://registry.local:5000/team/img@" + Digest('1')});
  // The image streams through a pipe in tmp/ into the root as it downloads.
  const auto& copy = c.tools->calls[2];
  REQUIRE(copy.size() == 9);
  // skopeo stages layers in the pull's own folder, on the cache's disk.
  const std::string work_prefix = c.options.dir + "/tmp/" + std::string(64, '1') + "-";
  CHECK(copy[1] == "--tmpdir");
  CHECK(absl::StartsWith(copy[2], work_prefix));
  CHECK(std::vector<std::string>(copy.begin() + 3, copy.begin() + 8) ==
        std::vector<std::string>{"copy", "--src-tls-verify=false", "--src-authfile",
                                 "/etc/tessera/auth.json",
                                 "docker://registry.local:5000/team/img@" + Digest('1')});
  CHECK(copy[8] == "docker-archive:" + copy[2] + "/archive.pipe");
  CHECK(c.tools->timeouts[0] == absl::Minutes(30));
  CHECK(c.TmpIsEmpty());
  CHECK(ReadNumberFile(c.Bundle('1') + "/tessera-size") == c.Get().TotalBytes());
  CHECK(ReadNumberFile(c.Bundle('1') + "/tessera-last-used") == absl::ToUnixNanos(c.clock->Now()));
  CHECK(c.Get().TotalBytes() > 100'000);
  // Ranks (other uids) may pass through to the root, not list the cache or its pulls.
  auto mode = [](const std::string& p) {
    return static_cast<int>(fs::status(p).permissions() & fs::perms::mask);
  };
  CHECK(mode(c.options.dir) == 0711);
  CHECK(mode(c.options.dir + "/bundles") == 0711);
  CHECK(mode(c.Bundle('1')) == 0711);
  CHECK(mode(c.options.dir + "/tmp") == 0700);

  // Cached: the registry is asked for the tag's digest, nothing is pulled.
  c.said.clear();
  auto again = c.Acquire(name);
  REQUIRE(again.ok());
  CHECK_FALSE(again->pulled);
  CHECK(again->rootfs == image->rootfs);
  CHECK(c.tools->calls.size() == 4);
  CHECK(c.tools->Calls("skopeo inspect").size() == 3);
  CHECK(c.said.empty());

  // Pinned and cached: not even the registry is asked; nor for a reference with a digest.
  CHECK(c.Acquire(name, Digest('1')).ok());
  CHECK(c.Acquire("registry.local:5000/team/img@" + Digest('1')).ok());
  CHECK(c.tools->calls.size() == 4);
}

TEST_CASE(
    "a secure registry without an auth file gets no flags, a pinned digest is pulled as it is") {
  Cache c;
  REQUIRE(c.Acquire("b:7", Digest('b')).ok());
  REQUIRE(c.tools->calls.size() == 2);  // no inspect of the digest, only of the config
  CHECK(c.tools->calls[0] ==
        std::vector<std::string>{"skopeo", "inspect", "--config", "--raw",
                                 "docker://docker.io/library/b@" + Digest('b')});
  CHECK(c.tools->calls[1][4] == "docker://docker.io/library/b@" + Digest('b'));
  CHECK(c.tools->calls[1].size() == 6);
}

TEST_CASE("pinned digests that are invalid or contradict the reference are refused") {
  Cache c;
  auto bad = c.Acquire("a", "sha256:xyz");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("Invalid pinned digest"));
  auto other = c.Acquire("a@" + Digest('a'), Digest('b'));
  CHECK(other.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(c.Acquire("Bad Name").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(c.tools->calls.empty());
}

TEST_CASE("env and working folder come from the image's config, cwd defaults to /") {
  ImageCacheOptions o;
  o.max_bytes = 0;  // evict whatever is not in use
  Cache c(o);
  c.tools->config_json = R"({"config": {"Env": ["A=1"]},
                              "rootfs": {"diff_ids": ["sha256:)" +
                         std::string(64, 'e') + R"("]}})";
  auto image = c.Acquire("a");
  REQUIRE(image.ok());
  CHECK(image->env == std::vector<std::string>{"A=1"});
  CHECK(image->working_dir == "/");

  c.tools->config_json = "{not json";
  auto broken = c.Acquire("b");
  CHECK(broken.status().code() == absl::StatusCode::kInternal);
  CHECK(broken.status().message() ==
        "Cannot unpack image docker.io/library/b:latest: the image's config is not a JSON object");
  CHECK_FALSE(fs::exists(c.Bundle('b')));

  // A cached image whose config.json was damaged is unusable, and the failed Acquire holds no
  // use of it: once released by its first user, it can be evicted.
  std::ofstream(c.Bundle('a') + "/config.json") << "{damaged";
  auto damaged = c.Acquire("a");
  CHECK(damaged.status().code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(damaged.status().message()),
             Catch::Contains("Image docker.io/library/a:latest is unusable"));
  CHECK(c.Get().Evict() == 0);
  c.Get().Release(Digest('a'));
  CHECK(c.Get().Evict() > 0);
  CHECK_FALSE(fs::exists(c.Bundle('a')));
}

TEST_CASE("eviction removes the least recently used images, never one in use") {
  ImageCacheOptions o;
  o.max_bytes = 250'000;  // two images of about 100 kB fit, three do not
  Cache c(o);
  const auto use = [&](const std::string& ref) {
    auto image = c.Acquire(ref);
    REQUIRE(image.ok());
    c.clock->Advance(absl::Minutes(1));
    return image->digest;
  };
  c.Get().Release(use("a"));
  c.Get().Release(use("b"));
  use("c");                                // stays in use
  CHECK_FALSE(fs::exists(c.Bundle('a')));  // the pull of c evicted a, the oldest
  CHECK(fs::exists(c.Bundle('b')));
  CHECK(fs::exists(c.Bundle('c')));

  // b is used again after c: c is now the least recently used, but in use, so b goes.
  c.Get().Release(use("b"));
  c.Get().Release(use("d"));
  CHECK(fs::exists(c.Bundle('c')));
  CHECK_FALSE(fs::exists(c.Bundle('b')));
  CHECK(fs::exists(c.Bundle('d')));
  CHECK(c.TmpIsEmpty());

  // Within the limit: nothing to do. Everything in use: nothing evicted either.
  CHECK(c.Get().Evict() == 0);
  c.options.max_bytes = 0;
  c.cache.reset();  // a new cache (a restarted worker) over the same folder; nothing in use
  const int64_t total = c.Get().TotalBytes();
  REQUIRE(c.Acquire("c").ok());
  const int64_t freed = c.Get().Evict();
  CHECK(fs::exists(c.Bundle('c')));
  CHECK_FALSE(fs::exists(c.Bundle('d')));
  CHECK(freed > 100'000);
  CHECK(c.Get().TotalBytes() == total - freed);
}

TEST_CASE("four Acquires of one image at once pull it once and share it") {
  ImageCacheOptions o;
  o.max_bytes = 0;  // every pull evicts all it can: the shared image must count as in use 4 times
  Cache c(o);
  c.Get();
  // The copy waits until all four have resolved the digest, so that the other three find the pull
  // in flight (or, at worst, already done: once is still once).
  c.tools->before_copy = [&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (c.tools->Calls("skopeo inspect").size() < 4 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::SleepFor(absl::Milliseconds(20));
  };
  std::vector<absl::StatusOr<PreparedImage>> results(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = c.Get().Acquire("a", "", nullptr); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    REQUIRE(r.ok());
    CHECK(r->rootfs == c.Bundle('a') + "/rootfs");
  }
  CHECK(c.tools->Calls("skopeo copy").size() == 1);
  for (int i = 0; i < 3; ++i) {
    c.Get().Release(Digest('a'));
    CHECK(c.Get().Evict() == 0);
  }
  c.Get().Release(Digest('a'));
  CHECK(c.Get().Evict() > 0);
  CHECK_FALSE(fs::exists(c.Bundle('a')));
}

TEST_CASE("what a crash left in tmp is removed at construction, bundles stay") {
  Cache c;
  REQUIRE(c.Acquire("a").ok());
  c.cache.reset();
  c.tmp.Write("cache/tmp/" + std::string(64, 'b') + "-1234abcd/blobs/x", "partial");
  c.tmp.Write("cache/tmp/evicted-x/rootfs/ro/file", "x");
  fs::permissions(c.options.dir + "/tmp/evicted-x/rootfs/ro",
                  fs::perms::owner_read | fs::perms::owner_exec);
  CHECK_FALSE(c.TmpIsEmpty());
  c.Get();
  CHECK(c.TmpIsEmpty());
  CHECK(fs::exists(c.Bundle('a') + "/rootfs/bin/tool"));
  // Ranks pass through it to their image's root; nobody else lists it.
  CHECK((fs::status(c.options.dir).permissions() & fs::perms::all) ==
        (fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec));
}

TEST_CASE("a cache folder that cannot be used fails every Acquire with the reason") {
  Cache c;
  c.options.dir = c.tmp.Write("file", "x");
  auto r = c.Get().Acquire("a", "", nullptr);
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("is not a folder"));
  CHECK(c.Get().Evict() == 0);
}

}  // namespace image_cache_test
}  // namespace tessera::worker::image
