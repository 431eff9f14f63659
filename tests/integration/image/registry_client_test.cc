// The registry client over real sockets: a scripted HTTP server for the token and Basic
// authentication flows, redirects, errors, corrupt and stalled blobs; a real docker-registry
// over TLS for certificate trust.
#include "worker/image/registry_client.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/free_port.h"
#include "tests/support/http_test_server.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"
#include "worker/image/blob_stream.h"

namespace tessera::worker::image {
namespace registry_client_test {
namespace fs = std::filesystem;
using tessera::testing::HttpTestRequest;
using tessera::testing::HttpTestResponse;
using tessera::testing::HttpTestServer;

const std::string kManifest = R"({"schemaVersion": 2, "layers": []})";
const std::string kBlob(200'000, 'b');

ImageReference RefAt(int port, const std::string& repository = "team/img") {
  return ImageReference{absl::StrCat("127.0.0.1:", port), repository, "1", ""};
}

RegistryClientOptions Plain(const HttpTestServer& server) {
  RegistryClientOptions o;
  o.base_url = server.url();
  return o;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

std::string Header(const HttpTestRequest& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

TEST_CASE(
    "a Bearer challenge is answered with a token from the realm, asked with the "
    "credentials") {
  int port = 0;
  HttpTestServer server([&](const HttpTestRequest& r) -> HttpTestResponse {
    if (absl::StartsWith(r.target, "/token?")) {
      if (Header(r, "authorization") != "Basic " + absl::Base64Escape("alice:pw")) {
        return {401, {}, R"({"errors": [{"code": "UNAUTHORIZED", "message": "bad password"}]})"};
      }
      return {200, {{"Content-Type", "application/json"}}, R"({"token": "T0K3N"})"};
    }
    if (Header(r, "authorization") != "Bearer T0K3N") {
      return {401,
              {{"WWW-Authenticate",
                absl::StrCat(R"(Bearer realm="http://127.0.0.1:)", port,
                             R"(/token",service="reg.test",scope="repository:team/img:pull")")}},
              R"({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]})"};
    }
    return {200, {{"Content-Type", "application/vnd.oci.image.manifest.v1+json"}}, kManifest};
  });
  port = server.port();
  RegistryClientOptions options = Plain(server);
  options.credentials = {"alice", "pw"};
  // A registry checked by TLS never sends credentials to a plain-HTTP token service.
  RegistryClient careful(RefAt(port), options, Soon());
  auto kept = careful.GetManifest(Sha256Digest(kManifest));
  CHECK(kept.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(kept.status().message()), Catch::Contains("is plain HTTP"));
  CHECK(server.requests().size() == 1);
  server.ClearRequests();

  options.insecure = true;  // this test's token service is plain HTTP
  RegistryClient client(RefAt(port), options, Soon());
  auto manifest = client.GetManifest(Sha256Digest(kManifest));
  INFO(manifest.status().ToString());
  REQUIRE(manifest.ok());
  CHECK(manifest->body == kManifest);
  CHECK(manifest->media_type == "application/vnd.oci.image.manifest.v1+json");
  const auto requests = server.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[1].target == "/token?service=reg.test&scope=repository%3Ateam%2Fimg%3Apull");
  CHECK(requests[2].headers.at("accept").find("application/vnd.oci.image.manifest.v1+json") !=
        std::string::npos);

  // The token is kept: the next request needs no new one.
  REQUIRE(client.GetManifest(Sha256Digest(kManifest)).ok());
  CHECK(server.requests().size() == 4);

  // Wrong credentials: the token service's refusal, in its words.
  options.credentials = {"alice", "wrong"};
  RegistryClient refused(RefAt(port), options, Soon());
  auto denied = refused.GetManifest(Sha256Digest(kManifest));
  CHECK(denied.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(
      std::string(denied.status().message()),
      Catch::Contains("token service refused") && Catch::Contains("UNAUTHORIZED: bad password"));
}

TEST_CASE("a Basic challenge is answered with the credentials, and refused without any") {
  HttpTestServer server([&](const HttpTestRequest& r) -> HttpTestResponse {
    if (Header(r, "authorization") != "Basic " + absl::Base64Escape("bob:pw")) {
      return {401, {{"WWW-Authenticate", R"(Basic realm="Registry Realm")"}}, ""};
    }
    return {200, {}, kBlob};
  });
  RegistryClientOptions options = Plain(server);
  options.credentials = {"bob", "pw"};
  RegistryClient client(RefAt(server.port()), options, Soon());
  auto blob = client.GetBlob(Sha256Digest(kBlob), 1 << 20);
  REQUIRE(blob.ok());
  CHECK(*blob == kBlob);

  RegistryClient anonymous(RefAt(server.port()), Plain(server), Soon());
  auto denied = anonymous.GetBlob(Sha256Digest(kBlob), 1 << 20);
  CHECK(denied.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(denied.status().message()),
             Catch::Contains("requires a user name and password") &&
                 Catch::Contains("no docker-registry secret"));
}

TEST_CASE("a blob redirected to another server is fetched without the registry's credentials") {
  HttpTestServer store([&](const HttpTestRequest&) -> HttpTestResponse {
    return {200, {}, kBlob};
  });
  HttpTestServer registry([&](const HttpTestRequest& r) -> HttpTestResponse {
    if (Header(r, "authorization").empty()) {
      return {401, {{"WWW-Authenticate", R"(Basic realm="r")"}}, ""};
    }
    return {307, {{"Location", store.url() + "/signed/blob?sig=abc"}}, ""};
  });
  RegistryClientOptions options = Plain(registry);
  options.credentials = {"carol", "pw"};
  // A registry checked by TLS is not followed to plain HTTP.
  RegistryClient strict(RefAt(registry.port()), options, Soon());
  auto downgraded = strict.GetBlob(Sha256Digest(kBlob), 1 << 20);
  CHECK(downgraded.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(downgraded.status().message()), Catch::Contains("without TLS"));
  CHECK(store.requests().empty());

  options.insecure = true;  // these test servers are plain HTTP
  RegistryClient client(RefAt(registry.port()), options, Soon());
  std::string got;
  const absl::Status st = client.StreamBlob(Sha256Digest(kBlob), [&](const char* d, size_t n) {
    got.append(d, n);
    return absl::OkStatus();
  });
  INFO(st.ToString());
  REQUIRE(st.ok());
  CHECK(got == kBlob);
  const auto at_store = store.requests();
  REQUIRE(at_store.size() == 1);
  CHECK(at_store[0].target == "/signed/blob?sig=abc");
  CHECK(at_store[0].headers.count("authorization") == 0);
}

TEST_CASE("the registry's errors and a corrupt blob become clear statuses") {
  HttpTestServer server([&](const HttpTestRequest& r) -> HttpTestResponse {
    if (absl::StrContains(r.target, "missing")) {
      return {404, {}, R"({"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown"}]})"};
    }
    if (absl::StrContains(r.target, "busy")) return {503, {}, "try later"};
    if (absl::StrContains(r.target, "odd")) return {418, {}, ""};
    return {200, {}, kBlob + "tampered"};
  });
  RegistryClient client(RefAt(server.port(), "missing/x"), Plain(server), Soon());
  auto missing = client.GetBlob(Sha256Digest(kBlob), 1 << 20);
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains("HTTP 404") && Catch::Contains("BLOB_UNKNOWN: blob unknown"));
  RegistryClient busy(RefAt(server.port(), "busy/x"), Plain(server), Soon());
  CHECK(busy.GetBlob(Sha256Digest(kBlob), 1 << 20).status().code() ==
        absl::StatusCode::kUnavailable);
  RegistryClient odd(RefAt(server.port(), "odd/x"), Plain(server), Soon());
  CHECK(odd.GetBlob(Sha256Digest(kBlob), 1 << 20).status().code() == absl::StatusCode::kUnknown);

  RegistryClient tampered(RefAt(server.port()), Plain(server), Soon());
  auto corrupt = tampered.GetBlob(Sha256Digest(kBlob), 1 << 20);
  CHECK(corrupt.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(corrupt.status().message()),
             Catch::Contains("not " + Sha256Digest(kBlob)));
  auto manifest = tampered.GetManifest(Sha256Digest(kBlob));
  CHECK(manifest.status().code() == absl::StatusCode::kDataLoss);
  // Longer than its manifest says: stopped there.
  const absl::Status longer = tampered.StreamBlob(
      Sha256Digest(kBlob), [](const char*, size_t) { return absl::OkStatus(); }, 1000);
  CHECK(longer.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(longer.message()), Catch::Contains("than the 1000 bytes"));
  // Bigger than the caller allows: stopped, not read whole.
  CHECK(tampered.GetBlob(Sha256Digest(kBlob), 1000).status().code() ==
        absl::StatusCode::kResourceExhausted);

  // Nothing listens.
  const int closed = tessera::testing::FreePort();
  RegistryClientOptions nowhere;
  nowhere.base_url = absl::StrCat("http://127.0.0.1:", closed);
  RegistryClient unreachable(RefAt(closed), nowhere, Soon());
  CHECK(unreachable.GetBlob(Sha256Digest(kBlob), 1 << 20).status().code() ==
        absl::StatusCode::kUnavailable);
  // No time left.
  RegistryClient late(RefAt(server.port()), Plain(server), absl::Now() - absl::Seconds(1));
  CHECK(late.GetBlob(Sha256Digest(kBlob), 1 << 20).status().code() ==
        absl::StatusCode::kDeadlineExceeded);
}

TEST_CASE("a stalled blob is given up after the stall timeout, or at once when stopped") {
  HttpTestServer server([&](const HttpTestRequest&) -> HttpTestResponse {
    HttpTestResponse r{200, {}, kBlob};
    r.stall_after = 1000;
    return r;
  });
  RegistryClientOptions options = Plain(server);
  options.stall_timeout = absl::Seconds(1);
  RegistryClient client(RefAt(server.port()), options, Soon());
  const absl::Time start = absl::Now();
  const absl::Status stalled =
      client.StreamBlob(Sha256Digest(kBlob), [](const char*, size_t) { return absl::OkStatus(); });
  CHECK(stalled.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(stalled.message()), Catch::Contains("stalled"));
  CHECK(absl::Now() - start < absl::Seconds(10));

  std::atomic<bool> stop{false};
  options.stall_timeout = absl::Seconds(60);
  options.stop_flags = {&stop};
  RegistryClient stoppable(RefAt(server.port()), options, Soon());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const absl::Time t0 = absl::Now();
  const absl::Status stopped = stoppable.StreamBlob(
      Sha256Digest(kBlob), [](const char*, size_t) { return absl::OkStatus(); });
  stopper.join();
  CHECK(stopped.code() == absl::StatusCode::kCancelled);
  CHECK(absl::Now() - t0 < absl::Seconds(5));
}

TEST_CASE("a registry's TLS certificate is trusted from certs.d, or not checked when insecure") {
  if (!fs::exists("/usr/bin/docker-registry")) {
    WARN("skipped: docker-registry is not installed");
    return;
  }
  tessera::testing::TestPki pki;
  tessera::testing::TempDir tmp{"registry_client_tls"};
  const int port = tessera::testing::FreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string config = tmp.Write(
      "registry.yml", absl::StrCat("version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n"
                                   "    rootdirectory: ",
                                   tmp.path, "/storage\nhttp:\n  addr: ", address,
                                   "\n  tls:\n    certificate: ", pki.services_cert(),
                                   "\n    key: ", pki.services_key(), "\n"));
  auto process = tessera::testing::Process::Start({"/usr/bin/docker-registry", "serve", config},
                                                  tmp.path + "/registry.log");
  REQUIRE(process.ok());
  REQUIRE(process->WaitForLine("listening on", absl::Seconds(30)).ok());
  const ImageReference ref{address, "team/img", "1", ""};
  const std::string digest = "sha256:" + std::string(64, 'a');

  // Not trusted: the system's CAs do not know the cluster's.
  RegistryClientOptions strict;
  strict.certs_dir = tmp.path + "/certs.d";
  RegistryClient untrusted(ref, strict, Soon());
  auto refused = untrusted.GetManifest(digest);
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("https://" + address));

  // Trusted through certs.d/HOST:PORT/ca.crt: the registry answers (the image does not exist).
  fs::create_directories(tmp.path + "/certs.d/" + address);
  fs::copy_file(pki.ca(), tmp.path + "/certs.d/" + address + "/ca.crt");
  RegistryClient trusted(ref, strict, Soon());
  auto answered = trusted.GetManifest(digest);
  INFO(answered.status().ToString());
  CHECK(answered.status().code() == absl::StatusCode::kNotFound);

  // Insecure: TLS unchecked (and plain HTTP only where the registry does not speak TLS).
  RegistryClientOptions insecure;
  insecure.insecure = true;
  insecure.certs_dir = "";
  RegistryClient unchecked(ref, insecure, Soon());
  CHECK(unchecked.GetManifest(digest).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace registry_client_test
}  // namespace tessera::worker::image
