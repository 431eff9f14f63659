// Authentication on every method, kill -9 with a full queue, and the services as separate
// processes with a standby scheduler.
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "tests/support/control_plane.h"

namespace tessera::testing {
namespace auth_and_faults_test {

// Calls `method` with an empty request over the generic API (works for unary and streaming
// methods alike) and returns the final status.
grpc::Status CallEmpty(grpc::GenericStub& stub, const std::string& method, const std::string& key) {
  grpc::ClientContext ctx;
  if (!key.empty()) ctx.AddMetadata("authorization", key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, method, &cq);
  void* tag;
  bool ok;
  auto next = [&]() { REQUIRE(cq.Next(&tag, &ok)); };
  call->StartCall(reinterpret_cast<void*>(1));
  next();
  grpc::ByteBuffer empty;
  grpc::Slice slice("", 0);
  empty = grpc::ByteBuffer(&slice, 1);
  call->Write(empty, reinterpret_cast<void*>(2));
  next();
  call->WritesDone(reinterpret_cast<void*>(3));
  next();
  grpc::ByteBuffer response;
  do {
    call->Read(&response, reinterpret_cast<void*>(4));
    next();
  } while (ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  next();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

TEST_CASE("every method of every service is UNAUTHENTICATED without a valid key",
          "[control-plane][auth]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  ServerProcess server = StartServer("tessera-server", (*pg)->url());
  grpc::GenericStub stub(
      grpc::CreateChannel(server.endpoint(), grpc::InsecureChannelCredentials()));
  const std::vector<const google::protobuf::ServiceDescriptor*> services = {
      v1::RunService::service_full_name()
          ? google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
                v1::RunService::service_full_name())
          : nullptr,
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::SchedulerService::service_full_name()),
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::CordonService::service_full_name()),
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::AdminService::service_full_name()),
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::WorkerControl::service_full_name()),
  };
  int walked = 0;
  for (const auto* service : services) {
    REQUIRE(service != nullptr);
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string method = "/" + service->full_name() + "/" + service->method(i)->name();
      for (const std::string key : {"", "Bearer tsk_not_a_real_key", "Basic abc"}) {
        grpc::Status st = CallEmpty(stub, method, key);
        INFO(method << " with key '" << key << "': " << st.error_message());
        CHECK(st.error_code() == grpc::StatusCode::UNAUTHENTICATED);
      }
      ++walked;
    }
  }
  CHECK(walked >= 25);
}

