// The security suite, the network (real tessera-server, tessera-worker, mcli, curl and openssl,
// real TLS): every listener speaks TLS only and checks its clients' certificates; a worker joins
// with a one-time token and acts over mutual TLS as its node only; a renewed certificate is
// served without a restart; plain text is refused off loopback; slow and oversized HTTP clients
// are cut off.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_worker.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"

namespace tessera::testing {
namespace tls_join_test {

constexpr const char* kScrapeToken = "tls-plane-scrape-token-0123456789";

// A TLS control plane: tessera-server with the services' certificate and the CA's key (it signs
// the certificates of nodes that join), an admin, and a client that checks the server.
struct TlsPlane {
  explicit TlsPlane(std::vector<std::string> extra = {}) {
    auto started = PostgresServer::Start();
    REQUIRE(started.ok());
    pg = *std::move(started);
    std::vector<std::string> flags = pki.ServerFlags();
    // /metrics for the holders of a scrape token, as deploy/cluster.sh starts it.
    const std::string token_file = dir.path + "/metrics.token";
    std::ofstream(token_file) << kScrapeToken << "\n";
    ::chmod(token_file.c_str(), 0600);
    flags.insert(flags.end(), {"--metrics-token-file", token_file});
    flags.insert(flags.end(), extra.begin(), extra.end());
    server = StartServer("tessera-server", pg->url(), flags);
    admin_key = CreateKey(pg->url(), "ops", "admin");
    client = std::make_unique<Client>(TlsChannel(endpoint(), pki.ca()), admin_key);
  }
  std::string endpoint() const { return "localhost:" + std::to_string(server.grpc_port); }
  std::string JoinToken(const std::string& node) {
    auto out = RunCommand({BinaryPath("tessera-server"), "--database-url", pg->url(), "--log-level",
                           "warn", "create-join-token", "--node", node});
    REQUIRE(out.ok());
    return std::string(absl::StripAsciiWhitespace(*out));
  }
  // Starts a worker that joins with a token file holding `token`.
  Process StartJoiningWorker(const std::string& node, const std::string& token,
                             const std::string& dir, const std::string& rank_user = "") {
    std::filesystem::create_directories(dir);
    const std::string token_file = dir + "/join.token";
    std::ofstream(token_file) << token << "\n";
    ::chmod(token_file.c_str(), 0600);
    const auto [metrics_cert, metrics_key] = pki.MetricsCertificate(node);
    auto p = Process::Start({BinaryPath("tessera-worker"),
                             "--scheduler-endpoint",
                             endpoint(),
                             "--join-token-file",
                             token_file,
                             "--tls-ca",
                             pki.ca(),
                             "--node-name",
                             node,
                             "--cluster",
                             "local",
                             "--address",
                             "127.0.0.1",
                             "--simulate-gpus",
                             "1",
                             "--state-dir",
                             dir + "/state",
                             "--rank-user",
                             rank_user.empty() ? (::geteuid() == 0 ? "root" : "") : rank_user,
                             "--metrics-listen",
                             "127.0.0.1:0",
                             "--metrics-tls-cert",
                             metrics_cert,
                             "--metrics-tls-key",
                             metrics_key},
                            TempLog("worker-" + node));
    REQUIRE(p.ok());
    return *std::move(p);
  }
  std::string Curl(const std::string& args) {
    return RunShell(absl::StrCat("curl -sS --max-time 20 --cacert ", pki.ca(), " ", args, " 2>&1"))
        .output;
  }

