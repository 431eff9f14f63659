#include "tests/support/fake_services.h"

#include <utility>

namespace tessera::testing {

using grpc::ServerContext;
using grpc::Status;

google::protobuf::Timestamp TimeAt(int64_t unix_seconds) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(unix_seconds);
  return timestamp;
}

v1::Run SampleRun(const std::string& name, v1::RunStatus status) {
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
  *run.mutable_created_at() = TimeAt(kT0);
  return run;
}

bool IsMissingRun(const std::string& name) { return name == "missing" || name == "nope"; }

namespace {

Status NotFound(const std::string& run_name) {
  return Status(grpc::StatusCode::NOT_FOUND, "run \"" + run_name + "\" not found");
}

// Polls: a stream held open by a simulated run ends only when the client cancels it.
void SleepUntilCancelled(ServerContext* context) {
  while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

// Recorder

Status Recorder::Record(ServerContext* context, const std::string& method,
                        const google::protobuf::Message& request) {
  std::string authorization;
  const auto& metadata = context->client_metadata();
  if (const auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization.assign(it->second.data(), it->second.size());
  }
  std::shared_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  std::lock_guard lock(mu_);
  calls_.push_back(Call{method, std::move(copy), authorization});
  if (authorization != kFakeAuthorization) {
    ++rejected_;
    return Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
  }
  if (next_error_.has_value()) {
    Status error = *std::move(next_error_);
    next_error_.reset();
    return error;
  }
  return Status::OK;
}

void Recorder::FailNext(Status status) {
  std::lock_guard lock(mu_);
  next_error_ = std::move(status);
}

std::size_t Recorder::count() {
  std::lock_guard lock(mu_);
  return calls_.size();
}

int Recorder::calls() { return static_cast<int>(count()); }

int Recorder::rejected() {
  std::lock_guard lock(mu_);
  return rejected_;
}

Recorder::Call Recorder::Last() {
  std::lock_guard lock(mu_);
  REQUIRE(!calls_.empty());
  return calls_.back();
}

void Recorder::Reset() {
  std::lock_guard lock(mu_);
  calls_.clear();
  rejected_ = 0;
  next_error_.reset();
}

// StreamControl

bool StreamControl::WaitCancelled(int n) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::seconds(20), [&] { return cancelled >= n; });
}

bool StreamControl::WaitStarted(int n) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::seconds(20), [&] { return started >= n; });
}

void StreamControl::Reset() {
  std::lock_guard lock(mu);
  started = cancelled = 0;
}

void StreamControl::WaitForCancel(ServerContext* context) {
  // The short wait only bounds how often IsCancelled is checked.
  std::unique_lock lock(mu);
  while (!context->IsCancelled()) cv.wait_for(lock, std::chrono::milliseconds(5));
  ++cancelled;
  cv.notify_all();
}

// FakeRunService

FakeRunService::FakeRunService(Recorder& recorder, StreamControl& stream)
    : recorder_(recorder), stream_(stream) {
  listed.push_back(SampleRun("train-a", v1::RUN_STATUS_RUNNING));
  v1::Run& second = listed.emplace_back(SampleRun("train-long-name", v1::RUN_STATUS_QUEUED));
  second.set_user("bob");
  second.set_resumption_index(2);
  second.mutable_progress()->set_step(50);
  second.mutable_progress()->set_total_steps(200);
}

Status FakeRunService::SubmitRun(ServerContext* context, const v1::SubmitRunRequest* request,
                                 v1::SubmitRunResponse* response) {
  if (Status st = recorder_.Record(context, "SubmitRun", *request); !st.ok()) return st;
  std::lock_guard lock(mu);
  submits.push_back(*request);
  *response->mutable_run() =
      SampleRun(request->spec().name() + submitted_suffix, v1::RUN_STATUS_PENDING);
  *response->mutable_run()->mutable_spec() = request->spec();
  return Status::OK;
}

Status FakeRunService::GetRun(ServerContext* context, const v1::GetRunRequest* request,
                              v1::GetRunResponse* response) {
  if (Status st = recorder_.Record(context, "GetRun", *request); !st.ok()) return st;
  std::lock_guard lock(mu);
  const auto latest = after_attempts.find(request->name());
  *response->mutable_run() = latest != after_attempts.end()
                                 ? latest->second
                                 : SampleRun(request->name(), v1::RUN_STATUS_PENDING);
  response->mutable_run()->set_version(1234567890123LL);  // more than 32 bits
  return Status::OK;
}

