#pragma once
// The gRPC adapter of RunManager: authenticates, forwards, maps the status.

#include "services/common/rpc.h"
#include "services/runs/run_manager.h"

namespace tessera::runs {

class RunService final : public v1::RunService::Service {
 public:
  RunService(std::shared_ptr<RunManager> manager, std::shared_ptr<auth::Authenticator> auth,
             absl::Duration watch_poll_interval = absl::Milliseconds(200))
      : m_(std::move(manager)), auth_(std::move(auth)), poll_(watch_poll_interval) {}

#define TESSERA_RUN_RPC(Method)                                                            \
  grpc::Status Method(grpc::ServerContext* ctx, const v1::Method##Request* req,            \
                      v1::Method##Response* resp) override {                               \
    return Serve(*auth_, ctx,                                                              \
                 [&](const auth::Principal& who) { return m_->Method(who, *req, resp); }); \
  }
  TESSERA_RUN_RPC(SubmitRun)
  TESSERA_RUN_RPC(GetRun)
  TESSERA_RUN_RPC(ListRuns)
  TESSERA_RUN_RPC(DescribeRun)
  TESSERA_RUN_RPC(StopRun)
  TESSERA_RUN_RPC(DeleteRun)
  TESSERA_RUN_RPC(UpdateRun)
  TESSERA_RUN_RPC(RestartRun)
  TESSERA_RUN_RPC(CloneRun)
  TESSERA_RUN_RPC(RecordAttempt)
  TESSERA_RUN_RPC(ReportProgress)
#undef TESSERA_RUN_RPC

  grpc::Status WatchRuns(grpc::ServerContext* ctx, const v1::WatchRunsRequest* req,
                         grpc::ServerWriter<v1::RunChange>* writer) override {
    return Serve(*auth_, ctx, [&](const auth::Principal& who) {
      return m_->WatchRuns(
          who, *req, [&](const v1::RunChange& c) { return writer->Write(c); },
          [&] { return ctx->IsCancelled(); }, poll_);
    });
  }

 private:
  std::shared_ptr<RunManager> m_;
  std::shared_ptr<auth::Authenticator> auth_;
  absl::Duration poll_;
};

}  // namespace tessera::runs
