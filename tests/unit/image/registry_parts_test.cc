// The pure parts of pulling over HTTP: auth files and challenges, manifests and indexes, gzip
// streams and layers checked against their diff ids.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/image/tar_builder.h"
#include "worker/image/blob_stream.h"
#include "worker/image/image_manifest.h"
#include "worker/image/layer_applier.h"
#include "worker/image/registry_auth.h"

namespace tessera::worker::image {
namespace registry_parts_test {
namespace fs = std::filesystem;
using testing::TarBuilder;

std::string Gzip(const std::string& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                       Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Auth(const std::string& user_pass) { return absl::Base64Escape(user_pass); }

TEST_CASE("credentials come from the most specific auth.json key for the repository") {
  const std::string json = R"({"auths": {
      "r.example.com": {"auth": ")" +
                           Auth("host:h") + R"("},
      "r.example.com/team": {"auth": ")" +
                           Auth("team:t") + R"("},
      "https://index.docker.io/v1/": {"auth": ")" +
                           Auth("hub:secret:with:colons") + R"("},
      "http://other.example.com:5000/v2/": {"username": "u", "password": "p"}}})";
  auto host = CredentialsFor(json, "r.example.com", "elsewhere/img");
  REQUIRE(host.ok());
  CHECK(host->username == "host");
  auto team = CredentialsFor(json, "r.example.com", "team/img");
  REQUIRE(team.ok());
  CHECK(team->username == "team");
  CHECK(team->password == "t");
  // "teamx" is not under "team".
  CHECK(CredentialsFor(json, "r.example.com", "teamx/img")->username == "host");
  auto hub = CredentialsFor(json, "docker.io", "library/ubuntu");
  REQUIRE(hub.ok());
  CHECK(hub->username == "hub");
  CHECK(hub->password == "secret:with:colons");
  CHECK(CredentialsFor(json, "other.example.com:5000", "x")->password == "p");
  CHECK(CredentialsFor(json, "nowhere.example.com", "x")->empty());
  CHECK(CredentialsFor(R"({"auths": {}})", "docker.io", "x")->empty());
  CHECK(CredentialsFor("{}", "docker.io", "x")->empty());
}

TEST_CASE("a broken auth.json is an error naming the entry") {
  CHECK(CredentialsFor("not json", "r", "x").status().code() == absl::StatusCode::kInvalidArgument);
  auto bad = CredentialsFor(R"({"auths": {"r": {"auth": "!!!"}}})", "r", "x");
  CHECK(bad.status().message() ==
        "the registry auth file's entry \"r\" has an \"auth\" that is "
        "not base64");
  auto no_colon =
      CredentialsFor(R"({"auths": {"r": {"auth": ")" + Auth("nocolon") + "\"}}}", "r", "x");
  CHECK_THAT(std::string(no_colon.status().message()), Catch::Contains("not \"user:password\""));
  auto empty = CredentialsFor(R"({"auths": {"r": {}}})", "r", "x");
  CHECK_THAT(std::string(empty.status().message()), Catch::Contains("has neither"));
}

TEST_CASE("WWW-Authenticate challenges are parsed with quoted and bare values") {
  auto bearer = ParseAuthChallenge(
      R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",)"
      R"(scope="repository:library/ubuntu:pull")");
  REQUIRE(bearer.ok());
  CHECK(bearer->scheme == "bearer");
  CHECK(bearer->params["realm"] == "https://auth.docker.io/token");
  CHECK(bearer->params["service"] == "registry.docker.io");
  CHECK(bearer->params["scope"] == "repository:library/ubuntu:pull");
  auto basic = ParseAuthChallenge(R"(Basic realm = "a \"quoted\" realm", charset=UTF-8)");
  REQUIRE(basic.ok());
  CHECK(basic->scheme == "basic");
  CHECK(basic->params["realm"] == "a \"quoted\" realm");
  CHECK(basic->params["charset"] == "UTF-8");
  CHECK_FALSE(ParseAuthChallenge("").ok());
  CHECK_FALSE(ParseAuthChallenge("realm=x").ok());
  CHECK_FALSE(ParseAuthChallenge(R"(Bearer realm="unterminated)").ok());
}

TEST_CASE("manifests and indexes are read, and the node's platform chosen") {
  const std::string d1 = "sha256:" + std::string(64, '1');
  const std::string d2 = "sha256:" + std::string(64, '2');
  const std::string d3 = "sha256:" + std::string(64, '3');
  auto manifest = ParseManifest(R"({"schemaVersion": 2,
      "mediaType": "application/vnd.oci.image.manifest.v1+json",
      "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": ")" +
                                    d1 +
                                    R"(", "size": 10},
      "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ")" +
                                    d2 + R"(", "size": 99},
                 {"mediaType": "application/vnd.docker.image.rootfs.diff.tar", "digest": ")" +
                                    d3 + R"("}]})",
                                "");
  REQUIRE(manifest.ok());
  CHECK_FALSE(manifest->is_index);
  CHECK(manifest->config.digest == d1);
  REQUIRE(manifest->layers.size() == 2);
  CHECK(manifest->layers[0].size == 99);
  CHECK(CompressionOf(manifest->layers[0].media_type) == LayerCompression::kGzip);
  CHECK(CompressionOf(manifest->layers[1].media_type) == LayerCompression::kNone);
  CHECK(CompressionOf("application/vnd.oci.image.layer.v1.tar+zstd") ==
        LayerCompression::kUnsupported);
  CHECK(CompressionOf("application/vnd.oci.image.layer.v1.tar+gzip+encrypted") ==
        LayerCompression::kUnsupported);

  // The media type from the response when the document has none (Docker's list).
  auto index = ParseManifest(
      R"({"schemaVersion": 2, "manifests": [
      {"digest": ")" +
          d1 + R"(", "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
      {"digest": ")" +
          d2 + R"(", "platform": {"os": "linux", "architecture": "amd64"}}]})",
      "application/vnd.docker.distribution.manifest.list.v2+json");
  REQUIRE(index.ok());
  CHECK(index->is_index);
  CHECK(ChoosePlatform(*index, "linux", "amd64")->digest == d2);
  CHECK(ChoosePlatform(*index, "linux", "arm64", "v8")->digest == d1);
  auto none = ChoosePlatform(*index, "linux", "s390x");
  CHECK(none.status().message() ==
        "the image has no linux/s390x variant (it has: linux/arm64/v8, linux/amd64)");

  CHECK(ParseManifest(R"({"schemaVersion": 1, "fsLayers": []})", "").status().code() ==
        absl::StatusCode::kUnimplemented);
  CHECK(ParseManifest("[]", "").status().code() == absl::StatusCode::kInvalidArgument);
  auto bad_digest = ParseManifest(R"({"config": {"digest": "md5:abc"}, "layers": []})", "");
  CHECK_THAT(std::string(bad_digest.status().message()), Catch::Contains("config has no sha256"));
}

