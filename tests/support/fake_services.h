#pragma once
// Fake Tessera gRPC services (RunService, SchedulerService, CordonService, HealthService,
// AdminService, LogService), for clients under test on a real gRPC server at 127.0.0.1:0
// (FakeServices): the real mcli binary (tests/integration/cli) and the REST gateway
// (tests/unit/gateway).
//
// Every fake records each call (method, request, authorization metadata) in a Recorder, answers
// UNAUTHENTICATED unless the call carries `authorization: Bearer test-key`, and answers the error
// set with Recorder::FailNext, once. Otherwise it answers canned data about a small sample world:
// runs of user alice on cluster c1, node node-a, times from kT0. The runs "missing" and "nope" do
// not exist (NOT_FOUND from DescribeRun, StopRun and GetLogs).
//
// Streams (WatchRuns, WatchNodeEvents, GetLogs) run as a StreamControl says: how many messages,
// then ended with a status or held open until the client cancels. With `simulate_attempts`
// (FakeRunService, FakeLogService) WatchRuns and GetLogs instead play a run's attempts as mcli
// run submit --follow sees them on a real server.
//
// What a fake answers is set in its public fields before the first call; what it recorded is read
// under its `mu` (or through the accessors that lock it).

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/health.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/run_metrics.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/secrets.grpc.pb.h"
#include "tessera/v1/teams.grpc.pb.h"

namespace tessera::testing {

// The key the fakes accept, and the metadata value that carries it.
inline constexpr char kFakeApiKey[] = "test-key";
inline constexpr char kFakeAuthorization[] = "Bearer test-key";

// The sample world's epoch: 2023-11-14 22:13:20 UTC.
inline constexpr int64_t kT0 = 1'700'000'000;

google::protobuf::Timestamp TimeAt(int64_t unix_seconds);

// Run `name` (id "id-NAME") of user alice: python train.py on 8 GPUs of cluster c1, medium
// priority, attempt 0, created at kT0.
v1::Run SampleRun(const std::string& name, v1::RunStatus status);

// Whether the fakes say run `name` does not exist ("missing", "nope").
bool IsMissingRun(const std::string& name);

// Every call that reached a fake, rejected ones included, and the error the next call answers.
class Recorder {
 public:
  struct Call {
    std::string method;
    std::shared_ptr<google::protobuf::Message> request;
    std::string authorization;   // the metadata as sent; empty without one
    std::string client_address;  // what the REST gateway says of its client
  };

  // Records the call; returns the status the fake answers with: UNAUTHENTICATED without the
  // right key, else the error set by FailNext (once), else OK.
  grpc::Status Record(grpc::ServerContext* context, const std::string& method,
                      const google::protobuf::Message& request);

  // The next authorized call answers `status`.
  void FailNext(grpc::Status status);

  std::size_t count();  // calls recorded
  int calls();          // the same, as mcli's tests count them
  int rejected();       // calls answered UNAUTHENTICATED

  // The last call (the test fails when there was none).
  Call Last();

  // The last call, which must be `method`, as its request type.
  template <class T>
  T LastAs(const std::string& method) {
    Call c = Last();
    REQUIRE(c.method == method);
    const T* typed = dynamic_cast<const T*>(c.request.get());
    REQUIRE(typed != nullptr);
    return *typed;
  }

  // Forgets the calls and any error set.
  void Reset();

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
  int rejected_ = 0;
  std::optional<grpc::Status> next_error_;
};

// What the fake streams do: send `events` messages (with `pause` after each), then either end
// (with `end_status`) or wait until the client cancels, counting that it did.
struct StreamControl {
  std::mutex mu;
  std::condition_variable cv;
  int events = 3;
  bool hold_open = false;
  bool send_metadata = true;                   // before the first event
  grpc::Status end_status = grpc::Status::OK;  // when not held open
  std::chrono::milliseconds pause{0};          // for clients that must show events as they come
  int started = 0;
  int cancelled = 0;

