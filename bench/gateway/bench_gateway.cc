// bench_gateway: the REST gateway in front of many watchers and many submitters.
//
// 1. Followers: F clients (default 2,000) each hold a Server-Sent-Event stream of a run's logs
//    open on one gateway (GET /api/v1/runs/NAME/logs?follow=true), over loopback. Upstream, a
//    log service of this benchmark's own streams each follower's lines at the rate that makes
//    L lines/s in all (default 10,000), each line stamped with the time it was sent. Prints the
//    delivery latency (upstream send to the client's read, p50/p99/max), the lines delivered
//    per second, and the process's memory per follower (what the gateway holds per open stream,
//    plus the client's own socket and buffer: an upper bound).
// 2. Submissions: C concurrent clients submit runs for T seconds through the gateway
//    (POST /api/v1/runs, JSON, kept-alive connections), then straight to the same gRPC service;
//    prints both rates and their ratio: against a service that does nothing (the gateway's own
//    cost), then against tessera-server on a real PostgreSQL (target: at least 0.8).
//
//   bench_gateway [--followers F] [--lines-per-second L] [--seconds S] [--submitters C]
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/gateway/gateway_server.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tests/support/binaries.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace v1 = tessera::v1;
using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

long RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

// Streams "T<send time in ns>" lines to each follower, `interval` apart, until cancelled.
class BenchLogService final : public v1::LogService::Service {
 public:
  explicit BenchLogService(std::chrono::nanoseconds interval) : interval_(interval) {}
  grpc::Status StreamLogs(grpc::ServerContext* context, const v1::GetLogsRequest*,
                          grpc::ServerWriter<v1::LogLines>* writer) override {
    // Spread the followers' lines over the interval, as runs print independently.
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(NowNs() % std::max<int64_t>(1, interval_.count())));
    for (int64_t seq = 0; !context->IsCancelled(); ++seq) {
      v1::LogLines batch;
      v1::LogLine* line = batch.add_lines();
      line->set_run_id("r");
      line->set_sequence(seq);
      line->set_node_name("node-1");
      line->set_text(absl::StrCat("T", NowNs(), " step 1234 loss 2.345 lr 3e-4 tokens/s 45000"));
      if (!writer->Write(batch)) break;
      std::this_thread::sleep_for(interval_);
    }
    return grpc::Status::OK;
  }

 private:
  const std::chrono::nanoseconds interval_;
};

class BenchRunService final : public v1::RunService::Service {
 public:
  grpc::Status SubmitRun(grpc::ServerContext*, const v1::SubmitRunRequest* request,
                         v1::SubmitRunResponse* response) override {
    const uint64_t n = ++submitted_;
    v1::Run* run = response->mutable_run();
    run->set_name(absl::StrCat(request->spec().name(), "-", n));
    run->set_status(v1::RUN_STATUS_QUEUED);
    *run->mutable_spec() = request->spec();
    return grpc::Status::OK;
  }

 private:
  std::atomic<uint64_t> submitted_{0};
};

// One follower: a socket reading an event stream, noting each line's latency.
struct Follower {
  explicit Follower(net::io_context& io) : socket(io) {}
  tcp::socket socket;
  std::string request;
  std::array<char, 8192> buffer{};
  std::string pending;
};

struct Latencies {
  std::mutex mu;
  std::vector<int64_t> ns;
  std::atomic<int64_t> lines{0};
  std::atomic<bool> recording{false};
  std::atomic<int> connected{0};
};