Status FakeRunService::ListRuns(ServerContext* context, const v1::ListRunsRequest* request,
                                v1::ListRunsResponse* response) {
  if (Status st = recorder_.Record(context, "ListRuns", *request); !st.ok()) return st;
  std::lock_guard lock(mu);
  lists.push_back(*request);
  for (const v1::Run& run : listed) *response->add_runs() = run;
  return Status::OK;
}

Status FakeRunService::DescribeRun(ServerContext* context, const v1::DescribeRunRequest* request,
                                   v1::DescribeRunResponse* response) {
  if (Status st = recorder_.Record(context, "DescribeRun", *request); !st.ok()) return st;
  if (IsMissingRun(request->name())) return NotFound(request->name());
  // In its second attempt, after a GPU fault ended the first.
  v1::RunDescription& description = *response->mutable_description();
  *description.mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_RUNNING);
  description.mutable_run()->set_resumption_index(1);
  description.mutable_run()->set_pending_seconds(125);
  description.set_goodput(0.5);
  v1::Attempt& first = *description.add_attempts();
  first.set_resumption_index(0);
  first.set_status(v1::RUN_STATUS_FAILED);
  first.add_nodes()->set_node_name("node-a");
  first.add_nodes()->set_node_name("node-b");
  *first.mutable_started_at() = TimeAt(kT0 + 60);
  *first.mutable_ended_at() = TimeAt(kT0 + 3600);
  first.set_end_reason(v1::ATTEMPT_END_REASON_GPU_FAULT);
  first.set_reason("XID 79 on GPU 3");
  v1::Attempt& second = *description.add_attempts();
  second.set_resumption_index(1);
  second.set_status(v1::RUN_STATUS_RUNNING);
  second.add_nodes()->set_node_name("node-c");
  v1::RunEvent& event = *description.add_events();
  event.set_type(v1::RUN_EVENT_TYPE_REQUEUED);
  *event.mutable_time() = TimeAt(kT0 + 3600);
  event.set_message("Run was placed back in the scheduling queue");
  return Status::OK;
}

Status FakeRunService::StopRun(ServerContext* context, const v1::StopRunRequest* request,
                               v1::StopRunResponse* response) {
  if (Status st = recorder_.Record(context, "StopRun", *request); !st.ok()) return st;
  std::lock_guard lock(mu);
  stops.push_back(*request);
  if (IsMissingRun(request->name())) return NotFound(request->name());
  *response->mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_TERMINATING);
  response->mutable_run()->set_stop_requested(true);
  return Status::OK;
}

Status FakeRunService::DeleteRun(ServerContext* context, const v1::DeleteRunRequest* request,
                                 v1::DeleteRunResponse*) {
  return recorder_.Record(context, "DeleteRun", *request);
}

Status FakeRunService::UpdateRun(ServerContext* context, const v1::UpdateRunRequest* request,
                                 v1::UpdateRunResponse* response) {
  response->mutable_run()->set_name(request->name());
  return recorder_.Record(context, "UpdateRun", *request);
}

Status FakeRunService::RestartRun(ServerContext* context, const v1::RestartRunRequest* request,
                                  v1::RestartRunResponse* response) {
  response->mutable_run()->set_name(request->name());
  return recorder_.Record(context, "RestartRun", *request);
}

Status FakeRunService::CloneRun(ServerContext* context, const v1::CloneRunRequest* request,
                                v1::CloneRunResponse* response) {
  response->mutable_run()->set_name(request->new_name().empty() ? request->name() + "-clone"
                                                                : request->new_name());
  return recorder_.Record(context, "CloneRun", *request);
}

Status FakeRunService::WatchRuns(ServerContext* context, const v1::WatchRunsRequest* request,
                                 grpc::ServerWriter<v1::RunChange>* writer) {
  if (Status st = recorder_.Record(context, "WatchRuns", *request); !st.ok()) return st;
  if (simulate_attempts) return WatchAttempts(context, *request, writer);
  return stream_.Serve(context, writer, [](int i) {
    v1::RunChange change;
    change.mutable_run()->set_name("run-" + std::to_string(i));
    change.mutable_event()->set_id(i + 1);
    change.mutable_event()->set_message("line one\nline two");
    return change;
  });
}

