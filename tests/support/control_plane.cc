#include "tests/support/control_plane.h"

#include <algorithm>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tessera::testing {

std::string TempLog(const std::string& name) {
  static int counter = 0;
  return absl::StrCat("/tmp/tessera-test-", getpid(), "-", counter++, "-", name, ".log");
}

ServerProcess StartServer(const std::string& binary, const std::string& database_url,
                          const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      BinaryPath(binary), "--database-url", database_url, "--metrics-listen",
      "127.0.0.1:0",      "--log-level",    "info"};
  if (std::find(extra.begin(), extra.end(), "--grpc-listen") == extra.end()) {
    argv.push_back("--grpc-listen");
    argv.push_back("127.0.0.1:0");
  }
  if (binary == "tessera-server" &&
      std::find(extra.begin(), extra.end(), "--http-listen") == extra.end()) {
    argv.push_back("--http-listen");
    argv.push_back("127.0.0.1:0");
  }
  // Tests run on the host unless they name an image (the sandbox_test pulls real ones).
  if ((binary == "tessera-server" || binary == "tessera-runs") &&
      std::find(extra.begin(), extra.end(), "--no-host-image") == extra.end()) {
    argv.push_back("--allow-host-image");
  }
  // Loopback in plain text, unless the test serves TLS.
  if (std::find(extra.begin(), extra.end(), "--tls-cert") == extra.end()) {
    argv.push_back("--plaintext");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto p = Process::Start(argv, TempLog(binary));
  REQUIRE(p.ok());
  auto line = p->WaitForLine("listening grpc=");
  INFO(line.status().ToString());
  REQUIRE(line.ok());
  ServerProcess s{*std::move(p), 0};
  std::string port = line->substr(line->find("grpc=") + 5);
  port = port.substr(0, port.find(' '));
  REQUIRE(absl::SimpleAtoi(port, &s.grpc_port));
  if (const auto at = line->find("http="); at != std::string::npos) {
    REQUIRE(absl::SimpleAtoi(line->substr(at + 5), &s.http_port));
  }
  return s;
}

std::string CreateKey(const std::string& database_url, const std::string& user,
                      const std::string& role, const std::string& node) {
  auto key = CreateApiKey(database_url, user, role, node);
  INFO(key.status().ToString());
  REQUIRE(key.ok());
  return *key;
}

Client::Client(const std::string& endpoint, std::string k)
    : Client(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()), std::move(k)) {}

Client::Client(const std::shared_ptr<grpc::Channel>& channel, std::string k) : key(std::move(k)) {
  runs = v1::RunService::NewStub(channel);
  scheduler = v1::SchedulerService::NewStub(channel);
  cordon = v1::CordonService::NewStub(channel);
  admin = v1::AdminService::NewStub(channel);
  secrets = v1::SecretService::NewStub(channel);
}

std::unique_ptr<grpc::ClientContext> Client::Ctx() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!key.empty()) ctx->AddMetadata("authorization", "Bearer " + key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

v1::Run Client::Submit(const std::string& name, int gpus, bool retry, const std::string& idem) {
  v1::SubmitRunRequest req;
  req.set_idempotency_key(idem);
  auto* spec = req.mutable_spec();
  spec->set_name(name);
  spec->set_command("python train.py");
  spec->mutable_compute()->set_gpus(gpus);
  spec->mutable_compute()->set_cluster("local");
  if (retry) spec->mutable_scheduling()->set_retry_on_system_failure(true);
  v1::SubmitRunResponse resp;
  grpc::Status st = runs->SubmitRun(Ctx().get(), req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp.run();
}

v1::Run Client::Get(const std::string& name) {
  v1::GetRunRequest req;
  req.set_name(name);
  v1::GetRunResponse resp;
  grpc::Status st = runs->GetRun(Ctx().get(), req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp.run();
}

v1::RunDescription Client::Describe(const std::string& name) {
  v1::DescribeRunRequest req;
  req.set_name(name);
  v1::DescribeRunResponse resp;
  grpc::Status st = runs->DescribeRun(Ctx().get(), req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp.description();
}

v1::Run Client::WaitForStatus(const std::string& name, v1::RunStatus status,
                              absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::Run run;
  while (absl::Now() < deadline) {
    run = Get(name);
    if (run.status() == status) return run;
    const bool ended = run.status() == v1::RUN_STATUS_COMPLETED ||
                       run.status() == v1::RUN_STATUS_FAILED ||
                       run.status() == v1::RUN_STATUS_STOPPED;
    if (ended) {  // it will not change any more: say so now, not at the timeout
      FAIL("run " << name << " ended " << v1::RunStatus_Name(run.status()) << " ("
                  << run.status_reason() << "), waited for " << v1::RunStatus_Name(status));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO("run " << name << " is " << v1::RunStatus_Name(run.status()) << ", waited for "
              << v1::RunStatus_Name(status));
  FAIL("timed out");
  return run;
}


}  // namespace tessera::testing
