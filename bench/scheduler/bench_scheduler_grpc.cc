// bench_scheduler_grpc: the scheduler's gRPC traffic in plain text and over TLS, in the same run.
//
// The real scheduler (MakeScheduler over memory stores) behind its real adapters
// (WorkerControlService, SchedulerService) on two real gRPC servers on 127.0.0.1: one in plain
// text, one serving TLS with the services' certificate and checking clients' certificates against
// the cluster CA (made by deploy/tls-certs.sh; the nodes' certificates signed in process by the
// same CertificateAuthority the run manager uses). The load comes from a child process (this
// binary with --load), as it comes from other machines, so that the server's own CPU time per call
// can be read apart from the clients'. Two kinds of traffic, each timed on both servers:
//
//  - heartbeats: N workers, each with its own node key and (over TLS) its own node certificate,
//    register on a control stream and heartbeat back to back, each waiting for its lease renewal
//    (the production interval is 0.5 s: this is far more than N nodes send);
//  - queue reads: U clients call GetQueue (a user's key) back to back.
//
// Printed for each: calls/s end to end with p50/p99 latency (the clients and the server share the
// machine's cores, so TLS's cost on both ends is in it), and the server's CPU time per call and
// calls per second of server CPU (its capacity), with TLS over plain text for both (target: at
// least 0.8). The machine's speed drifts by tens of percent for seconds at a time, so plain text
// and TLS alternate for several rounds, and the medians of the rounds are printed.
//
// Usage: bench_scheduler_grpc [--workers N] [--readers U] [--seconds S] [--rounds R]

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/timestamps.h"
#include "scheduler/service/scheduler.h"
#include "scheduler/service/scheduler_service.h"
#include "services/common/auth/api_keys.h"
#include "services/store/stores.h"
#include "tests/support/binaries.h"
#include "transport/grpc_limits.h"
#include "transport/service_host.h"
#include "transport/tls/certificate_authority.h"

namespace tessera::scheduler {
namespace {

struct Options {
  int workers = 32;
  int readers = 4;
  double seconds = 2;
  int rounds = 5;
};

// What the scheduler asks of the run manager: a steady queue of 50 runs, nothing recorded.
class QueuedRuns final : public RunsClient {
 public:
  QueuedRuns() {
    for (int i = 0; i < 50; ++i) {
      v1::Run r;
      r.set_id(absl::StrCat("run-", i));
      r.set_name(absl::StrCat("queued-", i));
      r.set_user(i % 2 ? "alice" : "bob");
      r.set_status(v1::RUN_STATUS_QUEUED);
      r.mutable_spec()->mutable_compute()->set_gpus(64);
      r.mutable_spec()->mutable_compute()->set_cluster("c1");
      *r.mutable_created_at() = ToProtoTime(absl::Now());
      runs_.push_back(r);
    }
  }
  absl::StatusOr<std::vector<v1::Run>> ListRuns(const std::vector<v1::RunStatus>&) override {
    return runs_;
  }
  absl::StatusOr<v1::Run> RecordAttempt(const v1::Attempt&) override {
    return absl::UnimplementedError("not in this benchmark");
  }
  absl::StatusOr<std::vector<v1::SecretValue>> RunSecrets(const std::string&) override {
    return std::vector<v1::SecretValue>{};
  }
  absl::Status RecordNote(const std::string&, int, const std::string&) override {
    return absl::UnimplementedError("not in this benchmark");
  }
  absl::Status ReportProgress(const v1::ReportProgressRequest&) override {
    return absl::OkStatus();
  }

