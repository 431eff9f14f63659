#pragma once
// The gRPC adapter of CordonHandler. WatchNodeEvents is served on the async API
// (pumped_stream.h): an open watch is a reactor and an entry of a StreamPump on the change
// feed's kNodeEvents topic, not a thread.

#include <memory>

#include "base/status_macros.h"
#include "services/common/pumped_stream.h"
#include "services/common/rpc.h"
#include "services/cordon/cordon_handler.h"
#include "tessera/v1/cordon.grpc.pb.h"

namespace tessera::cordon {

class CordonService final
    : public v1::CordonService::WithAsyncMethod_WatchNodeEvents<v1::CordonService::Service>,
      public AsyncServing {
 public:
  using Api = v1::CordonService;

  // `watch_threads`: watches' steps (reads of the store) run at once, however many are open.
  CordonService(std::shared_ptr<CordonHandler> handler, std::shared_ptr<auth::Authenticator> auth,
                absl::Duration watch_poll_interval = absl::Milliseconds(200), int watch_threads = 2)
      : h_(std::move(handler)),
        auth_(std::move(auth)),
        watches_(
            [this](grpc::ServerContext* ctx, v1::WatchNodeEventsRequest* req,
                   grpc::ServerAsyncWriter<v1::NodeEvent>* writer, grpc::ServerCompletionQueue* cq,
                   void* tag) { RequestWatchNodeEvents(ctx, req, writer, cq, cq, tag); },
            PumpedMethod<v1::WatchNodeEventsRequest, v1::NodeEvent>{
                .method = TESSERA_RPC_NAME(WatchNodeEvents),
                .open = [h = h_.get(), watch_poll_interval](const auth::Principal& who,
                                                            const v1::WatchNodeEventsRequest& req)
                    -> absl::StatusOr<std::unique_ptr<StreamSteps<v1::NodeEvent>>> {
                  auto watch = h->OpenWatch(who, req, watch_poll_interval);
                  if (!watch.ok()) return watch.status();
                  return std::unique_ptr<StreamSteps<v1::NodeEvent>>(*std::move(watch));
                },
                .auth = auth_.get()},
            PumpOptions{.feed = h_->change_feed(),
                        .topic = store::ChangeTopic::kNodeEvents,
                        .clock = h_->clock(),
                        .threads = watch_threads,
                        .wakes = StreamPump::Wakes::kEveryChange,
                        .tick = kPumpTick},
            /*queues=*/1) {}

  TESSERA_UNARY_RPC(h_, CordonNode)
  TESSERA_UNARY_RPC(h_, UncordonNode)
  TESSERA_UNARY_RPC(h_, DrainNode)
  TESSERA_UNARY_RPC(h_, ListNodeEvents)

  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    watches_.AddCompletionQueues(builder);
  }
  void Started() override { watches_.Start(); }
  void Stop() override { watches_.Stop(); }

 private:
  std::shared_ptr<CordonHandler> h_;
  std::shared_ptr<auth::Authenticator> auth_;
  PumpedStreams<v1::WatchNodeEventsRequest, v1::NodeEvent> watches_;
};

}  // namespace tessera::cordon