TEST_CASE("kill -9 with 1,000 queued runs loses no run and no event", "[control-plane][faults]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string user_key = CreateKey(url, "alice", "user");
  const std::string node_key = NodeKey(url, "node-1");
  // Alice submits her 1,000 runs as fast as the server answers: no rate holds her here.
  ServerProcess server = StartServer(
      "tessera-server", url, {"--lease-seconds", "30", "--max-submits-per-user-per-second", "0"});
  FakeWorker worker(server.endpoint(), node_key, SimulatedNode("node-1"));
  REQUIRE(worker.Connect().ok());
  Client alice(server.endpoint(), user_key);
  v1::Run blocker = alice.Submit("blocker", 8);  // takes the only node
  REQUIRE(worker.WaitForStart(blocker.id(), 0, absl::Seconds(10)));

  std::set<std::string> submitted;
  for (int i = 0; i < 1000; ++i) submitted.insert(alice.Submit("queued", 8).name());
  REQUIRE(submitted.size() == 1000);
  // Let the scheduler admit them, then kill it in the middle of its work.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  worker.Disconnect();
  REQUIRE(server.process.Kill(SIGKILL).ok());

  ServerProcess restarted = StartServer("tessera-server", url, {"--lease-seconds", "30"});
  Client after(restarted.endpoint(), user_key);
  v1::ListRunsRequest list;
  list.mutable_filter()->add_name_globs("queued-*");
  v1::ListRunsResponse runs;
  REQUIRE(after.runs->ListRuns(after.Ctx().get(), list, &runs).ok());
  std::set<std::string> found;
  for (const auto& r : runs.runs()) {
    found.insert(r.name());
    CHECK((r.status() == v1::RUN_STATUS_PENDING || r.status() == v1::RUN_STATUS_QUEUED));
  }
  CHECK(found == submitted);
  // Every run kept its history: created once, and queued at most once (the restarted
  // scheduler may be admitting the rest meanwhile).
  for (const auto& r : runs.runs()) {
    auto d = after.Describe(r.name());
    REQUIRE(d.events_size() >= 1);
    CHECK(d.events_size() <= 2);
    CHECK(d.events(0).message() == "Run created");
    if (d.events_size() == 2) CHECK(d.events(1).message() == "Run queued");
  }
  // The restarted scheduler goes on admitting the rest.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool all_queued = false;
  while (!all_queued && absl::Now() < deadline) {
    v1::ListRunsRequest pending;
    pending.mutable_filter()->add_statuses(v1::RUN_STATUS_PENDING);
    v1::ListRunsResponse left;
    REQUIRE(after.runs->ListRuns(after.Ctx().get(), pending, &left).ok());
    all_queued = left.runs_size() == 0;
    if (!all_queued) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(all_queued);
}

TEST_CASE("the services run as separate processes, a standby scheduler takes over",
          "[control-plane][processes]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string user_key = CreateKey(url, "alice", "user");
  const std::string admin_key = CreateKey(url, "ops", "admin");
  const std::string node_key = NodeKey(url, "node-1");

  // The run manager and the schedulers need each other's endpoints: start the run manager
  // on a fixed free port found by a throwaway listener.
  ServerProcess cordon = StartServer("tessera-cordon", url);
  ServerProcess probe = StartServer("tessera-cordon", url);
  const int runs_port = probe.grpc_port;
  REQUIRE(probe.process.Kill(SIGTERM).ok());
  const std::string runs_endpoint = "127.0.0.1:" + std::to_string(runs_port);
  const std::vector<std::string> sched_flags = {
      "--runs-endpoint", runs_endpoint, "--lease-seconds", "2", "--heartbeat-seconds", "0.2"};
  ServerProcess sched_a = StartServer("tessera-scheduler", url, sched_flags);
  ServerProcess runs =
      StartServer("tessera-runs", url,
                  {"--scheduler-endpoint", sched_a.endpoint(), "--grpc-listen", runs_endpoint});
  REQUIRE(runs.grpc_port == runs_port);
  ServerProcess sched_b = StartServer("tessera-scheduler", url, sched_flags);

  Client a(sched_a.endpoint(), admin_key), b(sched_b.endpoint(), admin_key);
  auto leader = [](Client& c) {
    v1::SchedulerStatusResponse s;
    REQUIRE(c.scheduler->GetStatus(c.Ctx().get(), {}, &s).ok());
    return s.leader();
  };
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (!leader(a) && absl::Now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(leader(a));
  CHECK_FALSE(leader(b));

  FakeWorker worker(sched_a.endpoint(), node_key, SimulatedNode("node-1"));
  REQUIRE(worker.Connect().ok());
  worker.FinishImmediately(0);
  Client alice(runs_endpoint, user_key);
  v1::Run first = alice.Submit("first", 8);
  alice.WaitForStatus(first.name(), v1::RUN_STATUS_COMPLETED);

  // The cordon service, in its own process, changes what the schedulers see.
  Client ops(cordon.endpoint(), admin_key);
  v1::DrainNodeRequest drain;
  drain.set_node_name("node-1");
  v1::DrainNodeResponse drained;
  REQUIRE(ops.cordon->DrainNode(ops.Ctx().get(), drain, &drained).ok());
  v1::UncordonNodeRequest un;
  un.set_node_name("node-1");
  v1::UncordonNodeResponse unr;
  REQUIRE(ops.cordon->UncordonNode(ops.Ctx().get(), un, &unr).ok());

  // The leader dies; the standby takes the lock, the worker reconnects to it, work goes on.
  worker.Disconnect();
  REQUIRE(sched_a.process.Kill(SIGKILL).ok());
  const absl::Time takeover = absl::Now() + absl::Seconds(10);
  while (!leader(b) && absl::Now() < takeover)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(leader(b));
  FakeWorker again(sched_b.endpoint(), node_key, SimulatedNode("node-1"));
  REQUIRE(again.Connect().ok());
  again.FinishImmediately(0);
  // The run manager still points at the dead scheduler for fit checks, so submit through a
  // run manager that knows the new leader.
  ServerProcess runs2 =
      StartServer("tessera-runs", url, {"--scheduler-endpoint", sched_b.endpoint()});
  Client alice2(runs2.endpoint(), user_key);
  v1::Run second = alice2.Submit("second", 8);
  alice2.WaitForStatus(second.name(), v1::RUN_STATUS_COMPLETED);
}

// A loopback port that accepts connections (the kernel completes them) but never answers: a
// service that is frozen.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_CASE("a call to a frozen service fails after --service-call-timeout-seconds",
          "[control-plane][processes]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string user_key = CreateKey(url, "alice", "user");
  SilentListener frozen_scheduler;
  // The run manager's fit check asks the scheduler, which never answers.
  ServerProcess runs = StartServer(
      "tessera-runs", url,
      {"--scheduler-endpoint", frozen_scheduler.endpoint(), "--service-call-timeout-seconds", "1"});
  Client alice(runs.endpoint(), user_key);
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("frozen");
  req.mutable_spec()->set_command("true");
  req.mutable_spec()->mutable_compute()->set_gpus(1);
  v1::SubmitRunResponse resp;
  const absl::Time start = absl::Now();
  const grpc::Status st = alice.runs->SubmitRun(alice.Ctx().get(), req, &resp);
  const absl::Duration took = absl::Now() - start;
  CHECK(st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  // One second, not the fit check's own default of ten.
  CHECK(took >= absl::Milliseconds(900));
  CHECK(took < absl::Seconds(5));

  // A bad value is one clear error at start.
  ShellResult bad = RunShell(std::string(TESSERA_BIN_DIR) + "/tessera-runs --database-url '" + url +
                             "' --service-call-timeout-seconds -1 2>&1");
  CHECK(bad.exit_code != 0);
  CHECK(absl::StrContains(bad.output, "--service-call-timeout-seconds"));
}

TEST_CASE("a loss lease longer than the lease, or within one heartbeat, is one clear error",
          "[control-plane][processes]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string scheduler =
      std::string(TESSERA_BIN_DIR) +
      "/tessera-scheduler --plaintext --runs-endpoint 127.0.0.1:1 --database-url '" + (*pg)->url() +
      "' ";
  ShellResult longer = RunShell(scheduler + "--lease-seconds 10 --loss-seconds 12 2>&1");
  INFO(longer.output);
  CHECK(longer.exit_code != 0);
  CHECK(absl::StrContains(longer.output, "--loss-seconds 12 is longer than --lease-seconds 10"));
  ShellResult within = RunShell(scheduler + "--heartbeat-seconds 1 --loss-seconds 1 2>&1");
  CHECK(within.exit_code != 0);
  CHECK(absl::StrContains(within.output,
                          "--loss-seconds 1 is not longer than --heartbeat-seconds 1"));
}

}  // namespace auth_and_faults_test
}  // namespace tessera::testing
