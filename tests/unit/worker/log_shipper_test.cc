// The log shipper against an in-process LogService over a real loopback socket: every line
// arrives once with its metadata, a restarted service and a restarted shipper lose nothing.
#include "worker/logship/log_shipper.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "proto/policy/packed_log_lines.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace log_shipper_test {
namespace fs = std::filesystem;

// Stores lines by (rank, stream, sequence) like the real service, and counts every receipt.
class RecordingLogs final : public v1::LogService::Service {
 public:
  grpc::Status PushLogs(grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<v1::LogAck, v1::LogBatch>* stream) override {
    auth_seen = ctx->client_metadata().count("authorization") > 0;
    v1::LogBatch batch;
    while (stream->Read(&batch)) {
      v1::LogAck ack;
      ack.set_idempotency_key(batch.idempotency_key());
      ack.set_accepts_packed(accepts_packed);
      std::vector<v1::LogLine> unpacked(batch.lines().begin(), batch.lines().end());
      for (const auto& group : batch.packed()) {
        if (!UnpackLines(group, unpacked).ok()) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed packed lines");
        }
      }
      {
        absl::MutexLock lock(&mu);
        (batch.packed_size() > 0 ? packed_batches : plain_batches)++;
        if (batch.packed_size() > 0 && batch.lines_size() > 0) ++mixed_batches;
        for (const auto& l : unpacked) {
          ++receipts;
          lines.emplace(std::make_tuple(l.rank(), static_cast<int>(l.stream()), l.sequence()), l);
        }
        if (drop_acks) continue;
      }
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }
  absl::Mutex mu;
  std::map<std::tuple<int, int, int64_t>, v1::LogLine> lines;
  int64_t receipts = 0;
  int64_t packed_batches = 0, plain_batches = 0, mixed_batches = 0;
  bool drop_acks = false;
  // Whether this service says it stores packed lines (a service from before them does not).
  bool accepts_packed = false;
  std::atomic<bool> auth_seen{false};
};

struct Server {
  RecordingLogs service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  explicit Server(int fixed_port = 0, bool accepts_packed = false) {
    service.accepts_packed = accepts_packed;
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("127.0.0.1:", fixed_port), grpc::InsecureServerCredentials(),
                       &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
    REQUIRE(server != nullptr);
  }
  ~Server() { server->Shutdown(std::chrono::system_clock::now()); }
  size_t Count() {
    absl::MutexLock lock(&service.mu);
    return service.lines.size();
  }
};

struct Folder {
  testing::TempDir tmp{"log_shipper_test"};
  const std::string dir = tmp.path;
  RankOutput Rank(int rank) {
    RankOutput out;
    out.run_id = "run-1";
    out.resumption_index = 0;
    out.node_rank = 1;
    out.rank = rank;
    out.stdout_path = absl::StrCat(dir, "/rank-", rank, ".stdout");
    out.stderr_path = absl::StrCat(dir, "/rank-", rank, ".stderr");
    return out;
  }
};

void Append(const std::string& path, int from, int to) {
  std::ofstream out(path, std::ios::app);
  for (int i = from; i < to; ++i) out << "line " << i << "\n";
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(10)) {
  return testing::PollUntil(done, timeout);
}

std::unique_ptr<LogShipper> Shipper(int port) {
  return std::make_unique<LogShipper>(
      LogShipperOptions{.node_name = "n1",
                        .endpoint = absl::StrCat("127.0.0.1:", port),
                        .api_key = "k",
                        .tls = {.plaintext = true},
                        .batch_lines = 100},
      SystemClock::Shared());
}

