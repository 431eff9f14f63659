#include "worker/image/image_reference.h"

#include <catch2/catch.hpp>
#include <string>

namespace tessera::worker::image {
namespace image_reference_test {

const std::string kDigest = "sha256:" + std::string(64, 'a');

struct Case {
  std::string ref;
  std::string registry, repository, tag, digest;
};

TEST_CASE("image references are normalized like Docker's") {
  const Case cases[] = {
      {"ubuntu", "docker.io", "library/ubuntu", "latest", ""},
      {"ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", ""},
      {"pytorch/pytorch:2.3", "docker.io", "pytorch/pytorch", "2.3", ""},
      {"docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", ""},
      {"index.docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", ""},
      {"docker.io/library/ubuntu:x", "docker.io", "library/ubuntu", "x", ""},
      {"localhost/foo", "localhost", "foo", "latest", ""},
      {"localhost:5000/foo:1", "localhost:5000", "foo", "1", ""},
      {"127.0.0.1:5000/test/busybox:1", "127.0.0.1:5000", "test/busybox", "1", ""},
      {"registry.internal/team/sub/trainer:v1.2_rc-3", "registry.internal", "team/sub/trainer",
       "v1.2_rc-3", ""},
      {"my-org/my__app.x", "docker.io", "my-org/my__app.x", "latest", ""},
      {"ubuntu@" + kDigest, "docker.io", "library/ubuntu", "", kDigest},
      {"ubuntu:22.04@" + kDigest, "docker.io", "library/ubuntu", "22.04", kDigest},
      {"Registry.Example.com:443/a", "Registry.Example.com:443", "a", "latest", ""},
      {"a--b/c", "docker.io", "a--b/c", "latest", ""},
  };
  for (const Case& c : cases) {
    INFO(c.ref);
    auto parsed = ParseImageReference(c.ref, "docker.io");
    REQUIRE(parsed.ok());
    CHECK(parsed->registry == c.registry);
    CHECK(parsed->repository == c.repository);
    CHECK(parsed->tag == c.tag);
    CHECK(parsed->digest == c.digest);
  }
}

TEST_CASE("a name without a registry uses the default registry, without library/ off docker.io") {
  auto parsed = ParseImageReference("ubuntu:1", "registry.internal:5000");
  REQUIRE(parsed.ok());
  CHECK(parsed->registry == "registry.internal:5000");
  CHECK(parsed->repository == "ubuntu");
  CHECK(parsed->Name() == "registry.internal:5000/ubuntu:1");
}

TEST_CASE("Name and DockerTransport") {
  ImageReference r{"docker.io", "library/ubuntu", "22.04", ""};
  CHECK(r.Name() == "docker.io/library/ubuntu:22.04");
  CHECK(r.DockerTransport() == "docker://docker.io/library/ubuntu:22.04");
  r.digest = kDigest;
  CHECK(r.Name() == "docker.io/library/ubuntu:22.04@" + kDigest);
  CHECK(r.DockerTransport() == "docker://docker.io/library/ubuntu@" + kDigest);
  r.tag.clear();
  CHECK(r.Name() == "docker.io/library/ubuntu@" + kDigest);
}

TEST_CASE("invalid image references are refused with a message naming them") {
  const std::pair<std::string, std::string> bad[] = {
      {"", "empty"},
      {"Ubuntu", "lower-case"},
      {"ghcr.io/Org/repo", "lower-case"},
      {"ubuntu latest", "whitespace"},
      {" ubuntu", "whitespace"},
      {"ubuntu\t", "whitespace"},
      {std::string("ubu\x01ntu"), "control"},
      {"ubuntu\x7f", "control"},
      {"ubuntu@sha256:abc", "digest"},
      {"ubuntu@sha256:" + std::string(64, 'A'), "digest"},
      {"ubuntu@sha512:" + std::string(128, 'a'), "digest"},
      {"ubuntu@", "digest"},
      {"ubuntu:", "tag"},
      {"ubuntu:.x", "tag"},
      {"ubuntu:" + std::string(129, 'a'), "tag"},
      {"ubuntu:a/b", "registry host"},
      {"a//b", "path component"},
      {"/a", "path component"},
      {"a/", "path component"},
      {"a/-b", "path component"},
      {"a/b_", "path component"},
      {"a/b___c", "path component"},
      {"a/b..c", "path component"},
      {"a/b$c", "path component"},
      {":tag", "no repository"},
      {"bad_host.com/a", "registry host"},
      {"-bad.com/a", "registry host"},
      {"host.com:port/a", "registry host"},
      {"host.com:/a", "registry host"},
      {std::string(64, 'a'), "image id"},
      {"a/" + std::string(260, 'b'), "longer than 255"},
  };
  for (const auto& [ref, why] : bad) {
    INFO(ref);
    auto parsed = ParseImageReference(ref, "docker.io");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(parsed.status().message());
    CHECK_THAT(message, Catch::Contains("Invalid image reference \""));
    CHECK_THAT(message, Catch::Contains(why));
  }
  // Control characters are shown escaped, not raw.
  auto parsed = ParseImageReference(std::string("ubu\x01ntu"), "docker.io");
  CHECK_THAT(std::string(parsed.status().message()), Catch::Contains("ubu\\x01ntu"));
}

TEST_CASE("a name without a registry and no default registry is refused") {
  auto parsed = ParseImageReference("ubuntu", "");
  REQUIRE(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()), Catch::Contains("no default registry"));
}

TEST_CASE("IsValidDigest accepts sha256 and 64 lower-case hex digits only") {
  CHECK(IsValidDigest(kDigest));
  CHECK(IsValidDigest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
  CHECK_FALSE(IsValidDigest(""));
  CHECK_FALSE(IsValidDigest("sha256:"));
  CHECK_FALSE(IsValidDigest(std::string(64, 'a')));
  CHECK_FALSE(IsValidDigest("sha256:" + std::string(63, 'a')));
  CHECK_FALSE(IsValidDigest("sha256:" + std::string(65, 'a')));
  CHECK_FALSE(IsValidDigest("sha256:" + std::string(63, 'a') + "g"));
  CHECK_FALSE(IsValidDigest("sha256:" + std::string(63, 'a') + "A"));
  CHECK_FALSE(IsValidDigest("sha512:" + std::string(64, 'a')));
}

}  // namespace image_reference_test
}  // namespace tessera::worker::image
