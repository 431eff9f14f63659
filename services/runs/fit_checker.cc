#include "services/runs/fit_checker.h"

namespace tessera::runs {
namespace {

class GrpcFitChecker final : public FitChecker {
 public:
  GrpcFitChecker(std::shared_ptr<ChannelRef> channel, SystemCredential key,
                 ServiceClientOptions options)
      : scheduler_(std::move(channel), std::move(key), "the scheduler", options) {}

  absl::StatusOr<std::string> CheckFit(const v1::ComputeSpec& compute, const std::string& user,
                                       bool preemptible) override {
    v1::CheckFitRequest req;
    *req.mutable_compute() = compute;
    req.set_user(user);
    req.set_preemptible(preemptible);
    v1::CheckFitResponse resp;
    absl::Status st = scheduler_.Call(&v1::SchedulerService::Stub::CheckFit, req, &resp);
    if (!st.ok()) return st;
    return resp.team();
  }

 private:
  SystemClient<v1::SchedulerService> scheduler_;
};

}  // namespace

std::shared_ptr<FitChecker> MakeGrpcFitChecker(std::shared_ptr<ChannelRef> channel,
                                               SystemCredential system_key,
                                               ServiceClientOptions options) {
  return std::make_shared<GrpcFitChecker>(std::move(channel), std::move(system_key), options);
}

}  // namespace tessera::runs