  // Wait (bounded, so that a broken client fails the test rather than hanging it) until
  // `started` or `cancelled` reaches `n`.
  bool WaitCancelled(int n);
  bool WaitStarted(int n);

  // Forgets the counts; keeps the settings.
  void Reset();

  // Runs one stream: `make(i)` is event i. Returns the status the RPC ends with.
  template <class Writer, class MakeMessage>
  grpc::Status Serve(grpc::ServerContext* context, Writer* writer, MakeMessage make) {
    int n = 0;
    bool hold = false;
    grpc::Status end;
    std::chrono::milliseconds wait{0};
    {
      std::lock_guard lock(mu);
      n = events;
      hold = hold_open;
      end = end_status;
      wait = pause;
      if (send_metadata) writer->SendInitialMetadata();
      ++started;
    }
    cv.notify_all();
    for (int i = 0; i < n; ++i) {
      if (!writer->Write(make(i))) break;
      if (wait.count() > 0) std::this_thread::sleep_for(wait);
    }
    if (!hold) return end;
    WaitForCancel(context);
    return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }

  // Waits until the client cancels the call, and counts it.
  void WaitForCancel(grpc::ServerContext* context);
};

class FakeRunService final : public v1::RunService::Service {
 public:
  FakeRunService(Recorder& recorder, StreamControl& stream);

  // SubmitRun names the run after its spec, plus this.
  std::string submitted_suffix = "-abc123";
  // ListRuns' answer. By default train-a (RUNNING) and train-long-name (bob's, QUEUED, attempt 2,
  // step 50 of 200).
  std::vector<v1::Run> listed;
  // Off: WatchRuns streams numbered changes ("run-0", "run-1", ...) as the StreamControl says.
  // On: it streams the watched run's next attempt through STARTING and RUNNING (nothing once the
  // run ended) and stays open until the client cancels; the attempt ends when its logs were
  // followed to their end (FakeLogService, EndAttempt). GetRun answers the run as its last ended
  // attempt left it either way.
  bool simulate_attempts = false;

  grpc::Status SubmitRun(grpc::ServerContext* context, const v1::SubmitRunRequest* request,
                         v1::SubmitRunResponse* response) override;
  grpc::Status GetRun(grpc::ServerContext* context, const v1::GetRunRequest* request,
                      v1::GetRunResponse* response) override;
  grpc::Status ListRuns(grpc::ServerContext* context, const v1::ListRunsRequest* request,
                        v1::ListRunsResponse* response) override;
  grpc::Status DescribeRun(grpc::ServerContext* context, const v1::DescribeRunRequest* request,
                           v1::DescribeRunResponse* response) override;
  grpc::Status StopRun(grpc::ServerContext* context, const v1::StopRunRequest* request,
                       v1::StopRunResponse* response) override;
  grpc::Status DeleteRun(grpc::ServerContext* context, const v1::DeleteRunRequest* request,
                         v1::DeleteRunResponse* response) override;
  grpc::Status UpdateRun(grpc::ServerContext* context, const v1::UpdateRunRequest* request,
                         v1::UpdateRunResponse* response) override;
  grpc::Status RestartRun(grpc::ServerContext* context, const v1::RestartRunRequest* request,
                          v1::RestartRunResponse* response) override;
  grpc::Status CloneRun(grpc::ServerContext* context, const v1::CloneRunRequest* request,
                        v1::CloneRunResponse* response) override;
  grpc::Status WatchRuns(grpc::ServerContext* context, const v1::WatchRunsRequest* request,
                         grpc::ServerWriter<v1::RunChange>* writer) override;

  // The run's attempt `resumption_index` ended: "crash-*" runs fail, "requeue-*" runs go back to
  // the queue after attempt 0 (then complete), others complete.
  void EndAttempt(const std::string& name, int resumption_index);
  // The run as its last ended attempt left it, if one ended.
  std::optional<v1::Run> AfterAttempts(const std::string& name);

  // Forgets the requests and the ended attempts; keeps the settings.
  void Reset();

