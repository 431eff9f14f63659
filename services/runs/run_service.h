#pragma once
// The gRPC adapter of RunManager: authenticates, forwards, maps the status.

#include "base/status_macros.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/rpc.h"
#include "services/runs/run_manager.h"

namespace tessera::runs {

class RunService final : public v1::RunService::Service {
 public:
  using Api = v1::RunService;

  RunService(std::shared_ptr<RunManager> manager, std::shared_ptr<auth::Authenticator> auth,
             absl::Duration watch_poll_interval = absl::Milliseconds(200))
      : m_(std::move(manager)), auth_(std::move(auth)), poll_(watch_poll_interval) {}

  TESSERA_UNARY_RPC(m_, SubmitRun)
  TESSERA_UNARY_RPC(m_, GetRun)
  TESSERA_UNARY_RPC(m_, ListRuns)
  TESSERA_UNARY_RPC(m_, DescribeRun)
  TESSERA_UNARY_RPC(m_, StopRun)
  TESSERA_UNARY_RPC(m_, DeleteRun)
  TESSERA_UNARY_RPC(m_, UpdateRun)
  TESSERA_UNARY_RPC(m_, RestartRun)
  TESSERA_UNARY_RPC(m_, CloneRun)
  TESSERA_UNARY_RPC(m_, RecordAttempt)
  TESSERA_UNARY_RPC(m_, ReportProgress)

  grpc::Status WatchRuns(grpc::ServerContext* ctx, const v1::WatchRunsRequest* req,
                         grpc::ServerWriter<v1::RunChange>* writer) override {
    return Serve(
        *auth_, ctx, TESSERA_RPC_NAME(WatchRuns), [&](const auth::Principal& who) -> absl::Status {
          TESSERA_ASSIGN_OR_RETURN(
              auto guard, auth::StreamGuard::Open(*auth_, *ctx, who,
                                                  auth::StreamGuard::Lifetime::kReconnecting));
          return guard.Outcome(m_->WatchRuns(
              who, *req, [&](const v1::RunChange& c) { return writer->Write(c); },
              [&] { return guard.Done(); }, poll_,
              // The headers go out once the watch's start is fixed (mcli waits for
              // them, then reads the run: no change between the two is missed).
              [&] { writer->SendInitialMetadata(); }));
        });
  }

 private:
  std::shared_ptr<RunManager> m_;
  std::shared_ptr<auth::Authenticator> auth_;
  absl::Duration poll_;
};

}  // namespace tessera::runs
