// The log service end to end through tessera-server over real sockets and a real PostgreSQL:
// pushes acknowledged with watermarks, a resend after reconnect stored once, kill -9 and restart
// in the middle of a push without loss, followers, and a deleted run's logs gone.
#include <signal.h>

#include <atomic>
#include <pqxx/pqxx>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/store/stores.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tests/support/control_plane.h"

namespace tessera::testing {
namespace logs_test {

constexpr int kLinesPerBatch = 100;

// Batch `i` of rank 0's stdout: sequences [100 i, 100 i + 99], one millisecond apart.
v1::LogBatch Batch(const std::string& run_id, int i) {
  v1::LogBatch b;
  b.set_idempotency_key("batch-" + std::to_string(i));
  b.set_node_name("node-1");
  for (int k = 0; k < kLinesPerBatch; ++k) {
    const int64_t seq = int64_t{i} * kLinesPerBatch + k;
    auto* l = b.add_lines();
    l->set_run_id(run_id);
    l->set_stream(v1::LOG_STREAM_STDOUT);
    l->set_sequence(seq);
    *l->mutable_time() =
        ToProtoTime(absl::FromUnixSeconds(1'800'000'000) + absl::Milliseconds(seq));
    l->set_text("line " + std::to_string(seq));
  }
  return b;
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& key, int seconds = 30) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

// A worker's shipper in miniature: pushes batches [from, to) over one stream, `pause` apart,
// reading acks as they come. Returns the highest durable sequence acknowledged (-1: none) and
// whether every batch was acknowledged.
struct PushResult {
  int64_t durable = -1;
  bool complete = false;
  int acks = 0;
};
PushResult Push(const std::string& endpoint, const std::string& key, const std::string& run_id,
                int from, int to, absl::Duration pause = absl::ZeroDuration(),
                std::atomic<int>* acked = nullptr) {
  auto stub =
      v1::LogService::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
  auto ctx = Ctx(key);
  auto stream = stub->PushLogs(ctx.get());
  PushResult r;
  std::thread writer([&] {
    for (int i = from; i < to; ++i) {
      if (!stream->Write(Batch(run_id, i))) return;
      absl::SleepFor(pause);
    }
    stream->WritesDone();
  });
  v1::LogAck ack;
  while (stream->Read(&ack)) {
    ++r.acks;
    if (acked) ++*acked;
    for (const auto& w : ack.watermarks()) r.durable = std::max(r.durable, w.durable_sequence());
  }
  writer.join();
  const grpc::Status st = stream->Finish();
  r.complete = st.ok() && r.acks == to - from;
  return r;
}

std::vector<std::string> ReadAll(const std::string& endpoint, const std::string& key,
                                 v1::GetLogsRequest req, grpc::Status* status = nullptr) {
  auto stub =
      v1::LogService::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
  auto ctx = Ctx(key, 60);
  auto reader = stub->GetLogs(ctx.get(), req);
  std::vector<std::string> out;
  v1::LogLine l;
  while (reader->Read(&l)) out.push_back(l.text());
  const grpc::Status st = reader->Finish();
  if (status) *status = st;
  return out;
}

std::vector<std::string> Expected(int lines) {
  std::vector<std::string> out;
  for (int i = 0; i < lines; ++i) out.push_back("line " + std::to_string(i));
  return out;
}

// Submits a run of 8 GPUs as `user` and waits until `worker` started it and it runs.
v1::Run RunningRun(FakeWorker& worker, Client& user, const std::string& name) {
  v1::Run run = user.Submit(name, 8);
  REQUIRE(worker.WaitForStart(run.id(), 0, absl::Seconds(10)).has_value());
  user.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  return run;
}

v1::GetLogsRequest FollowRequest(const v1::Run& run) {
  v1::GetLogsRequest follow;
  follow.set_run_name(run.name());
  follow.set_follow(true);
  return follow;
}

// Batches 0..4, each on a stream of its own, 100 ms apart: followers see them arrive.
void PushFiveBatchesApart(const std::string& endpoint, const std::string& key,
                          const std::string& run_id) {
  for (int i = 0; i < 5; ++i) {
    CHECK(Push(endpoint, key, run_id, i, i + 1).complete);
    absl::SleepFor(absl::Milliseconds(100));
  }
}

TEST_CASE("logs: push, resend, follow, kill -9 mid-push, delete", "[logs]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string worker_key = CreateKey(url, "worker", "system");
  const std::string alice_key = CreateKey(url, "alice", "user");
  const std::string bob_key = CreateKey(url, "bob", "user");
  const std::vector<std::string> flags = {"--lease-seconds", "60", "--heartbeat-seconds", "0.2"};
  ServerProcess server = StartServer("tessera-server", url, flags);
  const std::string endpoint = server.endpoint();

  FakeWorker worker(endpoint, NodeKey(url, "node-1"), SimulatedNode("node-1"));
  REQUIRE(worker.Connect().ok());
  Client alice(endpoint, alice_key);
  v1::Run run = RunningRun(worker, alice, "logs");

  // A follower from the start.
  const v1::GetLogsRequest follow = FollowRequest(run);
  std::vector<std::string> followed;
  grpc::Status follow_status;
  std::thread follower([&] { followed = ReadAll(endpoint, alice_key, follow, &follow_status); });

  // Batches 0..9, then a reconnect that resends 8 and 9 with 10..14: stored once.
  PushResult first = Push(endpoint, worker_key, run.id(), 0, 10);
  CHECK(first.complete);
  CHECK(first.durable == 999);
  PushResult resent = Push(endpoint, worker_key, run.id(), 8, 15);
  CHECK(resent.complete);
  CHECK(resent.durable == 1499);

  // Another user cannot read them; a user key cannot push.
  grpc::Status bob_status;
  v1::GetLogsRequest plain;
  plain.set_run_name(run.name());
  CHECK(ReadAll(endpoint, bob_key, plain, &bob_status).empty());
  CHECK(bob_status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_FALSE(Push(endpoint, alice_key, run.id(), 15, 16).complete);

  // The run completes: the follower has seen every line once, in order, and its stream ends.
  worker.Finish(run.id(), 0, 0);
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  follower.join();
  INFO(follow_status.error_message());
  CHECK(follow_status.ok());
  CHECK(followed == Expected(1500));

  // Kill -9 in the middle of a push; the shipper resends what was not acknowledged.
  std::atomic<int> acked{0};
  PushResult during;
  std::thread pusher([&] {
    during = Push(endpoint, worker_key, run.id(), 15, 30, absl::Milliseconds(30), &acked);
  });
  for (int i = 0; i < 500 && acked.load() < 3; ++i) absl::SleepFor(absl::Milliseconds(10));
  REQUIRE(server.process.Kill(SIGKILL).ok());
  pusher.join();
  CHECK_FALSE(during.complete);
  CHECK(during.durable >= 1799);
  server = StartServer(
      "tessera-server", url,
      {"--lease-seconds", "60", "--heartbeat-seconds", "0.2", "--grpc-listen", endpoint});
  const int resume_from = static_cast<int>((during.durable + 1) / kLinesPerBatch);
  PushResult after = Push(endpoint, worker_key, run.id(), resume_from, 30);
  CHECK(after.complete);
  CHECK(after.durable == 2999);

  // A second client follows the ended run: everything, once, in order, and the stream ends.
  CHECK(ReadAll(endpoint, alice_key, follow) == Expected(3000));
  v1::GetLogsRequest tail = plain;
  tail.set_tail(2);
  CHECK(ReadAll(endpoint, alice_key, tail) == std::vector<std::string>{"line 2998", "line 2999"});

  // Deleting the run deletes its logs.
  v1::DeleteRunRequest del;
  del.set_name(run.name());
  v1::DeleteRunResponse del_resp;
  grpc::Status st = alice.runs->DeleteRun(alice.Ctx().get(), del, &del_resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  auto stores = store::OpenPostgresStores({.url = url});
  REQUIRE(stores.ok());
  CHECK(stores->logs->ListLogStreams(run.id(), std::nullopt)->empty());
  CHECK(stores->logs->ReadLogs({.run_id = run.id()})->empty());
  worker.Disconnect();
}

TEST_CASE("logs: tessera-logs as its own process, followers on another process see its lines",
          "[logs]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  const std::string worker_key = CreateKey(url, "worker", "system");
  const std::string alice_key = CreateKey(url, "alice", "user");
  ServerProcess server =
      StartServer("tessera-server", url, {"--lease-seconds", "60", "--heartbeat-seconds", "0.2"});
  ServerProcess logs = StartServer("tessera-logs", url, {"--runs-endpoint", server.endpoint()});

  FakeWorker worker(server.endpoint(), NodeKey(url, "node-1"), SimulatedNode("node-1"));
  REQUIRE(worker.Connect().ok());
  Client alice(server.endpoint(), alice_key);
  v1::Run run = RunningRun(worker, alice, "apart");

  // Followers on tessera-server (woken only by polling) and on tessera-logs itself.
  const v1::GetLogsRequest follow = FollowRequest(run);
  std::vector<std::string> on_server, on_logs;
  std::thread f1([&] { on_server = ReadAll(server.endpoint(), alice_key, follow); });
  std::thread f2([&] { on_logs = ReadAll(logs.endpoint(), alice_key, follow); });
  absl::SleepFor(absl::Milliseconds(300));
  PushFiveBatchesApart(logs.endpoint(), worker_key, run.id());
  worker.Finish(run.id(), 0, 0);
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  f1.join();
  f2.join();
  CHECK(on_server == Expected(500));
  CHECK(on_logs == Expected(500));
  worker.Disconnect();
}

// Rows of log_chunks in the database at `url`.
int64_t StoredChunks(const std::string& url) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  return tx.exec1("SELECT count(*) FROM log_chunks")[0].as<int64_t>();
}

TEST_CASE("logs: rank output in a database of its own, keys and runs in the main one", "[logs]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  auto logs_url = (*pg)->CreateDatabase("tessera_logs");
  INFO(logs_url.status().ToString());
  REQUIRE(logs_url.ok());
  const std::string worker_key = CreateKey(url, "worker", "system");
  const std::string alice_key = CreateKey(url, "alice", "user");
  ServerProcess server = StartServer(
      "tessera-server", url,
      {"--lease-seconds", "60", "--heartbeat-seconds", "0.2", "--logs-database-url", *logs_url});
  FakeWorker worker(server.endpoint(), NodeKey(url, "node-1"), SimulatedNode("node-1"));
  REQUIRE(worker.Connect().ok());
  Client alice(server.endpoint(), alice_key);
  v1::Run run = RunningRun(worker, alice, "own-db");

  // A follower woken by the logs database's notifications, and the lines pushed meanwhile.
  std::vector<std::string> followed;
  std::thread follower(
      [&] { followed = ReadAll(server.endpoint(), alice_key, FollowRequest(run)); });
  absl::SleepFor(absl::Milliseconds(300));
  PushFiveBatchesApart(server.endpoint(), worker_key, run.id());
  worker.Finish(run.id(), 0, 0);
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  follower.join();
  CHECK(followed == Expected(500));
  v1::GetLogsRequest read;
  read.set_run_name(run.name());
  CHECK(ReadAll(server.endpoint(), alice_key, read) == Expected(500));
  // Stored where they were sent, and nowhere else.
  CHECK(StoredChunks(*logs_url) > 0);
  CHECK(StoredChunks(url) == 0);
  worker.Disconnect();
}

TEST_CASE("logs: a logs database that cannot be opened is refused at start with its name",
          "[logs]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  auto p = Process::Start(
      {BinaryPath("tessera-logs"), "--database-url", (*pg)->url(), "--logs-database-url",
       absl::StrCat("postgresql://tessera@127.0.0.1:", (*pg)->port(), "/no_such_database"),
       "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--plaintext",
       "--runs-endpoint", "127.0.0.1:1"},
      TempLog("tessera-logs-bad-db"));
  REQUIRE(p.ok());
  auto line = p->WaitForLine("cannot open the logs database");
  INFO(line.status().ToString());
  REQUIRE(line.ok());
  CHECK(absl::StrContains(*line, "no_such_database"));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (p->Running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  CHECK_FALSE(p->Running());  // it stops, serving nothing
}

}  // namespace logs_test
}  // namespace tessera::testing