void Read(Follower& f, Latencies& lat) {
  f.socket.async_read_some(
      net::buffer(f.buffer), [&f, &lat](boost::system::error_code ec, std::size_t n) {
        if (ec) return;
        const int64_t now = NowNs();
        f.pending.append(f.buffer.data(), n);
        if (f.pending.find("text/event-stream") != std::string::npos) {
          ++lat.connected;
          f.pending.clear();
        }
        std::size_t at = 0;
        std::vector<int64_t> seen;
        while ((at = f.pending.find("\"text\":\"T", at)) != std::string::npos) {
          const std::size_t start = at + 9;
          const std::size_t end = f.pending.find(' ', start);
          if (end == std::string::npos) break;
          int64_t sent = 0;
          if (absl::SimpleAtoi(f.pending.substr(start, end - start), &sent)) {
            seen.push_back(now - sent);
          }
          at = end;
        }
        // Keep an incomplete tail (a line cut by the read) for the next read.
        const std::size_t last = f.pending.rfind("\n\n");
        f.pending.erase(0, last == std::string::npos ? 0 : last + 2);
        if (!seen.empty()) {
          lat.lines += static_cast<int64_t>(seen.size());
          if (lat.recording.load()) {
            std::lock_guard lock(lat.mu);
            lat.ns.insert(lat.ns.end(), seen.begin(), seen.end());
          }
        }
        Read(f, lat);
      });
}

double Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return static_cast<double>(v[i]) / 1e6;
}

void Followers(tessera::gateway::GatewayServer& gateway, int count, double lines_per_second,
               int seconds) {
  net::io_context io;
  Latencies lat;
  std::vector<std::unique_ptr<Follower>> followers;
  const long rss_before = RssKiB();
  const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), gateway.port());
  for (int i = 0; i < count; ++i) {
    auto f = std::make_unique<Follower>(io);
    f->request = absl::StrCat("GET /api/v1/runs/run-", i,
                              "/logs?follow=true HTTP/1.1\r\nHost: bench\r\n"
                              "Authorization: Bearer bench\r\nAccept: text/event-stream\r\n\r\n");
    f->socket.connect(endpoint);
    net::write(f->socket, net::buffer(f->request));
    Read(*f, lat);
    followers.push_back(std::move(f));
  }
  std::thread client([&io] { io.run(); });
  const auto connect_deadline = Clock::now() + std::chrono::seconds(60);
  while (lat.connected.load() < count && Clock::now() < connect_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every stream into its rhythm
  const long rss_open = RssKiB();
  lat.recording = true;
  const int64_t lines_before = lat.lines.load();
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  lat.recording = false;
  const int64_t delivered = lat.lines.load() - lines_before;
  for (auto& f : followers) {
    boost::system::error_code ignored;
    f->socket.close(ignored);
  }
  io.stop();
  client.join();
  std::vector<int64_t> ns;
  {
    std::lock_guard lock(lat.mu);
    ns = lat.ns;
  }
  std::printf("followers: %d of %d streams open, target %.0f lines/s in all\n",
              lat.connected.load(), count, lines_per_second);
  std::printf("  delivered %.0f lines/s (%.2f of the target)\n", delivered / took,
              delivered / took / lines_per_second);
  std::printf(
      "  latency upstream send -> client read: p50 %.1f ms, p99 %.1f ms, max %.1f ms "
      "(target p99 < 100 ms: %.2f of the bound)\n",
      Percentile(ns, 0.5), Percentile(ns, 0.99), Percentile(ns, 1.0), Percentile(ns, 0.99) / 100.0);
  std::printf(
      "  memory per open stream: %.1f KiB (process RSS %ld -> %ld KiB, client side "
      "included)\n",
      static_cast<double>(rss_open - rss_before) / std::max(1, count), rss_before, rss_open);
}

// `clients` threads, each with a client of its own from `make_client`, submit for `seconds`;
// returns the submissions per second. A client returns false when a submission failed (it has
// said why), which ends its thread.
double SubmissionRate(int clients, int seconds,
                      const std::function<std::function<bool()>()>& make_client) {
  std::atomic<long> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      std::function<bool()> submit = make_client();
      while (!stop.load() && submit()) ++done;
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(done.load()) / seconds;
}

