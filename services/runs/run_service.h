#pragma once
// The gRPC adapter of RunManager (people's calls) and RunReports (the components' reports):
// authenticates, forwards, maps the status. WatchRuns is served
// on the async API (pumped_stream.h): an open watch is a reactor and an entry of a StreamPump,
// not a thread, woken by the run manager's RunEventTail when a change for it arrives.

#include "base/status_macros.h"
#include "services/common/pumped_stream.h"
#include "services/common/rpc.h"
#include "services/runs/run_manager.h"
#include "services/runs/run_reports.h"
#include "tessera/v1/runs.grpc.pb.h"

namespace tessera::runs {

// How often an idle watch steps: its key is checked again then, and a tail the feed said
// nothing to for longer than its fresh_for is read again (a missed commit is seen then).
inline constexpr absl::Duration kWatchCheckInterval = absl::Seconds(1);

class RunService final : public v1::RunService::WithAsyncMethod_WatchRuns<v1::RunService::Service>,
                         public AsyncServing {
 public:
  using Api = v1::RunService;

  // `watch_threads`: watches' steps run at once, however many are open. `watch_check_interval`:
  // how often an idle watch steps.
  RunService(std::shared_ptr<RunManager> manager, std::shared_ptr<RunReports> reports,
             std::shared_ptr<auth::Authenticator> auth,
             absl::Duration watch_check_interval = kWatchCheckInterval, int watch_threads = 4)
      : m_(std::move(manager)),
        reports_(std::move(reports)),
        auth_(std::move(auth)),
        watches_(
            [this](grpc::ServerContext* ctx, v1::WatchRunsRequest* req,
                   grpc::ServerAsyncWriter<v1::RunChange>* writer, grpc::ServerCompletionQueue* cq,
                   void* tag) { RequestWatchRuns(ctx, req, writer, cq, cq, tag); },
            PumpedMethod<v1::WatchRunsRequest, v1::RunChange>{
                .method = TESSERA_RPC_NAME(WatchRuns),
                .open = [m = m_.get(), watch_check_interval](const auth::Principal& who,
                                                             const v1::WatchRunsRequest& req)
                    -> absl::StatusOr<std::unique_ptr<StreamSteps<v1::RunChange>>> {
                  auto watch = m->OpenWatch(who, req, watch_check_interval);
                  if (!watch.ok()) return watch.status();
                  (*watch)->UseTailWakes(watch_check_interval);
                  return std::unique_ptr<StreamSteps<v1::RunChange>>(*std::move(watch));
                },
                .auth = auth_.get()},
            PumpOptions{.feed = m_->change_feed(),
                        .topic = store::ChangeTopic::kRunEvents,
                        .clock = m_->clock(),
                        .threads = watch_threads,
                        .wakes = StreamPump::Wakes::kNever,
                        .tick = kPumpTick},
            /*queues=*/1) {}

  TESSERA_UNARY_RPC(m_, SubmitRun)
  TESSERA_UNARY_RPC(m_, GetRun)
  TESSERA_UNARY_RPC(m_, ListRuns)
  TESSERA_UNARY_RPC(m_, DescribeRun)
  TESSERA_UNARY_RPC(m_, StopRun)
  TESSERA_UNARY_RPC(m_, DeleteRun)
  TESSERA_UNARY_RPC(m_, UpdateRun)
  TESSERA_UNARY_RPC(m_, RestartRun)
  TESSERA_UNARY_RPC(m_, CloneRun)
  TESSERA_UNARY_RPC(reports_, RecordAttempt)
  TESSERA_UNARY_RPC(reports_, ReportProgress)
  TESSERA_UNARY_RPC(reports_, ClearNodeAvoidance)

  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    watches_.AddCompletionQueues(builder);
  }
  void Started() override { watches_.Start(); }
  // Watches waiting in the pump (between their steps), for tests.
  size_t watches_waiting() const { return watches_.waiting(); }
  void Stop() override { watches_.Stop(); }

 private:
  std::shared_ptr<RunManager> m_;
  std::shared_ptr<RunReports> reports_;
  std::shared_ptr<auth::Authenticator> auth_;
  PumpedStreams<v1::WatchRunsRequest, v1::RunChange> watches_;
};

}  // namespace tessera::runs
