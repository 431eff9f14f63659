// bench_logs: ranks printing as fast as they can, through the whole log path
//   rank stdout -> spool file -> tessera-worker -> PushLogs -> log service (PostgreSQL) -> GetLogs
//   follower
// on a real local cluster (PostgreSQL, tessera-server, tessera-worker as processes), next to
// raw gRPC streaming of the same lines over loopback measured in the same run. Prints lines per
// second and line latency (print to follower) for both, and their ratio.
//
//   bench_logs [--ranks R] [--lines N] [--line-bytes B] [--rate LINES_PER_S]
//   bench_logs print N B RATE      (what each rank runs)
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/policy/packed_log_lines.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tests/support/binaries.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"

namespace {

using tessera::testing::PostgresServer;
using tessera::testing::Process;
using tessera::testing::RunCommand;
namespace v1 = tessera::v1;

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

// A rank: N lines of B bytes, "SEQ NANOS xxxx...". At full speed (rate 0) through stdio's
// buffer, as a program printing as fast as it can; at a given rate (lines/s) each line is flushed
// as it is printed, as an unbuffered training log is.
int Print(long n, long bytes, long rate) {
  std::string pad(static_cast<size_t>(std::max(0L, bytes - 32)), 'x');
  const int64_t start = NowNs();
  for (long i = 0; i < n; ++i) {
    if (rate > 0) {
      const int64_t due = start + i * 1000000000LL / rate;
      while (NowNs() < due) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::printf("%ld %lld %s\n", i, static_cast<long long>(NowNs()), pad.c_str());
    if (rate > 0) std::fflush(stdout);
  }
  std::fflush(stdout);
  return 0;
}

struct Figures {
  double lines_per_s = 0;
  double p50_ms = 0, p99_ms = 0;
};

Figures Summarize(std::vector<int64_t>& latencies_ns, int64_t lines, int64_t elapsed_ns) {
  Figures f;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  f.lines_per_s = lines / (elapsed_ns / 1e9);
  if (!latencies_ns.empty()) {
    f.p50_ms = latencies_ns[latencies_ns.size() / 2] / 1e6;
    f.p99_ms = latencies_ns[latencies_ns.size() * 99 / 100] / 1e6;
  }
  return f;
}

int64_t StampOf(absl::string_view text) {
  const size_t a = text.find(' ');
  const size_t b = text.find(' ', a + 1);
  int64_t ns = 0;
  if (a == absl::string_view::npos || !absl::SimpleAtoi(text.substr(a + 1, b - a - 1), &ns)) {
    return 0;
  }
  return ns;
}

// The bound: the same lines in LogBatches of the shipper's size, over one gRPC stream on
// loopback to a service that only acknowledges them, with the shipper's window of 4 batches.
class AckingLogs final : public v1::LogService::Service {
 public:
  grpc::Status PushLogs(grpc::ServerContext*,
                        grpc::ServerReaderWriter<v1::LogAck, v1::LogBatch>* stream) override {
    v1::LogBatch batch;
    while (stream->Read(&batch)) {
      const int64_t now = NowNs();
      for (const auto& l : batch.lines()) latencies.push_back(now - StampOf(l.text()));
      v1::LogAck ack;
      ack.set_idempotency_key(batch.idempotency_key());
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }
  std::vector<int64_t> latencies;
};

Figures RawGrpc(int ranks, long lines, long bytes) {
  AckingLogs service;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  auto stub = v1::LogService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->PushLogs(&ctx);
  std::string pad(static_cast<size_t>(std::max(0L, bytes - 32)), 'x');
  const long total = lines * ranks;
  const int64_t start = NowNs();
  std::atomic<long> acked{0};
  std::thread reader([&] {
    v1::LogAck ack;
    while (stream->Read(&ack)) acked++;
  });
  long sent_batches = 0;
  for (long i = 0; i < total;) {
    while (sent_batches - acked >= 4) std::this_thread::yield();
    v1::LogBatch batch;
    batch.set_idempotency_key(std::to_string(sent_batches));
    for (int k = 0; k < 4096 && i < total; ++k, ++i) {
      auto* l = batch.add_lines();
      l->set_run_id("run-bench");
      l->set_rank(static_cast<int>(i % ranks));
      l->set_sequence(i / ranks);
      l->set_stream(v1::LOG_STREAM_STDOUT);
      l->set_node_name("node-0");
      l->set_text(absl::StrCat(i, " ", NowNs(), " ", pad));
    }
    stream->Write(batch);
    ++sent_batches;
  }
  stream->WritesDone();
  reader.join();
  stream->Finish();
  const int64_t elapsed = NowNs() - start;
  server->Shutdown();
  return Summarize(service.latencies, total, elapsed);
}

std::string Bin(const std::string& name) { return std::string(TESSERA_BIN_DIR) + "/" + name; }

std::string Key(const std::string& url, const std::string& role) {
  auto out = RunCommand({Bin("tessera-server"), "--database-url", url, "--log-level", "warn",
                         "create-api-key", "--user", "bench-" + role, "--role", role});
  if (!out.ok()) {
    std::cerr << out.status() << "\n";
    std::exit(1);
  }
  std::string key = *out;
  key.erase(key.find_last_not_of("\n ") + 1);
  return key;
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& key) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + key);
  return ctx;
}

Figures EndToEnd(int ranks, long lines, long bytes, long rate, const std::string& self) {
  auto pg = PostgresServer::Start();
  if (!pg.ok()) {
    std::cerr << "PostgreSQL: " << pg.status() << "\n";
    std::exit(1);
  }
  const std::string url = (*pg)->url();
  const std::string admin_key = Key(url, "admin");
  const std::string dir =
      std::filesystem::temp_directory_path() / ("bench-logs-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto server =
      Process::Start({Bin("tessera-server"), "--database-url", url, "--grpc-listen", "127.0.0.1:0",
                      "--metrics-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                      "--log-level", "warn", "--plaintext", "--allow-host-image",
                      // The bench measures the path, not the per-run rate limit (16 MiB/s by
                      // default), which a longer run at full speed would reach.
                      "--log-rate-per-run", "0"},
                     dir + "/server.log");
  auto line = server->WaitForLine("listening grpc=");
  if (!line.ok()) {
    std::cerr << "tessera-server: " << line.status() << "\n" << server->Log();
    std::exit(1);
  }
  const std::string port = line->substr(
      line->find("grpc=") + 5, line->find(' ', line->find("grpc=")) - line->find("grpc=") - 5);
  const std::string endpoint = "127.0.0.1:" + port;
  auto key_file = tessera::testing::NodeKeyFile(url, "bench-node", dir);
  if (!key_file.ok()) {
    std::cerr << "node key: " << key_file.status() << "\n";
    std::exit(1);
  }
  std::vector<std::string> worker_argv =
      tessera::testing::WorkerArgv("bench-node", endpoint, *key_file, dir + "/worker", ranks);
  worker_argv.insert(worker_argv.end(), {"--log-level", "warn"});
  auto worker = Process::Start(worker_argv, dir + "/worker.log");
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto runs = v1::RunService::NewStub(channel);
  auto logs = v1::LogService::NewStub(channel);
  auto scheduler = v1::SchedulerService::NewStub(channel);
  for (int i = 0; i < 200; ++i) {
    v1::GetNodeRequest req;
    req.set_name("bench-node");
    v1::GetNodeResponse resp;
    if (scheduler->GetNode(Ctx(admin_key).get(), req, &resp).ok() &&
        resp.node().liveness() == v1::NODE_LIVENESS_ONLINE)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string go = dir + "/go";
  v1::SubmitRunRequest submit;
  submit.mutable_spec()->set_name("bench");
  submit.mutable_spec()->set_command(absl::StrCat("while [ ! -f ", go,
                                                  " ]; do sleep 0.01; done; exec ", self, " print ",
                                                  lines, " ", bytes, " ", rate));
  submit.mutable_spec()->mutable_compute()->set_gpus(ranks);
  v1::SubmitRunResponse submitted;
  // std::exit runs no destructor: the worker and the server are stopped here, or they would
  // outlive the bench (a worker retrying a dead server for ever).
  const auto fail = [&](const std::string& why) {
    std::cerr << why << "\n";
    (void)worker->Kill(SIGTERM);
    (void)server->Kill(SIGTERM);
    std::exit(1);
  };
  if (auto st = runs->SubmitRun(Ctx(admin_key).get(), submit, &submitted); !st.ok()) {
    fail("submit: " + st.error_message());
  }
  // Follow from before the first line; then let the ranks go.
  v1::GetLogsRequest get;
  get.set_run_name(submitted.run().name());
  get.set_follow(true);
  get.set_packed(true);  // as mcli follows: lines packed per stream
  for (int i = 0; i < 200; ++i) {
    v1::GetRunRequest r;
    r.set_name(submitted.run().name());
    v1::GetRunResponse resp;
    if (runs->GetRun(Ctx(admin_key).get(), r, &resp).ok() &&
        resp.run().status() == v1::RUN_STATUS_RUNNING)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto ctx = Ctx(admin_key);
  auto reader = logs->StreamLogs(ctx.get(), get);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t start = NowNs();
  { std::ofstream touch(go); }
  std::vector<int64_t> latencies;
  latencies.reserve(static_cast<size_t>(lines * ranks));
  v1::LogLines batch;
  const long total = lines * ranks;
  while (static_cast<long>(latencies.size()) < total && reader->Read(&batch)) {
    const int64_t now = NowNs();
    for (const auto& l : batch.lines()) latencies.push_back(now - StampOf(l.text()));
    for (const auto& group : batch.packed()) {
      const absl::Status st = tessera::ForEachPackedLine(
          group, [&](const tessera::ChunkLine& l) { latencies.push_back(now - StampOf(l.text)); });
      if (!st.ok()) fail(absl::StrCat("packed lines: ", st.message()));
    }
  }
  const int64_t elapsed = NowNs() - start;
  ctx->TryCancel();
  reader->Finish();
  if (static_cast<long>(latencies.size()) < total) {
    fail(absl::StrCat("follower got ", latencies.size(), " of ", total, " lines"));
  }
  (void)worker->Kill(SIGTERM);
  (void)server->Kill(SIGTERM);
  std::filesystem::remove_all(dir);
  return Summarize(latencies, total, elapsed);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "print")
    return Print(std::atol(argv[2]), std::atol(argv[3]), std::atol(argv[4]));
  int ranks = 2;
  long lines = 200000, bytes = 100, rate = 0;
  CLI::App app{"bench_logs: ranks printing as fast as they can, through the whole log path"};
  app.add_option("--ranks", ranks, "ranks printing (the run's GPUs)")->capture_default_str();
  app.add_option("--lines", lines, "lines each rank prints")->capture_default_str();
  app.add_option("--line-bytes", bytes, "bytes of each line")->capture_default_str();
  app.add_option("--rate", rate, "lines per second of each rank (0: as fast as it can)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (ranks < 1 || lines < 1 || bytes < 1 || rate < 0) {
    std::cerr << "need --ranks, --lines and --line-bytes >= 1, and --rate >= 0\n";
    return 2;
  }
  const std::string self = std::filesystem::canonical("/proc/self/exe");
  std::printf("bench_logs: %d rank(s) x %ld lines of %ld bytes, %s\n", ranks, lines, bytes,
              rate > 0 ? absl::StrCat(rate, " lines/s per rank").c_str() : "as fast as they can");
  const Figures raw = RawGrpc(ranks, lines, bytes);
  std::printf("  raw gRPC stream (bound):  %10.0f lines/s   p50 %7.2f ms   p99 %7.2f ms\n",
              raw.lines_per_s, raw.p50_ms, raw.p99_ms);
  const Figures e2e = EndToEnd(ranks, lines, bytes, rate, self);
  std::printf("  end to end (rank->follower): %7.0f lines/s   p50 %7.2f ms   p99 %7.2f ms\n",
              e2e.lines_per_s, e2e.p50_ms, e2e.p99_ms);
  if (rate == 0) {
    std::printf("  ratio end-to-end / raw: %.2f (target >= 0.5); p99 %.1f ms (target < 50 ms)\n",
                e2e.lines_per_s / raw.lines_per_s, e2e.p99_ms);
  } else {
    std::printf(
        "  paced: end to end kept %.2f of the offered %ld lines/s; p99 %.1f ms (target < 50 ms)\n",
        e2e.lines_per_s / (rate * ranks), rate * ranks, e2e.p99_ms);
  }
  return 0;
}
