#pragma once
// Fake gRPC services for the gateway tests: each records what reached it (method, request,
// authorization metadata) and answers the next error set on it, once.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/health.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::gateway::testing {

inline constexpr char kGoodAuth[] = "Bearer test-key";

// What every fake records: the last call's method, request and authorization metadata; and what
// it answers: the next error, if one is set (once).
class Recorder {
 public:
  struct Call {
    std::string method;
    std::shared_ptr<google::protobuf::Message> request;
    std::string authorization;
  };

  // Records the call; returns the status the fake should answer with (UNAUTHENTICATED without
  // the right key, or the error set by FailNext).
  grpc::Status Record(grpc::ServerContext* ctx, const std::string& method,
                      const google::protobuf::Message& request) {
    std::string auth;
    auto it = ctx->client_metadata().find("authorization");
    if (it != ctx->client_metadata().end()) auth.assign(it->second.data(), it->second.size());
    std::shared_ptr<google::protobuf::Message> copy(request.New());
    copy->CopyFrom(request);
    std::lock_guard lock(mu_);
    calls_.push_back(Call{method, copy, auth});
    if (auth != kGoodAuth) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad API key");
    if (next_error_.has_value()) {
      grpc::Status st = *next_error_;
      next_error_.reset();
      return st;
    }
    return grpc::Status::OK;
  }

  void FailNext(grpc::Status status) {
    std::lock_guard lock(mu_);
    next_error_ = std::move(status);
  }

  std::size_t count() {
    std::lock_guard lock(mu_);
    return calls_.size();
  }

  Call Last() {
    std::lock_guard lock(mu_);
    REQUIRE(!calls_.empty());
    return calls_.back();
  }

  // The last call, which must be `method`, as its request type.
  template <class T>
  T LastAs(const std::string& method) {
    Call c = Last();
    REQUIRE(c.method == method);
    const T* typed = dynamic_cast<const T*>(c.request.get());
    REQUIRE(typed != nullptr);
    return *typed;
  }

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
  std::optional<grpc::Status> next_error_;
};

// What the fake streams do: send `events` messages, then either end (with `end_status`) or wait
// until the client cancels, recording that it did.
struct StreamControl {
  std::mutex mu;
  std::condition_variable cv;
  int events = 3;
  bool hold_open = false;
  bool send_metadata = true;                   // before the first event
  grpc::Status end_status = grpc::Status::OK;  // when not held open
  int started = 0;
  int cancelled = 0;

  // Waits (bounded, so that a broken gateway fails the test rather than hanging it) until
  // `cancelled` reaches `n`.
  bool WaitCancelled(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return cancelled >= n; });
  }
  bool WaitStarted(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return started >= n; });
  }

  // Runs one stream: `write(i)` writes event i. Returns the status the RPC ends with.
  template <class Writer, class MakeMessage>
  grpc::Status Serve(grpc::ServerContext* ctx, Writer* writer, MakeMessage make) {
    int n = 0;
    bool hold = false;
    grpc::Status end;
    {
      std::lock_guard lock(mu);
      n = events;
      hold = hold_open;
      end = end_status;
      if (send_metadata) writer->SendInitialMetadata();
      ++started;
    }
    cv.notify_all();
    for (int i = 0; i < n; ++i) {
      if (!writer->Write(make(i))) break;
    }
    if (!hold) return end;
    // Waits for the cancellation; the short wait only bounds how often IsCancelled is checked.
    std::unique_lock lock(mu);
    while (!ctx->IsCancelled()) cv.wait_for(lock, std::chrono::milliseconds(5));
    ++cancelled;
    cv.notify_all();
    return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
};

class FakeRuns final : public v1::RunService::Service {
 public:
  FakeRuns(Recorder& rec, StreamControl& stream) : rec_(rec), stream_(stream) {}