Status FakeRunService::WatchAttempts(ServerContext* context, const v1::WatchRunsRequest& request,
                                     grpc::ServerWriter<v1::RunChange>* writer) {
  const std::string name = request.filter().name_globs_size() > 0 ? request.filter().name_globs(0)
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
      *change.mutable_event()->mutable_time() = TimeAt(kT0 + offset++);
      if (!writer->Write(change)) break;
    }
  }
  // The stream stays open: the client must end it itself.
  SleepUntilCancelled(context);
  return Status::OK;
}

void FakeRunService::EndAttempt(const std::string& name, int resumption_index) {
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
  *run.mutable_updated_at() = TimeAt(kT0 + 10 + resumption_index);
  std::lock_guard lock(mu);
  after_attempts[name] = run;
}

std::optional<v1::Run> FakeRunService::AfterAttempts(const std::string& name) {
  std::lock_guard lock(mu);
  const auto latest = after_attempts.find(name);
  if (latest == after_attempts.end()) return std::nullopt;
  return latest->second;
}

void FakeRunService::Reset() {
  std::lock_guard lock(mu);
  submits.clear();
  lists.clear();
  stops.clear();
  after_attempts.clear();
}

// FakeSchedulerService

FakeSchedulerService::FakeSchedulerService(Recorder& recorder) : recorder_(recorder) {
  v1::Node& node = nodes.emplace_back();
  node.set_name("node-a");
  node.set_gpu_count(8);
  node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
}

Status FakeSchedulerService::ListNodes(ServerContext* context, const v1::ListNodesRequest* request,
                                       v1::ListNodesResponse* response) {
  if (Status st = recorder_.Record(context, "ListNodes", *request); !st.ok()) return st;
  for (const v1::Node& node : nodes) {
    v1::Node& listed = *response->add_nodes() = node;
    listed.set_cluster(request->filter().cluster());
  }
  return Status::OK;
}

Status FakeSchedulerService::GetNode(ServerContext* context, const v1::GetNodeRequest* request,
                                     v1::GetNodeResponse* response) {
  response->mutable_node()->set_name(request->name());
  response->add_run_names("train-1");
  return recorder_.Record(context, "GetNode", *request);
}

Status FakeSchedulerService::GetQueue(ServerContext* context, const v1::GetQueueRequest* request,
                                      v1::GetQueueResponse* response) {
  response->add_entries()->set_waiting_reason("needs 4 nodes");
  return recorder_.Record(context, "GetQueue", *request);
}

// FakeCordonService

FakeCordonService::FakeCordonService(Recorder& recorder, StreamControl& stream)
    : recorder_(recorder), stream_(stream) {}

Status FakeCordonService::CordonNode(ServerContext* context, const v1::CordonNodeRequest* request,
                                     v1::CordonNodeResponse* response) {
  if (Status st = recorder_.Record(context, "CordonNode", *request); !st.ok()) return st;
  std::lock_guard lock(mu);
  cordons.push_back(*request);
  response->mutable_node()->set_name(request->node_name());
  response->mutable_node()->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  return Status::OK;
}

Status FakeCordonService::UncordonNode(ServerContext* context,
                                       const v1::UncordonNodeRequest* request,
                                       v1::UncordonNodeResponse* response) {
  response->mutable_node()->set_name(request->node_name());
  return recorder_.Record(context, "UncordonNode", *request);
}

Status FakeCordonService::DrainNode(ServerContext* context, const v1::DrainNodeRequest* request,
                                    v1::DrainNodeResponse* response) {
  response->mutable_node()->set_name(request->node_name());
  return recorder_.Record(context, "DrainNode", *request);
}

Status FakeCordonService::ListNodeEvents(ServerContext* context,
                                         const v1::ListNodeEventsRequest* request,
                                         v1::ListNodeEventsResponse* response) {
  response->add_events()->set_id(7);
  return recorder_.Record(context, "ListNodeEvents", *request);
}

