#pragma once
// Fake RunService, SchedulerService, CordonService, AdminService and LogService on a real gRPC
// server at 127.0.0.1:0, for running the real mcli binary against. The fakes record every request
// and answer UNAUTHENTICATED unless the call carries `authorization: Bearer test-key`.

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace mcli_test {

namespace v1 = tessera::v1;
using grpc::ServerContext;
using grpc::Status;

inline constexpr char kApiKey[] = "test-key";

// Fakes

// Counts calls and rejects those without the right key.
class Recorder {
 public:
  Status Authorize(ServerContext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    const std::string value =
        it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
    if (value != std::string("Bearer ") + kApiKey) {
      ++rejected_;
      return Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
    }
    return Status::OK;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  int rejected() {
    std::lock_guard<std::mutex> lock(mu_);
    return rejected_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_ = rejected_ = 0;
  }

 private:
  std::mutex mu_;
  int calls_ = 0;
  int rejected_ = 0;
};

inline google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(seconds);
  return timestamp;
}

constexpr int64_t kT0 = 1'700'000'000;  // 2023-11-14 22:13:20 UTC

inline v1::Run SampleRun(const std::string& name, v1::RunStatus status) {
  v1::Run run;
  run.set_id("id-" + name);
  run.set_name(name);
  run.set_user("alice");
  run.set_status(status);
  run.set_resumption_index(0);
  run.mutable_spec()->set_name(name);
  run.mutable_spec()->set_command("python train.py");
  run.mutable_spec()->mutable_compute()->set_cluster("c1");
  run.mutable_spec()->mutable_compute()->set_gpus(8);
  run.mutable_spec()->mutable_scheduling()->set_priority(v1::PRIORITY_MEDIUM);
  *run.mutable_created_at() = At(kT0);
  return run;
}

class FakeRunService : public v1::RunService::Service {
 public:
  explicit FakeRunService(Recorder& recorder) : recorder_(recorder) {}

  Status SubmitRun(ServerContext* context, const v1::SubmitRunRequest* request,
                   v1::SubmitRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    submits.push_back(*request);
    *response->mutable_run() =
        SampleRun(request->spec().name() + "-abc123", v1::RUN_STATUS_PENDING);
    *response->mutable_run()->mutable_spec() = request->spec();
    return Status::OK;
  }

  Status GetRun(ServerContext* context, const v1::GetRunRequest* request,
                v1::GetRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    const auto latest = after_attempts.find(request->name());
    *response->mutable_run() = latest != after_attempts.end()
                                   ? latest->second
                                   : SampleRun(request->name(), v1::RUN_STATUS_PENDING);
    return Status::OK;
  }

  // The run's attempt `resumption_index` ended (its followed logs did): "crash-*" runs fail,
  // "requeue-*" runs go back to the queue after attempt 0 (then complete), others complete.
  void EndAttempt(const std::string& name, int resumption_index) {
    v1::Run run = SampleRun(name, v1::RUN_STATUS_COMPLETED);
    run.set_status_reason("Run completed");
    run.set_resumption_index(resumption_index);
    if (name.rfind("crash", 0) == 0) {
      run.set_status(v1::RUN_STATUS_FAILED);
      run.set_status_reason("Run failed with exit code 1 (rank 1 on node-a)");
    } else if (name.rfind("requeue", 0) == 0 && resumption_index == 0) {
      run.set_status(v1::RUN_STATUS_QUEUED);
      run.set_status_reason("Run was placed back in the queue (node-a failed)");
      run.set_resumption_index(1);
    }
    *run.mutable_updated_at() = At(kT0 + 10 + resumption_index);
    std::lock_guard<std::mutex> lock(mu);
    after_attempts[name] = run;
  }

  // The run as its last ended attempt left it, if one ended.
  std::optional<v1::Run> AfterAttempts(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    const auto latest = after_attempts.find(name);
    if (latest == after_attempts.end()) return std::nullopt;
    return latest->second;
  }

  Status ListRuns(ServerContext* context, const v1::ListRunsRequest* request,
                  v1::ListRunsResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    lists.push_back(*request);
    *response->add_runs() = SampleRun("train-a", v1::RUN_STATUS_RUNNING);
    v1::Run& second = *response->add_runs() = SampleRun("train-long-name", v1::RUN_STATUS_QUEUED);
    second.set_user("bob");
    second.set_resumption_index(2);
    second.mutable_progress()->set_step(50);
    second.mutable_progress()->set_total_steps(200);
    return Status::OK;
  }

  Status DescribeRun(ServerContext* context, const v1::DescribeRunRequest* request,
                     v1::DescribeRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    if (request->name() != "train-a") {
      return Status(grpc::StatusCode::NOT_FOUND, "run \"" + request->name() + "\" not found");
    }
    v1::RunDescription& description = *response->mutable_description();
    *description.mutable_run() = SampleRun("train-a", v1::RUN_STATUS_RUNNING);
    description.mutable_run()->set_resumption_index(1);
    description.mutable_run()->set_pending_seconds(125);
    v1::Attempt& first = *description.add_attempts();
    first.set_resumption_index(0);
    first.set_status(v1::RUN_STATUS_FAILED);
    first.add_nodes()->set_node_name("node-a");
    first.add_nodes()->set_node_name("node-b");
    *first.mutable_started_at() = At(kT0 + 60);
    *first.mutable_ended_at() = At(kT0 + 3600);
    first.set_end_reason(v1::ATTEMPT_END_REASON_GPU_FAULT);
    first.set_reason("XID 79 on GPU 3");
    v1::Attempt& second = *description.add_attempts();
    second.set_resumption_index(1);
    second.set_status(v1::RUN_STATUS_RUNNING);
    second.add_nodes()->set_node_name("node-c");
    v1::RunEvent& event = *description.add_events();
    event.set_type(v1::RUN_EVENT_TYPE_REQUEUED);
    *event.mutable_time() = At(kT0 + 3600);
    event.set_message("Run was placed back in the scheduling queue");
    return Status::OK;
  }

  Status StopRun(ServerContext* context, const v1::StopRunRequest* request,
                 v1::StopRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    stops.push_back(*request);
    if (request->name() == "missing") {
      return Status(grpc::StatusCode::NOT_FOUND, "run \"missing\" not found");
    }
    *response->mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_TERMINATING);
    response->mutable_run()->set_stop_requested(true);
    return Status::OK;
  }

  // Streams the run's next attempt through STARTING and RUNNING; the attempt ends when its logs
  // were followed to their end (EndAttempt), as with a real run. A run that has ended gets no
  // changes. The stream stays open: mcli must end it itself.
  Status WatchRuns(ServerContext* context, const v1::WatchRunsRequest* request,
                   grpc::ServerWriter<v1::RunChange>* writer) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    const std::string name = request->filter().name_globs_size() > 0
                                 ? request->filter().name_globs(0)
                                 : std::string("unknown");
    const std::optional<v1::Run> latest = AfterAttempts(name);
    if (!latest.has_value() || latest->status() == v1::RUN_STATUS_QUEUED) {
      const int attempt = latest.has_value() ? latest->resumption_index() : 0;
      const std::pair<v1::RunStatus, const char*> steps[] = {
          {v1::RUN_STATUS_STARTING, "Run was placed on node-a"},
          {v1::RUN_STATUS_RUNNING, "Run started"}};
      int64_t offset = 1 + 20 * attempt;
      for (const auto& [status, message] : steps) {
        v1::RunChange change;
        *change.mutable_run() = SampleRun(name, status);
        change.mutable_run()->set_resumption_index(attempt);
        change.mutable_event()->set_type(v1::RUN_EVENT_TYPE_STARTED);
        change.mutable_event()->set_message(message);
        *change.mutable_event()->mutable_time() = At(kT0 + offset++);
        if (!writer->Write(change)) break;
      }
    }
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return Status::OK;
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mu);
    submits.clear();
    lists.clear();
    stops.clear();
    after_attempts.clear();
  }

  std::mutex mu;
  std::vector<v1::SubmitRunRequest> submits;
  std::vector<v1::ListRunsRequest> lists;
  std::vector<v1::StopRunRequest> stops;
  std::map<std::string, v1::Run> after_attempts;

 private:
  Recorder& recorder_;
};