// POST /api/v1/runs with a JSON spec, over one kept-alive connection per client.
double SubmitOverRest(uint16_t port, int clients, int seconds, const std::string& key) {
  const std::string body =
      R"({"spec": {"name": "bench", "command": "echo hi", "compute": {"gpus": 1}}})";
  const std::string request = absl::StrCat(
      "POST /api/v1/runs HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer ", key,
      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  return SubmissionRate(clients, seconds, [&]() -> std::function<bool()> {
    auto io = std::make_shared<net::io_context>();
    auto socket = std::make_shared<tcp::socket>(*io);
    socket->connect({net::ip::make_address("127.0.0.1"), port});
    return [io, socket, &request] {
      net::write(*socket, net::buffer(request));
      // The answer: a header with its Content-Length, then that many bytes.
      std::string buffer;
      std::size_t need = std::string::npos;
      char chunk[4096];
      while (buffer.size() < need) {
        boost::system::error_code ec;
        const std::size_t n = socket->read_some(net::buffer(chunk), ec);
        if (ec) return false;
        buffer.append(chunk, n);
        const std::size_t head = buffer.find("\r\n\r\n");
        if (head != std::string::npos && need == std::string::npos) {
          const std::size_t cl = buffer.find("Content-Length: ");
          need = head + 4 + static_cast<std::size_t>(std::atol(buffer.c_str() + cl + 16));
        }
      }
      if (buffer.rfind("HTTP/1.1 200", 0) == 0) return true;
      std::fprintf(stderr, "submit failed: %s\n", buffer.substr(0, 200).c_str());
      return false;
    };
  });
}

// RunService.SubmitRun, one stub per client over one channel.
double SubmitOverGrpc(const std::string& target, int clients, int seconds, const std::string& key) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  v1::SubmitRunRequest request;
  request.mutable_spec()->set_name("bench");
  request.mutable_spec()->set_command("echo hi");
  request.mutable_spec()->mutable_compute()->set_gpus(1);
  return SubmissionRate(clients, seconds, [&]() -> std::function<bool()> {
    std::shared_ptr<v1::RunService::Stub> stub = v1::RunService::NewStub(channel);
    return [stub, &request, &key] {
      grpc::ClientContext context;
      context.AddMetadata("authorization", "Bearer " + key);
      v1::SubmitRunResponse response;
      const grpc::Status status = stub->SubmitRun(&context, request, &response);
      if (status.ok()) return true;
      std::fprintf(stderr, "submit failed: %s\n", status.error_message().c_str());
      return false;
    };
  });
}

std::string Bin(const std::string& name) { return std::string(TESSERA_BIN_DIR) + "/" + name; }