Status FakeCordonService::WatchNodeEvents(ServerContext* context,
                                          const v1::WatchNodeEventsRequest* request,
                                          grpc::ServerWriter<v1::NodeEvent>* writer) {
  if (Status st = recorder_.Record(context, "WatchNodeEvents", *request); !st.ok()) return st;
  {
    std::lock_guard lock(mu);
    watches.push_back(*request);
  }
  const int64_t after = request->filter().after_id();
  return stream_.Serve(context, writer, [after](int i) {
    const bool cordoned = i % 2 == 0;
    v1::NodeEvent event;
    event.set_id(after + i + 1);
    event.set_node_name("node-a");
    event.set_type(cordoned ? v1::NODE_EVENT_TYPE_CORDONED
                            : v1::NODE_EVENT_TYPE_HEALTH_CHECK_PASSED);
    *event.mutable_time() = TimeAt(kT0 + i);
    event.mutable_actor()->set_name("health-api");
    event.set_reason(cordoned ? "XID 79 on GPU 3" : "passed the all-reduce canary");
    return event;
  });
}

void FakeCordonService::Reset() {
  std::lock_guard lock(mu);
  cordons.clear();
  watches.clear();
}

// FakeHealthService

FakeHealthService::FakeHealthService(Recorder& recorder) : recorder_(recorder) {}

Status FakeHealthService::StartSweep(ServerContext* context, const v1::StartSweepRequest* request,
                                     v1::StartSweepResponse* response) {
  response->mutable_sweep()->set_id("sweep-1");
  response->mutable_sweep()->set_state(v1::SWEEP_STATE_RUNNING);
  return recorder_.Record(context, "StartSweep", *request);
}

Status FakeHealthService::GetSweep(ServerContext* context, const v1::GetSweepRequest* request,
                                   v1::GetSweepResponse* response) {
  response->mutable_sweep()->set_id(request->id());
  return recorder_.Record(context, "GetSweep", *request);
}

Status FakeHealthService::ListSweeps(ServerContext* context, const v1::ListSweepsRequest* request,
                                     v1::ListSweepsResponse* response) {
  response->add_sweeps()->set_id("sweep-1");
  return recorder_.Record(context, "ListSweeps", *request);
}

Status FakeHealthService::ListHealthResults(ServerContext* context,
                                            const v1::ListHealthResultsRequest* request,
                                            v1::ListHealthResultsResponse* response) {
  response->add_results()->set_node_name("node-1");
  return recorder_.Record(context, "ListHealthResults", *request);
}

// FakeAdminService

FakeAdminService::FakeAdminService(Recorder& recorder) : recorder_(recorder) {}

Status FakeAdminService::CreateApiKey(ServerContext* context,
                                      const v1::CreateApiKeyRequest* request,
                                      v1::CreateApiKeyResponse* response) {
  response->mutable_key()->set_id("key-1");
  response->mutable_key()->set_user(request->user());
  response->set_secret("s3cret");
  return recorder_.Record(context, "CreateApiKey", *request);
}

Status FakeAdminService::ListApiKeys(ServerContext* context, const v1::ListApiKeysRequest* request,
                                     v1::ListApiKeysResponse* response) {
  response->add_keys()->set_id("key-1");
  return recorder_.Record(context, "ListApiKeys", *request);
}

Status FakeAdminService::RevokeApiKey(ServerContext* context,
                                      const v1::RevokeApiKeyRequest* request,
                                      v1::RevokeApiKeyResponse*) {
  return recorder_.Record(context, "RevokeApiKey", *request);
}

Status FakeAdminService::WhoAmI(ServerContext* context, const v1::WhoAmIRequest* request,
                                v1::WhoAmIResponse* response) {
  response->set_user("alice");
  response->set_role(v1::ROLE_ADMIN);
  return recorder_.Record(context, "WhoAmI", *request);
}

// FakeLogService

FakeLogService::FakeLogService(Recorder& recorder, StreamControl& stream, FakeRunService* runs)
    : recorder_(recorder), stream_(stream), runs_(runs) {}