  std::mutex mu;
  std::vector<v1::SubmitRunRequest> submits;  // authorized requests, in order
  std::vector<v1::ListRunsRequest> lists;
  std::vector<v1::StopRunRequest> stops;
  std::map<std::string, v1::Run> after_attempts;  // by run name

 private:
  grpc::Status WatchAttempts(grpc::ServerContext* context, const v1::WatchRunsRequest& request,
                             grpc::ServerWriter<v1::RunChange>* writer);

  Recorder& recorder_;
  StreamControl& stream_;
};

class FakeSchedulerService final : public v1::SchedulerService::Service {
 public:
  explicit FakeSchedulerService(Recorder& recorder);

  // ListNodes' answer, each node in the cluster the filter names. By default node-a: 8 GPUs,
  // schedulable.
  std::vector<v1::Node> nodes;

  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status GetNode(grpc::ServerContext* context, const v1::GetNodeRequest* request,
                       v1::GetNodeResponse* response) override;
  grpc::Status GetQueue(grpc::ServerContext* context, const v1::GetQueueRequest* request,
                        v1::GetQueueResponse* response) override;
  // One cluster, "local": 16 GPUs, 8 in use, one run running, one queued.
  grpc::Status GetUtilization(grpc::ServerContext* context,
                              const v1::GetUtilizationRequest* request,
                              v1::GetUtilizationResponse* response) override;

 private:
  Recorder& recorder_;
};

class FakeCordonService final : public v1::CordonService::Service {
 public:
  FakeCordonService(Recorder& recorder, StreamControl& stream);

  grpc::Status CordonNode(grpc::ServerContext* context, const v1::CordonNodeRequest* request,
                          v1::CordonNodeResponse* response) override;
  grpc::Status UncordonNode(grpc::ServerContext* context, const v1::UncordonNodeRequest* request,
                            v1::UncordonNodeResponse* response) override;
  grpc::Status DrainNode(grpc::ServerContext* context, const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override;
  grpc::Status ListNodeEvents(grpc::ServerContext* context,
                              const v1::ListNodeEventsRequest* request,
                              v1::ListNodeEventsResponse* response) override;
  // Events of node-a as the StreamControl says, numbered from the filter's after_id + 1, one
  // second apart from kT0: even ones CORDONED ("XID 79 on GPU 3"), odd ones HEALTH_CHECK_PASSED
  // ("passed the all-reduce canary"), both by health-api.
  grpc::Status WatchNodeEvents(grpc::ServerContext* context,
                               const v1::WatchNodeEventsRequest* request,
                               grpc::ServerWriter<v1::NodeEvent>* writer) override;

  // Forgets the requests.
  void Reset();

  std::mutex mu;
  std::vector<v1::CordonNodeRequest> cordons;  // authorized requests, in order
  std::vector<v1::WatchNodeEventsRequest> watches;

 private:
  Recorder& recorder_;
  StreamControl& stream_;
};

class FakeHealthService final : public v1::HealthService::Service {
 public:
  explicit FakeHealthService(Recorder& recorder);

  grpc::Status StartSweep(grpc::ServerContext* context, const v1::StartSweepRequest* request,
                          v1::StartSweepResponse* response) override;
  grpc::Status GetSweep(grpc::ServerContext* context, const v1::GetSweepRequest* request,
                        v1::GetSweepResponse* response) override;
  grpc::Status ListSweeps(grpc::ServerContext* context, const v1::ListSweepsRequest* request,
                          v1::ListSweepsResponse* response) override;
  grpc::Status ListHealthResults(grpc::ServerContext* context,
                                 const v1::ListHealthResultsRequest* request,
                                 v1::ListHealthResultsResponse* response) override;

 private:
  Recorder& recorder_;
};

class FakeAdminService final : public v1::AdminService::Service {
 public:
  explicit FakeAdminService(Recorder& recorder);

