// Log ingest end to end: workers push batches over gRPC to the log service, which stores them in
// PostgreSQL and acknowledges them; compared with the same pushes to a service that acknowledges
// without storing (raw gRPC streaming), measured in the same run. Also the store alone. Both in
// plain text and over mutual TLS (the services' certificate, as made by deploy/tls-certs.sh), to
// show what TLS costs the log path.
//
//   bench_logs_ingest [--database-url URL] [--lines N] [--batch B] [--workers W]
//
// Without --database-url it starts a private PostgreSQL server (as the integration tests do).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/admin/admin_handler.h"
#include "services/logs/log_service.h"
#include "services/store/stores.h"
#include "tests/support/binaries.h"
#include "tests/support/postgres_server.h"
#include "transport/grpc_limits.h"
#include "transport/service_host.h"
#include "transport/tls/grpc_credentials.h"

namespace tessera {
namespace {

struct Options {
  std::string database_url;
  int lines = 200'000;
  int batch = 1000;
  int workers = 2;
};

// Acknowledges every batch without storing it: the bound for the gRPC part of ingest.
class RawLogService final : public v1::LogService::Service {
  grpc::Status PushLogs(grpc::ServerContext*,
                        grpc::ServerReaderWriter<v1::LogAck, v1::LogBatch>* stream) override {
    v1::LogBatch batch;
    while (stream->Read(&batch)) {
      v1::LogAck ack;
      ack.set_idempotency_key(batch.idempotency_key());
      const auto& last = batch.lines(batch.lines_size() - 1);
      auto* w = ack.add_watermarks();
      w->set_run_id(last.run_id());
      w->set_rank(last.rank());
      w->set_stream(last.stream());
      w->set_durable_sequence(last.sequence());
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }
};

// Worker `w`'s batches: ranks 8w..8w+7 of one run, stdout, lines of ~100 bytes.
std::vector<v1::LogBatch> Batches(const Options& o, int w, const std::string& run_id) {
  std::vector<v1::LogBatch> out;
  const int per_worker = o.lines / o.workers;
  const absl::Time t0 = absl::Now();
  for (int i = 0; i < per_worker; i += o.batch) {
    v1::LogBatch b;
    b.set_idempotency_key(absl::StrCat(w, "-", i));
    b.set_node_name(absl::StrCat("node-", w));
    for (int k = i; k < std::min(per_worker, i + o.batch); ++k) {
      auto* l = b.add_lines();
      l->set_run_id(run_id);
      l->set_node_rank(w);
      l->set_rank(w * 8 + k % 8);
      l->set_stream(v1::LOG_STREAM_STDOUT);
      l->set_sequence(k / 8);
      *l->mutable_time() = ToProtoTime(t0 + absl::Microseconds(k));
      l->set_text(absl::StrCat("step ", k / 8, " | loss 2.3417 | lr 3.0e-04 | tokens/s 181234.5 | ",
                               "mfu 0.412 | grad_norm 0.873 | rank ", w * 8 + k % 8, "\n"));
    }
    out.push_back(std::move(b));
  }
  return out;
}

// Pushes every worker's batches over its own stream at once; returns lines per second.
double PushAll(const std::string& endpoint, const std::string& key, const Options& o,
               const std::string& run_id, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  std::vector<std::vector<v1::LogBatch>> batches;
  for (int w = 0; w < o.workers; ++w) batches.push_back(Batches(o, w, run_id));
  auto channel = CreateLimitedChannel(endpoint, credentials);  // as the workers' channels
  auto stub = v1::LogService::NewStub(channel);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  int64_t lines = 0;
  for (const auto& bs : batches) {
    for (const auto& b : bs) lines += b.lines_size();
  }
  for (int w = 0; w < o.workers; ++w) {
    threads.emplace_back([&, w] {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", "Bearer " + key);
      auto stream = stub->PushLogs(&ctx);
      std::thread writer([&] {
        for (const auto& b : batches[w]) {
          if (!stream->Write(b)) break;
        }
        stream->WritesDone();
      });
      v1::LogAck ack;
      size_t acks = 0;
      while (stream->Read(&ack)) ++acks;
      writer.join();
      const grpc::Status st = stream->Finish();
      if (!st.ok() || acks != batches[w].size()) {
        std::fprintf(stderr, "push failed: %s (%zu acks)\n", st.error_message().c_str(), acks);
        std::exit(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<double>(lines) / absl::ToDoubleSeconds(absl::Now() - start);
}

int Main(const Options& o) {
  std::unique_ptr<testing::PostgresServer> private_pg;
  std::string url = o.database_url;
  if (url.empty()) {
    auto pg = testing::PostgresServer::Start();
    if (!pg.ok()) {
      std::fprintf(stderr, "cannot start PostgreSQL: %s\n", pg.status().ToString().c_str());
      return 1;
    }
    private_pg = *std::move(pg);
    url = private_pg->url();
  }
  auto stores = store::OpenPostgresStores({.url = url, .pool_size = o.workers + 2});
  if (!stores.ok()) {
    std::fprintf(stderr, "cannot open the database: %s\n", stores.status().ToString().c_str());
    return 1;
  }
  auto clock = SystemClock::Shared();
  v1::CreateApiKeyRequest key_request;
  key_request.set_user("bench");
  key_request.set_role(v1::ROLE_SYSTEM);
  auto key = admin::CreateApiKeyDirect(*stores->api_keys, *clock, key_request);
  if (!key.ok()) return 1;
  auto auth = std::make_shared<auth::Authenticator>(stores->api_keys, clock);
  auto handler = std::make_shared<logs::LogHandler>(stores->logs, nullptr, clock);
  logs::LogService stored(handler, auth);
  RawLogService raw;
  HostOptions host{.grpc_listen = "127.0.0.1:0",
                   .metrics_listen = "127.0.0.1:0",
                   .log_level = "warn",
                   .tls = {.plaintext = true}};
  auto stored_host = ServiceHost::Start(host, {&stored});
  auto raw_host = ServiceHost::Start(host, {&raw});
  if (!stored_host.ok() || !raw_host.ok()) return 1;
  // The same two over TLS: the services' certificate served and shown (a system key needs it).
  char dir_template[] = "/tmp/bench-logs-tls.XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  if (const absl::Status made = testing::MakeClusterCertificates(dir); !made.ok()) {
    std::fprintf(stderr, "%s\n", made.ToString().c_str());
    return 1;
  }
  const tls::TlsFlags tls_flags{dir + "/services.pem", dir + "/services.key", dir + "/ca.pem",
                                false};
  HostOptions secure = host;
  secure.tls = tls_flags;
  logs::LogService stored_secure(handler, auth);
  RawLogService raw_secure;
  auto stored_tls_host = ServiceHost::Start(secure, {&stored_secure});
  auto raw_tls_host = ServiceHost::Start(secure, {&raw_secure});
  if (!stored_tls_host.ok() || !raw_tls_host.ok()) return 1;
  const auto plain = grpc::InsecureChannelCredentials();
  const auto mutual = tls::ChannelCredentials(tls_flags);

  // The store alone, one batch per call.
  const int store_lines = std::min(o.lines, 100'000);
  Options so = o;
  so.lines = store_lines;
  so.workers = 1;
  // Fresh run ids, so that a database used before holds none of these lines.
  const std::string suffix = absl::StrCat("-", absl::ToUnixMicros(absl::Now()));
  auto store_batches = Batches(so, 0, "bench-store" + suffix);
  absl::Time start = absl::Now();
  for (const auto& b : store_batches) {
    if (!stores->logs->AppendLogs({b.lines().begin(), b.lines().end()}).ok()) return 1;
  }
  const double store_rate = store_lines / absl::ToDoubleSeconds(absl::Now() - start);

  // Plain text and TLS alternate, so that drift of the shared machine falls on both alike.
  const auto at = [](const std::unique_ptr<ServiceHost>& h, const char* host) {
    return absl::StrCat(host, ":", h->grpc_port());
  };
  const double raw_rate = PushAll(at(*raw_host, "127.0.0.1"), *key, o, "bench-raw" + suffix, plain);
  const double raw_tls_rate =
      PushAll(at(*raw_tls_host, "localhost"), *key, o, "bench-raw-tls" + suffix, mutual);
  const double stored_rate =
      PushAll(at(*stored_host, "127.0.0.1"), *key, o, "bench-e2e" + suffix, plain);
  const double stored_tls_rate =
      PushAll(at(*stored_tls_host, "localhost"), *key, o, "bench-e2e-tls" + suffix, mutual);
  std::printf("lines %d, batch %d, workers %d\n", o.lines, o.batch, o.workers);
  std::printf("store alone (AppendLogs, 1 caller):  %10.0f lines/s\n", store_rate);
  std::printf(
      "raw gRPC streaming (ack only):       %10.0f lines/s plain, %10.0f over TLS: "
      "TLS/plain %.2f\n",
      raw_rate, raw_tls_rate, raw_tls_rate / raw_rate);
  std::printf(
      "log service (PostgreSQL, acked):     %10.0f lines/s plain, %10.0f over TLS: "
      "TLS/plain %.2f (target >= 0.8)\n",
      stored_rate, stored_tls_rate, stored_tls_rate / stored_rate);
  std::printf("ratio end-to-end / raw (plain text): %10.2f (target >= 0.5)\n",
              stored_rate / raw_rate);
  std::error_code ignored;  // what cannot be removed stays in /tmp
  std::filesystem::remove_all(dir, ignored);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::Options o;
  CLI::App app{"bench_logs_ingest: log ingest end to end, against raw gRPC streaming"};
  app.add_option("--database-url", o.database_url,
                 "PostgreSQL to store in (none: a private server, started here)");
  app.add_option("--lines", o.lines, "lines pushed in all")->capture_default_str();
  app.add_option("--batch", o.batch, "lines per batch")->capture_default_str();
  app.add_option("--workers", o.workers, "threads pushing, each on a stream of its own")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.lines <= 0 || o.batch <= 0 || o.workers <= 0) {
    std::fprintf(stderr, "need --lines, --batch and --workers >= 1\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  return tessera::Main(o);
}
