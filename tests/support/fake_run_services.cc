// The run manager and log service fakes: their simulated attempts go together (a followed
// attempt ends when its logs were read to their end).
#include <chrono>
#include <cmath>
#include <thread>

#include "proto/policy/packed_log_lines.h"
#include "tests/support/fake_services.h"

namespace tessera::testing {

using grpc::ServerContext;
using grpc::Status;

namespace {

Status NotFound(const std::string& run_name) {
  return Status(grpc::StatusCode::NOT_FOUND, "run \"" + run_name + "\" not found");
}

// Polls: a stream held open by a simulated run ends only when the client cancels it.
void SleepUntilCancelled(ServerContext* context) {
  while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

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
  if (latest != after_attempts.end()) {
    *response->mutable_run() = latest->second;
  } else if (request->name().rfind("instant", 0) == 0) {
    // Ended before anyone looked: completed (with no reason, as a real server leaves it).
    *response->mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_COMPLETED);
    *response->mutable_run()->mutable_updated_at() = TimeAt(kT0 + 5);
  } else {
    *response->mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_PENDING);
  }
  response->mutable_run()->set_version(1234567890123LL);  // more than 32 bits
  // A run named per-rank-... says `launch: rank` (its lines are its ranks'); one named
  // per-node-... is placed on 2 nodes × 4 GPUs. Others leave `launch` out, as most YAMLs do.
  if (request->name().rfind("per-rank", 0) == 0) {
    response->mutable_run()->mutable_spec()->set_launch(v1::LAUNCH_MODE_RANK);
  } else if (request->name().rfind("per-node", 0) == 0) {
    for (int n = 0; n < 2; ++n) {
      auto* node = response->mutable_run()->add_nodes();
      node->set_node_name(n == 0 ? "node-a" : "node-b");
      node->set_node_rank(n);
      for (int g = 0; g < 4; ++g) node->add_gpu_indices(g);
    }
  }
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
  if (request->name().rfind("instant", 0) == 0) {
    v1::RunEvent& ended = *description.add_events();
    ended.set_type(v1::RUN_EVENT_TYPE_COMPLETED);
    *ended.mutable_time() = TimeAt(kT0 + 5);
    ended.set_message("Run completed");
  }
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
  // As the real service: headers once the watch's start is fixed (mcli waits for them).
  writer->SendInitialMetadata();
  const std::optional<v1::Run> latest = AfterAttempts(name);
  if (name.rfind("instant", 0) == 0) {
    SleepUntilCancelled(context);  // over before the watch began: no change comes
    return Status::OK;
  }
  if (!latest.has_value() || latest->status() == v1::RUN_STATUS_QUEUED) {
    const int attempt = latest.has_value() ? latest->resumption_index() : 0;
    struct Step {
      v1::RunStatus status;
      v1::RunEventType type;
      const char* message;
    };
    const Step steps[] = {
        {v1::RUN_STATUS_STARTING, v1::RUN_EVENT_TYPE_PLACED, "Run was placed on node-a"},
        {v1::RUN_STATUS_RUNNING, v1::RUN_EVENT_TYPE_STARTED, "Run started"}};
    // "quick-*" runs end at once: every change reads the run as already completed, as a real
    // service does when its events are read after the run moved on.
    const bool quick = name.rfind("quick", 0) == 0;
    int64_t offset = 1 + 20 * attempt;
    for (const auto& [status, type, message] : steps) {
      v1::RunChange change;
      *change.mutable_run() = SampleRun(name, quick ? v1::RUN_STATUS_COMPLETED : status);
      change.mutable_run()->set_resumption_index(attempt);
      change.mutable_event()->set_type(type);
      change.mutable_event()->set_resumption_index(attempt);
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

// FakeLogService

FakeLogService::FakeLogService(Recorder& recorder, StreamControl& stream, FakeRunService* runs)
    : recorder_(recorder), stream_(stream), runs_(runs) {}

// `wrap` makes the message a line goes out in (the line itself, or a LogLines of it).
template <class Writer, class Wrap>
Status FakeLogService::Answer(ServerContext* context, const v1::GetLogsRequest& request,
                              const char* method, Writer* writer, Wrap wrap) {
  if (Status st = recorder_.Record(context, method, request); !st.ok()) return st;
  {
    std::lock_guard lock(mu);
    requests.push_back(request);
  }
  if (IsMissingRun(request.run_name())) return NotFound(request.run_name());
  if (simulate_attempts) {
    return ServeAttempt(context, request,
                        [&](const v1::LogLine& line) { return writer->Write(wrap(line)); });
  }
  const std::string run_id = "id-" + request.run_name();
  return stream_.Serve(context, writer, [&run_id, &wrap](int i) {
    v1::LogLine line;
    line.set_run_id(run_id);
    line.set_rank(i % 2);
    line.set_node_rank(0);
    line.set_node_name("node-1");
    line.set_stream(i % 2 == 0 ? v1::LOG_STREAM_STDOUT : v1::LOG_STREAM_STDERR);
    line.set_sequence(i / 2);
    *line.mutable_time() = TimeAt(kT0 + i);
    line.set_text(i == 2 ? std::string("bad \xff byte") : "line " + std::to_string(i));
    return wrap(line);
  });
}

Status FakeLogService::GetLogs(ServerContext* context, const v1::GetLogsRequest* request,
                               grpc::ServerWriter<v1::LogLine>* writer) {
  return Answer(context, *request, "GetLogs", writer, [](const v1::LogLine& line) { return line; });
}

Status FakeLogService::StreamLogs(ServerContext* context, const v1::GetLogsRequest* request,
                                  grpc::ServerWriter<v1::LogLines>* writer) {
  if (simulate_attempts && request->run_name().rfind("nologs", 0) == 0) {
    return Status(grpc::StatusCode::UNIMPLEMENTED, "");
  }
  const Packing packing = request->packed() ? this->packing : Packing::kNever;
  return Answer(context, *request, "StreamLogs", writer,
                [packing, first = true](const v1::LogLine& line) mutable {
                  v1::LogLines batch;
                  if (packing == Packing::kNever) {
                    *batch.add_lines() = line;
                    return batch;
                  }
                  v1::PackedLogLines& group = *batch.add_packed();
                  CopyStreamFields(line, group);
                  PackLine(line, group);
                  if (packing == Packing::kMalformed && !first) {
                    group.mutable_lines()->resize(group.lines().size() - 1);
                  }
                  first = false;
                  return batch;
                });
}

Status FakeLogService::ServeAttempt(ServerContext* context, const v1::GetLogsRequest& request,
                                    const std::function<bool(const v1::LogLine&)>& write) {
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
    if (!write(line)) return Status::OK;
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

// FakeRunMetricsService

Status FakeRunMetricsService::GetRunMetrics(ServerContext* context,
                                            const v1::GetRunMetricsRequest* request,
                                            v1::GetRunMetricsResponse* response) {
  if (Status st = recorder_.Record(context, "GetRunMetrics", *request); !st.ok()) return st;
  if (IsMissingRun(request->name())) return NotFound(request->name());
  response->set_run_name(request->name());
  response->set_total_steps(100);
  const auto add = [&](int attempt, int64_t step, double loss) {
    v1::ProgressPoint& p = *response->add_points();
    p.set_resumption_index(attempt);
    p.set_step(step);
    p.mutable_time()->set_seconds(1'700'000'000 + step);
    p.mutable_time()->set_nanos(250'000'000);
    p.set_loss(loss);
    p.set_learning_rate(0.0003);
    p.set_tokens_per_second(1500.5);
    p.set_mfu(0.42);
  };
  add(0, 10, 2.5);
  add(0, 20, 2.25);
  add(1, 30, std::nan(""));
  v1::Attempt& first = *response->add_attempts();
  first.set_resumption_index(0);
  first.set_status(v1::RUN_STATUS_FAILED);
  first.set_end_reason(v1::ATTEMPT_END_REASON_NODE_FAILURE);
  first.set_reason("node-2 lost");
  v1::Attempt& second = *response->add_attempts();
  second.set_resumption_index(1);
  second.set_status(v1::RUN_STATUS_RUNNING);
  second.set_resumed_from_step(20);
  second.mutable_started_at()->set_seconds(1'700'000'025);
  return Status::OK;
}

}  // namespace tessera::testing