TEST_CASE("a gzip stream is inflated in pieces of any size, members one after another") {
  const std::string a(300'000, 'a');
  const std::string b = "and then some more";
  const std::string compressed = Gzip(a) + Gzip(b);
  const size_t piece = GENERATE(1, 7, 4096, 1 << 20);
  std::string out;
  GzipInflater gz([&](const char* data, size_t size) {
    out.append(data, size);
    return absl::OkStatus();
  });
  for (size_t i = 0; i < compressed.size(); i += piece) {
    REQUIRE(gz.Feed(compressed.data() + i, std::min(piece, compressed.size() - i)).ok());
  }
  REQUIRE(gz.Finish().ok());
  CHECK(out == a + b);
  CHECK(gz.bytes_out() == static_cast<int64_t>(a.size() + b.size()));
}

TEST_CASE("a gzip stream that is cut or is not gzip fails") {
  const auto sink = [](const char*, size_t) { return absl::OkStatus(); };
  const std::string compressed = Gzip(std::string(10'000, 'z'));
  GzipInflater cut(sink);
  REQUIRE(cut.Feed(compressed.data(), compressed.size() - 4).ok());
  CHECK(cut.Finish().code() == absl::StatusCode::kInvalidArgument);
  GzipInflater garbage(sink);
  CHECK(garbage.Feed("this is no gzip", 15).code() == absl::StatusCode::kInvalidArgument);
  // The sink's own error stops the stream.
  GzipInflater refused([](const char*, size_t) { return absl::ResourceExhaustedError("full"); });
  CHECK(refused.Feed(compressed.data(), compressed.size()).code() ==
        absl::StatusCode::kResourceExhausted);
}

TEST_CASE("SHA-256 digests are computed incrementally") {
  CHECK(Sha256Digest("") ==
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256Stream sha;
  sha.Update("ab", 2);
  sha.Update("c", 1);
  CHECK(sha.Digest() == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

struct Root {
  Root() {
    fs::create_directories(tmp.path + "/root");
    fd = ::open((tmp.path + "/root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~Root() { ::close(fd); }
  tessera::testing::TempDir tmp{"layer_applier_test"};
  int fd = -1;
  RootFinish finish;
};

TEST_CASE("a gzip layer is applied as it streams and checked against its diff id") {
  const std::string tar = TarBuilder().Dir("etc").File("etc/motd", "hello").Finish();
  const std::string blob = Gzip(tar);
  Root root;
  LayerApplier applier(root.fd, &root.finish, LayerCompression::kGzip, Sha256Digest(tar));
  for (size_t i = 0; i < blob.size(); i += 5) {
    REQUIRE(applier.Feed(blob.data() + i, std::min<size_t>(5, blob.size() - i)).ok());
  }
  REQUIRE(applier.Finish().ok());
  std::ifstream motd(root.tmp.path + "/root/etc/motd");
  CHECK(std::string(std::istreambuf_iterator<char>(motd), {}) == "hello");

  // From a spool file, uncompressed.
  Root other;
  const std::string path = other.tmp.Write("layer.tar", tar);
  LayerApplier plain(other.fd, &other.finish, LayerCompression::kNone, Sha256Digest(tar));
  REQUIRE(plain.ApplyFile(path).ok());
  CHECK(fs::exists(other.tmp.path + "/root/etc/motd"));
}

TEST_CASE("a layer whose content is not its diff id is refused") {
  const std::string tar = TarBuilder().File("a", "1").Finish();
  Root root;
  LayerApplier applier(root.fd, &root.finish, LayerCompression::kNone,
                       "sha256:" + std::string(64, '0'));
  REQUIRE(applier.Feed(tar.data(), tar.size()).ok());
  const absl::Status st = applier.Finish();
  CHECK(st.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(st.message()), Catch::Contains("not its diff id sha256:000"));
}

TEST_CASE("a layer that unpacks to more than its budget is stopped there") {
  const std::string tar = TarBuilder().File("big", std::string(100'000, 'x')).Finish();
  const std::string blob = Gzip(tar);  // about 100 bytes that inflate to 100 kB: a small bomb
  Root root;
  LayerApplier applier(root.fd, &root.finish, LayerCompression::kGzip, Sha256Digest(tar), 50'000);
  const absl::Status st = applier.Feed(blob.data(), blob.size());
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK(applier.bytes() > 50'000);
  CHECK(applier.bytes() < 60'000 + (256 << 10));
}

}  // namespace registry_parts_test
}  // namespace tessera::worker::image
