#include "bench/goodput/split_cluster.h"

#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/support/binaries.h"
#include "tests/support/loopback_port.h"

namespace tessera::bench {

using testing::BinaryPath;

absl::StatusOr<std::unique_ptr<SplitCluster>> SplitCluster::Start(
    const SplitClusterOptions& options) {
  std::unique_ptr<SplitCluster> c(new SplitCluster(options));
  auto pg = testing::PostgresServer::Start();
  if (!pg.ok()) return pg.status();
  c->pg_ = *std::move(pg);
  auto admin = testing::CreateApiKey(c->pg_->url(), "ops", "admin");
  if (!admin.ok()) return admin.status();
  c->admin_key_ = *admin;
  c->shared_ = options.root + "/shared";
  std::filesystem::create_directories(c->shared_);
  for (const char* role : {"runs", "sched0", "sched1", "cordon", "logs", "health"}) {
    auto port = testing::LoopbackPort();
    if (!port.ok()) return port.status();
    c->endpoints_[role] = absl::StrCat("127.0.0.1:", *port);
  }
  for (const char* role : {"runs", "sched0", "cordon", "logs", "health", "sched1"}) {
    if (auto st = c->StartService(role); !st.ok()) return st;
  }
  auto channel = [](const std::string& at) {
    return grpc::CreateChannel(at, grpc::InsecureChannelCredentials());
  };
  c->runs = v1::RunService::NewStub(channel(c->endpoints_["runs"]));
  c->cordon = v1::CordonService::NewStub(channel(c->endpoints_["cordon"]));
  c->health = v1::HealthService::NewStub(channel(c->endpoints_["health"]));
  c->logs = v1::LogService::NewStub(channel(c->endpoints_["logs"]));
  c->schedulers[0] = v1::SchedulerService::NewStub(channel(c->endpoints_["sched0"]));
  c->schedulers[1] = v1::SchedulerService::NewStub(channel(c->endpoints_["sched1"]));
  for (int i = 0; i < options.workers; ++i) {
    if (auto st = c->StartWorker(absl::StrCat("node-", i)); !st.ok()) return st;
  }
  return c;
}

SplitCluster::~SplitCluster() {
  for (auto& [name, p] : workers_) (void)p.Kill(SIGKILL);
  for (auto& [role, p] : services_) {
    ::kill(p.pid(), SIGCONT);  // a frozen process cannot die of SIGKILL before it runs again
    (void)p.Kill(SIGKILL);
  }
}

std::string SplitCluster::ProcessLog(const std::string& name) {
  return absl::StrCat(options_.root, "/", name, "-", log_counter_++, ".log");
}

absl::Status SplitCluster::StartService(const std::string& role) {
  const std::string schedulers = absl::StrCat(endpoints_["sched0"], ",", endpoints_["sched1"]);
  std::vector<std::string> flags;
  std::string binary;
  if (role == "runs") {
    binary = "tessera-runs";
    // The bench's runs set an 8 s hang_timeout.
    flags = {"--scheduler-endpoint",       schedulers, "--logs-endpoint",   endpoints_["logs"],
             "--min-hang-timeout-seconds", "1",        "--allow-host-image"};
  } else if (role == "sched0" || role == "sched1") {
    binary = "tessera-scheduler";
    flags = {"--runs-endpoint",   endpoints_["runs"],
             "--health-endpoint", endpoints_["health"],
             "--lease-seconds",   std::to_string(options_.lease_seconds),
             "--loss-seconds",    absl::StrCat(options_.loss_seconds)};
  } else if (role == "cordon") {
    binary = "tessera-cordon";
  } else if (role == "logs") {
    binary = "tessera-logs";
    flags = {"--runs-endpoint", endpoints_["runs"]};
  } else if (role == "health") {
    binary = "tessera-health";
    flags = {"--scheduler-endpoint",  schedulers,
             "--cordon-endpoint",     endpoints_["cordon"],
             "--runs-endpoint",       endpoints_["runs"],
             "--move-off-stragglers", options_.move_off_stragglers ? "true" : "false"};
  } else {
    return absl::InvalidArgumentError("no service role " + role);
  }
  std::vector<std::string> argv = {BinaryPath(binary), "--database-url",    pg_->url(),
                                   "--grpc-listen",    endpoints_.at(role), "--metrics-listen",
                                   "127.0.0.1:0",      "--plaintext"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto p = Process::Start(argv, ProcessLog(role));
  if (!p.ok()) return p.status();
  if (auto line = p->WaitForLine("listening grpc=", absl::Seconds(30)); !line.ok()) {
    return absl::InternalError(absl::StrCat(binary, " did not start: ", p->Log()));
  }
  services_.insert_or_assign(role, *std::move(p));
  return absl::OkStatus();
}

absl::StatusOr<std::string> SplitCluster::Leader() {
  for (int i = 0; i < 2; ++i) {
    auto ctx = Ctx(absl::Seconds(1));
    v1::SchedulerStatusResponse resp;
    if (schedulers[i]->GetStatus(ctx.get(), v1::SchedulerStatusRequest(), &resp).ok() &&
        resp.leader()) {
      return absl::StrCat("sched", i);
    }
  }
  return absl::UnavailableError("no scheduler leads");
}

absl::Status SplitCluster::StartWorker(const std::string& name) {
  auto key_file = testing::NodeKeyFile(pg_->url(), name, options_.root);
  if (!key_file.ok()) return key_file.status();
  std::vector<std::string> argv =
      testing::WorkerArgv(name, absl::StrCat(endpoints_["sched0"], ",", endpoints_["sched1"]),
                          *key_file, options_.root + "/" + name, options_.gpus_per_worker);
  for (const auto& flag : testing::TrainingRankEnv(shared_)) argv.push_back(flag);
  argv.insert(argv.end(), {"--log-endpoint", endpoints_["logs"], "--allow-fault-injection",
                           "--metrics-listen", "127.0.0.1:0"});
  auto p = Process::Start(argv, ProcessLog("worker-" + name));
  if (!p.ok()) return p.status();
  if (auto line = p->WaitForLine("registered node " + name, absl::Seconds(30)); !line.ok()) {
    return absl::InternalError(absl::StrCat("worker ", name, " did not register: ", p->Log()));
  }
  workers_.insert_or_assign(name, *std::move(p));
  return absl::OkStatus();
}

std::vector<std::string> SplitCluster::worker_names() const {
  std::vector<std::string> names;
  for (const auto& [name, p] : workers_) names.push_back(name);
  return names;
}

std::unique_ptr<grpc::ClientContext> SplitCluster::Ctx(absl::Duration deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + admin_key_);
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return ctx;
}

absl::StatusOr<std::string> SplitCluster::Mcli(const std::string& args) {
  testing::ShellResult r = testing::RunShell(
      absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", endpoints_["runs"],
                   " TESSERA_API_KEY=", admin_key_, " ", BinaryPath("mcli"), " ", args, " 2>&1"));
  if (r.exit_code != 0) return absl::InternalError(absl::StrCat("mcli ", args, ": ", r.output));
  return r.output;
}

}  // namespace tessera::bench
