#include "services/logs/run_lookup.h"

#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::logs {
namespace {

class GrpcRunLookup final : public RunLookup {
 public:
  GrpcRunLookup(std::shared_ptr<ChannelRef> channel, SystemCredential key,
                ServiceClientOptions options)
      : runs_(std::move(channel), std::move(key), "the run manager", options) {}

  absl::StatusOr<v1::RunDescription> DescribeRun(const std::string& name) override {
    v1::DescribeRunRequest req;
    req.set_name(name);
    return Describe(req);
  }
  absl::StatusOr<v1::RunDescription> DescribeRunById(const std::string& run_id) override {
    v1::DescribeRunRequest req;
    req.set_run_id(run_id);
    return Describe(req);
  }

 private:
  absl::StatusOr<v1::RunDescription> Describe(const v1::DescribeRunRequest& req) {
    v1::DescribeRunResponse resp;
    if (auto st = runs_.Call(&v1::RunService::Stub::DescribeRun, req, &resp); !st.ok()) return st;
    return resp.description();
  }

  SystemClient<v1::RunService> runs_;
};

}  // namespace

absl::StatusOr<v1::RunDescription> SharedRunLookup::DescribeRun(const std::string& name) {
  const absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = answers_.find(name);
    if (it != answers_.end()) {
      if (now - it->second.at < fresh_for_ || it->second.asking) return it->second.description;
      it->second.asking = true;
    }
  }
  // Asked without the lock: no caller waits for another's call.
  absl::StatusOr<v1::RunDescription> description = inner_->DescribeRun(name);
  absl::MutexLock lock(&mu_);
  if (answers_.size() >= 4096) {  // the answers of runs nobody follows any more go
    absl::erase_if(answers_, [&](const auto& entry) {
      return !entry.second.asking && now - entry.second.at >= fresh_for_;
    });
  }
  answers_.insert_or_assign(name, Answer{now, description, false});
  return description;
}

std::shared_ptr<RunLookup> MakeGrpcRunLookup(std::shared_ptr<ChannelRef> channel,
                                             SystemCredential system_key,
                                             ServiceClientOptions options) {
  return std::make_shared<GrpcRunLookup>(std::move(channel), std::move(system_key), options);
}

}  // namespace tessera::logs