  grpc::Status CreateApiKey(grpc::ServerContext* context, const v1::CreateApiKeyRequest* request,
                            v1::CreateApiKeyResponse* response) override;
  grpc::Status ListApiKeys(grpc::ServerContext* context, const v1::ListApiKeysRequest* request,
                           v1::ListApiKeysResponse* response) override;
  grpc::Status RevokeApiKey(grpc::ServerContext* context, const v1::RevokeApiKeyRequest* request,
                            v1::RevokeApiKeyResponse* response) override;
  // alice, an admin.
  grpc::Status WhoAmI(grpc::ServerContext* context, const v1::WhoAmIRequest* request,
                      v1::WhoAmIResponse* response) override;
  grpc::Status CreateJoinToken(grpc::ServerContext* context,
                               const v1::CreateJoinTokenRequest* request,
                               v1::CreateJoinTokenResponse* response) override;
  grpc::Status ListJoinTokens(grpc::ServerContext* context,
                              const v1::ListJoinTokensRequest* request,
                              v1::ListJoinTokensResponse* response) override;
  grpc::Status RevokeJoinToken(grpc::ServerContext* context,
                               const v1::RevokeJoinTokenRequest* request,
                               v1::RevokeJoinTokenResponse* response) override;
  // One record: ops cordoned node-1 from 10.0.0.7 through the gateway.
  grpc::Status ListAuditRecords(grpc::ServerContext* context,
                                const v1::ListAuditRecordsRequest* request,
                                v1::ListAuditRecordsResponse* response) override;

 private:
  Recorder& recorder_;
};

// Secrets: one, "hf", an environment secret of alice's; creates answer what they were given,
// without the value.
class FakeSecretService final : public v1::SecretService::Service {
 public:
  explicit FakeSecretService(Recorder& recorder) : recorder_(recorder) {}
  grpc::Status CreateSecret(grpc::ServerContext* context, const v1::CreateSecretRequest* request,
                            v1::CreateSecretResponse* response) override;
  grpc::Status ListSecrets(grpc::ServerContext* context, const v1::ListSecretsRequest* request,
                           v1::ListSecretsResponse* response) override;
  grpc::Status DeleteSecret(grpc::ServerContext* context, const v1::DeleteSecretRequest* request,
                            v1::DeleteSecretResponse* response) override;

 private:
  Recorder& recorder_;
};

// Teams: every call answers a team of the request's name ("vision" when the request names
// none) with ann as member and a quota of 8 GPUs in cluster local; GetUsage one row of ann's.
class FakeTeamService final : public v1::TeamService::Service {
 public:
  explicit FakeTeamService(Recorder& recorder) : recorder_(recorder) {}
  grpc::Status CreateTeam(grpc::ServerContext* c, const v1::CreateTeamRequest* r,
                          v1::CreateTeamResponse* a) override;
  grpc::Status DeleteTeam(grpc::ServerContext* c, const v1::DeleteTeamRequest* r,
                          v1::DeleteTeamResponse* a) override;
  grpc::Status GetTeam(grpc::ServerContext* c, const v1::GetTeamRequest* r,
                       v1::GetTeamResponse* a) override;
  grpc::Status ListTeams(grpc::ServerContext* c, const v1::ListTeamsRequest* r,
                         v1::ListTeamsResponse* a) override;
  grpc::Status AddTeamMember(grpc::ServerContext* c, const v1::AddTeamMemberRequest* r,
                             v1::AddTeamMemberResponse* a) override;
  grpc::Status RemoveTeamMember(grpc::ServerContext* c, const v1::RemoveTeamMemberRequest* r,
                                v1::RemoveTeamMemberResponse* a) override;
  grpc::Status SetTeamQuota(grpc::ServerContext* c, const v1::SetTeamQuotaRequest* r,
                            v1::SetTeamQuotaResponse* a) override;
  grpc::Status SetTeamShare(grpc::ServerContext* c, const v1::SetTeamShareRequest* r,
                            v1::SetTeamShareResponse* a) override;
  grpc::Status GetUsage(grpc::ServerContext* c, const v1::GetUsageRequest* r,
                        v1::GetUsageResponse* a) override;