  TestPki pki;
  std::unique_ptr<PostgresServer> pg;
  ServerProcess server;
  std::string admin_key;
  std::unique_ptr<Client> client;
  TempDir dir{"tessera-tls"};
};

std::unique_ptr<grpc::ClientContext> WithKey(const std::string& key) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

TEST_CASE("every listener speaks TLS only, and checks who its clients are", "[security]") {
  TlsPlane p;
  // gRPC: with the CA, yes; in plain text, or without the CA, no.
  v1::WhoAmIResponse who;
  REQUIRE(p.client->admin->WhoAmI(p.client->Ctx().get(), v1::WhoAmIRequest(), &who).ok());
  CHECK(who.user() == "ops");
  Client plain(p.server.endpoint(), p.admin_key);
  CHECK(plain.admin->WhoAmI(WithKey(p.admin_key).get(), v1::WhoAmIRequest(), &who).error_code() ==
        grpc::StatusCode::UNAVAILABLE);
  Client unverified(TlsChannel(p.endpoint(), ""), p.admin_key);
  CHECK(unverified.admin->WhoAmI(WithKey(p.admin_key).get(), v1::WhoAmIRequest(), &who)
            .error_code() == grpc::StatusCode::UNAVAILABLE);

  // REST and /metrics: HTTPS with the CA; plain HTTP gets no answer.
  const std::string http = std::to_string(p.server.http_port);
  const std::string whoami = p.Curl(absl::StrCat("-H 'Authorization: Bearer ", p.admin_key,
                                                 "' https://localhost:", http, "/api/v1/whoami"));
  CHECK(absl::StrContains(whoami, "\"user\":\"ops\""));
  CHECK_FALSE(absl::StrContains(p.Curl(absl::StrCat("-H 'Authorization: Bearer ", p.admin_key,
                                                    "' http://localhost:", http, "/api/v1/whoami")),
                                "\"user\""));
  auto metrics_line = p.server.process.WaitForLine("metrics on https://");
  REQUIRE(metrics_line.ok());
  // "... metrics on https://127.0.0.1:PORT/metrics": /metrics only with the scrape token, over
  // HTTPS; /healthz for anyone.
  std::string metrics_at = metrics_line->substr(0, metrics_line->rfind("/metrics"));
  metrics_at = "https://localhost:" + metrics_at.substr(metrics_at.rfind(':') + 1);
  const std::string no_token = p.Curl("-o /dev/null -w '%{http_code}' " + metrics_at + "/metrics");
  CHECK(no_token == "401");
  const std::string wrong = p.Curl(absl::StrCat("-w '%{http_code}' -H 'Authorization: Bearer ",
                                                p.admin_key, "' ", metrics_at, "/metrics"));
  CHECK(absl::EndsWith(wrong, "401"));
  CHECK_FALSE(absl::StrContains(wrong, "tessera_"));
  const std::string scraped = p.Curl(
      absl::StrCat("-H 'Authorization: Bearer ", kScrapeToken, "' ", metrics_at, "/metrics"));
  CHECK(absl::StrContains(scraped, "# TYPE tessera_"));
  CHECK(p.Curl(metrics_at + "/healthz") == "ok");
  CHECK_FALSE(absl::StrContains(
      p.Curl(absl::StrCat("-H 'Authorization: Bearer ", kScrapeToken, "' http://localhost:",
                          metrics_at.substr(metrics_at.rfind(':') + 1), "/metrics")),
      "tessera_"));

  // mcli: TLS with the CA; without it, a plain-text attempt that fails, naming the endpoint.
  const std::string mcli = absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_API_KEY=", p.admin_key,
                                        " ", BinaryPath("mcli"), " --endpoint ", p.endpoint());
  ShellResult ok = RunShell(mcli + " --ca " + p.pki.ca() + " whoami");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK(absl::StrContains(ok.output, "ops"));
  ShellResult refused = RunShell(mcli + " whoami");
  CHECK(refused.exit_code != 0);
  // Across a network, mcli does not even try plain text with a key.
  ShellResult remote =
      RunShell(absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_API_KEY=k ", BinaryPath("mcli"),
                            " --endpoint 10.255.255.1:50051 whoami"));
  CHECK(remote.exit_code == 2);
  CHECK(absl::StrContains(remote.output, "--ca FILE"));
}

TEST_CASE("plain text is refused on an address other machines reach", "[security]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  ShellResult r =
      RunShell(absl::StrCat(BinaryPath("tessera-server"), " --database-url '", (*pg)->url(),
                            "' --plaintext --grpc-listen 0.0.0.0:0"
                            " --metrics-listen 127.0.0.1:0 --http-listen '' 2>&1"));
  CHECK(r.exit_code == 2);
  CHECK(absl::StrContains(r.output, "--grpc-listen 0.0.0.0:0"));
  CHECK(absl::StrContains(r.output, "loopback"));
  // And TLS without its files names the flag.
  r = RunShell(absl::StrCat(BinaryPath("tessera-server"), " --database-url '", (*pg)->url(),
                            "' --grpc-listen 127.0.0.1:0 2>&1"));
  CHECK(r.exit_code == 2);
  CHECK(absl::StrContains(r.output, "--tls-cert is required"));
}