  grpc::Status SubmitRun(grpc::ServerContext* c, const v1::SubmitRunRequest* r,
                         v1::SubmitRunResponse* out) override {
    out->mutable_run()->set_name(r->spec().name() + "-abc1");
    out->mutable_run()->set_status(v1::RUN_STATUS_PENDING);
    return rec_.Record(c, "SubmitRun", *r);
  }
  grpc::Status GetRun(grpc::ServerContext* c, const v1::GetRunRequest* r,
                      v1::GetRunResponse* out) override {
    out->mutable_run()->set_name(r->name());
    out->mutable_run()->set_status(v1::RUN_STATUS_RUNNING);
    out->mutable_run()->set_version(1234567890123LL);
    return rec_.Record(c, "GetRun", *r);
  }
  grpc::Status ListRuns(grpc::ServerContext* c, const v1::ListRunsRequest* r,
                        v1::ListRunsResponse* out) override {
    out->add_runs()->set_name("a");
    out->add_runs()->set_name("b");
    return rec_.Record(c, "ListRuns", *r);
  }
  grpc::Status DescribeRun(grpc::ServerContext* c, const v1::DescribeRunRequest* r,
                           v1::DescribeRunResponse* out) override {
    out->mutable_description()->mutable_run()->set_name(r->name());
    out->mutable_description()->set_goodput(0.5);
    return rec_.Record(c, "DescribeRun", *r);
  }
  grpc::Status StopRun(grpc::ServerContext* c, const v1::StopRunRequest* r,
                       v1::StopRunResponse* out) override {
    out->mutable_run()->set_name(r->name());
    out->mutable_run()->set_stop_requested(true);
    return rec_.Record(c, "StopRun", *r);
  }
  grpc::Status DeleteRun(grpc::ServerContext* c, const v1::DeleteRunRequest* r,
                         v1::DeleteRunResponse*) override {
    return rec_.Record(c, "DeleteRun", *r);
  }
  grpc::Status UpdateRun(grpc::ServerContext* c, const v1::UpdateRunRequest* r,
                         v1::UpdateRunResponse* out) override {
    out->mutable_run()->set_name(r->name());
    return rec_.Record(c, "UpdateRun", *r);
  }
  grpc::Status RestartRun(grpc::ServerContext* c, const v1::RestartRunRequest* r,
                          v1::RestartRunResponse* out) override {
    out->mutable_run()->set_name(r->name());
    return rec_.Record(c, "RestartRun", *r);
  }
  grpc::Status CloneRun(grpc::ServerContext* c, const v1::CloneRunRequest* r,
                        v1::CloneRunResponse* out) override {
    out->mutable_run()->set_name(r->new_name().empty() ? r->name() + "-clone" : r->new_name());
    return rec_.Record(c, "CloneRun", *r);
  }
  grpc::Status WatchRuns(grpc::ServerContext* c, const v1::WatchRunsRequest* r,
                         grpc::ServerWriter<v1::RunChange>* w) override {
    if (grpc::Status st = rec_.Record(c, "WatchRuns", *r); !st.ok()) return st;
    return stream_.Serve(c, w, [](int i) {
      v1::RunChange change;
      change.mutable_run()->set_name("run-" + std::to_string(i));
      change.mutable_event()->set_id(i + 1);
      change.mutable_event()->set_message("line one\nline two");
      return change;
    });
  }

 private:
  Recorder& rec_;
  StreamControl& stream_;
};

class FakeScheduler final : public v1::SchedulerService::Service {
 public:
  explicit FakeScheduler(Recorder& rec) : rec_(rec) {}
  grpc::Status ListNodes(grpc::ServerContext* c, const v1::ListNodesRequest* r,
                         v1::ListNodesResponse* out) override {
    out->add_nodes()->set_name("node-1");
    return rec_.Record(c, "ListNodes", *r);
  }
  grpc::Status GetNode(grpc::ServerContext* c, const v1::GetNodeRequest* r,
                       v1::GetNodeResponse* out) override {
    out->mutable_node()->set_name(r->name());
    out->add_run_names("train-1");
    return rec_.Record(c, "GetNode", *r);
  }
  grpc::Status GetQueue(grpc::ServerContext* c, const v1::GetQueueRequest* r,
                        v1::GetQueueResponse* out) override {
    out->add_entries()->set_waiting_reason("needs 4 nodes");
    return rec_.Record(c, "GetQueue", *r);
  }

 private:
  Recorder& rec_;
};

class FakeCordon final : public v1::CordonService::Service {
 public:
  FakeCordon(Recorder& rec, StreamControl& stream) : rec_(rec), stream_(stream) {}
  grpc::Status CordonNode(grpc::ServerContext* c, const v1::CordonNodeRequest* r,
                          v1::CordonNodeResponse* out) override {
    out->mutable_node()->set_name(r->node_name());
    out->mutable_node()->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    return rec_.Record(c, "CordonNode", *r);
  }
  grpc::Status UncordonNode(grpc::ServerContext* c, const v1::UncordonNodeRequest* r,
                            v1::UncordonNodeResponse* out) override {
    out->mutable_node()->set_name(r->node_name());
    return rec_.Record(c, "UncordonNode", *r);
  }
  grpc::Status DrainNode(grpc::ServerContext* c, const v1::DrainNodeRequest* r,
                         v1::DrainNodeResponse* out) override {
    out->mutable_node()->set_name(r->node_name());
    return rec_.Record(c, "DrainNode", *r);
  }
  grpc::Status ListNodeEvents(grpc::ServerContext* c, const v1::ListNodeEventsRequest* r,
                              v1::ListNodeEventsResponse* out) override {
    out->add_events()->set_id(7);
    return rec_.Record(c, "ListNodeEvents", *r);
  }
  grpc::Status WatchNodeEvents(grpc::ServerContext* c, const v1::WatchNodeEventsRequest* r,
                               grpc::ServerWriter<v1::NodeEvent>* w) override {
    if (grpc::Status st = rec_.Record(c, "WatchNodeEvents", *r); !st.ok()) return st;
    const std::int64_t base = r->filter().after_id();
    return stream_.Serve(c, w, [base](int i) {
      v1::NodeEvent e;
      e.set_id(base + i + 1);
      e.set_node_name("node-1");
      e.set_type(v1::NODE_EVENT_TYPE_CORDONED);
      return e;
    });
  }