 private:
  std::vector<v1::Run> runs_;
};

std::string ReadFile(const std::string& path) {
  auto contents = ReadWholeFile(path);
  if (!contents.ok()) {
    std::fprintf(stderr, "%s\n", contents.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(contents);
}

std::string MakeKey(store::ApiKeyStore& keys, const std::string& user, v1::Role role,
                    const std::string& node = "") {
  store::ApiKeyRecord r;
  const std::string secret = auth::NewSecret();
  r.secret_hash = auth::HashSecret(secret);
  r.key.set_id(auth::NewKeyId());
  r.key.set_user(user);
  r.key.set_role(role);
  r.key.set_node(node);
  if (!keys.CreateKey(r).ok()) std::exit(1);
  return secret;
}

struct Figures {
  double calls = 0;
  double per_second = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double server_cpu_seconds = 0;  // filled in by the parent
};

Figures Summarize(std::vector<double>& latencies_ms, double seconds) {
  Figures f;
  if (latencies_ms.empty()) return f;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  f.calls = static_cast<double>(latencies_ms.size());
  f.per_second = f.calls / seconds;
  f.p50_ms = latencies_ms[latencies_ms.size() / 2];
  f.p99_ms = latencies_ms[std::min(latencies_ms.size() - 1, latencies_ms.size() * 99 / 100)];
  return f;
}

// A worker's credentials: its node key and, for TLS, its certificate and private key.
struct Node {
  std::string name;
  std::string key;
  std::string cert_pem;
  std::string key_pem;
};

std::shared_ptr<grpc::Channel> Channel(const std::string& endpoint, const std::string& ca_pem,
                                       const std::string& cert_pem, const std::string& key_pem) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per client, as workers
  ApplyTransportSettings(args);                        // as the workers' channels
  if (ca_pem.empty()) {
    return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_pem;
  o.pem_cert_chain = cert_pem;
  o.pem_private_key = key_pem;
  return grpc::CreateCustomChannel(endpoint, grpc::SslCredentials(o), args);
}

Figures Heartbeats(const std::string& endpoint, const std::string& ca_pem,
                   const std::vector<Node>& nodes, double seconds) {
  std::vector<std::vector<double>> per_worker(nodes.size());
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now() + absl::Milliseconds(500);  // all connected by then
  const absl::Time end = start + absl::Seconds(seconds);
  for (size_t i = 0; i < nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      const Node& n = nodes[i];
      auto stub = v1::WorkerControl::NewStub(Channel(endpoint, ca_pem, n.cert_pem, n.key_pem));
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", "Bearer " + n.key);
      auto stream = stub->Connect(&ctx);
      v1::WorkerMessage reg;
      auto* node = reg.mutable_register_()->mutable_node();
      node->set_name(n.name);
      node->set_cluster("c1");
      node->set_gpu_type("h100");
      node->set_gpu_count(8);
      reg.mutable_register_()->set_process_id(n.name + "-bench");
      v1::ControlMessage m;
      if (!stream->Write(reg) || !stream->Read(&m) || !m.has_registered()) {
        failed = true;
        return;
      }
      absl::SleepFor(start - absl::Now());
      for (int64_t seq = 1; absl::Now() < end; ++seq) {
        v1::WorkerMessage hb;
        hb.mutable_heartbeat()->set_sequence(seq);
        const absl::Time sent = absl::Now();
        if (!stream->Write(hb)) {
          failed = true;
          return;
        }
        do {
          if (!stream->Read(&m)) {
            failed = true;
            return;
          }
        } while (!m.has_lease_renewed() || m.lease_renewed().heartbeat_sequence() != seq);
        per_worker[i].push_back(absl::ToDoubleMilliseconds(absl::Now() - sent));
      }
      stream->WritesDone();
      ctx.TryCancel();
      stream->Finish();
    });
  }
  for (auto& t : threads) t.join();
  if (failed) {
    std::fprintf(stderr, "a heartbeat stream to %s failed\n", endpoint.c_str());
    std::exit(1);
  }
  std::vector<double> all;
  for (auto& v : per_worker) all.insert(all.end(), v.begin(), v.end());
  return Summarize(all, seconds);
}

Figures QueueReads(const std::string& endpoint, const std::string& ca_pem,
                   const std::string& user_key, int readers, double seconds) {
  std::vector<std::vector<double>> per_reader(static_cast<size_t>(readers));
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&, r] {
      auto stub = v1::SchedulerService::NewStub(Channel(endpoint, ca_pem, "", ""));
      while (absl::Now() < end) {
        grpc::ClientContext ctx;
        ctx.AddMetadata("authorization", "Bearer " + user_key);
        v1::GetQueueResponse resp;
        const absl::Time sent = absl::Now();
        if (!stub->GetQueue(&ctx, v1::GetQueueRequest(), &resp).ok()) {
          failed = true;
          return;
        }
        per_reader[static_cast<size_t>(r)].push_back(
            absl::ToDoubleMilliseconds(absl::Now() - sent));
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) {
    std::fprintf(stderr, "GetQueue on %s failed\n", endpoint.c_str());
    std::exit(1);
  }
  std::vector<double> all;
  for (auto& v : per_reader) all.insert(all.end(), v.begin(), v.end());
  return Summarize(all, seconds);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The rounds of one kind of traffic: medians of each figure and of the rounds' ratios.
void Print(const char* what, const std::vector<Figures>& plain, const std::vector<Figures>& tls) {
  const auto capacity = [](const Figures& f) { return f.calls / f.server_cpu_seconds; };
  std::printf("%s (median of %zu rounds)\n", what, plain.size());
  for (const auto& [name, rounds] :
       {std::pair<const char*, const std::vector<Figures>&>{"plain", plain}, {"TLS", tls}}) {
    std::vector<double> rate, p50, p99, cpu, cap;
    for (const Figures& f : rounds) {
      rate.push_back(f.per_second);
      p50.push_back(f.p50_ms);
      p99.push_back(f.p99_ms);
      cpu.push_back(1e6 * f.server_cpu_seconds / f.calls);
      cap.push_back(capacity(f));
    }
    std::printf(
        "  %-5s %9.0f calls/s  p50 %6.2f ms  p99 %6.2f ms | server %6.1f us CPU a call, "
        "%9.0f calls per CPU second\n",
        name, Median(rate), Median(p50), Median(p99), Median(cpu), Median(cap));
  }
  std::vector<double> end_to_end, server;
  for (size_t r = 0; r < plain.size(); ++r) {
    end_to_end.push_back(tls[r].per_second / plain[r].per_second);
    server.push_back(capacity(tls[r]) / capacity(plain[r]));
  }
  std::printf(
      "  TLS/plain: %.2f end to end (both ends on this machine), %.2f of the server's "
      "capacity (target >= 0.8); rounds %.2f-%.2f and %.2f-%.2f\n",
      Median(end_to_end), Median(server), *std::min_element(end_to_end.begin(), end_to_end.end()),
      *std::max_element(end_to_end.begin(), end_to_end.end()),
      *std::min_element(server.begin(), server.end()),
      *std::max_element(server.begin(), server.end()));
}

// CPU seconds this process has used.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Runs the load in a child process (this binary with --load) and reads its figures; the server's
// CPU time over it is this process's.
Figures LoadFromChild(const std::string& kind, const std::string& endpoint, const std::string& ca,
                      const std::string& credentials, const Options& o) {
  const std::string cmd = absl::StrCat("/proc/", ::getpid(), "/exe --load ", kind, " --endpoint ",
                                       endpoint, " --ca '", ca, "' --credentials ", credentials,
                                       " --readers ", o.readers, " --seconds ", o.seconds);
  const double cpu_before = CpuSeconds();
  FILE* child = ::popen(cmd.c_str(), "r");
  char line[512] = "";
  const bool read = child != nullptr && std::fgets(line, sizeof line, child) != nullptr;
  const int status = child != nullptr ? ::pclose(child) : -1;
  Figures f;
  if (!read || status != 0 ||
      std::sscanf(line, "%lf %lf %lf %lf", &f.calls, &f.per_second, &f.p50_ms, &f.p99_ms) != 4) {
    std::fprintf(stderr, "the load (%s) failed: %s\n", cmd.c_str(), line);
    std::exit(1);
  }
  f.server_cpu_seconds = CpuSeconds() - cpu_before;
  return f;
}

// The child: one load against one server, figures on one line.
int LoadMain(const std::string& kind, const std::string& endpoint, const std::string& ca_file,
             const std::string& credentials, const Options& o) {
  const std::string ca_pem = ca_file.empty() ? "" : ReadFile(ca_file);
  const auto doc = nlohmann::json::parse(ReadFile(credentials));
  Figures f;
  if (kind == "heartbeats") {
    std::vector<Node> nodes;
    for (const auto& n : doc.at(ca_file.empty() ? "plain_nodes" : "tls_nodes")) {
      nodes.push_back({n.at("name"), n.at("key"), n.at("cert"), n.at("private_key")});
    }
    f = Heartbeats(endpoint, ca_pem, nodes, o.seconds);
  } else {
    f = QueueReads(endpoint, ca_pem, doc.at("user_key"), o.readers, o.seconds);
  }
  std::printf("%.0f %.1f %.3f %.3f\n", f.calls, f.per_second, f.p50_ms, f.p99_ms);
  return 0;
}

int Main(const Options& o) {
  // The cluster's CA and the services' certificate, as operators make them.
  char dir_template[] = "/tmp/bench-scheduler-grpc.XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  if (const absl::Status made = testing::MakeClusterCertificates(dir); !made.ok()) {
    std::fprintf(stderr, "%s\n", made.ToString().c_str());
    return 1;
  }
  auto ca = tls::CertificateAuthority::Load(dir + "/ca.pem", dir + "/ca.key");
  if (!ca.ok()) {
    std::fprintf(stderr, "%s\n", ca.status().ToString().c_str());
    return 1;
  }

  auto clock = SystemClock::Shared();
  store::Stores stores = store::MakeMemoryStores();
  auto workers = std::make_shared<WorkerRegistry>();
  Scheduler core = MakeScheduler(
      stores.nodes, std::make_shared<QueuedRuns>(), workers,
      std::make_shared<IdempotentCalls>(stores.idempotency, clock), clock,
      SchedulerConfig{.lease = absl::Seconds(30), .heartbeat_interval = absl::Milliseconds(500)});
  auto authn = std::make_shared<auth::Authenticator>(stores.api_keys, clock);
  auto leads = [] { return true; };
  WorkerControlService plain_control(core, workers, authn, leads, leads);
  WorkerControlService tls_control(core, workers, authn, leads, leads);
  SchedulerService plain_api(core, authn, leads, "bench");
  SchedulerService tls_api(core, authn, leads, "bench");
  HostOptions plain_host{.grpc_listen = "127.0.0.1:0",
                         .metrics_listen = "127.0.0.1:0",
                         .log_level = "warn",
                         .tls = {.plaintext = true}};
  HostOptions tls_host = plain_host;
  tls_host.tls =
      tls::TlsFlags{dir + "/services.pem", dir + "/services.key", dir + "/ca.pem", false};
  auto plain_server = ServiceHost::Start(plain_host, {&plain_control, &plain_api});
  auto tls_server = ServiceHost::Start(tls_host, {&tls_control, &tls_api});
  if (!plain_server.ok() || !tls_server.ok()) {
    std::fprintf(stderr, "cannot serve\n");
    return 1;
  }
  const std::string plain_at = absl::StrCat("127.0.0.1:", (*plain_server)->grpc_port());
  const std::string tls_at = absl::StrCat("localhost:", (*tls_server)->grpc_port());

  std::vector<Node> plain_nodes, tls_nodes;
  for (int i = 0; i < o.workers; ++i) {
    for (auto* nodes : {&plain_nodes, &tls_nodes}) {
      Node n;
      n.name = absl::StrCat(nodes == &plain_nodes ? "plain-" : "tls-", i);
      n.key = MakeKey(*stores.api_keys, n.name, v1::ROLE_NODE, n.name);
      if (nodes == &tls_nodes) {
        auto pair = tls::MakeKeyAndCsr("node:" + n.name);
        if (!pair.ok()) return 1;
        auto cert = (*ca)->SignNodeCertificate(pair->csr_pem, n.name, absl::Now(), absl::Hours(1));
        if (!cert.ok()) return 1;
        n.cert_pem = cert->pem;
        n.key_pem = pair->key_pem;
      }
      nodes->push_back(n);
    }
  }
  const std::string user_key = MakeKey(*stores.api_keys, "alice", v1::ROLE_USER);
  // What the load's process gets: every node's key and certificate, as its own machines have them.
  nlohmann::json doc;
  doc["user_key"] = user_key;
  for (const auto& [field, nodes] :
       {std::pair<const char*, const std::vector<Node>&>{"plain_nodes", plain_nodes},
        {"tls_nodes", tls_nodes}}) {
    doc[field] = nlohmann::json::array();
    for (const Node& n : nodes) {
      doc[field].push_back(
          {{"name", n.name}, {"key", n.key}, {"cert", n.cert_pem}, {"private_key", n.key_pem}});
    }
  }
  const std::string credentials = dir + "/credentials.json";
  std::ofstream(credentials) << doc.dump();

  std::printf("%d workers heartbeating back to back, %d queue readers, %.1f s a load, %d rounds\n",
              o.workers, o.readers, o.seconds, o.rounds);
  // Alternated, so that drift of the shared machine falls on both alike.
  const std::string ca_file = dir + "/ca.pem";
  std::vector<Figures> hb_plain, hb_tls, q_plain, q_tls;
  for (int r = 0; r < o.rounds; ++r) {
    hb_plain.push_back(LoadFromChild("heartbeats", plain_at, "", credentials, o));
    hb_tls.push_back(LoadFromChild("heartbeats", tls_at, ca_file, credentials, o));
    q_plain.push_back(LoadFromChild("queue", plain_at, "", credentials, o));
    q_tls.push_back(LoadFromChild("queue", tls_at, ca_file, credentials, o));
  }
  Print("heartbeats", hb_plain, hb_tls);
  Print("GetQueue", q_plain, q_tls);
  std::error_code ignored;  // what cannot be removed stays in /tmp
  std::filesystem::remove_all(dir, ignored);
  return 0;
}

}  // namespace
}  // namespace tessera::scheduler

