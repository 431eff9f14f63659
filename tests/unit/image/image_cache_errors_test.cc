// What the image cache says when a pull fails: skopeo's words mapped to status codes, always with
// skopeo's last line; nothing left behind.
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/image/fake_tools.h"
#include "worker/image/image_cache.h"

namespace tessera::worker::image {
namespace image_cache_errors_test {
namespace fs = std::filesystem;
using testing::Digest;
using testing::FakeTools;

struct Failing {
  Failing() { options.dir = tmp.path + "/cache"; }
  absl::Status Acquire(const std::string& ref, const std::string& pinned = "") {
    options.pull_over_http = false;  // the fake skopeo serves the images
    ImageCache cache(options, tools, std::make_shared<FakeClock>());
    auto image = cache.Acquire(ref, pinned, nullptr);
    REQUIRE_FALSE(image.ok());
    // A failed pull leaves nothing: no half-written layout, no bundle.
    CHECK(fs::is_empty(options.dir + "/tmp"));
    CHECK(fs::is_empty(options.dir + "/bundles"));
    return image.status();
  }
  tessera::testing::TempDir tmp{"image_cache_errors_test"};
  ImageCacheOptions options;
  std::shared_ptr<FakeTools> tools = std::make_shared<FakeTools>();
};

std::string LastLineOf(const char* output) {
  std::string s(output);
  s.pop_back();  // the newline
  return s;
}

TEST_CASE("skopeo's failures become clear statuses with its last line") {
  struct Case {
    const char* output;
    absl::StatusCode code;
    std::string prefix;
  };
  const Case cases[] = {
      {testing::kManifestUnknown, absl::StatusCode::kNotFound,
       "Image not found: docker.io/library/a:latest: "},
      {"... name unknown: repository name not known to registry\n", absl::StatusCode::kNotFound,
       "Image not found: "},
      {testing::kUnauthorized, absl::StatusCode::kPermissionDenied,
       "Not allowed to pull image docker.io/library/a:latest: "},
      {"msg=\"requested access to the resource is denied\"\n", absl::StatusCode::kPermissionDenied,
       "Not allowed to pull image "},
      {testing::kRefused, absl::StatusCode::kUnavailable,
       "Cannot reach the registry of docker.io/library/a:latest: "},
      {testing::kHttpToHttps, absl::StatusCode::kUnavailable, "Cannot reach the registry of "},
      {"dial tcp: lookup r.example.com: no such host\n", absl::StatusCode::kUnavailable,
       "Cannot reach the registry of "},
      {"read tcp 1.2.3.4:443: i/o timeout\n", absl::StatusCode::kUnavailable,
       "Cannot reach the registry of "},
      {"open /cache/tmp/x/index.json: permission denied\n", absl::StatusCode::kUnknown,
       "Cannot pull image docker.io/library/a:latest: skopeo exited with status 1: "},
      {"something else entirely\n", absl::StatusCode::kUnknown,
       "Cannot pull image docker.io/library/a:latest: skopeo exited with status 1: "},
  };
  for (const Case& c : cases) {
    INFO(c.output);
    {
      INFO("from skopeo inspect");
      Failing f;
      f.tools->inspect_answer = ToolResult{1, std::string("Getting image\n") + c.output};
      const absl::Status st = f.Acquire("a");
      CHECK(st.code() == c.code);
      CHECK(absl::StartsWith(st.message(), c.prefix));
      CHECK(absl::EndsWith(st.message(), LastLineOf(c.output)));
      CHECK(f.tools->Calls("skopeo copy").empty());
    }
    {
      INFO("from skopeo copy");
      Failing f;
      f.tools->copy_answer = ToolResult{1, c.output};
      const absl::Status st = f.Acquire("a", Digest('a'));
      CHECK(st.code() == c.code);
      CHECK(absl::StartsWith(st.message(), c.prefix));
      CHECK(absl::EndsWith(st.message(), LastLineOf(c.output)));
      CHECK(f.tools->Calls("skopeo copy").size() == 1);
    }
    {
      INFO("from skopeo inspect --config");
      Failing f;
      f.tools->config_answer = ToolResult{1, c.output};
      const absl::Status st = f.Acquire("a", Digest('a'));
      CHECK(st.code() == c.code);
      CHECK(absl::StartsWith(st.message(), c.prefix));
      CHECK(f.tools->Calls("skopeo copy").empty());
    }
  }
}

TEST_CASE("a broken archive or config is INTERNAL, naming the image, and leaves nothing") {
  {
    Failing f;
    f.tools->archive_override = std::string(2000, 'z');
    const absl::Status st = f.Acquire("a", Digest('a'));
    CHECK(st.code() == absl::StatusCode::kInternal);
    CHECK(st.message() ==
          "Cannot unpack image docker.io/library/a:latest: a tar header's checksum is wrong "
          "(not a tar stream?)");
  }
  {
    Failing f;
    f.tools->config_answer = ToolResult{0, "Getting image source signatures\n"};
    const absl::Status st = f.Acquire("a", Digest('a'));
    CHECK(st.code() == absl::StatusCode::kInternal);
    CHECK(st.message() ==
          "Cannot unpack image docker.io/library/a:latest: the image's config is not a JSON "
          "object");
  }
}

TEST_CASE("an inspect that prints no digest is INTERNAL") {
  Failing f;
  f.tools->inspect_answer = ToolResult{0, "sha256:1234\n"};
  const absl::Status st = f.Acquire("a");
  CHECK(st.code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(st.message()),
             Catch::Contains("skopeo inspect gave no valid digest for image docker.io/library/a"));
}

TEST_CASE("a tool that cannot run or runs too long fails the pull with the runner's reason") {
  struct Broken final : ToolRunner {
    absl::StatusCode code;
    std::string message;
    absl::StatusOr<ToolResult> Run(const std::vector<std::string>&, absl::Duration) override {
      return absl::Status(code, message);
    }
  };
  tessera::testing::TempDir tmp{"image_cache_errors_test"};
  ImageCacheOptions o;
  o.dir = tmp.path;
  o.pull_over_http = false;
  auto broken = std::make_shared<Broken>();
  broken->code = absl::StatusCode::kFailedPrecondition;
  broken->message = "cannot run skopeo: No such file or directory";
  ImageCache cache(o, broken, std::make_shared<FakeClock>());
  auto r = cache.Acquire("a", "", nullptr);
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(r.status().message() ==
        "Cannot pull image docker.io/library/a:latest: cannot run skopeo: No such file or "
        "directory");

  broken->code = absl::StatusCode::kDeadlineExceeded;
  broken->message = "skopeo did not finish within 30m and was killed";
  r = cache.Acquire("a", Digest('a'), nullptr);
  CHECK(r.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(fs::is_empty(tmp.path + "/tmp"));
}

TEST_CASE("a failed pull fails the calls waiting for it too, the next Acquire tries again") {
  Failing f;
  f.tools->digests["docker://docker.io/library/a:latest"] = Digest('a');
  f.tools->copy_answer = ToolResult{1, testing::kRefused};
  // The copy waits until both calls resolved the digest: the second then waits for this pull.
  f.tools->before_copy = [&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (f.tools->Calls("skopeo inspect").size() < 2 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::SleepFor(absl::Milliseconds(50));
  };
  f.options.pull_over_http = false;
  ImageCache cache(f.options, f.tools, std::make_shared<FakeClock>());
  absl::Status first, second;
  std::thread t([&] { first = cache.Acquire("a", "", nullptr).status(); });
  second = cache.Acquire("a", "", nullptr).status();
  t.join();
  CHECK(first.code() == absl::StatusCode::kUnavailable);
  CHECK(second == first);
  CHECK(f.tools->Calls("skopeo copy").size() == 1);

  f.tools->copy_answer.reset();
  f.tools->before_copy = nullptr;
  CHECK(cache.Acquire("a", "", nullptr).ok());
  CHECK(f.tools->Calls("skopeo copy").size() == 2);
}

}  // namespace image_cache_errors_test
}  // namespace tessera::worker::image
