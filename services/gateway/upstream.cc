#include "services/gateway/upstream.h"

#include <utility>

#include "transport/client_address.h"

namespace tessera::gateway {

UpstreamCall::~UpstreamCall() { upstream_.Forget(this); }

Upstream::Upstream(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds unary_timeout,
                   std::shared_ptr<grpc::Channel> logs_channel)
    : channel_(std::move(channel)),
      unary_timeout_(unary_timeout),
      runs_(v1::RunService::NewStub(channel_)),
      run_metrics_(v1::RunMetricsService::NewStub(channel_)),
      scheduler_(v1::SchedulerService::NewStub(channel_)),
      cordon_(v1::CordonService::NewStub(channel_)),
      health_(v1::HealthService::NewStub(channel_)),
      admin_(v1::AdminService::NewStub(channel_)),
      logs_(v1::LogService::NewStub(logs_channel != nullptr ? logs_channel : channel_)),
      secrets_(v1::SecretService::NewStub(channel_)),
      teams_(v1::TeamService::NewStub(channel_)) {}

std::unique_ptr<UpstreamCall> Upstream::NewUnaryCall(const std::string& authorization,
                                                     const std::string& client_address) {
  return NewCall(authorization, client_address, /*with_deadline=*/true);
}

std::unique_ptr<UpstreamCall> Upstream::NewStreamCall(const std::string& authorization,
                                                      const std::string& client_address) {
  return NewCall(authorization, client_address, /*with_deadline=*/false);
}

std::unique_ptr<UpstreamCall> Upstream::NewCall(const std::string& authorization,
                                                const std::string& client_address,
                                                bool with_deadline) {
  std::unique_ptr<UpstreamCall> call(new UpstreamCall(*this));
  grpc::ClientContext& ctx = call->context_;
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  if (!client_address.empty()) ctx.AddMetadata(kClientAddressMetadata, client_address);
  if (with_deadline) ctx.set_deadline(std::chrono::system_clock::now() + unary_timeout_);
  absl::MutexLock lock(&mu_);
  calls_.insert(call.get());
  // A context cancelled before its call starts cancels the call as soon as it starts.
  if (cancelled_) ctx.TryCancel();
  return call;
}

void Upstream::Forget(UpstreamCall* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

void Upstream::CancelAll() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (UpstreamCall* call : calls_) call->TryCancel();
}

}  // namespace tessera::gateway
