#pragma once
// The gRPC adapter of LogHandler. StreamLogs, which follows, is served on the async API
// (pumped_stream.h): an open follow is a reactor and an entry in a StreamPump, not a thread, so
// 10,000 of them cost memory. PushLogs and GetLogs are synchronous.

#include <memory>

#include "base/status_macros.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/pumped_stream.h"
#include "services/common/rpc.h"
#include "services/common/stream_pump.h"
#include "services/logs/log_handler.h"
#include "tessera/v1/logs.grpc.pb.h"

namespace tessera::logs {

struct LogServiceOptions {
  // Threads that run the follows' steps (reads of the store and of the run manager): how many
  // follows read at once, however many are open.
  int stream_threads = 8;
  // Completion queues (each with a thread polling it) the follows are spread over.
  int stream_queues = 2;
};

class LogService final : public v1::LogService::WithAsyncMethod_StreamLogs<v1::LogService::Service>,
                         public AsyncServing {
 public:
  using Api = v1::LogService;

  LogService(std::shared_ptr<LogHandler> handler, std::shared_ptr<auth::Authenticator> auth,
             LogServiceOptions options = {});
  ~LogService() override = default;

  // Each batch is stored and acknowledged before the next is read; a malformed batch ends the
  // stream with INVALID_ARGUMENT naming the field.
  grpc::Status PushLogs(grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<v1::LogAck, v1::LogBatch>* stream) override {
    return Serve(
        *auth_, ctx, TESSERA_RPC_NAME(PushLogs), [&](const auth::Principal& who) -> absl::Status {
          TESSERA_ASSIGN_OR_RETURN(
              auto guard,
              auth::StreamGuard::Open(*auth_, *ctx, who, auth::StreamGuard::Lifetime::kUnbounded));
          v1::LogBatch batch;
          while (stream->Read(&batch)) {
            TESSERA_RETURN_IF_ERROR(guard.CheckKey());
            v1::LogAck ack;
            TESSERA_RETURN_IF_ERROR(h_->PushBatch(who, std::move(batch), &ack));
            if (!stream->Write(ack)) return absl::CancelledError("the log stream was closed");
          }
          return absl::OkStatus();
        });
  }

  grpc::Status GetLogs(grpc::ServerContext* ctx, const v1::GetLogsRequest* req,
                       grpc::ServerWriter<v1::LogLine>* writer) override {
    return Serve(
        *auth_, ctx, TESSERA_RPC_NAME(GetLogs), [&](const auth::Principal& who) -> absl::Status {
          TESSERA_ASSIGN_OR_RETURN(
              auto guard, auth::StreamGuard::Open(*auth_, *ctx, who,
                                                  auth::StreamGuard::Lifetime::kReconnecting));
          return guard.Outcome(h_->GetLogs(
              who, *req, [&](const v1::LogLine& l) { return writer->Write(l); },
              [&] { return guard.Done(); }));
        });
  }

  TESSERA_UNARY_RPC(h_, DeleteRunLogs)

  void AddCompletionQueues(grpc::ServerBuilder& builder) override {
    follows_.AddCompletionQueues(builder);
  }
  void Started() override { follows_.Start(); }
  void Stop() override { follows_.Stop(); }

  // StreamLogs calls waiting for lines now (for tests and the benches).
  size_t follows_waiting() const { return follows_.waiting(); }
  // Waits of StreamLogs calls that ended so far (each a step that read again).
  uint64_t follows_woken() const { return follows_.waits_ended(); }

 private:
  std::shared_ptr<LogHandler> h_;
  std::shared_ptr<auth::Authenticator> auth_;
  PumpedStreams<v1::GetLogsRequest, v1::LogLines> follows_;
};

}  // namespace tessera::logs