 private:
  Recorder& rec_;
  StreamControl& stream_;
};

class FakeHealth final : public v1::HealthService::Service {
 public:
  explicit FakeHealth(Recorder& rec) : rec_(rec) {}
  grpc::Status StartSweep(grpc::ServerContext* c, const v1::StartSweepRequest* r,
                          v1::StartSweepResponse* out) override {
    out->mutable_sweep()->set_id("sweep-1");
    out->mutable_sweep()->set_state(v1::SWEEP_STATE_RUNNING);
    return rec_.Record(c, "StartSweep", *r);
  }
  grpc::Status GetSweep(grpc::ServerContext* c, const v1::GetSweepRequest* r,
                        v1::GetSweepResponse* out) override {
    out->mutable_sweep()->set_id(r->id());
    return rec_.Record(c, "GetSweep", *r);
  }
  grpc::Status ListSweeps(grpc::ServerContext* c, const v1::ListSweepsRequest* r,
                          v1::ListSweepsResponse* out) override {
    out->add_sweeps()->set_id("sweep-1");
    return rec_.Record(c, "ListSweeps", *r);
  }
  grpc::Status ListHealthResults(grpc::ServerContext* c, const v1::ListHealthResultsRequest* r,
                                 v1::ListHealthResultsResponse* out) override {
    out->add_results()->set_node_name("node-1");
    return rec_.Record(c, "ListHealthResults", *r);
  }

 private:
  Recorder& rec_;
};

class FakeAdmin final : public v1::AdminService::Service {
 public:
  explicit FakeAdmin(Recorder& rec) : rec_(rec) {}
  grpc::Status CreateApiKey(grpc::ServerContext* c, const v1::CreateApiKeyRequest* r,
                            v1::CreateApiKeyResponse* out) override {
    out->mutable_key()->set_id("key-1");
    out->mutable_key()->set_user(r->user());
    out->set_secret("s3cret");
    return rec_.Record(c, "CreateApiKey", *r);
  }
  grpc::Status ListApiKeys(grpc::ServerContext* c, const v1::ListApiKeysRequest* r,
                           v1::ListApiKeysResponse* out) override {
    out->add_keys()->set_id("key-1");
    return rec_.Record(c, "ListApiKeys", *r);
  }
  grpc::Status RevokeApiKey(grpc::ServerContext* c, const v1::RevokeApiKeyRequest* r,
                            v1::RevokeApiKeyResponse*) override {
    return rec_.Record(c, "RevokeApiKey", *r);
  }
  grpc::Status WhoAmI(grpc::ServerContext* c, const v1::WhoAmIRequest* r,
                      v1::WhoAmIResponse* out) override {
    out->set_user("alice");
    out->set_role(v1::ROLE_ADMIN);
    return rec_.Record(c, "WhoAmI", *r);
  }

 private:
  Recorder& rec_;
};

// Streams `events` log lines as StreamControl says: ranks alternate 0, 1 (rank 1's lines on
// stderr), and line 2 is not valid UTF-8.
class FakeLogs final : public v1::LogService::Service {
 public:
  FakeLogs(Recorder& rec, StreamControl& stream) : rec_(rec), stream_(stream) {}
  grpc::Status GetLogs(grpc::ServerContext* c, const v1::GetLogsRequest* r,
                       grpc::ServerWriter<v1::LogLine>* w) override {
    if (grpc::Status st = rec_.Record(c, "GetLogs", *r); !st.ok()) return st;
    return stream_.Serve(c, w, [r](int i) {
      v1::LogLine line;
      line.set_run_id("id-" + r->run_name());
      line.set_rank(i % 2);
      line.set_node_rank(0);
      line.set_node_name("node-1");
      line.set_stream(i % 2 == 0 ? v1::LOG_STREAM_STDOUT : v1::LOG_STREAM_STDERR);
      line.set_sequence(i / 2);
      line.mutable_time()->set_seconds(1700000000 + i);
      line.set_text(i == 2 ? std::string("bad \xff byte") : "line " + std::to_string(i));
      return line;
    });
  }

 private:
  Recorder& rec_;
  StreamControl& stream_;
};

}  // namespace tessera::gateway::testing
