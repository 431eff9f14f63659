#pragma once
// The gRPC side of the gateway: one stub per service over one channel (the LogService may have
// its own), and the contexts of the calls in flight, so that shutting the gateway down cancels
// them instead of waiting for them.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/health.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/run_metrics.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/secrets.grpc.pb.h"
#include "tessera/v1/teams.grpc.pb.h"

namespace tessera::gateway {

class Upstream;

// One upstream call: its context, registered with the Upstream while it lives. The context
// carries the client's Authorization header as `authorization` metadata and, for unary calls,
// a deadline.
class UpstreamCall {
 public:
  ~UpstreamCall();
  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  grpc::ClientContext* context() { return &context_; }
  void TryCancel() { context_.TryCancel(); }

 private:
  friend class Upstream;
  explicit UpstreamCall(Upstream& upstream) : upstream_(upstream) {}
  Upstream& upstream_;
  grpc::ClientContext context_;
};

class Upstream {
 public:
  // `unary_timeout`: the deadline of every unary call (streams get none). `logs_channel` reaches
  // the LogService, which may run apart from the others; null: `channel` does.
  Upstream(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds unary_timeout,
           std::shared_ptr<grpc::Channel> logs_channel = nullptr);

  v1::RunService::Stub& runs() { return *runs_; }
  v1::RunMetricsService::Stub& run_metrics() { return *run_metrics_; }
  v1::SchedulerService::Stub& scheduler() { return *scheduler_; }
  v1::CordonService::Stub& cordon() { return *cordon_; }
  v1::HealthService::Stub& health() { return *health_; }
  v1::AdminService::Stub& admin() { return *admin_; }
  v1::LogService::Stub& logs() { return *logs_; }
  v1::SecretService::Stub& secrets() { return *secrets_; }
  v1::TeamService::Stub& teams() { return *teams_; }

  // A context for one call. `authorization` is forwarded unchanged when not empty, and the HTTP
  // client's address as kClientAddressMetadata (the services' audit log records it). Once
  // CancelAll has run, new calls are cancelled from the start.
  std::unique_ptr<UpstreamCall> NewUnaryCall(const std::string& authorization,
                                             const std::string& client_address = "");
  std::unique_ptr<UpstreamCall> NewStreamCall(const std::string& authorization,
                                              const std::string& client_address = "");

  // Cancels every call in flight and every later one. For shutdown.
  void CancelAll();

 private:
  friend class UpstreamCall;
  std::unique_ptr<UpstreamCall> NewCall(const std::string& authorization,
                                        const std::string& client_address, bool with_deadline);
  void Forget(UpstreamCall* call);

  std::shared_ptr<grpc::Channel> channel_;
  const std::chrono::milliseconds unary_timeout_;
  std::unique_ptr<v1::RunService::Stub> runs_;
  std::unique_ptr<v1::RunMetricsService::Stub> run_metrics_;
  std::unique_ptr<v1::SchedulerService::Stub> scheduler_;
  std::unique_ptr<v1::CordonService::Stub> cordon_;
  std::unique_ptr<v1::HealthService::Stub> health_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::LogService::Stub> logs_;
  std::unique_ptr<v1::SecretService::Stub> secrets_;
  std::unique_ptr<v1::TeamService::Stub> teams_;

  absl::Mutex mu_;
  std::set<UpstreamCall*> calls_;
  bool cancelled_ = false;
};

}  // namespace tessera::gateway