Status FakeLogService::GetLogs(ServerContext* context, const v1::GetLogsRequest* request,
                               grpc::ServerWriter<v1::LogLine>* writer) {
  if (Status st = recorder_.Record(context, "GetLogs", *request); !st.ok()) return st;
  {
    std::lock_guard lock(mu);
    requests.push_back(*request);
  }
  if (IsMissingRun(request->run_name())) return NotFound(request->run_name());
  if (simulate_attempts) return ServeAttempt(context, *request, writer);
  const std::string run_id = "id-" + request->run_name();
  return stream_.Serve(context, writer, [&run_id](int i) {
    v1::LogLine line;
    line.set_run_id(run_id);
    line.set_rank(i % 2);
    line.set_node_rank(0);
    line.set_node_name("node-1");
    line.set_stream(i % 2 == 0 ? v1::LOG_STREAM_STDOUT : v1::LOG_STREAM_STDERR);
    line.set_sequence(i / 2);
    *line.mutable_time() = TimeAt(kT0 + i);
    line.set_text(i == 2 ? std::string("bad \xff byte") : "line " + std::to_string(i));
    return line;
  });
}

Status FakeLogService::ServeAttempt(ServerContext* context, const v1::GetLogsRequest& request,
                                    grpc::ServerWriter<v1::LogLine>* writer) {
  if (runs_ == nullptr) {  // not a REQUIRE: this is a server thread, not the test's
    return Status(grpc::StatusCode::FAILED_PRECONDITION, "simulated attempts need the runs");
  }
  if (request.run_name().rfind("nologs", 0) == 0) {  // its attempt ends unseen
    runs_->EndAttempt(request.run_name(), 0);
    return Status(grpc::StatusCode::UNIMPLEMENTED, "");
  }
  const struct {
    int rank;
    v1::LogStream stream;
    const char* text;
  } lines[] = {{0, v1::LOG_STREAM_STDOUT, "step 1 loss 2.50"},
               {1, v1::LOG_STREAM_STDERR, "warning: slow data loader"},
               {0, v1::LOG_STREAM_STDOUT, "bad \xff byte"}};
  int64_t sequence[2][3] = {};  // by rank and stream
  int i = 0;
  for (const auto& spec : lines) {
    ++i;
    if (request.has_rank() && request.rank() != spec.rank) continue;
    v1::LogLine line;
    line.set_run_id("id-" + request.run_name());
    line.set_resumption_index(request.resumption_index());
    line.set_rank(spec.rank);
    line.set_node_rank(0);
    line.set_node_name("node-a");
    line.set_stream(spec.stream);
    line.set_sequence(sequence[spec.rank][spec.stream]++);
    *line.mutable_time() = TimeAt(kT0 + i);
    line.set_text(spec.text);
    if (!writer->Write(line)) return Status::OK;
    if (request.follow()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  if (!request.follow()) return Status::OK;
  if (request.run_name() == "endless") {
    SleepUntilCancelled(context);
    std::lock_guard lock(mu);
    ++cancelled;
    return Status(grpc::StatusCode::CANCELLED, "cancelled");
  }
  runs_->EndAttempt(request.run_name(),
                    request.has_resumption_index() ? request.resumption_index() : 0);
  return Status::OK;
}

std::vector<v1::GetLogsRequest> FakeLogService::Requests() {
  std::lock_guard lock(mu);
  return requests;
}

void FakeLogService::Reset() {
  std::lock_guard lock(mu);
  requests.clear();
  cancelled = 0;
}

// FakeServices

FakeServices::FakeServices()
    : runs(recorder, stream),
      scheduler(recorder),
      cordon(recorder, stream),
      health(recorder),
      admin(recorder),
      logs(recorder, stream, &runs) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&runs);
  builder.RegisterService(&scheduler);
  builder.RegisterService(&cordon);
  builder.RegisterService(&health);
  builder.RegisterService(&admin);
  builder.RegisterService(&logs);
  server_ = builder.BuildAndStart();
  REQUIRE(server_ != nullptr);
  REQUIRE(port_ > 0);
}

FakeServices::~FakeServices() { Shutdown(); }

void FakeServices::Reset() {
  recorder.Reset();
  stream.Reset();
  runs.Reset();
  cordon.Reset();
  logs.Reset();
}

void FakeServices::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace tessera::testing