// Submissions through tessera-server's own gateway and straight to its gRPC API: the run
// manager's real work (validation, the fit check, a PostgreSQL transaction) behind both.
int AgainstControlPlane(int clients, int seconds) {
  auto pg = tessera::testing::PostgresServer::Start();
  if (!pg.ok()) {
    std::fprintf(stderr, "PostgreSQL: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  const std::string url = (*pg)->url();
  auto key = tessera::testing::RunCommand({Bin("tessera-server"), "--database-url", url,
                                           "--log-level", "warn", "create-api-key", "--user",
                                           "bench", "--role", "admin"});
  if (!key.ok()) {
    std::fprintf(stderr, "create-api-key: %s\n", key.status().ToString().c_str());
    return 1;
  }
  key->erase(key->find_last_not_of("\n ") + 1);
  const std::string log = std::filesystem::temp_directory_path() /
                          absl::StrCat("bench-gateway-", getpid(), "-server.log");
  auto server = tessera::testing::Process::Start(
      {Bin("tessera-server"), "--database-url", url, "--grpc-listen", "127.0.0.1:0",
       "--metrics-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn",
       "--plaintext", "--allow-host-image"},
      log);
  if (!server.ok()) {
    std::fprintf(stderr, "tessera-server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  auto line = server->WaitForLine("listening grpc=");
  if (!line.ok()) {
    std::fprintf(stderr, "tessera-server: %s\n", line.status().ToString().c_str());
    return 1;
  }
  auto field = [&](const std::string& name) {
    const std::size_t at = line->find(name + "=") + name.size() + 1;
    return line->substr(at, line->find(' ', at) - at);
  };
  const int http_port = std::atoi(field("http").c_str());
  const std::string grpc_endpoint = "127.0.0.1:" + field("grpc");
  // A node, so that the runs fit the cluster (each asks for its one GPU: one runs at a time,
  // the others wait).
  const std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("bench-gateway-", getpid());
  std::filesystem::create_directories(dir);
  auto key_file = tessera::testing::NodeKeyFile(url, "bench-node", dir);
  if (!key_file.ok()) {
    std::fprintf(stderr, "node key: %s\n", key_file.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> worker_argv =
      tessera::testing::WorkerArgv("bench-node", grpc_endpoint, *key_file, dir + "/worker", 1);
  worker_argv.insert(worker_argv.end(), {"--log-level", "warn"});
  auto worker = tessera::testing::Process::Start(worker_argv, dir + "/worker.log");
  if (!worker.ok()) {
    std::fprintf(stderr, "tessera-worker: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // registered
  // The two paths take turns, so that both see the queue as it grows.
  constexpr int kRounds = 4;
  const int slice = std::max(1, seconds / kRounds);
  double rest = 0, grpc_only = 0;
  for (int round = 0; round < kRounds; ++round) {
    rest += SubmitOverRest(static_cast<uint16_t>(http_port), clients, slice, *key) / kRounds;
    grpc_only += SubmitOverGrpc(grpc_endpoint, clients, slice, *key) / kRounds;
  }
  std::printf(
      "submissions to tessera-server on PostgreSQL (%d clients, the paths taking turns): "
      "REST %.0f/s, gRPC alone %.0f/s: ratio %.2f (target >= 0.8)\n",
      clients, rest, grpc_only, grpc_only > 0 ? rest / grpc_only : 0.0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int followers = 2000, seconds = 10, submitters = 8;
  double lines_per_second = 10000;
  CLI::App app{"bench_gateway: the REST gateway in front of many watchers and many submitters"};
  app.add_option("--followers", followers, "clients each following a run's logs over SSE")
      ->capture_default_str();
  app.add_option("--lines-per-second", lines_per_second, "log lines sent to the followers in all")
      ->capture_default_str();
  app.add_option("--seconds", seconds, "how long the followers and each submission path run")
      ->capture_default_str();
  app.add_option("--submitters", submitters, "concurrent clients submitting runs")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (followers < 1 || seconds < 1 || submitters < 1 || lines_per_second <= 0) {
    std::fprintf(stderr, "bench_gateway: every figure must be positive\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);  // no access log line per request

  const auto interval =
      std::chrono::nanoseconds(static_cast<int64_t>(1e9 * followers / lines_per_second));
  BenchLogService logs(interval);
  BenchRunService runs;
  int upstream_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &upstream_port);
  builder.RegisterService(&logs);
  builder.RegisterService(&runs);
  // Every follower's stream holds a thread of the synchronous server.
  grpc::ResourceQuota quota;
  quota.SetMaxThreads(followers + 256);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  const std::string upstream = absl::StrCat("127.0.0.1:", upstream_port);

  tessera::gateway::GatewayServer gateway(
      grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials()));
  if (auto st = gateway.Start("127.0.0.1", 0); !st.ok()) {
    std::fprintf(stderr, "bench_gateway: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("bench_gateway: gateway on 127.0.0.1:%d, upstream %s\n", gateway.port(),
              upstream.c_str());
  Followers(gateway, followers, lines_per_second, seconds);

  const double rest = SubmitOverRest(gateway.port(), submitters, seconds, "bench");
  const double grpc_only = SubmitOverGrpc(upstream, submitters, seconds, "bench");
  std::printf(
      "submissions to a service that does nothing (%d clients): REST %.0f/s, gRPC alone "
      "%.0f/s: ratio %.2f (the gateway's own cost)\n",
      submitters, rest, grpc_only, grpc_only > 0 ? rest / grpc_only : 0.0);
  gateway.Shutdown();
  server->Shutdown();
  return AgainstControlPlane(submitters, seconds);
}