// Three lines of the latest attempt, in time order: rank 0 stdout, rank 1 stderr, and rank 0
// again with a byte that is not UTF-8. --rank filters them. With follow, the lines come 300 ms
// apart, then the attempt ends (see FakeRunService::EndAttempt), except for the run
// "endless", whose stream stays open until mcli cancels it. The run "missing" does not exist;
// "nologs-*" runs have no logs (UNIMPLEMENTED, as from a server without a log service).
class FakeLogService : public v1::LogService::Service {
 public:
  FakeLogService(Recorder& recorder, FakeRunService& runs) : recorder_(recorder), runs_(runs) {}

  Status GetLogs(ServerContext* context, const v1::GetLogsRequest* request,
                 grpc::ServerWriter<v1::LogLine>* writer) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(*request);
    }
    if (request->run_name() == "missing") {
      return Status(grpc::StatusCode::NOT_FOUND, "run \"missing\" not found");
    }
    if (request->run_name().rfind("nologs", 0) == 0) {  // its attempt ends unseen
      runs_.EndAttempt(request->run_name(), 0);
      return Status(grpc::StatusCode::UNIMPLEMENTED, "");
    }
    const struct {
      int rank;
      v1::LogStream stream;
      const char* text;
    } lines[] = {{0, v1::LOG_STREAM_STDOUT, "step 1 loss 2.50"},
                 {1, v1::LOG_STREAM_STDERR, "warning: slow data loader"},
                 {0, v1::LOG_STREAM_STDOUT, "bad \xff byte"}};
    int64_t sequence[2][3] = {};
    int i = 0;
    for (const auto& spec : lines) {
      ++i;
      if (request->has_rank() && request->rank() != spec.rank) continue;
      v1::LogLine line;
      line.set_run_id("id-" + request->run_name());
      line.set_resumption_index(request->resumption_index());
      line.set_rank(spec.rank);
      line.set_node_rank(0);
      line.set_node_name("node-a");
      line.set_stream(spec.stream);
      line.set_sequence(sequence[spec.rank][spec.stream]++);
      *line.mutable_time() = At(kT0 + i);
      line.set_text(spec.text);
      if (!writer->Write(line)) return Status::OK;
      if (request->follow()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    if (!request->follow()) return Status::OK;
    if (request->run_name() == "endless") {
      while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard<std::mutex> lock(mu);
      ++cancelled;
      return Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    runs_.EndAttempt(request->run_name(),
                     request->has_resumption_index() ? request->resumption_index() : 0);
    return Status::OK;
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mu);
    requests.clear();
    cancelled = 0;
  }

  std::vector<v1::GetLogsRequest> Requests() {
    std::lock_guard<std::mutex> lock(mu);
    return requests;
  }

  std::mutex mu;
  std::vector<v1::GetLogsRequest> requests;
  int cancelled = 0;

 private:
  Recorder& recorder_;
  FakeRunService& runs_;
};