 private:
  Recorder& recorder_;
};

// A run's metrics: three points, two of attempt 0 (steps 10, 20) and one of attempt 1 (step
// 30, loss NaN), and the two attempts, the first ended by a node failure ("node-2 lost").
class FakeRunMetricsService final : public v1::RunMetricsService::Service {
 public:
  explicit FakeRunMetricsService(Recorder& recorder) : recorder_(recorder) {}
  grpc::Status GetRunMetrics(grpc::ServerContext* context, const v1::GetRunMetricsRequest* request,
                             v1::GetRunMetricsResponse* response) override;

 private:
  Recorder& recorder_;
};

class FakeLogService final : public v1::LogService::Service {
 public:
  // `runs` is told when a simulated attempt ends; it may be null without simulate_attempts.
  FakeLogService(Recorder& recorder, StreamControl& stream, FakeRunService* runs = nullptr);

  // Off: GetLogs streams numbered lines ("line 0", "line 1", ...) of node-1 as the StreamControl
  // says: ranks alternate 0, 1 (rank 1's lines on stderr), line 2 is not valid UTF-8, and the
  // request's filters are ignored (a client relays what comes).
  // On: it streams three lines of the latest attempt of node-a, in time order: rank 0 stdout,
  // rank 1 stderr, and rank 0 again with a byte that is not UTF-8; the request's rank filters
  // them. With follow, the lines come 300 ms apart, then the attempt ends (EndAttempt), except
  // for the run "endless", whose stream stays open until the client cancels it. "nologs-*" runs
  // have no logs (UNIMPLEMENTED, as from a server without a log service).
  bool simulate_attempts = false;
  // How StreamLogs sends lines to a request with `packed`: as plain lines (a log service from
  // before packing), or each in a group of its own; kMalformed: the first so, the others in
  // groups whose bytes are not whole lines.
  enum class Packing { kNever, kWhenAsked, kMalformed };
  Packing packing = Packing::kNever;

  grpc::Status GetLogs(grpc::ServerContext* context, const v1::GetLogsRequest* request,
                       grpc::ServerWriter<v1::LogLine>* writer) override;
  // The same lines, one LogLines message each, recorded as "StreamLogs". For "nologs-*" runs it
  // answers UNIMPLEMENTED without ending the attempt (as a server without a log service; a
  // client falls back to GetLogs, which ends it).
  grpc::Status StreamLogs(grpc::ServerContext* context, const v1::GetLogsRequest* request,
                          grpc::ServerWriter<v1::LogLines>* writer) override;

  // The authorized requests so far.
  std::vector<v1::GetLogsRequest> Requests();
  // Forgets the requests and the cancellations.
  void Reset();

  std::mutex mu;
  std::vector<v1::GetLogsRequest> requests;
  int cancelled = 0;  // simulated streams of "endless" that the client cancelled

 private:
  template <class Writer, class Wrap>
  grpc::Status Answer(grpc::ServerContext* context, const v1::GetLogsRequest& request,
                      const char* method, Writer* writer, Wrap wrap);
  grpc::Status ServeAttempt(grpc::ServerContext* context, const v1::GetLogsRequest& request,
                            const std::function<bool(const v1::LogLine&)>& write);

  Recorder& recorder_;
  StreamControl& stream_;
  FakeRunService* runs_;
};

// All the fakes on one real gRPC server at 127.0.0.1:0, sharing one Recorder and one
// StreamControl.
class FakeServices {
 public:
  FakeServices();  // the test fails when the server cannot start
  ~FakeServices();

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  // Forgets what was recorded (calls, requests, stream counts, ended attempts); keeps the
  // settings.
  void Reset();

  // Stops the server; streams still open are cancelled after 5 s. Also on destruction.
  void Shutdown();

  Recorder recorder;
  StreamControl stream;
  FakeRunService runs;
  FakeSchedulerService scheduler;
  FakeCordonService cordon;
  FakeHealthService health;
  FakeAdminService admin;
  FakeLogService logs;
  FakeSecretService secrets;
  FakeRunMetricsService metrics;
  FakeTeamService teams;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace tessera::testing
