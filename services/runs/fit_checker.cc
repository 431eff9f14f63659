#include "services/runs/fit_checker.h"

namespace tessera::runs {
namespace {

class GrpcFitChecker final : public FitChecker {
 public:
  GrpcFitChecker(std::shared_ptr<ChannelRef> channel, SystemCredential key,
                 ServiceClientOptions options)
      : scheduler_(std::move(channel), std::move(key), "the scheduler", options) {}

  absl::Status CheckFit(const v1::ComputeSpec& compute) override {
    v1::CheckFitRequest req;
    *req.mutable_compute() = compute;
    v1::CheckFitResponse resp;
    return scheduler_.Call(&v1::SchedulerService::Stub::CheckFit, req, &resp);
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