TEST_CASE("a worker joins once with its token and runs over mutual TLS as its node", "[security]") {
  TlsPlane p;
  const std::string token = p.JoinToken("node-a");
  Process worker = p.StartJoiningWorker("node-a", token, p.dir.path + "/node-a");
  auto registered = worker.WaitForLine("registered node node-a", absl::Seconds(30));
  INFO(worker.Log());
  REQUIRE(registered.ok());
  // Its credentials: made on the node, kept where only the worker reads them: not its ranks.
  const std::string creds = p.dir.path + "/node-a/state/credentials";
  for (const char* f : {"node-api.key", "node.key"}) {
    struct stat st;
    REQUIRE(::stat((creds + "/" + f).c_str(), &st) == 0);
    CHECK((st.st_mode & 077) == 0);
  }
  struct stat dir_st;
  REQUIRE(::stat(creds.c_str(), &dir_st) == 0);
  CHECK((dir_st.st_mode & 077) == 0);
  const std::string node_key =
      std::string(absl::StripAsciiWhitespace(ReadFile(creds + "/node-api.key")));
  // The certificate the CA gave it is a client's: whoever takes the node cannot pose as a
  // server with it. Its /metrics is served with the server certificate made for its name.
  ShellResult as_server = RunShell(absl::StrCat("openssl verify -CAfile ", p.pki.ca(),
                                                " -purpose sslserver ", creds, "/node.pem 2>&1"));
  INFO(as_server.output);
  CHECK(as_server.exit_code != 0);
  CHECK(RunShell(absl::StrCat("openssl verify -CAfile ", p.pki.ca(), " -purpose sslclient ", creds,
                              "/node.pem"))
            .exit_code == 0);
  auto running = worker.WaitForLine("running; metrics=");
  REQUIRE(running.ok());
  const std::string metrics_port =
      std::string(absl::StripAsciiWhitespace(running->substr(running->rfind('=') + 1)));
  CHECK(p.Curl(absl::StrCat("--resolve node-a:", metrics_port,
                            ":127.0.0.1 https://node-a:", metrics_port, "/healthz")) == "ok");

  // A run's output comes back over the worker's mutual-TLS log stream.
  v1::SubmitRunRequest submit;
  submit.mutable_spec()->set_name("hello");
  submit.mutable_spec()->set_command("echo hello-over-tls-$RANK");
  submit.mutable_spec()->set_launch(v1::LAUNCH_MODE_RANK);
  submit.mutable_spec()->mutable_compute()->set_gpus(1);
  submit.mutable_spec()->mutable_compute()->set_cluster("local");
  v1::SubmitRunResponse submitted;
  REQUIRE(p.client->runs->SubmitRun(p.client->Ctx().get(), submit, &submitted).ok());
  p.client->WaitForStatus(submitted.run().name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  auto logs = v1::LogService::NewStub(TlsChannel(p.endpoint(), p.pki.ca()));
  // A run's whole log, read again until it holds `last` (the log service may be a moment behind
  // the run's end) or 5 s have passed.
  const auto log_of = [&](const std::string& run, const std::string& last) {
    std::string text;
    for (int i = 0; i < 50 && !absl::StrContains(text, last); ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      text.clear();
      v1::GetLogsRequest get;
      get.set_run_name(run);
      auto ctx = WithKey(p.admin_key);
      auto reader = logs->GetLogs(ctx.get(), get);
      v1::LogLine line;
      while (reader->Read(&line)) text += line.text();
      reader->Finish();
    }
    return text;
  };
  CHECK(absl::StrContains(log_of(submitted.run().name(), "hello-over-tls-0"), "hello-over-tls-0"));

  SECTION("a rank of another user reads none of the node's credentials") {
    Process snooped =
        p.StartJoiningWorker("node-b", p.JoinToken("node-b"), p.dir.path + "/node-b", "nobody");
    REQUIRE(snooped.WaitForLine("registered node node-b", absl::Seconds(30)).ok());
    // The test's own folders are private (mkdtemp): let the rank pass through to its own.
    std::filesystem::permissions(p.dir.path, std::filesystem::perms::owner_all |
                                                 std::filesystem::perms::group_exec |
                                                 std::filesystem::perms::others_exec);
    std::filesystem::permissions(p.dir.path + "/node-b", std::filesystem::perms::owner_all |
                                                             std::filesystem::perms::group_exec |
                                                             std::filesystem::perms::others_exec);
    const std::string state = p.dir.path + "/node-b/state";
    v1::SubmitRunRequest snoop = submit;
    snoop.mutable_spec()->set_name("snoop");
    snoop.mutable_spec()->set_command(absl::StrCat(
        "cat ", state, "/credentials/* ", state, "/credentials/.* 2>&1; ls ", state,
        "/credentials 2>&1; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c tsk_; "
        "echo snooped"));
    snoop.mutable_spec()->mutable_compute()->add_node_names("node-b");
    v1::SubmitRunResponse snooping;
    REQUIRE(p.client->runs->SubmitRun(p.client->Ctx().get(), snoop, &snooping).ok());
    p.client->WaitForStatus(snooping.run().name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
    const std::string out = log_of(snooping.run().name(), "snooped");
    INFO(out);
    CHECK(absl::StrContains(out, "snooped"));
    // In the sandbox the worker's state folder is an empty tmpfs: the credentials are not even
    // there (without it, their folder's mode refuses the rank).
    CHECK((absl::StrContains(out, "No such file or directory") ||
           absl::StrContains(out, "Permission denied")));
    CHECK_FALSE(absl::StrContains(out, "tsk_"));
    CHECK_FALSE(absl::StrContains(out, "PRIVATE KEY"));
  }
  SECTION("the token was spent: another worker cannot join with it") {
    Process second = p.StartJoiningWorker("node-a", token, p.dir.path + "/again");
    auto refused = second.WaitForLine("already used", absl::Seconds(30));
    INFO(second.Log());
    CHECK(refused.ok());
  }
  SECTION("its key is useless without its certificate, or with another node's") {
    auto control = [&](const std::shared_ptr<grpc::Channel>& channel) {
      auto stub = v1::WorkerControl::NewStub(channel);
      auto ctx = WithKey(node_key);
      auto stream = stub->Connect(ctx.get());
      v1::WorkerMessage reg;
      *reg.mutable_register_()->mutable_node() = SimulatedNode("node-a");
      reg.mutable_register_()->set_process_id("stolen-key");
      stream->Write(reg);
      v1::ControlMessage m;
      while (stream->Read(&m)) {
      }
      return stream->Finish();
    };
    const grpc::Status bare = control(TlsChannel(p.endpoint(), p.pki.ca()));
    CHECK(bare.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(bare.error_message(), "client certificate of node:node-a"));
    const auto [other_cert, other_key] = p.pki.NodeCertificate("node-b");
    const grpc::Status other = control(TlsChannel(p.endpoint(), p.pki.ca(), other_cert, other_key));
    CHECK(other.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(other.error_message(), "node:node-b"));
    // The real worker kept its stream all along.
    CHECK(worker.Running());
  }
  SECTION("attack: a joined node cannot register itself into another cluster or pool") {
    // Tokens whose terms are the admin's word on what the node is.
    const auto token_with = [&](const std::string& node, const std::string& cluster) {
      v1::CreateJoinTokenRequest req;
      req.set_node(node);
      req.mutable_terms()->set_cluster(cluster);
      (*req.mutable_terms()->mutable_labels())["pool"] = "team-a";
      v1::CreateJoinTokenResponse resp;
      REQUIRE(p.client->admin->CreateJoinToken(p.client->Ctx().get(), req, &resp).ok());
      return resp.secret();
    };
    // The worker says "--cluster local"; its token says pool-a: it never registers.
    Process moved =
        p.StartJoiningWorker("node-c", token_with("node-c", "pool-a"), p.dir.path + "/node-c");
    auto refused = moved.WaitForLine("which allow cluster pool-a", absl::Seconds(30));
    INFO(moved.Log());
    CHECK(refused.ok());
    v1::GetNodeRequest get;
    get.set_name("node-c");
    v1::GetNodeResponse got;
    CHECK(p.client->scheduler->GetNode(p.client->Ctx().get(), get, &got).error_code() ==
          grpc::StatusCode::NOT_FOUND);
    // Within its terms it registers, wearing the token's labels.
    Process kept =
        p.StartJoiningWorker("node-d", token_with("node-d", "local"), p.dir.path + "/node-d");
    REQUIRE(kept.WaitForLine("registered node node-d", absl::Seconds(30)).ok());
    get.set_name("node-d");
    REQUIRE(p.client->scheduler->GetNode(p.client->Ctx().get(), get, &got).ok());
    CHECK(got.node().labels().at("pool") == "team-a");
    // The first worker and its runs were never disturbed.
    CHECK(worker.Running());
  }
  SECTION("a node certificate does not make a node key an admin") {
    v1::CreateApiKeyRequest req;
    req.set_user("evil");
    req.set_role(v1::ROLE_ADMIN);
    v1::CreateApiKeyResponse resp;
    const auto [cert, key] = std::make_pair(creds + "/node.pem", creds + "/node.key");
    Client as_node(TlsChannel(p.endpoint(), p.pki.ca(), cert, key), node_key);
    CHECK(as_node.admin->CreateApiKey(as_node.Ctx().get(), req, &resp).error_code() ==
          grpc::StatusCode::PERMISSION_DENIED);
  }
}

TEST_CASE("a renewed certificate is served without a restart", "[security]") {
  TlsPlane p;
  const std::string before = ServedCertificateSerial(p.server.grpc_port, p.pki.ca());
  const std::string http_before = ServedCertificateSerial(p.server.http_port, p.pki.ca());
  REQUIRE_FALSE(before.empty());
  REQUIRE_FALSE(http_before.empty());
  p.pki.RenewServices();
  std::string after = before, http_after = http_before;
  for (int i = 0; i < 100 && (after == before || http_after == http_before); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = ServedCertificateSerial(p.server.grpc_port, p.pki.ca());
    http_after = ServedCertificateSerial(p.server.http_port, p.pki.ca());
  }
  CHECK(after != before);
  CHECK(http_after != http_before);
  CHECK_FALSE(after.empty());
  v1::WhoAmIResponse who;
  CHECK(p.client->admin->WhoAmI(p.client->Ctx().get(), v1::WhoAmIRequest(), &who).ok());
}

// A client that starts a request and then sends nothing: it is cut off after the request
// timeout, in the TLS handshake or in its header.
int SecondsUntilClosed(int port, const std::string& ca, bool handshake) {
  const std::string script = absl::StrCat(
      "import socket, ssl, time\n"
      "s = socket.create_connection(('127.0.0.1', ",
      port, "))\n",
      handshake ? absl::StrCat("c = ssl.create_default_context(cafile='", ca,
                               "')\ns = c.wrap_socket(s, server_hostname='localhost')\n"
                               "s.sendall(b'GET /api/v1/whoami HTTP/1.1\\r\\nHost: x\\r\\n')\n")
                : "",
      "t = time.time()\n"
      "try:\n"
      "    while s.recv(1024): pass\n"
      "except Exception: pass\n"
      "print(int(time.time() - t))\n");
  const std::string file = TempLog("slow-client.py");
  std::ofstream(file) << script;
  ShellResult r = RunShell("/usr/bin/python3 " + file);
  INFO(r.output);
  return r.exit_code == 0 ? std::atoi(r.output.c_str()) : -1;
}

TEST_CASE("the HTTPS gateway cuts off slow clients and refuses oversized bodies", "[security]") {
  TlsPlane p({"--http-request-timeout-seconds", "2"});
  const int port = p.server.http_port;
  // Connected, no TLS handshake: closed after the timeout, not held forever.
  const int silent = SecondsUntilClosed(port, p.pki.ca(), /*handshake=*/false);
  CHECK(silent >= 1);
  CHECK(silent <= 5);
  // A header started and never finished.
  const int dribbling = SecondsUntilClosed(port, p.pki.ca(), /*handshake=*/true);
  CHECK(dribbling >= 1);
  CHECK(dribbling <= 5);
  // A body over 4 MiB: 413.
  const std::string big = TempLog("big-body");
  RunShell("head -c 5000000 /dev/zero | tr '\\0' 'x' > " + big);
  const std::string code =
      p.Curl(absl::StrCat("-o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ", p.admin_key,
                          "' -H 'Content-Type: application/json' --data-binary @", big,
                          " https://localhost:", port, "/api/v1/runs"));
  CHECK(absl::StrContains(code, "413"));
  // The gateway still answers.
  CHECK(absl::StrContains(p.Curl(absl::StrCat("-H 'Authorization: Bearer ", p.admin_key,
                                              "' https://localhost:", port, "/api/v1/whoami")),
                          "\"user\":\"ops\""));
}

}  // namespace tls_join_test
}  // namespace tessera::testing