class FakeSchedulerService : public v1::SchedulerService::Service {
 public:
  explicit FakeSchedulerService(Recorder& recorder) : recorder_(recorder) {}

  Status ListNodes(ServerContext* context, const v1::ListNodesRequest* request,
                   v1::ListNodesResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    v1::Node& node = *response->add_nodes();
    node.set_name("node-a");
    node.set_cluster(request->filter().cluster());
    node.set_gpu_count(8);
    node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    return Status::OK;
  }

 private:
  Recorder& recorder_;
};

class FakeCordonService : public v1::CordonService::Service {
 public:
  explicit FakeCordonService(Recorder& recorder) : recorder_(recorder) {}

  Status CordonNode(ServerContext* context, const v1::CordonNodeRequest* request,
                    v1::CordonNodeResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    cordons.push_back(*request);
    response->mutable_node()->set_name(request->node_name());
    response->mutable_node()->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    return Status::OK;
  }

  // Two events, a moment apart, then the end of the stream.
  Status WatchNodeEvents(ServerContext* context, const v1::WatchNodeEventsRequest* request,
                         grpc::ServerWriter<v1::NodeEvent>* writer) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    {
      std::lock_guard<std::mutex> lock(mu);
      watches.push_back(*request);
    }
    const char* reasons[] = {"XID 79 on GPU 3", "passed the all-reduce canary"};
    const v1::NodeEventType types[] = {v1::NODE_EVENT_TYPE_CORDONED,
                                       v1::NODE_EVENT_TYPE_HEALTH_CHECK_PASSED};
    for (int i = 0; i < 2; ++i) {
      v1::NodeEvent event;
      event.set_id(i + 1);
      event.set_node_name("node-a");
      event.set_type(types[i]);
      *event.mutable_time() = At(kT0 + i);
      event.mutable_actor()->set_name("health-api");
      event.set_reason(reasons[i]);
      writer->Write(event);
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    }
    return Status::OK;
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mu);
    cordons.clear();
    watches.clear();
  }

  std::mutex mu;
  std::vector<v1::CordonNodeRequest> cordons;
  std::vector<v1::WatchNodeEventsRequest> watches;

 private:
  Recorder& recorder_;
};

class FakeAdminService : public v1::AdminService::Service {
 public:
  explicit FakeAdminService(Recorder& recorder) : recorder_(recorder) {}

  Status WhoAmI(ServerContext* context, const v1::WhoAmIRequest*,
                v1::WhoAmIResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    response->set_user("alice");
    response->set_role(v1::ROLE_ADMIN);
    return Status::OK;
  }

 private:
  Recorder& recorder_;
};

class FakeServer {
 public:
  FakeServer()
      : runs(recorder),
        scheduler(recorder),
        cordon(recorder),
        admin(recorder),
        logs(recorder, runs) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&runs);
    builder.RegisterService(&scheduler);
    builder.RegisterService(&cordon);
    builder.RegisterService(&admin);
    builder.RegisterService(&logs);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    REQUIRE(port_ > 0);
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  void Reset() {
    recorder.Reset();
    runs.Reset();
    cordon.Reset();
    logs.Reset();
  }

  Recorder recorder;
  FakeRunService runs;
  FakeSchedulerService scheduler;
  FakeCordonService cordon;
  FakeAdminService admin;
  FakeLogService logs;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Started once for the whole binary and never destroyed (its threads outlive the tests).
inline FakeServer& Instance() {
  static FakeServer* server = new FakeServer();
  return *server;
}

// The server with nothing recorded yet, for a test to start with.
inline FakeServer& Server() {
  FakeServer& server = Instance();
  server.Reset();
  return server;
}

}  // namespace mcli_test
