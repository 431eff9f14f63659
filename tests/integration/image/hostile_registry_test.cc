// A registry that lies, against the node's image cache over real sockets: a manifest that
// declares layers too large for the cache, a layer that streams past its declared size, a layer
// of more files than a node unpacks. Each pull fails with the limit it met and leaves nothing.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "tests/support/http_test_server.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/image/tar_builder.h"
#include "worker/image/blob_stream.h"
#include "worker/image/image_cache.h"

namespace tessera::worker::image {
namespace hostile_registry_test {
namespace fs = std::filesystem;
using tessera::testing::HttpTestRequest;
using tessera::testing::HttpTestResponse;
using tessera::testing::HttpTestServer;

// One image the server serves: its manifest may declare `declared_size` for the layer whatever
// the layer's real size is.
struct HostileImage {
  std::string layer;
  int64_t declared_size = -1;  // -1: the layer's own size
  std::string config;
  std::string manifest;

  // `copies`: how many times the manifest lists the layer.
  explicit HostileImage(std::string layer_bytes, int64_t declared = -1, int copies = 1)
      : layer(std::move(layer_bytes)), declared_size(declared) {
    config =
        absl::StrCat(R"({"architecture":"amd64","os":"linux","config":{},)",
                     R"("rootfs":{"type":"layers","diff_ids":[")", Sha256Digest(layer), R"("]}})");
    manifest = absl::StrCat(
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)",
        R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")",
        Sha256Digest(config), R"(","size":)", config.size(), "},", R"("layers":[)");
    for (int i = 0; i < copies; ++i) {
      absl::StrAppend(&manifest, i > 0 ? "," : "",
                      R"({"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":")",
                      Sha256Digest(layer), R"(","size":)",
                      declared_size >= 0 ? declared_size : static_cast<int64_t>(layer.size()), "}");
    }
    manifest += "]}";
  }

  HttpTestResponse Serve(const HttpTestRequest& r) const {
    HttpTestResponse response;
    if (r.target == "/v2/") return response;
    if (absl::StrContains(r.target, "/manifests/")) {
      response.headers = {{"Content-Type", "application/vnd.oci.image.manifest.v1+json"}};
      response.body = manifest;
    } else if (absl::EndsWith(r.target, Sha256Digest(config))) {
      response.body = config;
    } else if (absl::EndsWith(r.target, Sha256Digest(layer))) {
      response.body = layer;
    } else {
      response.status = 404;
    }
    return response;
  }
};

struct PullResult {
  absl::Status status;
  std::vector<HttpTestRequest> requests;
};

PullResult Pull(const HostileImage& image, const ImageCacheOptions& base) {
  HttpTestServer server([&](const HttpTestRequest& r) { return image.Serve(r); });
  ImageCacheOptions options = base;
  const std::string registry = absl::StrCat("127.0.0.1:", server.port());
  options.insecure_registries = {registry};
  ImageCache cache(options, std::make_shared<ProcessToolRunner>(), SystemClock::Shared());
  const std::string name = absl::StrCat(registry, "/evil/img@", Sha256Digest(image.manifest));
  auto acquired = cache.Acquire(name, "", [](const std::string&) {});
  PullResult result{acquired.status(), server.requests()};
  if (acquired.ok()) cache.Release(acquired->digest);
  return result;
}

bool AskedForBlobs(const std::vector<HttpTestRequest>& requests) {
  return std::any_of(requests.begin(), requests.end(), [](const HttpTestRequest& r) {
    return absl::StrContains(r.target, "/blobs/");
  });
}

TEST_CASE("a lying registry cannot fill a node's disk", "[security]") {
  tessera::testing::TempDir tmp{"hostile_registry_test"};
  ImageCacheOptions options;
  options.dir = tmp.path + "/cache";
  options.max_bytes = 10 << 20;
  options.pull_timeout = absl::Minutes(1);
  options.min_free_bytes = 0;
  const std::string small = testing::TarBuilder().File("hello", "world").Finish();

  SECTION("an honest image of the same shape is pulled") {
    PullResult r = Pull(HostileImage(small), options);
    INFO(r.status.ToString());
    CHECK(r.status.ok());
  }
  SECTION("layers declared larger than the cache: refused before any blob is asked for") {
    PullResult r = Pull(HostileImage(small, int64_t{1} << 40), options);
    CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(r.status.message()),
               Catch::Contains("declares layers of 1099511627776 bytes, more than the node's "
                               "image cache holds (10485760 bytes, --image-cache-size)"));
    CHECK_FALSE(r.requests.empty());  // the manifest was read
    CHECK_FALSE(AskedForBlobs(r.requests));
  }
  SECTION("layer sizes that overflow when summed are refused, not wrapped around") {
    PullResult r = Pull(HostileImage(small, INT64_MAX, 3), options);
    CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(r.status.message()),
               Catch::Contains("declares layers of 9223372036854775807 bytes"));
    CHECK_FALSE(AskedForBlobs(r.requests));
  }
  SECTION("layers declared larger than the disk's free space above its reserve: refused") {
    options.max_bytes = int64_t{1} << 50;  // a cache as large as anything; the disk is not
    auto space = StatDiskSpace(tmp.path);
    REQUIRE(space.ok());
    // A tebibyte over the free space: other tests that delete files meanwhile (ctest runs them
    // side by side) cannot free that much; free + 1 byte was pulled once when they did.
    PullResult r = Pull(HostileImage(small, space->free_bytes + (int64_t{1} << 40)), options);
    CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(r.status.message()), Catch::Contains("(--image-min-free-disk)"));
    CHECK_FALSE(AskedForBlobs(r.requests));
  }
  SECTION("a layer that streams past its declared size is cut off there") {
    const std::string big =
        testing::TarBuilder().File("zeros", std::string(4 << 20, '\0')).Finish();
    PullResult r = Pull(HostileImage(big, 1024), options);
    CHECK(r.status.code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(r.status.message()), Catch::Contains("than the 1024"));
  }
  SECTION("a layer of more files than a node unpacks stops at the limit") {
    options.max_files = 100;
    testing::TarBuilder many;
    for (int i = 0; i < 500; ++i) many.File(absl::StrCat("f", i), "");
    PullResult r = Pull(HostileImage(many.Finish()), options);
    CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(r.status.message()), Catch::Contains("has more than 100 files") &&
                                                    Catch::Contains("(--image-max-files)"));
  }
  SECTION("a disk already at its reserve takes no pull") {
    auto space = StatDiskSpace(tmp.path);
    REQUIRE(space.ok());
    options.min_free_bytes = space->free_bytes + (int64_t{1} << 40);
    PullResult r = Pull(HostileImage(small), options);
    CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(r.status.message()), Catch::Contains("(--image-min-free-disk)"));
  }
  // Whatever failed, nothing of the pull is left behind.
  if (fs::exists(options.dir + "/tmp")) CHECK(fs::is_empty(options.dir + "/tmp"));
}

}  // namespace hostile_registry_test
}  // namespace tessera::worker::image