TEST_CASE("every line is shipped once, numbered per rank and stream, with its metadata") {
  Server server;
  Folder folder;
  auto shipper = Shipper(server.port);
  shipper->Watch(folder.Rank(0));
  shipper->Watch(folder.Rank(1));
  shipper->Start();
  Append(folder.Rank(0).stdout_path, 0, 500);
  Append(folder.Rank(1).stdout_path, 0, 250);
  std::ofstream(folder.Rank(1).stderr_path) << "err 0\nno newline";
  REQUIRE(WaitFor([&] { return server.Count() == 751; }));
  shipper->RankDone(folder.Rank(1));
  REQUIRE(WaitFor([&] { return server.Count() == 752 && shipper->Drained(); }));
  absl::MutexLock lock(&server.service.mu);
  for (int i = 0; i < 500; ++i) {
    const auto& l = server.service.lines.at({0, v1::LOG_STREAM_STDOUT, i});
    CHECK(l.text() == absl::StrCat("line ", i));
    CHECK(l.run_id() == "run-1");
    CHECK(l.node_rank() == 1);
    CHECK(l.node_name() == "n1");
  }
  CHECK(server.service.lines.at({1, v1::LOG_STREAM_STDERR, 1}).text() == "no newline");
  CHECK(server.service.receipts == 752);  // nothing sent twice on a healthy stream
  CHECK(server.service.auth_seen);
}

TEST_CASE("once the log service says it takes packed lines they go packed with the same fields") {
  Server server(0, /*accepts_packed=*/true);
  Folder folder;
  auto shipper = Shipper(server.port);
  shipper->Watch(folder.Rank(0));
  shipper->Watch(folder.Rank(1));
  shipper->Start();
  Append(folder.Rank(0).stdout_path, 0, 500);
  Append(folder.Rank(1).stdout_path, 0, 250);
  std::ofstream(folder.Rank(1).stderr_path) << "err 0\nno newline";
  REQUIRE(WaitFor([&] { return server.Count() == 751; }));
  shipper->RankDone(folder.Rank(1));
  REQUIRE(WaitFor([&] { return server.Count() == 752 && shipper->Drained(); }));
  absl::MutexLock lock(&server.service.mu);
  // The first batches go before any acknowledgement (one message a line); the rest packed.
  CHECK(server.service.packed_batches >= 1);
  CHECK(server.service.plain_batches <= 4);
  CHECK(server.service.mixed_batches == 0);
  for (int i = 0; i < 500; ++i) {
    const auto& l = server.service.lines.at({0, v1::LOG_STREAM_STDOUT, i});
    CHECK(l.text() == absl::StrCat("line ", i));
    CHECK(l.run_id() == "run-1");
    CHECK(l.node_rank() == 1);
    CHECK(l.node_name() == "n1");
    CHECK(l.time().seconds() > 0);
  }
  CHECK(server.service.lines.at({1, v1::LOG_STREAM_STDERR, 1}).text() == "no newline");
  CHECK(server.service.receipts == 752);
}

TEST_CASE("a log service replaced by one that does not take packed lines gets plain ones again") {
  Folder folder;
  auto first = std::make_unique<Server>(0, /*accepts_packed=*/true);
  const int port = first->port;
  auto shipper = Shipper(port);
  shipper->Watch(folder.Rank(0));
  shipper->Start();
  for (int i = 0; i < 10; ++i) {  // batch after batch, so that some go after an ack
    Append(folder.Rank(0).stdout_path, i * 100, (i + 1) * 100);
    REQUIRE(WaitFor([&] { return first->Count() == static_cast<size_t>((i + 1) * 100); }));
  }
  REQUIRE(WaitFor([&] { return shipper->Drained(); }));
  {
    absl::MutexLock lock(&first->service.mu);
    CHECK(first->service.packed_batches >= 1);
  }
  first.reset();
  Server old_service(port, /*accepts_packed=*/false);
  Append(folder.Rank(0).stdout_path, 1000, 1300);
  REQUIRE(WaitFor([&] { return old_service.Count() == 300; }, absl::Seconds(15)));
  absl::MutexLock lock(&old_service.service.mu);
  CHECK(old_service.service.packed_batches == 0);
  CHECK(old_service.service.lines.at({0, v1::LOG_STREAM_STDOUT, 1299}).text() == "line 1299");
}

