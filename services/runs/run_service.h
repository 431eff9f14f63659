#pragma once
// The gRPC adapter of RunManager: authenticates, forwards, maps the status. WatchRuns is served
// on the async API (pumped_stream.h): an open watch is a reactor and an entry of a StreamPump on
// the change feed's kRunEvents topic, not a thread.

#include "base/status_macros.h"
#include "services/common/pumped_stream.h"
#include "services/common/rpc.h"
#include "services/runs/run_manager.h"

namespace tessera::runs {

class RunService final : public v1::RunService::WithAsyncMethod_WatchRuns<v1::RunService::Service>,
                         public AsyncServing {
 public:
  using Api = v1::RunService;

  // `watch_threads`: watches' steps (reads of the store) run at once, however many are open.
  RunService(std::shared_ptr<RunManager> manager, std::shared_ptr<auth::Authenticator> auth,
             absl::Duration watch_poll_interval = absl::Milliseconds(200), int watch_threads = 4)
      : m_(std::move(manager)),
        auth_(std::move(auth)),
        pump_(std::make_unique<StreamPump>(m_->change_feed(), store::ChangeTopic::kRunEvents,
                                           m_->clock(), watch_threads)),
        watches_(std::make_unique<PumpedStreams<v1::WatchRunsRequest, v1::RunChange>>(
            [this](grpc::ServerContext* ctx, v1::WatchRunsRequest* req,
                   grpc::ServerAsyncWriter<v1::RunChange>* writer, grpc::ServerCompletionQueue* cq,
                   void* tag) { RequestWatchRuns(ctx, req, writer, cq, cq, tag); },
            PumpedMethod<v1::WatchRunsRequest, v1::RunChange>{
                .method = TESSERA_RPC_NAME(WatchRuns),
                .open = [m = m_.get(), watch_poll_interval](const auth::Principal& who,
                                                            const v1::WatchRunsRequest& req)
                    -> absl::StatusOr<std::unique_ptr<StreamSteps<v1::RunChange>>> {
                  auto watch = m->OpenWatch(who, req, watch_poll_interval);
                  if (!watch.ok()) return watch.status();
                  return std::unique_ptr<StreamSteps<v1::RunChange>>(*std::move(watch));
                },
                .auth = auth_.get(),
                .pump = pump_.get()},
            /*queues=*/1)) {}
  ~RunService() override {
    watches_->Stop();  // every watch ended (the server was shut down first) ...
    watches_.reset();
    pump_.reset();  // ... so no step is left
  }

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

  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    watches_->AddCompletionQueues(builder);
  }
  void Started() override { watches_->Start(); }
  void Stop() override { watches_->Stop(); }

 private:
  std::shared_ptr<RunManager> m_;
  std::shared_ptr<auth::Authenticator> auth_;
  // Before watches_: the watches' steps run here until the last one ends.
  std::unique_ptr<StreamPump> pump_;
  std::unique_ptr<PumpedStreams<v1::WatchRunsRequest, v1::RunChange>> watches_;
};

}  // namespace tessera::runs