int main(int argc, char** argv) {
  tessera::scheduler::Options o;
  std::string load, endpoint, ca, credentials;
  CLI::App app{"bench_scheduler_grpc: the scheduler's gRPC traffic in plain text and over TLS"};
  app.add_option("--workers", o.workers, "workers heartbeating back to back")
      ->capture_default_str();
  app.add_option("--readers", o.readers, "clients calling GetQueue back to back")
      ->capture_default_str();
  app.add_option("--seconds", o.seconds, "how long each load runs")->capture_default_str();
  app.add_option("--rounds", o.rounds, "rounds of plain text and TLS in turn")
      ->capture_default_str();
  // The child's flags, which this binary passes to itself (LoadFromChild): not for people, so
  // left out of --help.
  app.add_option("--load", load, "heartbeats or queue: run this load alone")
      ->check(CLI::IsMember({"heartbeats", "queue"}))
      ->group("");
  app.add_option("--endpoint", endpoint, "the server the load calls")->group("");
  app.add_option("--ca", ca, "the CA file of a TLS server (none: plain text)")->group("");
  app.add_option("--credentials", credentials, "the nodes' and user's keys, as JSON")->group("");
  CLI11_PARSE(app, argc, argv);
  if (o.workers <= 0 || o.readers <= 0 || o.seconds <= 0 || o.rounds <= 0) {
    std::fprintf(stderr, "need --workers, --readers and --rounds >= 1, and --seconds > 0\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  if (!load.empty()) return tessera::scheduler::LoadMain(load, endpoint, ca, credentials, o);
  return tessera::scheduler::Main(o);
}