TEST_CASE("a restarted log service gets the unacknowledged lines again and loses none") {
  Folder folder;
  auto first = std::make_unique<Server>();
  const int port = first->port;
  auto shipper = Shipper(port);
  shipper->Watch(folder.Rank(0));
  shipper->Start();
  {
    absl::MutexLock lock(&first->service.mu);
    first->service.drop_acks = true;  // the service dies before it acknowledges these
  }
  Append(folder.Rank(0).stdout_path, 0, 300);
  REQUIRE(WaitFor([&] { return first->Count() == 300; }));
  first.reset();
  Append(folder.Rank(0).stdout_path, 300, 400);  // printed while the service is down
  // Nothing was acknowledged: every byte printed is the backlog.
  const auto printed = static_cast<int64_t>(std::filesystem::file_size(folder.Rank(0).stdout_path));
  CHECK(shipper->stats().backlog_bytes == printed);
  Server second(port);
  REQUIRE(WaitFor([&] { return second.Count() == 400 && shipper->Drained(); }, absl::Seconds(15)));
  CHECK(shipper->stats().backlog_bytes == 0);
  absl::MutexLock lock(&second.service.mu);
  for (int i = 0; i < 400; ++i) {
    CHECK(second.service.lines.at({0, v1::LOG_STREAM_STDOUT, i}).text() ==
          absl::StrCat("line ", i));
  }
  CHECK(shipper->stats().batches_resent >= 1);
}

TEST_CASE("a restarted worker resumes at the acknowledged position") {
  Server server;
  Folder folder;
  {
    auto shipper = Shipper(server.port);
    shipper->Watch(folder.Rank(0));
    shipper->Start();
    Append(folder.Rank(0).stdout_path, 0, 200);
    REQUIRE(WaitFor([&] { return shipper->Drained(); }));
    shipper->Stop();  // saves the acknowledged position
  }
  Append(folder.Rank(0).stdout_path, 200, 260);
  int64_t before;
  {
    absl::MutexLock lock(&server.service.mu);
    before = server.service.receipts;
  }
  auto shipper = Shipper(server.port);
  shipper->Watch(folder.Rank(0));
  shipper->Start();
  REQUIRE(WaitFor([&] { return server.Count() == 260; }));
  absl::MutexLock lock(&server.service.mu);
  CHECK(server.service.receipts - before == 60);  // only the new lines
  CHECK(server.service.lines.at({0, v1::LOG_STREAM_STDOUT, 259}).text() == "line 259");
}

TEST_CASE("a fully shipped rank's files are dropped and not picked up again") {
  Server server;
  Folder folder;
  auto shipper = Shipper(server.port);
  shipper->Watch(folder.Rank(0));
  shipper->Start();
  Append(folder.Rank(0).stdout_path, 0, 10);
  shipper->RankDone(folder.Rank(0));
  REQUIRE(WaitFor([&] { return shipper->stats().files_tracked == 0; }));
  CHECK(LoadAckState(folder.Rank(0).stdout_path).done);
  shipper->Watch(folder.Rank(0));
  CHECK(shipper->stats().files_tracked == 0);
}

TEST_CASE("a rank's output is shipped only once its files are complete and all acknowledged") {
  Folder folder;
  auto first = std::make_unique<Server>();
  const int port = first->port;
  auto shipper = Shipper(port);
  shipper->Watch(folder.Rank(0));
  shipper->Watch(folder.Rank(1));
  shipper->Start();
  Append(folder.Rank(0).stdout_path, 0, 300);
  REQUIRE(WaitFor([&] { return first->Count() == 300 && shipper->Drained(); }));
  // Every line so far is in, but the rank may still print: not shipped.
  CHECK_FALSE(shipper->Shipped(folder.Rank(0)));
  // Its last line has no newline; it goes once the rank is done.
  std::ofstream(folder.Rank(0).stderr_path) << "last words";
  {
    absl::MutexLock lock(&first->service.mu);
    first->service.drop_acks = true;  // the service dies before it acknowledges it
  }
  shipper->RankDone(folder.Rank(0));
  REQUIRE(WaitFor([&] { return first->Count() == 301; }));
  CHECK_FALSE(shipper->Shipped(folder.Rank(0)));
  // The unacknowledged line goes again to the service that replaces it, which acknowledges it.
  first.reset();
  Server second(port);
  REQUIRE(WaitFor([&] { return shipper->Shipped(folder.Rank(0)); }, absl::Seconds(15)));
  CHECK(second.Count() == 1);  // only what was never acknowledged
  // Rank 1 printed nothing and still runs.
  CHECK_FALSE(shipper->Shipped(folder.Rank(1)));
  shipper->RankDone(folder.Rank(1));
  REQUIRE(WaitFor([&] { return shipper->Shipped(folder.Rank(1)); }));
}

}  // namespace log_shipper_test
}  // namespace tessera::worker
